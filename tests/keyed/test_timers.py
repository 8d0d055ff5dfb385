"""KeyedProcessFunction timers in STREAMING and BATCH mode: firing order, stamps, key,
deduplication, deletion, processing time, side outputs (execute_local)."""

from __future__ import annotations

import pytest

from airflow_flinkchain.functions import KeyedProcessFunction, OutputTag
from airflow_flinkchain.runtime.core.elements import MAX_WATERMARK_TS, MIN_WATERMARK_TS
from airflow_flinkchain.state import ValueStateDescriptor

from .util import collect_stamped, pipeline

LATE = OutputTag("timer_side")


class Probe(KeyedProcessFunction):
    """Each record (key, v) registers an event-time timer at ts + 10, twice (one timer);
    v == "del" deletes the key's timer at ts + 10 - 5 registered by an earlier record."""

    def process_element(self, value, ctx):
        key, v = value
        ts = ctx.timestamp()
        service = ctx.timer_service()
        if v == "del":
            service.delete_event_time_timer(ts + 5)
            return
        service.register_event_time_timer(ts + 10)
        service.register_event_time_timer(ts + 10)
        yield ("rec", key, v, service.current_watermark())

    def on_timer(self, timestamp, ctx):
        assert ctx.timestamp() == timestamp
        yield ("timer", ctx.get_current_key(), timestamp, ctx.timer_service().current_watermark())
        yield LATE, ("side", ctx.get_current_key(), timestamp)


RECORDS = [(("a", 1), 100), (("b", 2), 104), (("a", 3), 112), (("b", 4), 103), (("a", "del"), 117),
           (("b", 5), 130)]


def _run(mode):
    p, src = pipeline(mode, RECORDS, out_of_orderness=0)
    probe = src.key_by(lambda r: r[0]).process(Probe(), output_tags=[LATE]).name("probe")
    collect_stamped(probe)
    probe.get_side_output(LATE).collect("side")
    res = p.execute_local()
    return res.output("out"), res.output("side")


def test_streaming_event_time_timers_fire_as_the_watermark_passes_them():
    out, side = _run("streaming")
    # watermark = max timestamp - 1 after each record: 99, 103, 111, 111, 116, 129, then MAX
    assert out == [
        (("rec", "a", 1, MIN_WATERMARK_TS), 100),
        (("rec", "b", 2, 99), 104),
        (("rec", "a", 3, 103), 112),
        (("timer", "a", 110, 111), 110),  # watermark 111 passes a@110 (b@114 waits)
        (("rec", "b", 4, 111), 103),  # behind the watermark, not late for a KeyedProcessFunction
        (("timer", "b", 113, 116), 113),  # a@122 was deleted by ("a", "del") at 117
        (("timer", "b", 114, 116), 114),
        (("rec", "b", 5, 116), 130),
        (("timer", "b", 140, MAX_WATERMARK_TS), 140),  # at the end of input
    ]
    assert side == [("side", "a", 110), ("side", "b", 113), ("side", "b", 114), ("side", "b", 140)]


def test_batch_runs_each_key_in_timestamp_order_then_fires_its_timers():
    out, side = _run("batch")
    # no watermark before the end; a key's timers fire after its last record (watermark MAX)
    assert out == [
        (("rec", "a", 1, MIN_WATERMARK_TS), 100),
        (("rec", "a", 3, MIN_WATERMARK_TS), 112),
        (("timer", "a", 110, MAX_WATERMARK_TS), 110),
        (("rec", "b", 4, MIN_WATERMARK_TS), 103),
        (("rec", "b", 2, MIN_WATERMARK_TS), 104),
        (("rec", "b", 5, MIN_WATERMARK_TS), 130),
        (("timer", "b", 113, MAX_WATERMARK_TS), 113),
        (("timer", "b", 114, MAX_WATERMARK_TS), 114),
        (("timer", "b", 140, MAX_WATERMARK_TS), 140),
    ]
    assert sorted(side) == [("side", "a", 110), ("side", "b", 113), ("side", "b", 114), ("side", "b", 140)]


