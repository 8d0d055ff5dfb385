"""Broadcast state: BroadcastProcessFunction and KeyedBroadcastProcessFunction. Every
parallel instance reads the whole broadcast input before the other input (both modes),
writes broadcast state on the broadcast side and only reads it on the other."""

from __future__ import annotations

from collections import Counter

import pytest

from airflow_flinkchain import StreamPipeline
from airflow_flinkchain.functions import BroadcastProcessFunction, KeyedBroadcastProcessFunction
from airflow_flinkchain.runtime.core.elements import StreamRecord, Watermark
from airflow_flinkchain.runtime.spark.job import ChainRunError
from airflow_flinkchain.state import MapStateDescriptor, ValueStateDescriptor
from airflow_flinkchain.testing import TestingSource

from conformance_cases import as_multiset

from .cases import build_two_input_case, load_two_input_cases
from .pipelines import enrich_pipeline

LIMITS = MapStateDescriptor("limits", None, None)
NAMES = MapStateDescriptor("names", None, None)


class Limit(BroadcastProcessFunction):
    def process_element(self, value, ctx):
        limit = ctx.get_broadcast_state(LIMITS).get("max")
        if limit is None or value <= limit:
            yield value

    def process_broadcast_element(self, value, ctx):
        ctx.get_broadcast_state(LIMITS).put("max", value)


@pytest.mark.parametrize("mode", ["batch", "streaming"])
def test_broadcast_side_is_read_first_by_every_instance(mode):
    """The limit arrives after the events in the sources' order, yet every instance (p=3)
    has it before its first event."""
    p = StreamPipeline("limit", parallelism=3, runtime_mode=mode)
    events = p.from_collection(list(range(10))).name("events")
    limits = p.from_collection([4]).name("limits")
    events.connect(limits.broadcast(LIMITS)).process(Limit()).name("limit").collect("out")
    assert sorted(p.execute_local().output("out")) == [0, 1, 2, 3, 4]


def test_shared_broadcast_case_streaming_gives_the_batch_result():
    """STREAMING is not compared by the shared case (Flink fixes no order); this runtime reads
    the broadcast side first in both modes, so it gives BATCH's result."""
    case = next(c for c in load_two_input_cases() if c["name"] == "broadcast_filter_p2")
    result = build_two_input_case(case, "streaming").execute_local()
    assert as_multiset(result.output("out")) == as_multiset(case["expected_outputs_batch"]["out"])


class Writer(BroadcastProcessFunction):
    def process_element(self, value, ctx):
        ctx.get_broadcast_state(LIMITS).put("max", value)

    def process_broadcast_element(self, value, ctx):
        pass


@pytest.mark.parametrize("keyed", [False, True])
def test_writing_broadcast_state_on_the_non_broadcast_side_fails_clearly(keyed):
    class KeyedWriter(KeyedBroadcastProcessFunction):
        def process_element(self, value, ctx):
            ctx.get_broadcast_state(LIMITS)["max"] = value

        def process_broadcast_element(self, value, ctx):
            pass

    p = StreamPipeline("ro")
    events = p.from_collection([1]).name("events")
    if keyed:
        events = events.key_by(lambda x: x)
    events.connect(p.from_collection([2]).broadcast(LIMITS)).process(
        KeyedWriter() if keyed else Writer()).name("writer").collect("out")
    with pytest.raises(ChainRunError) as info:
        p.execute_local()
    text = str(info.value)
    assert "writer" in text and "broadcast state 'limits' is read-only" in text
    assert "process_broadcast_element()" in text


def test_unknown_broadcast_state_names_the_known_ones():
    class Other(BroadcastProcessFunction):
        def process_element(self, value, ctx):
            ctx.get_broadcast_state(NAMES).get(value)

        def process_broadcast_element(self, value, ctx):
            pass

    p = StreamPipeline("unknown")
    p.from_collection([1]).connect(p.from_collection([2]).broadcast(LIMITS)).process(Other()).name("o").collect("x")
    with pytest.raises(ChainRunError, match="no broadcast state 'names'.*'limits'"):
        p.execute_local()


