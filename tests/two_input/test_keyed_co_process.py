"""KeyedCoProcessFunction: keyed state and timers shared by both inputs; the operator's
watermark is the minimum of its inputs' (timers fire by it); late and out-of-order
records on either input; BATCH replays each key's records of both inputs together."""

from __future__ import annotations

from collections import Counter

import pytest

from airflow_flinkchain import StreamPipeline
from airflow_flinkchain.functions import KeyedCoProcessFunction
from airflow_flinkchain.runtime.core.elements import MAX_WATERMARK_TS, StreamRecord, Watermark
from airflow_flinkchain.state import ListStateDescriptor
from airflow_flinkchain.testing import TestingSource

from conformance_cases import as_multiset

from .cases import build_two_input_case, load_two_input_cases


class SeenAtTimer(KeyedCoProcessFunction):
    """Both inputs register a timer at their record's time and remember the record;
    a timer at t emits (key, t, operator watermark, values with timestamp <= t)."""

    def open(self, runtime_context):
        self.seen = runtime_context.get_list_state(ListStateDescriptor("seen"))

    def _add(self, value, ctx):
        self.seen.add((value[1], ctx.timestamp()))
        ctx.timer_service().register_event_time_timer(ctx.timestamp())

    process_element1 = _add
    process_element2 = _add

    def on_timer(self, timestamp, ctx):
        values = tuple(sorted(v for v, ts in self.seen.get() if ts <= timestamp))
        yield (ctx.get_current_key(), timestamp, ctx.timer_service().current_watermark(), values)


def R(value, ts):
    return StreamRecord(value, ts)


# input 1: k@100, k@300, then k@150 (late for input 1: its watermark is 300)
ORDERS = [R(("k", 1), 100), Watermark(100), R(("k", 2), 300), Watermark(300), R(("k", 3), 150), Watermark(400)]
# input 2 lags: k@50, k@250, then k@120 (late for the operator: its watermark is 250 by then)
DIMS = [R(("k", 10), 50), Watermark(50), R(("k", 11), 250), Watermark(250), R(("k", 12), 120), Watermark(500)]


def _pipeline(mode, parallelism=1, orders=ORDERS, dims=DIMS):
    p = StreamPipeline(f"co_{mode}", parallelism=parallelism, runtime_mode=mode)
    a = p.from_source(TestingSource(orders), name="orders")
    b = p.from_source(TestingSource(dims), name="dims")
    out = a.connect(b).key_by(lambda r: r[0], lambda r: r[0]).process(SeenAtTimer()).name("seen")
    out.collect("out")
    return p


def test_streaming_timers_fire_by_the_minimum_of_both_input_watermarks():
    """Inputs alternate record by record (input_selection.py). Timer 50 fires when input 2
    reaches 50 although input 1 is at 100; 100, 150 and 250 wait for input 2's 250; the
    late k@150 of input 1 is still on time for the operator (watermark 50); the late
    k@120 of input 2 registers a timer in the past, which fires at the next advance."""
    out = _pipeline("streaming").execute_local().output("out")
    assert out == [
        ("k", 50, 50, (10,)),
        ("k", 100, 250, (1, 10)),
        ("k", 150, 250, (1, 3, 10)),
        ("k", 250, 250, (1, 3, 10, 11)),
        ("k", 120, 500, (1, 10, 12)),
        ("k", 300, 500, (1, 2, 3, 10, 11, 12)),
    ]


def test_batch_replays_each_keys_records_of_both_inputs_in_timestamp_order_then_its_timers():
    out = _pipeline("batch").execute_local().output("out")
    everything = (1, 2, 3, 10, 11, 12)
    expected = {50: (10,), 100: (1, 10), 120: (1, 10, 12), 150: (1, 3, 10, 12), 250: (1, 3, 10, 11, 12),
                300: everything}
    assert out == [("k", t, MAX_WATERMARK_TS, v) for t, v in sorted(expected.items())]


