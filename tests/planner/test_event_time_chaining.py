"""Chains of event-time pipelines as Flink builds them: assign_timestamps_and_watermarks
chains with its input (ChainingStrategy.ALWAYS, one input); window operators and keyed
process functions start a chain after key_by's HASH edge, and what follows them on a
forward edge chains; window_all is keyed by a constant (HASH edge) with parallelism 1."""

from __future__ import annotations

import pytest

from airflow_flinkchain import (CountTrigger, Duration, GlobalWindows, KeyedProcessFunction, OutputTag, PlanningError,
                                ProcessWindowFunction, StreamPipeline, TumblingEventTimeWindows, WatermarkStrategy)
from airflow_flinkchain.graph.model import OperatorKind
from airflow_flinkchain.graph.windows import WindowFunctionKind, WindowSpec

STRATEGY = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(lambda r, ts: r[1])
TUMBLING = TumblingEventTimeWindows.of(Duration.of_seconds(1))
late = OutputTag("late")


def key(r):
    return r[0]


def add(a, b):
    return (a[0], a[1] + b[1])


def names(plan):
    return [list(c.operator_names) for c in plan.chains]


def edges(plan):
    return [(e.source_operator, e.target_operator, e.partitioner.value, e.output_tag) for e in plan.edges]


def test_timestamps_and_watermarks_chain_with_their_input():
    p = StreamPipeline("t")
    p.from_collection([("a", 1)]).name("src").assign_timestamps_and_watermarks(STRATEGY).name("wm") \
        .map(lambda r: r).name("m").collect("out")
    assert names(p.plan()) == [["src", "wm", "m", "out"]]
    node = p.stream_graph().node_by_key("wm")
    assert node.kind is OperatorKind.TIMESTAMPS_AND_WATERMARKS and node.function is STRATEGY


def test_timestamps_and_watermarks_after_a_rebalance_head_their_chain():
    p = StreamPipeline("t", parallelism=2)
    p.from_collection([("a", 1)]).name("src").rebalance().assign_timestamps_and_watermarks(STRATEGY).name("wm") \
        .map(lambda r: r).name("m").collect("out")
    assert names(p.plan()) == [["src"], ["wm", "m", "out"]]
    assert edges(p.plan()) == [("src", "wm", "REBALANCE", None)]


def test_window_starts_a_chain_after_key_by_and_chains_what_follows():
    p = StreamPipeline("t", parallelism=2)
    stream = p.from_collection([("a", 1)]).name("src").assign_timestamps_and_watermarks(STRATEGY).name("wm")
    sums = stream.key_by(key).window(TUMBLING).allowed_lateness(500).side_output_late_data(late).reduce(add)
    sums = sums.name("win")
    sums.map(lambda r: r).name("m").collect("out")
    sums.get_side_output(late).collect("late_out")
    plan = p.plan()
    assert names(plan) == [["src"], ["wm"], ["win", "m", "out", "late_out"]]
    assert edges(plan) == [("src", "wm", "REBALANCE", None), ("wm", "win", "HASH", None)]
    chain = plan.chains[2]
    assert sorted(str(e.output_tag) for e in chain.chained_edges) == ["None", "None", "late"]
    node = p.stream_graph().node_by_key("win")
    assert node.kind is OperatorKind.WINDOW and node.parallelism == 2 and node.key_selector is key
    assert node.function == WindowSpec(TUMBLING, WindowFunctionKind.REDUCE, add, allowed_lateness=500,
                                       late_data_tag=late)


def test_cascaded_windows_each_start_a_chain():
    p = StreamPipeline("t")
    s = p.from_collection([("a", 1)]).name("src").assign_timestamps_and_watermarks(STRATEGY).name("wm")
    first = s.key_by(key).window(TUMBLING).reduce(add).name("w1")
    second = first.key_by(key).window(TumblingEventTimeWindows.of(Duration.of_seconds(10))).reduce(add).name("w2")
    second.collect("out")
    assert names(p.plan()) == [["src", "wm"], ["w1"], ["w2", "out"]]


