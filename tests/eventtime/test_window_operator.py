import pickle
from collections import Counter

import pytest

from airflow_flinkchain.functions import OutputTag, ReduceFunction
from airflow_flinkchain.runtime.core.elements import MAX_WATERMARK_TS
from airflow_flinkchain.runtime.core.operators.window import (
    WindowOperator,
    aggregate_window,
    process_window,
    reduce_window,
    run_batch,
)
from airflow_flinkchain.runtime.state.backend import HeapKeyedStateBackend
from airflow_flinkchain.runtime.state.key_groups import compute_key_group_range_for_operator_index
from airflow_flinkchain.state import ValueStateDescriptor
from airflow_flinkchain.window import (
    ContinuousEventTimeTrigger,
    EventTimeTrigger,
    CountTrigger,
    CountTumblingWindowAssigner,
    EventTimeSessionWindows,
    GlobalWindows,
    PurgingTrigger,
    SlidingEventTimeWindows,
    TimeWindow,
    Trigger,
    TriggerResult,
    TumblingEventTimeWindows,
)
from airflow_flinkchain.window_functions import (
    AllWindowFunction,
    ProcessAllWindowFunction,
    ProcessWindowFunction,
    WindowFunction,
)

from tests.eventtime.harness import CollectingOutput
from tests.windows.util import Mean


def key(r):
    return r[0]


def add(a, b):
    return (a[0], a[1] + b[1])


def op_for(assigner, fn=None, **kw):
    descriptor, internal = fn if fn is not None else reduce_window(add)
    out = CollectingOutput()
    kw.setdefault("key_selector", key)
    return WindowOperator(assigner, descriptor, internal, out, **kw), out


def feed(op, *events):
    """events: ("k", v, ts) records of value ("k", v), or ints (watermarks)."""
    for e in events:
        if isinstance(e, int):
            op.process_watermark(e)
        else:
            op.process_element(e[:2], e[2] if len(e) > 2 else None)


class Count(ProcessWindowFunction):
    def process(self, key, context, elements):
        yield (key, context.window().start, context.window().end, len(list(elements)))


def test_tumbling_reduce_fires_at_the_watermark_with_max_timestamp():
    op, out = op_for(TumblingEventTimeWindows.of(1000))
    feed(op, ("a", 1, 100), ("a", 2, 900), ("b", 5, 950), 998)
    assert out.records == []
    feed(op, 999)
    assert Counter(out.records) == Counter({(("a", 3), 999): 1, (("b", 5), 999): 1})
    assert out.watermarks == [998, 999]
    assert op.timer_service.num_event_time_timers() == 0  # fired and cleaned up


def test_late_records_are_dropped_and_counted():
    op, out = op_for(TumblingEventTimeWindows.of(1000))
    feed(op, ("a", 1, 100), 1500, ("a", 9, 200), ("a", 2, 1600))
    op.end_input()
    assert out.records == [(("a", 1), 999), (("a", 2), 1999)]
    assert op.num_late_records_dropped == 1


def test_allowed_lateness_fires_again_and_late_side_output_takes_the_rest():
    late = OutputTag("late")
    op, out = op_for(TumblingEventTimeWindows.of(1000), allowed_lateness=500, late_data_output_tag=late)
    feed(op, ("a", 1, 100), 1000, ("a", 2, 300), 1498, ("a", 4, 400), 1499, ("a", 8, 500))
    assert out.records == [(("a", 1), 999), (("a", 3), 999), (("a", 7), 999)]
    assert out.side == {"late": [(("a", 8), 500)]}
    assert op.timer_service.num_event_time_timers() == 0  # cleanup timer at 999 + 500 fired


def test_sliding_windows_with_a_process_window_function():
    op, out = op_for(SlidingEventTimeWindows.of(1000, 500), process_window(Count()))
    feed(op, ("a", 1, 100), ("a", 1, 700), ("a", 1, 1200))
    op.end_input()
    assert sorted(out.records) == [(("a", -500, 500, 1), 499), (("a", 0, 1000, 2), 999),
                                   (("a", 500, 1500, 2), 1499), (("a", 1000, 2000, 1), 1999)]


def test_session_windows_merge_when_a_record_bridges_them():
    op, out = op_for(EventTimeSessionWindows.with_gap(500), process_window(Count()))
    feed(op, ("a", 1, 0), ("a", 1, 1000), ("b", 1, 0))
    assert op.timer_service.num_event_time_timers() == 3
    feed(op, ("a", 1, 600))  # [600, 1100) touches [0, 500)? no: 500 < 600; overlaps [1000, 1500)
    feed(op, ("a", 1, 450))  # [450, 950) bridges [0, 500) and [600, 1500)
    assert op.timer_service.num_event_time_timers() == 2  # merged windows' timers are gone
    op.end_input()
    assert sorted(out.records) == [(("a", 0, 1500, 4), 1499), (("b", 0, 500, 1), 499)]