class Sessions(KeyedProcessFunction):
    """Counts a key's records; emits the count 5 ms after the key's last record (timer moved
    on every record: delete the previous one, register the new one)."""

    def open(self, runtime_context):
        self.count = runtime_context.get_state(ValueStateDescriptor("count"))
        self.timer = runtime_context.get_state(ValueStateDescriptor("timer"))

    def process_element(self, value, ctx):
        self.count.update((self.count.value() or 0) + 1)
        if self.timer.value() is not None:
            ctx.timer_service().delete_event_time_timer(self.timer.value())
        self.timer.update(ctx.timestamp() + 5)
        ctx.timer_service().register_event_time_timer(ctx.timestamp() + 5)

    def on_timer(self, timestamp, ctx):
        yield (ctx.get_current_key(), self.count.value())
        self.count.clear()
        self.timer.clear()


@pytest.mark.parametrize("mode", ["batch", "streaming"])
def test_out_of_order_input_gives_the_same_result_in_both_modes_when_nothing_is_late(mode):
    records = [(("a", 0), 10), (("b", 0), 11), (("a", 0), 12), (("a", 0), 30), (("b", 0), 13), (("a", 0), 31)]
    p, src = pipeline(mode, records, out_of_orderness=20)
    collect_stamped(src.key_by(lambda r: r[0]).process(Sessions()))
    assert sorted(p.execute_local().output("out")) == [(("a", 4), 36), (("b", 2), 18)]


def test_batch_sorts_late_records_into_place():
    """In STREAMING, a@5 arrives behind the watermark (19): it moves the key's timer from 25
    back to 10, which fires at once at the end; BATCH sorts it first, so the timer ends at 25."""
    records = [(("a", 0), 10), (("a", 0), 20), (("a", 0), 5)]
    results = {}
    for mode in ("batch", "streaming"):
        p, src = pipeline(mode, records, out_of_orderness=0)
        collect_stamped(src.key_by(lambda r: r[0]).process(Sessions()))
        results[mode] = p.execute_local().output("out")
    assert results["batch"] == [(("a", 3), 25)]
    assert results["streaming"] == [(("a", 3), 10)]


class ProcessingTime(KeyedProcessFunction):
    def process_element(self, value, ctx):
        service = ctx.timer_service()
        now = service.current_processing_time()
        assert now > 1_600_000_000_000  # wall-clock ms
        service.register_processing_time_timer(now + 60_000 + value[1])
        service.register_processing_time_timer(now + 60_000 + value[1])
        if value[1] == 2:
            service.delete_processing_time_timer(now + 60_000 + value[1])
        service.register_event_time_timer(1)

    def on_timer(self, timestamp, ctx):
        kind = "event" if timestamp == 1 else "processing"
        yield (ctx.get_current_key(), kind)


@pytest.mark.parametrize("mode", ["batch", "streaming"])
def test_processing_time_timers_fire_at_key_end_in_batch_and_never_in_streaming(mode):
    records = [(("a", 1), 0), (("b", 2), 0), (("b", 3), 0)]
    p, src = pipeline(mode, records)
    src.key_by(lambda r: r[0]).process(ProcessingTime()).collect("out")
    out = p.execute_local().output("out")
    if mode == "batch":  # per key: event time, then processing time (BatchExecutionInternalTimeService)
        assert out == [("a", "event"), ("a", "processing"), ("b", "event"), ("b", "processing")]
    else:  # the MAX watermark fires the event-time timers; the processing-time service is quiesced
        assert out == [("a", "event"), ("b", "event")]


class Emitter(KeyedProcessFunction):
    def process_element(self, value, ctx):
        ctx.timer_service().register_event_time_timer(value[1])

    def on_timer(self, timestamp, ctx):
        if timestamp < 50:  # timers registered while firing fire in the same advance
            ctx.timer_service().register_event_time_timer(timestamp + 50)
        yield (ctx.get_current_key(), timestamp)


@pytest.mark.parametrize("mode", ["batch", "streaming"])
def test_timers_fire_in_timestamp_order_per_key_including_ones_registered_by_timers(mode):
    records = [(("k", 30), 1), (("k", 10), 2), (("k", 20), 3), (("k", 10), 4)]
    p, src = pipeline(mode, records)
    collect_stamped(src.key_by(lambda r: r[0]).process(Emitter()))
    if mode == "streaming":
        assert p.execute_local().output("out") == [(("k", t), t) for t in (10, 20, 30, 60, 70, 80)]
    else:  # BATCH fires a key's timers with the service quiesced: the ones on_timer registers are ignored
        assert p.execute_local().output("out") == [(("k", t), t) for t in (10, 20, 30)]