def _keys(elements, keys):
    """Each record once per key (same value and timestamp), watermarks as they are."""
    out = []
    for el in elements:
        out.extend([R((k, el.value[1]), el.timestamp) for k in keys] if isinstance(el, StreamRecord) else [el])
    return out


@pytest.mark.parametrize("mode", ["batch", "streaming"])
def test_parallelism_two_keys_get_the_same_results_as_alone(mode):
    """Several keys on two parallel instances: per key, what one key alone gets at parallelism 1
    in BATCH; in STREAMING each key's timers see both inputs' records up to the min watermark."""
    keys = ["k", "x", "y", "z"]
    out = _pipeline(mode, 2, _keys(ORDERS, keys), _keys(DIMS, keys)).execute_local().output("out")
    alone = _pipeline("batch").execute_local().output("out")
    if mode == "batch":
        assert Counter(out) == Counter((k, *rest) for k in keys for _, *rest in alone)
    else:
        assert len(out) == 6 * len(keys)
        for key, t, wm, values in out:
            assert wm >= t  # a timer fires only once the operator's watermark passed it
        finals = {(k, t): v for k, t, _, v in out if t == 300}
        assert set(finals.values()) == {(1, 2, 3, 10, 11, 12)} and len(finals) == len(keys)


@pytest.mark.parametrize("mode", ["batch", "streaming"])
def test_shared_enrich_case_at_parallelism_two(mode):
    case = next(c for c in load_two_input_cases() if c["name"] == "keyed_enrich")
    case = {**case, "steps": [s if s[0] != "co" else [*s[:3], {**s[3], "p": 2}] for s in case["steps"]]}
    result = build_two_input_case(case, mode).execute_local()
    expected = case[f"expected_outputs_{mode}"]["out"]
    assert as_multiset(result.output("out")) == as_multiset(expected)


def test_keyed_state_is_shared_by_both_inputs_and_timers_carry_their_time():
    from airflow_flinkchain.state import ValueStateDescriptor

    class Total(KeyedCoProcessFunction):
        def open(self, runtime_context):
            self.total = runtime_context.get_state(ValueStateDescriptor("total"))

        def process_element1(self, value, ctx):
            self.total.update((self.total.value() or 0) + value[1])
            ctx.timer_service().register_event_time_timer(1000)

        def process_element2(self, value, ctx):
            self.total.update((self.total.value() or 0) - value[1])

        def on_timer(self, timestamp, ctx):
            yield ctx.get_current_key(), self.total.value(), ctx.timestamp()

    for mode in ("batch", "streaming"):
        p = StreamPipeline("total", parallelism=2, runtime_mode=mode)
        a = p.from_collection([("a", 5), ("b", 7), ("a", 1)])
        b = p.from_collection([("a", 2), ("b", 3)])
        a.connect(b).key_by(lambda r: r[0], lambda r: r[0]).process(Total()).collect("out")
        assert sorted(p.execute_local().output("out")) == [("a", 4, 1000), ("b", 4, 1000)], mode


def test_a_failing_key_selector_of_either_input_is_dead_lettered():
    class Echo(KeyedCoProcessFunction):
        def process_element1(self, value, ctx):
            yield (1, value)

        def process_element2(self, value, ctx):
            yield (2, value)

    p = StreamPipeline("keys", parallelism=2, on_error="dead_letter")
    a, b = p.from_collection([{"k": 1}, {}]), p.from_collection([{"id": 1}, {"x": 2}])
    out = a.connect(b).key_by(lambda r: r["k"], lambda r: r["id"]).process(Echo()).name("echo")
    out.collect("out")
    out.dead_letters().collect("dead")
    result = p.execute_local()
    assert sorted(result.output("out"), key=str) == [(1, {"k": 1}), (2, {"id": 1})]
    dead = result.output("dead")
    assert sorted(map(str, (d["record"] for d in dead))) == ["{'x': 2}", "{}"]
    assert {d["operator"] for d in dead} == {"echo"} and {d["error_type"] for d in dead} == {"KeySelectorError"}