def test_session_merge_keeps_state_of_a_single_state_window_without_copying():
    op, out = op_for(EventTimeSessionWindows.with_gap(100))
    for ts in (0, 50, 120, 200, 290):
        op.process_element(("a", 1, ts), ts)
    op.backend.set_current_key("a")
    mapping = op.backend.get_state(ValueStateDescriptor("merging-window-set")).value()
    assert mapping == {TimeWindow(0, 390): TimeWindow(0, 100)}
    op.end_input()
    assert out.records == [(("a", 5), 389)]


def test_a_fired_session_is_not_reopened_by_merging():
    op, out = op_for(EventTimeSessionWindows.with_gap(500), allowed_lateness=0)
    feed(op, ("a", 1, 0), 499, ("a", 2, 400))  # late: its window [400, 900) ... merges with nothing live
    op.end_input()
    assert out.records == [(("a", 1), 499), (("a", 2), 899)]


class Ctx(ProcessWindowFunction):
    """Counts firings per window (window_state) and per key (global_state), and side-outputs."""

    def __init__(self):
        self.cleared = []

    def process(self, key, context, elements):
        firings = context.window_state().get_state(ValueStateDescriptor("firings"))
        firings.update((firings.value() or 0) + 1)
        total = context.global_state().get_state(ValueStateDescriptor("total"))
        total.update((total.value() or 0) + 1)
        context.output(OutputTag("info"), context.current_watermark())
        yield (key, firings.value(), total.value(), sum(e[1] for e in elements))

    def clear(self, context):
        # per-window state is the function's to clear, as in Flink
        context.window_state().get_state(ValueStateDescriptor("firings")).clear()
        self.cleared.append(context.window())


def test_process_window_function_context_state_and_side_output():
    fn = Ctx()
    op, out = op_for(TumblingEventTimeWindows.of(1000), process_window(fn), allowed_lateness=1000)
    feed(op, ("a", 1, 100), 999, ("a", 2, 200), ("a", 3, 1500), 1999)
    assert out.records == [(("a", 1, 1, 1), 999), (("a", 2, 2, 3), 999), (("a", 1, 3, 3), 1999)]
    assert out.side["info"] == [(999, 999), (999, 999), (1999, 1999)]
    assert fn.cleared == [TimeWindow(0, 1000)]  # cleanup at 999 + 1000
    op.backend.set_current_key("a")
    assert op.backend.get_partitioned_state(TimeWindow(0, 1000), ValueStateDescriptor("firings")).value() is None
    assert op.backend.get_state(ValueStateDescriptor("total")).value() == 3


class Label(ProcessWindowFunction):
    def process(self, key, context, elements):
        (value,) = elements
        yield (key, context.window().start, value)


class Apply(WindowFunction):
    def apply(self, key, window, inputs):
        return [(key, window.end, [i[1] for i in inputs])]


def test_aggregate_reduce_and_apply_variants():
    rows = [("a", 1, 10), ("a", 3, 20), ("b", 5, 30)]
    results = {}
    for name, fn in (("agg", aggregate_window(Mean())), ("agg+pwf", aggregate_window(Mean(), Label())),
                     ("reduce+pwf", reduce_window(add, Label())), ("apply", process_window(Apply()))):
        op, out = op_for(TumblingEventTimeWindows.of(100), fn)
        feed(op, *rows)
        op.end_input()
        results[name] = sorted(out.records)
    assert results["agg"] == [(2.0, 99), (5.0, 99)]
    assert results["agg+pwf"] == [(("a", 0, 2.0), 99), (("b", 0, 5.0), 99)]
    assert results["reduce+pwf"] == [(("a", 0, ("a", 4)), 99), (("b", 0, ("b", 5)), 99)]
    assert results["apply"] == [(("a", 100, [1, 3]), 99), (("b", 100, [5]), 99)]


def test_reduce_function_class_is_accepted_and_bad_functions_name_the_operator():
    class Add(ReduceFunction):
        def reduce(self, a, b):
            return add(a, b)

    op, out = op_for(TumblingEventTimeWindows.of(100), reduce_window(Add()))
    feed(op, ("a", 1, 1), ("a", 2, 2))
    op.end_input()
    assert out.records == [(("a", 3), 99)]
    with pytest.raises(TypeError, match="my window"):
        reduce_window(add, window_function=lambda *a: a, where="my window")
    with pytest.raises(TypeError, match="AggregateFunction"):
        aggregate_window(add)


class CountAll(ProcessAllWindowFunction):
    def process(self, context, elements):
        yield (context.window().start, len(list(elements)))


class ApplyAll(AllWindowFunction):
    def apply(self, window, inputs):
        yield (window.start, sorted(i[0] for i in inputs))


