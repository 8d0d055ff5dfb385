"""Windows and watermarks end to end through execute_local(): every assigner, triggers,
lateness with late firings and the late side output, the window functions and their
context, window_all, count windows, session merges, cascaded windows, unions of
watermarked streams and exchanges to parallelism 2."""

from __future__ import annotations

from collections import Counter

import pytest

from airflow_flinkchain import (AllWindowFunction, ContinuousEventTimeTrigger, CountTrigger,
                                Duration, EventTimeSessionWindows, GlobalWindows, OutputTag,
                                ProcessAllWindowFunction, ProcessWindowFunction, PurgingTrigger,
                                SlidingEventTimeWindows, StreamPipeline, TumblingEventTimeWindows,
                                ValueStateDescriptor, WatermarkStrategy, WindowFunction)
from airflow_flinkchain.runtime.spark.job import ChainRunError

from tests.windows.util import LATE, Mean, add, event_time, events, key, stamped


def run(p, *sinks):
    result = p.execute_local()
    outs = [Counter(result.output(s)) for s in sinks]
    return outs[0] if len(outs) == 1 else outs


def collect(stream, name="out"):
    stream.process(stamped).collect(name)


RECORDS = [("a", 1, 100), ("a", 2, 900), ("b", 3, 1100), ("a", 4, 1500), ("a", 5, 2600)]


# ---- assigners ----

@pytest.mark.parametrize("mode", ["streaming", "batch"])
def test_tumbling_with_offset(mode):
    p = StreamPipeline("t", runtime_mode=mode)
    w = events(p, RECORDS).key_by(key).window(TumblingEventTimeWindows.of(Duration.of_millis(1000),
                                                                          Duration.of_millis(500)))
    collect(w.reduce(add))
    # windows [-500, 500), [500, 1500), ...
    assert run(p, "out") == Counter({(("a", 1, 100), 499): 1, (("a", 2, 900), 1499): 1, (("b", 3, 1100), 1499): 1,
                                     (("a", 4, 1500), 2499): 1, (("a", 5, 2600), 3499): 1})


@pytest.mark.parametrize("mode", ["streaming", "batch"])
def test_sliding_windows_hold_each_record_in_size_over_slide_windows(mode):
    p = StreamPipeline("t", runtime_mode=mode)
    w = events(p, [("a", 1, 100), ("a", 2, 700), ("a", 4, 1200)]).key_by(key)
    collect(w.window(SlidingEventTimeWindows.of(Duration.of_millis(1000), Duration.of_millis(500))).reduce(add))
    assert run(p, "out") == Counter({(("a", 1, 100), 499): 1, (("a", 3, 700), 999): 1,
                                     (("a", 6, 1200), 1499): 1, (("a", 4, 1200), 1999): 1})


@pytest.mark.parametrize("mode", ["streaming", "batch"])
def test_session_merges_a_record_bridging_two_sessions(mode):
    p = StreamPipeline("t", runtime_mode=mode)
    # 0 and 1000 are two sessions (gap 600) until 500 arrives and bridges them; the watermark
    # (bounded 2000) keeps both open
    w = events(p, [("a", 1, 0), ("a", 2, 1000), ("a", 4, 500), ("a", 8, 5000)], bounded=2000).key_by(key)
    collect(w.window(EventTimeSessionWindows.with_gap(Duration.of_millis(600))).reduce(add))
    assert run(p, "out") == Counter({(("a", 7, 1000), 1599): 1, (("a", 8, 5000), 5599): 1})


@pytest.mark.parametrize("mode", ["streaming", "batch"])
def test_global_windows_with_count_trigger(mode):
    p = StreamPipeline("t", runtime_mode=mode)
    w = events(p, RECORDS).key_by(key).window(GlobalWindows.create()).trigger(CountTrigger.of(2))
    collect(w.reduce(add))
    # CountTrigger fires without purging: the 4th 'a' record fires the running sum again
    assert run(p, "out") == Counter({(("a", 3, 900), 2**63 - 1): 1, (("a", 12, 2600), 2**63 - 1): 1})