class PerKey(KeyedBroadcastProcessFunction):
    """Events (key, value) pass when value <= the broadcast limit of their key; counts
    events per key in keyed state; a timer at the event time emits the count."""

    def open(self, runtime_context):
        self.count = runtime_context.get_state(ValueStateDescriptor("count"))

    def process_element(self, value, ctx):
        self.count.update((self.count.value() or 0) + 1)
        ctx.timer_service().register_event_time_timer(ctx.timestamp())
        limit = ctx.get_broadcast_state(LIMITS).get(ctx.get_current_key())
        if limit is not None and value[1] <= limit:
            yield ("pass", ctx.get_current_key(), value[1])

    def process_broadcast_element(self, value, ctx):
        ctx.get_broadcast_state(LIMITS).put(value[0], value[1])
        with pytest.raises(RuntimeError, match="outside any key"):
            ctx.get_current_key()
        yield ("rule", value[0], value[1])

    def on_timer(self, timestamp, ctx):
        yield ("count", ctx.get_current_key(), timestamp, self.count.value(),
               ctx.get_broadcast_state(LIMITS).get(ctx.get_current_key()))


@pytest.mark.parametrize("mode", ["batch", "streaming"])
def test_keyed_broadcast_state_timers_and_keyed_state(mode):
    """STREAMING fires a's timer 10 at watermark 10, before a's second event; BATCH after all of a's events."""
    p = StreamPipeline("perkey", parallelism=2, runtime_mode=mode)
    events = p.from_source(TestingSource([StreamRecord(("a", 5), 10), StreamRecord(("b", 9), 10), Watermark(10),
                                          StreamRecord(("a", 1), 20), Watermark(20)]), name="events")
    rules = p.from_collection([("a", 4), ("b", 10)]).name("rules")
    events.key_by(lambda r: r[0]).connect(rules.broadcast(LIMITS)).process(PerKey()).name("perkey").collect("out")
    out = Counter(p.execute_local().output("out"))
    assert out == Counter([("rule", "a", 4), ("rule", "b", 10)] * 2 + [
        ("pass", "b", 9), ("pass", "a", 1),
        ("count", "a", 10, 1 if mode == "streaming" else 2, 4), ("count", "a", 20, 2, 4), ("count", "b", 10, 1, 10)])


@pytest.mark.parametrize("mode", ["batch", "streaming"])
def test_keyed_co_process_then_keyed_broadcast(mode):
    out = sorted(enrich_pipeline(2, mode).execute_local().output("out"))
    assert out == [("a", 20, 1, 1), ("a", 22, 1, 2), ("b", 40, 2, 1), ("c", 60, 3, 1)]


def test_apply_to_keyed_state_from_the_broadcast_side():
    """Through a pipeline the broadcast side is read first, so no key holds state yet when the
    rule arrives (test_two_input_runtime_core drives the other order)."""

    class Reset(KeyedBroadcastProcessFunction):
        COUNT = ValueStateDescriptor("count")

        def open(self, runtime_context):
            self.count = runtime_context.get_state(self.COUNT)

        def process_element(self, value, ctx):
            self.count.update((self.count.value() or 0) + value[1])
            ctx.timer_service().register_event_time_timer(100)

        def process_broadcast_element(self, value, ctx):
            seen = []
            ctx.apply_to_keyed_state(self.COUNT, lambda key, state: seen.append((key, state.value())))
            yield ("keys with state", sorted(seen))

        def on_timer(self, timestamp, ctx):
            yield (ctx.get_current_key(), self.count.value())

    p = StreamPipeline("apply", runtime_mode="streaming")
    events = p.from_collection([("a", 1), ("b", 2), ("a", 3)]).key_by(lambda r: r[0])
    out = events.connect(p.from_collection(["reset"]).broadcast(LIMITS)).process(Reset()).name("reset")
    out.collect("out")
    assert sorted(p.execute_local().output("out"), key=str) == [("a", 4), ("b", 2), ("keys with state", [])]
