from airflow_flinkchain.functions import KeyedProcessFunction, ReduceFunction, ValueStateDescriptor
from airflow_flinkchain.runtime.core.elements import MAX_WATERMARK_TS, StreamRecord, Watermark
from airflow_flinkchain.runtime.state.backend import HeapKeyedStateBackend
from airflow_flinkchain.runtime.core.timers import InternalTimerService
from airflow_flinkchain.runtime.core.valve import WatermarkValve

from .helpers import K, build_job, edge, node, run


def keyed_job(kind, fn, runtime_mode="batch"):
    return build_job([node(0, K.SOURCE), node(1, kind, fn, key_selector=lambda v: v[0]), node(2, K.SINK, name="o")],
                     [edge(0, 1), edge(1, 2)], runtime_mode=runtime_mode)


def test_keyed_reduce_emits_one_record_per_key_at_end_of_input():
    class Sum(ReduceFunction):
        def reduce(self, a, b):
            return (a[0], a[1] + b[1])

    w, m = run(keyed_job(K.REDUCE, Sum()), [("b", 1), ("a", 2), ("b", 3), ("c", 4), ("a", 5)])
    assert w.sink_values("o") == [("b", 4), ("a", 7), ("c", 4)]  # first-seen key order
    assert {r.timestamp for r in w.sink[("o", 0)].records} == {MAX_WATERMARK_TS}
    assert m.operator("reduce1").records_in == 5 and m.operator("reduce1").records_out == 3


class CountWithTimer(KeyedProcessFunction):
    def open(self, ctx):
        self.count = ctx.get_state(ValueStateDescriptor("count"))

    def process_element(self, value, ctx):
        n = (self.count.value() or 0) + 1
        self.count.update(n)
        ctx.timer_service().register_event_time_timer(ctx.timestamp() + 10)
        yield (ctx.get_current_key(), "seen", n)

    def on_timer(self, ts, ctx):
        yield (ctx.get_current_key(), "timer", ts, ctx.timestamp())


def test_keyed_state_and_event_time_timers():
    inputs = [StreamRecord(("a", 1), 1), StreamRecord(("b", 1), 2), StreamRecord(("a", 2), 3), Watermark(12),
              StreamRecord(("b", 3), 20)]
    w, _ = run(keyed_job(K.KEYED_PROCESS, CountWithTimer(), "streaming"), inputs)
    assert w.sink_values("o") == [
        ("a", "seen", 1), ("b", "seen", 1), ("a", "seen", 2),
        ("a", "timer", 11, 11),  # watermark 12 passes the timers at 11 and 12
        ("b", "timer", 12, 12),
        ("b", "seen", 2),
        ("a", "timer", 13, 13), ("b", "timer", 30, 30),  # the rest fire at end of input (MAX_WATERMARK)
    ]
    assert w.sink[("o", 0)].records[3].timestamp == 11  # timer outputs carry the timer's timestamp


class _Fired:
    def __init__(self):
        self.timers = []

    def on_event_time(self, timer):
        self.timers.append((timer.timestamp, timer.key))


def test_state_backend_snapshot_and_restore():
    b = HeapKeyedStateBackend()
    timers = InternalTimerService(b, _Fired())
    state = b.get_state(ValueStateDescriptor("s"))
    b.set_current_key("k")
    state.update(41)
    timers.register_event_time_timer(None, 5)
    snap, timer_snap = b.snapshot(), timers.snapshot()
    restored = HeapKeyedStateBackend()
    fired = _Fired()
    restored_timers = InternalTimerService(restored, fired)
    restored.restore(snap)
    restored_timers.restore(timer_snap)
    restored.set_current_key("k")
    assert restored.get_state(ValueStateDescriptor("s")).value() == 41
    restored_timers.advance_watermark(5)
    restored_timers.advance_watermark(MAX_WATERMARK_TS)
    assert fired.timers == [(5, "k")]


def test_watermark_valve_is_min_over_channels():
    valve = WatermarkValve(2)
    assert valve.input_watermark(0, 5) is None
    assert valve.input_watermark(1, 3) == Watermark(3)
    assert valve.input_watermark(1, 2) is None  # never goes back
    assert valve.input_watermark(1, 9) == Watermark(5)
    merged = list(WatermarkValve(2).merge([(0, "a"), (0, Watermark(4)), (1, StreamRecord("b", 1)),
                                           (1, Watermark(6)), (0, Watermark(7))]))
    assert merged == ["a", StreamRecord("b", 1), Watermark(4), Watermark(6)]
    v = WatermarkValve(2)
    v.input_watermark(0, 3)
    assert v.channel_finished(1) == Watermark(3)
