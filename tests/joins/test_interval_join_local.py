"""Interval join end to end through execute_local(): the shared case `interval_join` in every
mode it compares, inclusive / exclusive bounds, negative and positive intervals, late and
out-of-order records on either input (dropped, or to the late-data side outputs), cleanup of
the buffers, parallelism 2, both runtime modes (BATCH: nothing is late)."""

from __future__ import annotations

from collections import Counter

import pytest

from airflow_flinkchain import OutputTag, PlanningError, StreamPipeline
from airflow_flinkchain.functions import ProcessJoinFunction
from airflow_flinkchain.runtime.spark.job import ChainRunError

from conformance_cases import as_multiset
from tests.two_input.cases import build_two_input_case, compared_modes, load_two_input_cases
from tests.windows.util import events, key, stamped

CASE = next(c for c in load_two_input_cases() if c["name"] == "interval_join")
MODES = ["streaming", "batch"]
LEFT_LATE, RIGHT_LATE = OutputTag("left-late"), OutputTag("right-late")


@pytest.mark.parametrize("mode", compared_modes(CASE))
def test_shared_interval_join_case(mode):
    result = build_two_input_case(CASE, mode).execute_local()
    for sink, expected in CASE[f"expected_outputs_{mode}"].items():
        assert as_multiset(result.output(sink)) == as_multiset(expected), sink


class Pairs(ProcessJoinFunction):
    def process_element(self, left, right, ctx):
        assert ctx.get_timestamp() == ctx.timestamp() == max(left[2], right[2])
        assert (ctx.get_left_timestamp(), ctx.get_right_timestamp()) == (left[2], right[2])
        yield (left[1], right[1])


def interval_join(p, a, b, lower, upper, bounded=0, parallelism=None):
    left, right = events(p, a, bounded), events(p, b, bounded)
    if parallelism:
        left, right = left.rebalance().map(lambda r: r), right.rebalance().map(lambda r: r)
    return left.key_by(key).interval_join(right.key_by(key)).between(lower, upper)


def run(p, name="out"):
    return Counter(p.execute_local().output(name))


def reference(a, b, lower, upper):
    return Counter(((x[1], y[1]), max(x[2], y[2])) for x in a for y in b
                   if x[0] == y[0] and x[2] + lower <= y[2] <= x[2] + upper)


A = [("a", 1, 1000), ("b", 2, 1500), ("a", 3, 2000), ("a", 4, 2050), ("b", 5, 3000)]
B = [("a", 10, 800), ("a", 11, 1300), ("b", 12, 1400), ("a", 13, 2000), ("b", 14, 1800), ("a", 15, 2300),
     ("b", 16, 3500), ("c", 17, 2000)]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("lower, upper", [(-200, 300), (0, 0), (100, 500), (-500, -100), (-1000, 1000)])
def test_pairs_within_inclusive_bounds(mode, lower, upper):
    p = StreamPipeline("ij", runtime_mode=mode)
    interval_join(p, A, B, lower, upper, bounded=1000).process(Pairs()).process(stamped).collect("out")
    want = reference(A, B, lower, upper)
    assert want and run(p) == want


@pytest.mark.parametrize("mode", MODES)
def test_exclusive_bounds(mode):
    p = StreamPipeline("ij", runtime_mode=mode)
    # a@2000 with (-300, 300): b@2300 is on the upper bound; a@1000 with b@800 (-200) inside
    j = interval_join(p, A, B, -200, 300, bounded=1000)
    j.lower_bound_exclusive().upper_bound_exclusive().process(Pairs()).process(stamped).collect("out")
    want = Counter(((x[1], y[1]), max(x[2], y[2])) for x in A for y in B
                   if x[0] == y[0] and x[2] - 200 < y[2] < x[2] + 300)
    assert run(p) == want
    assert (((3, 15), 2300) not in want) and (((1, 10), 1000) not in want)  # both on a bound