def test_window_all_sees_every_key_in_one_window():
    for fn, want in ((CountAll(), [((0, 3), 99)]), (ApplyAll(), [((0, ["a", "b", "c"]), 99)])):
        op, out = op_for(TumblingEventTimeWindows.of(100), process_window(fn), key_selector=None)
        feed(op, ("a", 1, 1), ("b", 1, 2), ("c", 1, 3))
        op.end_input()
        assert out.records == want


def test_global_windows_with_count_trigger_fire_without_purging():
    op, out = op_for(GlobalWindows.create(), trigger=CountTrigger.of(2))
    feed(op, *[("a", i) for i in range(1, 6)])
    op.end_input()
    assert [r for r, _ in out.records] == [("a", 3), ("a", 10)]
    assert out.records[0][1] == MAX_WATERMARK_TS


def test_purging_count_trigger_starts_each_window_empty():
    op, out = op_for(GlobalWindows.create(), trigger=PurgingTrigger.of(CountTrigger.of(2)))
    feed(op, *[("a", i) for i in range(1, 6)])
    op.end_input()
    assert [r for r, _ in out.records] == [("a", 3), ("a", 7)]


def test_count_tumbling_assigner_is_count_window():
    op, out = op_for(CountTumblingWindowAssigner.of(2))
    feed(op, ("a", 1), ("b", 10), ("a", 2), ("a", 3), ("b", 20), ("a", 4))
    assert [r for r, _ in out.records] == [("a", 3), ("b", 30), ("a", 7)]


def test_continuous_event_time_trigger_fires_early_and_at_the_end():
    op, out = op_for(TumblingEventTimeWindows.of(1000), trigger=ContinuousEventTimeTrigger.of(300))
    feed(op, ("a", 1, 50), 299)
    assert out.records == []
    feed(op, 300, ("a", 2, 350), 600, ("a", 4, 700), 999)
    # timers at 300, 600, 900 (the next aligned interval each), then the window end
    assert [r for r, _ in out.records] == [("a", 1), ("a", 3), ("a", 7), ("a", 7)]
    assert {ts for _, ts in out.records} == {999}
    assert op.timer_service.num_event_time_timers() == 0


def test_merging_assigner_needs_a_mergeable_trigger():
    class Never(Trigger):
        def on_element(self, *a):
            return TriggerResult.CONTINUE

    with pytest.raises(ValueError, match="'w'.*can_merge"):
        op_for(EventTimeSessionWindows.with_gap(10), trigger=Never(), name="w")


def test_negative_allowed_lateness_is_refused():
    with pytest.raises(ValueError, match="allowed_lateness"):
        op_for(TumblingEventTimeWindows.of(10), allowed_lateness=-1)


def test_batch_mode_sorts_by_timestamp_per_key_so_nothing_is_late():
    rows = [("a", 1, 1200), ("a", 2, 100), ("b", 4, 50), ("a", 8, 300)]
    op, out = op_for(TumblingEventTimeWindows.of(1000))
    run_batch(op, [(r[:2], r[2]) for r in rows])
    assert sorted(out.records) == [(("a", 1), 1999), (("a", 10), 999), (("b", 4), 999)]
    assert op.num_late_records_dropped == 0
    assert out.watermarks == [MAX_WATERMARK_TS]