def test_keyed_process_function_chains_what_follows():
    class Noop(KeyedProcessFunction):
        def process_element(self, value, ctx):
            yield value

    p = StreamPipeline("t")
    s = p.from_collection([("a", 1)]).name("src").assign_timestamps_and_watermarks(STRATEGY).name("wm")
    s.key_by(key).process(Noop()).name("kp").map(lambda r: r).name("m").collect("out")
    assert names(p.plan()) == [["src", "wm"], ["kp", "m", "out"]]


def test_window_all_is_keyed_by_a_constant_with_parallelism_one():
    p = StreamPipeline("t", parallelism=3)
    s = p.from_collection([("a", 1)]).name("src").assign_timestamps_and_watermarks(STRATEGY).name("wm")
    s.window_all(TUMBLING).reduce(add).name("all").map(lambda r: r).name("m").collect("out")
    plan = p.plan()
    assert names(plan) == [["src"], ["wm"], ["all"], ["m", "out"]]
    assert edges(plan) == [("src", "wm", "REBALANCE", None), ("wm", "all", "HASH", None),
                           ("all", "m", "REBALANCE", None)]
    node = p.stream_graph().node_by_key("all")
    assert node.parallelism == 1 and node.function.all_windows
    with pytest.raises(PlanningError, match="window_all: its parallelism must be 1"):
        s.window_all(TUMBLING).reduce(add).set_parallelism(2)


def test_count_window_and_trigger_reach_the_spec():
    p = StreamPipeline("t")
    keyed = p.from_collection([("a", 1)]).key_by(key)
    keyed.count_window(3, 1).reduce(add).name("c").collect("out")
    keyed.window(GlobalWindows.create()).trigger(CountTrigger.of(2)).reduce(add).name("g").collect("out2")
    g = p.stream_graph()
    assert type(g.node_by_key("c").function.assigner).__name__ == "CountSlidingWindowAssigner"
    assert g.node_by_key("g").function.trigger == CountTrigger.of(2) or \
        repr(g.node_by_key("g").function.trigger) == repr(CountTrigger.of(2))


def test_side_outputs_of_a_window():
    p = StreamPipeline("t")
    keyed = p.from_collection([("a", 1)]).key_by(key)
    plain = keyed.window(TUMBLING).reduce(add)
    with pytest.raises(PlanningError, match="never emits side output 'other'"):
        plain.get_side_output(OutputTag("other"))

    class Tagging(ProcessWindowFunction):
        def process(self, key, context, elements):
            context.output(OutputTag("other"), key)
            return []

    keyed.window(TUMBLING).process(Tagging()).get_side_output(OutputTag("other")).collect("other")


@pytest.mark.parametrize("call, message", [
    (lambda w: w.reduce(lambda a, b: a, window_function=object()), "window_function must be"),
    (lambda w: w.aggregate(lambda a: a), "needs an AggregateFunction"),
    (lambda w: w.process(lambda *a: a), "needs a ProcessWindowFunction"),
    (lambda w: w.apply(lambda *a: a), "needs a WindowFunction"),
    (lambda w: w.allowed_lateness(-1), "must not be negative"),
    (lambda w: w.side_output_late_data("late"), "needs an OutputTag"),
    (lambda w: w.trigger("count"), "needs a Trigger"),
])
def test_window_api_errors_say_the_fix(call, message):
    w = StreamPipeline("t").from_collection([1]).key_by(lambda x: x).window(TUMBLING)
    with pytest.raises(PlanningError, match=message):
        call(w)


def test_window_and_assign_need_the_right_objects():
    s = StreamPipeline("t").from_collection([1])
    with pytest.raises(PlanningError, match="needs a WindowAssigner"):
        s.key_by(lambda x: x).window("tumbling")
    with pytest.raises(PlanningError, match="assigner class TumblingEventTimeWindows"):
        s.window_all(TumblingEventTimeWindows)
    with pytest.raises(PlanningError, match="needs a WatermarkStrategy"):
        s.assign_timestamps_and_watermarks(lambda r: r)