def test_late_records_of_either_input_go_to_their_side_outputs_in_streaming():
    # the inputs alternate record by record (a watermark travels with its input's next record):
    # a1 | b10 | wm 999, a2 | wm 2999, b11 (on time: the operator's watermark is 999) |
    # wm 2999, a3 (late: the watermark is now 2999) | b12 (late)
    a = [("a", 1, 1000), ("a", 2, 3000), ("a", 3, 1100)]
    b = [("a", 10, 3000), ("a", 11, 1050), ("a", 12, 1000)]
    p = StreamPipeline("ij", runtime_mode="streaming")
    j = interval_join(p, a, b, -100, 100).side_output_left_late_data(LEFT_LATE).side_output_right_late_data(
        RIGHT_LATE)
    out = j.process(Pairs())
    out.process(stamped).collect("out")
    out.get_side_output(LEFT_LATE).process(stamped).collect("left_late")
    out.get_side_output(RIGHT_LATE).process(stamped).collect("right_late")
    result = p.execute_local()
    assert Counter(result.output("out")) == Counter({((2, 10), 3000): 1, ((1, 11), 1050): 1})
    assert result.output("left_late") == [(("a", 3, 1100), 1100)]  # a late record keeps its timestamp
    assert result.output("right_late") == [(("a", 12, 1000), 1000)]


def test_late_records_without_side_output_are_dropped():
    a = [("a", 1, 1000), ("a", 2, 3000), ("a", 3, 1100)]
    b = [("a", 10, 3000), ("a", 11, 1050), ("a", 12, 1000)]
    p = StreamPipeline("ij", runtime_mode="streaming")
    interval_join(p, a, b, -100, 100).process(Pairs()).process(stamped).collect("out")
    assert run(p) == Counter({((2, 10), 3000): 1, ((1, 11), 1050): 1})  # a3 would meet b11, b12 a1


@pytest.mark.parametrize("mode, joined", [("streaming", False), ("batch", True)])
def test_a_record_leaves_the_buffer_when_the_watermark_reaches_its_cleanup_time(mode, joined):
    # left a@1000, upper 100: its cleanup timer is at 1100. Once both inputs' watermarks reach 1100
    # (a1 | b9 | wm 999, a2 | wm 1100, b10 | wm 4999, a3: the operator's watermark is 1100), it is
    # gone: b11@1100 (not late: 1100 is not behind watermark 1100) no longer meets it, as in Flink
    a = [("a", 1, 1000), ("a", 2, 5000), ("a", 3, 6000)]
    b = [("a", 9, 1101), ("a", 10, 1101), ("a", 11, 1100)]
    p = StreamPipeline("ij", runtime_mode=mode)
    interval_join(p, a, b, -100, 100).process(Pairs()).process(stamped).collect("out")
    assert run(p) == (Counter({((1, 11), 1100): 1}) if joined else Counter())


def test_batch_mode_nothing_is_late():
    a = [("a", 1, 1000), ("a", 2, 3000), ("a", 3, 1100)]
    b = [("a", 10, 1050), ("a", 11, 3000), ("a", 12, 1000)]
    p = StreamPipeline("ij", runtime_mode="batch")
    out = interval_join(p, a, b, -100, 100).side_output_left_late_data(LEFT_LATE).process(Pairs())
    out.process(stamped).collect("out")
    out.get_side_output(LEFT_LATE).collect("late")
    result = p.execute_local()
    assert Counter(result.output("out")) == reference(a, b, -100, 100)
    assert result.output("late") == []


@pytest.mark.parametrize("mode", MODES)
def test_out_of_order_within_the_watermark_bound_still_joins(mode):
    a = [("a", 1, 1000), ("a", 2, 1400), ("a", 3, 1200)]  # 1200 after 1400: within 500 ms out of order
    b = [("a", 10, 1300), ("a", 11, 1100), ("a", 12, 1250)]
    p = StreamPipeline("ij", runtime_mode=mode)
    interval_join(p, a, b, -150, 150, bounded=500).process(Pairs()).process(stamped).collect("out")
    assert run(p) == reference(a, b, -150, 150)


@pytest.mark.parametrize("mode", MODES)
def test_parallelism_2(mode):
    keys = ["k%d" % i for i in range(9)]
    a = [(k, i, 100 * i) for i, k in enumerate(keys * 4)]
    b = [(k, -i, 100 * i + 30) for i, k in enumerate(keys * 3)]
    p = StreamPipeline("ij", parallelism=2, runtime_mode=mode)
    interval_join(p, a, b, -1000, 1000, bounded=10_000, parallelism=2).process(Pairs()).process(
        stamped).collect("out")
    want = reference(a, b, -1000, 1000)
    assert want and run(p) == want
    assert {c.name: c.parallelism for c in p.plan().chains}["Interval Join -> Process -> out"] == 2