@pytest.mark.parametrize("mode", ["streaming", "batch"])
def test_purging_count_trigger(mode):
    p = StreamPipeline("t", runtime_mode=mode)
    w = events(p, RECORDS).key_by(key).window(GlobalWindows.create()).trigger(PurgingTrigger.of(CountTrigger.of(2)))
    collect(w.reduce(add))
    assert run(p, "out") == Counter({(("a", 3, 900), 2**63 - 1): 1, (("a", 9, 2600), 2**63 - 1): 1})


def test_count_windows_tumbling_and_sliding():
    p = StreamPipeline("t")
    keyed = p.from_collection([("a", 1, 0), ("a", 2, 0), ("b", 10, 0), ("a", 3, 0), ("a", 4, 0)]).key_by(key)
    keyed.count_window(2).reduce(add).collect("tumbling")
    keyed.count_window(2, 1).reduce(add).collect("sliding")
    tumbling, sliding = run(p, "tumbling", "sliding")
    assert tumbling == Counter({("a", 3, 0): 1, ("a", 7, 0): 1})
    # windows of 2 sliding by 1 fire at every record once full, and at the first one (count 1 < 2: not yet)
    assert sliding == Counter({("a", 3, 0): 1, ("a", 5, 0): 1, ("a", 7, 0): 1})


def test_continuous_event_time_trigger_fires_early_results():
    p = StreamPipeline("t", runtime_mode="streaming")
    w = events(p, [("a", 1, 100), ("a", 2, 600), ("a", 4, 1200), ("a", 8, 2500)]).key_by(key)
    w = w.window(TumblingEventTimeWindows.of(Duration.of_millis(2000)))
    collect(w.trigger(ContinuousEventTimeTrigger.of(Duration.of_millis(500))).reduce(add))
    # [0, 2000): timers at 500 (fires at watermark 599), 1000, 1500, then the window end 1999;
    # [2000, 4000): 3000, 3500 and 3999, all at the final watermark. Every firing is stamped max_timestamp()
    assert run(p, "out") == Counter({(("a", 3, 600), 1999): 1, (("a", 7, 1200), 1999): 3,
                                     (("a", 8, 2500), 3999): 3})


# ---- lateness ----

def test_late_firing_is_stamped_with_the_window_end_and_late_records_go_aside():
    p = StreamPipeline("t", runtime_mode="streaming")
    records = [("a", 1, 100), ("a", 2, 1200), ("a", 4, 500), ("a", 8, 1800), ("a", 16, 700)]
    w = events(p, records).key_by(key).window(TumblingEventTimeWindows.of(Duration.of_millis(1000)))
    sums = w.allowed_lateness(Duration.of_millis(600)).side_output_late_data(LATE).reduce(add)
    collect(sums)
    collect(sums.get_side_output(LATE), "late")
    out, late = run(p, "out", "late")
    # watermark 1199 fires [0, 1000); 500 arrives within the lateness: a late firing, stamped 999;
    # at watermark 1799 the window [0, 1000) is cleaned up, so 700 is late
    assert out == Counter({(("a", 1, 100), 999): 1, (("a", 5, 500), 999): 1, (("a", 10, 1800), 1999): 1})
    assert late == Counter({(("a", 16, 700), 700): 1})


def test_batch_mode_has_nothing_late():
    p = StreamPipeline("t", runtime_mode="batch")
    records = [("a", 1, 100), ("a", 2, 1200), ("a", 4, 500), ("a", 16, 700)]
    sums = events(p, records).key_by(key).window(TumblingEventTimeWindows.of(Duration.of_millis(1000)))
    sums = sums.side_output_late_data(LATE).reduce(add)
    collect(sums)
    collect(sums.get_side_output(LATE), "late")
    out, late = run(p, "out", "late")
    assert out == Counter({(("a", 21, 700), 999): 1, (("a", 2, 1200), 1999): 1}) and late == Counter()