def _events():
    rows = []
    for i in range(60):
        k = f"k{i % 7}"
        ts = (i * 37) % 900 + (i // 20) * 600
        rows.append((k, i, ts))
    return rows


def _streaming(op, rows, start=0, stop=None):
    high = -(2**63)
    for r in rows[start:stop]:
        op.process_element(r, r[2])
        high = max(high, r[2])
        if high - 301 > op.current_watermark:
            op.process_watermark(high - 301)


def test_snapshot_restore_mid_stream_into_rescaled_operators_gives_the_same_results():
    rows = _events()
    whole, whole_out = op_for(SlidingEventTimeWindows.of(400, 200), allowed_lateness=100)
    _streaming(whole, rows)
    whole.process_watermark(MAX_WATERMARK_TS)

    first, first_out = op_for(SlidingEventTimeWindows.of(400, 200), allowed_lateness=100,
                              backend=HeapKeyedStateBackend(max_parallelism=128))
    _streaming(first, rows, 0, 30)
    snap = pickle.loads(pickle.dumps(first.snapshot()))  # plain data: survives a process boundary
    wm = first.current_watermark
    outs = list(first_out.records)
    for index in range(2):
        r = compute_key_group_range_for_operator_index(128, 2, index)
        op, out = op_for(SlidingEventTimeWindows.of(400, 200), allowed_lateness=100,
                         backend=HeapKeyedStateBackend(max_parallelism=128, key_group_range=r))
        op.restore([snap])
        op.process_watermark(wm)
        high = max(row[2] for row in rows[:30])
        for row in rows[30:]:  # as behind a keyed exchange: own keys' records, every watermark
            if op.backend.key_group_of(row[0]) in r:
                op.process_element(row, row[2])
            high = max(high, row[2])
            if high - 301 > op.current_watermark:
                op.process_watermark(high - 301)
        op.process_watermark(MAX_WATERMARK_TS)
        outs.extend(out.records)
    assert whole.num_late_records_dropped > 0  # the data has late records: lateness state matters
    assert Counter(whole_out.records) == Counter(outs)


def test_dynamic_gap_sessions():
    op, out = op_for(EventTimeSessionWindows.with_dynamic_gap(lambda r: r[1] * 100), process_window(Count()))
    feed(op, ("a", 1, 0), ("a", 5, 50), ("a", 1, 1000))  # gaps 100, 500, 100
    op.end_input()
    assert sorted(out.records) == [(("a", 0, 550, 2), 549), (("a", 1000, 1100, 1), 1099)]


def test_processing_time_windows_clean_up_on_processing_time():
    op, out = op_for(GlobalWindows.create(), trigger=PurgingTrigger.of(CountTrigger.of(3)))
    feed(op, ("a", 1), ("a", 2))
    op.advance_processing_time(10**15)  # GlobalWindow's cleanup time is MAX: nothing registered
    feed(op, ("a", 3))
    assert [r for r, _ in out.records] == [("a", 6)]


class _Forward:
    """Output of one window operator feeding the next (records and watermarks in order)."""

    def __init__(self, downstream):
        self.downstream = downstream

    def collect(self, value, timestamp):
        self.downstream.process_element(value, timestamp)

    def collect_side(self, tag, value, timestamp):
        raise AssertionError("no side output expected")

    def emit_watermark(self, timestamp):
        self.downstream.process_watermark(timestamp)


def test_cascaded_windows_see_results_at_window_max_timestamp():
    second, out = op_for(TumblingEventTimeWindows.of(2000))
    d, f = reduce_window(add)
    first = WindowOperator(TumblingEventTimeWindows.of(1000), d, f, _Forward(second), key_selector=key)
    for ts in (100, 900, 1500, 2500, 3999):
        first.process_element(("a", 1), ts)
        first.process_watermark(ts - 1)
    first.process_watermark(MAX_WATERMARK_TS)
    # first: [0,1000)=2 @999, [1000,2000)=1 @1999, [2000,3000)=1 @2999, [3000,4000)=1 @3999
    assert out.records == [(("a", 3), 1999), (("a", 2), 3999)]
    assert out.watermarks[-1] == MAX_WATERMARK_TS


def test_keyed_timers_in_batch_mode_fire_at_the_end_of_each_key():
    from airflow_flinkchain.functions import KeyedProcessFunction
    from tests.eventtime.harness import KeyedProcessHarness

    class DeleteEven(KeyedProcessFunction):
        def process_element(self, value, ctx):
            ctx.timer_service().register_event_time_timer(ctx.timestamp() + 10)
            if value[1] % 2 == 0:
                ctx.timer_service().delete_event_time_timer(ctx.timestamp() + 10)
            return None

        def on_timer(self, timestamp, ctx):
            yield (ctx.get_current_key(), timestamp, ctx.timer_service().current_watermark())

    out = CollectingOutput()
    h = KeyedProcessHarness(DeleteEven(), key, out)
    run_batch(h, [(("b", 1), 5), (("a", 2), 7), (("a", 3), 1), (("b", 5), 2)])
    assert out.records == [(("b", 12, MAX_WATERMARK_TS), 12), (("b", 15, MAX_WATERMARK_TS), 15),
                           (("a", 11, MAX_WATERMARK_TS), 11)]


class _GenericEventTimeTrigger(EventTimeTrigger):
    """Same trigger, but not the exact class: the operator takes its generic path."""


@pytest.mark.parametrize("seed", range(6))
def test_inlined_event_time_trigger_path_equals_the_generic_path(seed):
    import random

    rnd = random.Random(seed)
    rows = [(f"k{rnd.randrange(3)}", rnd.randrange(100), rnd.randrange(0, 3000)) for _ in range(300)]
    for assigner in (TumblingEventTimeWindows.of(500, 100), SlidingEventTimeWindows.of(600, 200)):
        for lateness in (0, 150):
            for fn in (reduce_window(add), aggregate_window(Mean()), process_window(Count())):
                results = []
                for trigger in (EventTimeTrigger(), _GenericEventTimeTrigger()):
                    op, out = op_for(assigner, fn, trigger=trigger, allowed_lateness=lateness,
                                     late_data_output_tag=OutputTag("late"))
                    _streaming(op, rows)
                    op.end_input()
                    results.append((out.records, out.side, op.timer_service.num_event_time_timers()))
                assert results[0] == results[1]
                assert results[0][0]  # something fired