def test_buffers_are_cleaned_up_as_the_watermark_passes():
    class Spy(ProcessJoinFunction):
        def process_element(self, left, right, ctx):
            yield (left[1], right[1])

    # right records far apart in time: each left record only meets the right records of its interval
    a = [("a", i, 1000 * i) for i in range(1, 30)]
    b = [("a", -i, 1000 * i + 10) for i in range(1, 30)]
    p = StreamPipeline("ij", runtime_mode="streaming")
    interval_join(p, a, b, 0, 50).process(Spy()).collect("out")
    assert sorted(run(p)) == [(i, -i) for i in range(1, 30)]


def test_plain_callable_and_side_output_from_the_function():
    extra = OutputTag("extra")
    p = StreamPipeline("ij", runtime_mode="batch")

    def fn(left, right, ctx):
        ctx.output(extra, (left[1], right[1]))
        return [left[1] + right[1]]

    out = interval_join(p, A, B, 0, 0).process(fn)
    out.collect("out")
    out.get_side_output(extra).process(stamped).collect("extra")
    result = p.execute_local()
    # a@2000 with b@2000 (3, 13): the only pair at distance 0
    assert result.output("out") == [16]
    assert result.output("extra") == [((3, 13), 2000)]


def test_records_without_timestamps_fail_with_the_fix():
    p = StreamPipeline("ij", runtime_mode="streaming")
    a = p.from_collection([("a", 1)]).key_by(key)
    b = p.from_collection([("a", 2)]).key_by(key)
    a.interval_join(b).between(-1, 1).process(Pairs()).collect("out")
    with pytest.raises(ChainRunError, match="assign_timestamps_and_watermarks"):
        p.execute_local()


def test_api_errors_name_the_fix():
    p = StreamPipeline("ij")
    a = p.from_collection([("a", 1)])
    with pytest.raises(PlanningError, match="KeyedStream"):
        a.key_by(key).interval_join(a)
    with pytest.raises(AttributeError, match="key_by"):
        a.interval_join(a.key_by(key))
    with pytest.raises(PlanningError, match="lower_bound <= upper_bound"):
        a.key_by(key).interval_join(a.key_by(key)).between(10, -10)
    with pytest.raises(PlanningError, match="widen the bounds"):
        a.key_by(key).interval_join(a.key_by(key)).between(5, 5).lower_bound_exclusive().process(Pairs())
    with pytest.raises(PlanningError, match="function class"):
        a.key_by(key).interval_join(a.key_by(key)).between(0, 5).process(Pairs)
    with pytest.raises(PlanningError, match="never emits side output"):
        class Declared(Pairs):
            output_tags = [OutputTag("x")]
        out = a.key_by(key).interval_join(a.key_by(key)).between(0, 5).side_output_left_late_data(LEFT_LATE)
        out.process(Declared()).get_side_output(OutputTag("y"))
    j = a.key_by(key).interval_join(a.key_by(key)).between(0, 5).side_output_left_late_data(LEFT_LATE)
    j.process(Declared()).get_side_output(LEFT_LATE)  # the late-data tag is the operator's own


def test_plan_is_a_two_input_chain_head_with_two_hash_inputs():
    p = StreamPipeline("ij", parallelism=2)
    a = p.from_collection([("a", 1, 1)]).name("clicks")
    b = p.from_collection([("a", 2, 2)]).name("views").map(lambda r: r).name("clean")
    a.key_by(key).interval_join(b.key_by(key)).between(0, 5).process(Pairs()).name("pairs").collect("out")
    plan = p.plan()
    assert [(c.name, c.parallelism) for c in plan.chains] == [
        ("clicks", 1), ("views", 1), ("clean", 2), ("pairs -> out", 2)]
    into_join = sorted((e.stream_edge.type_number, e.source_operator, e.partitioner.value)
                       for e in plan.edges if e.target_operator == "pairs")
    assert into_join == [(1, "clicks", "HASH"), (2, "clean", "HASH")]