def test_no_watermark_until_the_end_with_an_auto_watermark_interval_of_zero():
    p = StreamPipeline("t", runtime_mode="streaming")
    p.get_config().set_auto_watermark_interval(0)
    records = [("a", 1, 100), ("a", 2, 1200), ("a", 4, 500)]
    sums = events(p, records).key_by(key).window(TumblingEventTimeWindows.of(Duration.of_millis(1000)))
    collect(sums.side_output_late_data(LATE).reduce(add))
    assert run(p, "out") == Counter({(("a", 5, 500), 999): 1, (("a", 2, 1200), 1999): 1})


# ---- window functions ----

class Describe(ProcessWindowFunction):
    """Window bounds, the watermark at firing, a per-window firing count (window state), a
    per-key count over windows (global state), and a side output per firing."""

    def process(self, key, context, elements):
        firings = context.window_state().get_state(ValueStateDescriptor("firings"))
        firings.update((firings.value() or 0) + 1)
        seen = context.global_state().get_state(ValueStateDescriptor("windows"))
        seen.update((seen.value() or 0) + 1)
        context.output(OutputTag("fired"), (key, context.window().start))
        values = list(elements)
        yield (key, context.window().start, context.window().end, values, firings.value(), seen.value())


class Apply(WindowFunction):
    def apply(self, key, window, inputs):
        yield (key, window.end, sorted(r[1] for r in inputs))


@pytest.mark.parametrize("mode", ["streaming", "batch"])
def test_aggregate_reduce_apply_and_process(mode):
    p = StreamPipeline("t", runtime_mode=mode)
    w = lambda: events(p, RECORDS).key_by(key).window(TumblingEventTimeWindows.of(Duration.of_millis(1000)))  # noqa
    w().aggregate(Mean()).collect("mean")
    w().aggregate(Mean(), window_function=Describe()).collect("mean_described")
    w().reduce(add, Apply()).collect("reduce_applied")
    w().apply(Apply()).collect("applied")
    described = w().process(Describe())
    described.collect("described")
    described.get_side_output(OutputTag("fired")).collect("fired")
    result = p.execute_local()
    assert sorted(result.output("mean")) == [1.5, 3.0, 4.0, 5.0]
    assert sorted(result.output("mean_described")) == [
        ("a", 0, 1000, [1.5], 1, 1), ("a", 1000, 2000, [4.0], 1, 2), ("a", 2000, 3000, [5.0], 1, 3),
        ("b", 1000, 2000, [3.0], 1, 1)]
    assert sorted(result.output("reduce_applied")) == [("a", 1000, [3]), ("a", 2000, [4]), ("a", 3000, [5]),
                                                       ("b", 2000, [3])]
    assert sorted(result.output("applied")) == [("a", 1000, [1, 2]), ("a", 2000, [4]), ("a", 3000, [5]),
                                                ("b", 2000, [3])]
    assert sorted(r[:4] for r in result.output("described"))[0] == ("a", 0, 1000, [("a", 1, 100), ("a", 2, 900)])
    assert sorted(result.output("fired")) == [("a", 0), ("a", 1000), ("a", 2000), ("b", 1000)]


def test_current_watermark_in_the_window_context():
    class Watermark(ProcessWindowFunction):
        def process(self, key, context, elements):
            yield (context.window().end, context.current_watermark())

    p = StreamPipeline("t", runtime_mode="streaming")
    w = events(p, [("a", 1, 100), ("a", 2, 1500), ("a", 3, 2500)]).key_by(key)
    w.window(TumblingEventTimeWindows.of(Duration.of_millis(1000))).process(Watermark()).collect("out")
    assert sorted(p.execute_local().output("out")) == [(1000, 1499), (2000, 2499), (3000, 2**63 - 1)]


# ---- window_all, cascades, unions, parallelism ----

class CountAll(ProcessAllWindowFunction):
    def process(self, context, elements):
        yield (context.window().start, len(list(elements)))


class SumAll(AllWindowFunction):
    def apply(self, window, inputs):
        yield (window.start, sum(r[1] for r in inputs))


@pytest.mark.parametrize("mode", ["streaming", "batch"])
def test_window_all_after_parallel_operators(mode):
    p = StreamPipeline("t", parallelism=2, runtime_mode=mode)
    s = events(p, RECORDS).map(lambda r: r)
    collect(s.window_all(TumblingEventTimeWindows.of(Duration.of_millis(1000))).process(CountAll()), "count")
    s.window_all(TumblingEventTimeWindows.of(Duration.of_millis(1000))).apply(SumAll()).collect("sum")
    count, total = run(p, "count", "sum")
    assert count == Counter({((0, 2), 999): 1, ((1000, 2), 1999): 1, ((2000, 1), 2999): 1})
    assert total == Counter({(0, 3): 1, (1000, 7): 1, (2000, 5): 1})


@pytest.mark.parametrize("mode", ["streaming", "batch"])
def test_cascaded_windows_use_the_first_windows_result_timestamps(mode):
    p = StreamPipeline("t", runtime_mode=mode)
    first = events(p, RECORDS).key_by(key).window(TumblingEventTimeWindows.of(Duration.of_millis(1000))).reduce(add)
    second = first.key_by(key).window(TumblingEventTimeWindows.of(Duration.of_millis(2000))).reduce(add)
    collect(second)
    assert run(p, "out") == Counter({(("a", 7, 1500), 1999): 1, (("b", 3, 1100), 1999): 1,
                                     (("a", 5, 2600), 3999): 1})


def test_union_of_two_watermarked_streams_takes_the_minimum_watermark():
    p = StreamPipeline("t", runtime_mode="streaming")
    fast = events(p, [("a", 1, 100), ("a", 2, 5000)])
    slow = events(p, [("a", 4, 300)])
    # the fast stream alone would make 300 late; the union's watermark is the minimum of both
    sums = fast.union(slow).key_by(key).window(TumblingEventTimeWindows.of(Duration.of_millis(1000)))
    collect(sums.side_output_late_data(LATE).reduce(add))
    assert run(p, "out") == Counter({(("a", 5, 300), 999): 1, (("a", 2, 5000), 5999): 1})


def test_single_watermarked_stream_drops_the_same_record():
    p = StreamPipeline("t", runtime_mode="streaming")
    stream = events(p, [("a", 1, 100), ("a", 2, 5000), ("a", 4, 300)])
    sums = stream.key_by(key).window(TumblingEventTimeWindows.of(Duration.of_millis(1000)))
    sums = sums.side_output_late_data(LATE).reduce(add)
    collect(sums)
    collect(sums.get_side_output(LATE), "late")
    out, late = run(p, "out", "late")
    assert out == Counter({(("a", 1, 100), 999): 1, (("a", 2, 5000), 5999): 1})
    assert late == Counter({(("a", 4, 300), 300): 1})


@pytest.mark.parametrize("mode", ["streaming", "batch"])
def test_rebalance_to_parallelism_two(mode):
    p = StreamPipeline("t", parallelism=2, runtime_mode=mode)
    records = [(k, i, i * 100) for i in range(1, 40) for k in ("a", "b", "c")]
    s = p.from_collection(records).rebalance().assign_timestamps_and_watermarks(
        WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_millis(0)).with_timestamp_assigner(event_time))
    sums = s.map(lambda r: r).key_by(key).window(TumblingEventTimeWindows.of(Duration.of_millis(1000)))
    collect(sums.reduce(add))
    expected = Counter()
    for k in ("a", "b", "c"):
        for start in range(0, 4000, 1000):
            values = [i for i in range(1, 40) if start <= i * 100 < start + 1000]
            expected[((k, sum(values), max(values) * 100), start + 999)] += 1
    assert run(p, "out") == expected


def test_timestamps_reach_process_functions_and_cross_exchanges():
    p = StreamPipeline("t", parallelism=2, runtime_mode="streaming")
    s = events(p, [("a", 1, 100), ("b", 2, 200)]).rebalance().map(lambda r: r[1])
    collect(s)
    assert run(p, "out") == Counter({(1, 100): 1, (2, 200): 1})


def test_a_record_without_timestamp_in_an_event_time_window_fails_naming_the_fix():
    p = StreamPipeline("t", runtime_mode="streaming")
    w = p.from_collection([("a", 1)]).key_by(key).window(TumblingEventTimeWindows.of(Duration.of_millis(1000)))
    w.reduce(add).name("sums").collect("out")
    with pytest.raises(ChainRunError, match="sums.*assign_timestamps_and_watermarks"):
        p.execute_local()


# ---- idleness ----

def _union_with_an_empty_stream(idleness: bool, empty_first: bool):
    p = StreamPipeline("t", runtime_mode="streaming")
    strategy = WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_millis(0)).with_timestamp_assigner(event_time)
    if idleness:
        strategy = strategy.with_idleness(Duration.of_seconds(10))
    fast = p.from_collection([("a", 1, 100), ("a", 2, 5000), ("a", 4, 300)]).assign_timestamps_and_watermarks(strategy)
    empty = p.from_collection([]).assign_timestamps_and_watermarks(strategy)
    both = empty.union(fast) if empty_first else fast.union(empty)
    sums = both.key_by(key).window(TumblingEventTimeWindows.of(Duration.of_millis(1000)))
    sums = sums.side_output_late_data(LATE).reduce(add)
    collect(sums)
    collect(sums.get_side_output(LATE), "late")
    return run(p, "out", "late")


@pytest.mark.parametrize("empty_first", [False, True])
def test_an_idle_input_does_not_hold_the_watermark_back(empty_first):
    out, late = _union_with_an_empty_stream(idleness=True, empty_first=empty_first)
    assert out == Counter({(("a", 1, 100), 999): 1, (("a", 2, 5000), 5999): 1})
    assert late == Counter({(("a", 4, 300), 300): 1})


def test_without_idleness_an_empty_input_holds_the_watermark_back():
    out, late = _union_with_an_empty_stream(idleness=False, empty_first=False)
    assert out == Counter({(("a", 5, 300), 999): 1, (("a", 2, 5000), 5999): 1}) and late == Counter()


def test_window_functions_get_keyed_state_from_their_runtime_context():
    class Running(ProcessWindowFunction):
        def open(self, runtime_context):
            self.total = runtime_context.get_state(ValueStateDescriptor("total"))

        def process(self, key, context, elements):
            self.total.update((self.total.value() or 0) + sum(r[1] for r in elements))
            yield (key, context.window().start, self.total.value())

    p = StreamPipeline("t", runtime_mode="streaming")
    w = events(p, RECORDS).key_by(key).window(TumblingEventTimeWindows.of(Duration.of_millis(1000)))
    w.process(Running()).collect("out")
    assert sorted(p.execute_local().output("out")) == [("a", 0, 3), ("a", 1000, 7), ("a", 2000, 12), ("b", 1000, 3)]


def test_window_on_a_plain_stream_says_to_key_it_first():
    s = StreamPipeline("t").from_collection([1])
    with pytest.raises(AttributeError, match=r"key_by\(key_selector\) first"):
        s.window(TumblingEventTimeWindows.of(1000))


def test_pyflink_types_as_output_type_and_timestamps_on_a_typed_edge():
    from airflow_flinkchain import Time, Types

    p = StreamPipeline("t", parallelism=2, runtime_mode="streaming")
    w = events(p, RECORDS).key_by(key).window(TumblingEventTimeWindows.of(Time.seconds(1)))
    sums = w.reduce(add, output_type=Types.TUPLE([Types.STRING(), Types.INT(), Types.LONG()]))
    rows = sums.map(lambda r: {"k": r[0], "v": r[1]}, output_type={"k": "string", "v": "int64"})
    collect(rows.rebalance().map(lambda r: r))  # the typed edge: declared Arrow columns plus the timestamp
    out = sorted((v["k"], v["v"], ts) for v, ts in p.execute_local().output("out"))
    assert out == [("a", 3, 999), ("a", 4, 1999), ("a", 5, 2999), ("b", 3, 1999)]
