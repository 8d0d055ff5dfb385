"""Every plan-time error: one PlanningError class, the operator named, the fix said."""

from __future__ import annotations

import warnings

import pytest

from airflow_flinkchain import OutputTag, PlanningError, PlanningWarning, StreamPipeline
from airflow_flinkchain.functions import ProcessFunction
from airflow_flinkchain.graph.model import OperatorKind, PartitionSpec, Partitioner, StreamEdge, StreamGraph, StreamNode
from airflow_flinkchain.io.sources import Source
from airflow_flinkchain.planner import build_job_graph

late = OutputTag("late")


def inc(x):
    return x + 1


class Flag(ProcessFunction):
    output_tags = [late]

    def process_element(self, value, ctx):
        yield value


def pipe(p=1):
    return StreamPipeline("t", parallelism=p)


def test_forward_across_parallelism_change_names_both_operators():
    p = pipe()
    p.from_collection([1]).name("src").forward().map(inc).name("wide").set_parallelism(3).collect("out")
    with pytest.raises(PlanningError, match=r"Forward partitioning does not allow change of parallelism.*'src'.*1.*'wide'.*3.*rebalance") as e:
        p.plan()
    assert e.value.operator == "wide"


def test_no_sink():
    p = pipe()
    p.from_collection([1]).map(inc)
    with pytest.raises(PlanningError, match="has no sink.*collect"):
        p.plan()


def test_duplicate_uids():
    p = pipe()
    s = p.from_collection([1]).map(inc).name("a").uid("same")
    s.map(inc).name("b").uid("same").collect("out")
    with pytest.raises(PlanningError, match="'a' and 'b' have the same uid 'same'"):
        p.plan()


def test_uids_colliding_after_making_them_path_safe():
    p = pipe()
    p.from_collection([1]).map(inc).name("a").uid("x y").map(inc).name("b").uid("x/y").collect("o")
    with pytest.raises(PlanningError, match="same key 'x_y'"):
        p.plan()


@pytest.mark.parametrize("bad", [0, -1, 1.5, "2", True])
def test_invalid_parallelism(bad):
    p = pipe()
    with pytest.raises(PlanningError, match="'Map': parallelism must be a positive integer"):
        p.from_collection([1]).map(inc).set_parallelism(bad)
    with pytest.raises(PlanningError, match="parallelism must be a positive integer"):
        StreamPipeline("x", parallelism=bad)


def test_parallelism_above_max_parallelism():
    p = pipe()
    p.from_collection([1]).map(inc).name("m").set_parallelism(8).set_max_parallelism(4).collect("o")
    with pytest.raises(PlanningError, match="'m': parallelism 8 exceeds its max parallelism 4"):
        p.plan()


def test_non_parallel_source_parallelism():
    with pytest.raises(PlanningError, match="non-parallel source.*must be 1"):
        pipe().from_collection([1]).name("rows").set_parallelism(2)


@pytest.mark.parametrize("where", ["operator", "pipeline"])
def test_invalid_on_error(where):
    with pytest.raises(PlanningError, match="on_error must be one of 'fail', 'dead_letter', 'skip'"):
        if where == "pipeline":
            StreamPipeline("x", on_error="ignore")
        else:
            pipe().from_collection([1]).map(inc, on_error="ignore")
    with pytest.raises(PlanningError, match="operator 'Map': on_error"):
        pipe().from_collection([1]).map(inc).on_error("retry")


def test_on_error_takes_the_enum_or_its_string_and_falls_back_operator_pipeline_fail():
    from airflow_flinkchain import ErrorPolicy

    p = StreamPipeline("t", on_error="skip")
    src = p.from_collection([1])
    src.map(inc, on_error=ErrorPolicy.DEAD_LETTER).name("enum").collect("a")
    src.map(inc, on_error="fail").name("string").collect("b")
    src.map(inc).name("default").collect("c")
    nodes = {n.name: n for n in p.stream_graph().nodes}
    assert nodes["enum"].on_error is ErrorPolicy.DEAD_LETTER and nodes["string"].on_error is ErrorPolicy.FAIL
    assert nodes["default"].on_error is None and p.stream_graph().on_error is ErrorPolicy.SKIP
    assert ErrorPolicy.effective(None, "skip") is ErrorPolicy.SKIP
    assert ErrorPolicy.effective("dead_letter", "skip") is ErrorPolicy.DEAD_LETTER
    assert ErrorPolicy.effective(None, None) is ErrorPolicy.FAIL


def test_unknown_side_output_tag_of_declaring_function():
    f = pipe().from_collection([1]).process(Flag()).name("flag")
    with pytest.raises(PlanningError, match="'flag' never emits side output 'early'.*declares only \\['late'\\]"):
        f.get_side_output(OutputTag("early"))


def test_side_output_tags_declared_on_process_call():
    s = pipe().from_collection([1]).process(lambda v, ctx: [v], output_tags=[late]).name("p")
    s.get_side_output(late)
    with pytest.raises(PlanningError, match="never emits side output 'x'"):
        s.get_side_output("x")


def test_undeclared_tags_are_accepted():
    s = pipe().from_collection([1]).process(lambda v, ctx: [v])
    s.get_side_output(OutputTag("anything"))


def test_side_output_of_non_process_operator():
    with pytest.raises(PlanningError, match="'m' \\(map\\) cannot emit side outputs.*process"):
        pipe().from_collection([1]).map(inc).name("m").get_side_output(late)


def test_side_output_on_split_stream():
    f = pipe().from_collection([1]).process(Flag()).name("flag")
    with pytest.raises(PlanningError, match="get_side_output\\(\\) on the split stream of 'flag'"):
        f.split(lambda x: ["a"]).get_side_output(late)
    with pytest.raises(PlanningError, match="get_side_output\\(\\) applies to an operator.*select"):
        p = pipe()
        g = p.from_collection([1]).process(Flag()).name("g")
        g.split(lambda x: ["a"]).select("a").get_side_output(late)


def test_split_of_a_split():
    p = pipe()
    s = p.from_collection([1]).map(inc).name("m").split(lambda x: ["a"])
    with pytest.raises(PlanningError, match="split\\(\\) of a split: operator 'm'"):
        s.split(lambda x: ["b"])
    with pytest.raises(PlanningError, match="split\\(\\) of a split"):
        s.select("a").split(lambda x: ["b"])
    p2 = pipe()
    m = p2.from_collection([1]).map(inc).name("m")
    m.split(lambda x: ["a"])
    with pytest.raises(PlanningError, match="'m' is already split"):
        m.split(lambda x: ["b"])


def test_select_without_split():
    s = pipe().from_collection([1]).map(inc)
    with pytest.raises(PlanningError, match="select\\('a',\\) without split\\(\\).*split\\(selector\\)"):
        s.select("a")


def test_select_of_a_name_no_selector_returns_warns():
    p = pipe()
    s = p.from_collection([1]).map(inc).name("m").split(lambda x: ["big"], names=["big", "small"])
    s.select("huge").map(inc).name("audit").collect("o")
    with pytest.warns(PlanningWarning, match="'audit' selects \\['huge'\\] from the split of 'm'"):
        p.plan()


def test_selector_declaring_names_as_attribute():
    class Sizes:
        names = ("big",)

        def select(self, value):
            return ["big"]

    p = pipe()
    p.from_collection([1]).split(Sizes()).select("big").collect("o")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        p.plan()


def test_sink_has_no_outputs():
    sink = pipe().from_collection([1]).collect("out")
    with pytest.raises(PlanningError, match="sink 'out' has no outputs, so it has no map\\(\\)"):
        sink.map(inc)
    assert sink.name("renamed").set_parallelism(1) is sink  # settings are fine


def test_virtual_streams_have_no_operator_settings():
    s = pipe().from_collection([1]).rebalance()
    with pytest.raises(PlanningError, match="name\\(\\) applies to an operator.*rebalance"):
        s.name("x")
    with pytest.raises(PlanningError, match="key_by\\(\\)"):
        pipe().from_collection([1]).key_by(inc).set_parallelism(2)


def test_partitioning_a_keyed_stream():
    with pytest.raises(PlanningError, match="cannot override the partitioning of a KeyedStream"):
        pipe().from_collection([1]).key_by(inc).rebalance()


def test_cycle_in_a_hand_built_graph():
    fwd = PartitionSpec(Partitioner.FORWARD)
    nodes = tuple(StreamNode(id=i, key=f"n{i}", kind=OperatorKind.MAP, name=f"op{i}", parallelism=1) for i in range(3))
    g = StreamGraph("loop", nodes, (StreamEdge(0, 1, fwd), StreamEdge(1, 2, fwd), StreamEdge(2, 1, fwd)))
    with pytest.raises(PlanningError, match="cycle through operators \\['op1', 'op2'\\]"):
        build_job_graph(g)


def test_streams_of_another_pipeline():
    a, b = pipe(), pipe()
    s = a.from_collection([1])
    with pytest.raises(PlanningError, match="same pipeline"):
        b.from_collection([1]).union(s)


@pytest.mark.parametrize("bad", [None, 3, "text"])
def test_bad_functions(bad):
    with pytest.raises(PlanningError, match="map\\(\\) needs a callable"):
        pipe().from_collection([1]).map(bad)


def test_bad_source_sink_and_strategy():
    with pytest.raises(PlanningError, match="from_source\\(\\) needs a Source"):
        pipe().from_source([1, 2])
    with pytest.raises(PlanningError, match="sink_to\\(\\) needs a Sink"):
        pipe().from_collection([1]).sink_to(print)
    p = pipe()
    p.from_collection([1]).collect("o")
    with pytest.raises(PlanningError, match="unknown chaining strategy 'fast'"):
        p.plan("fast")


def test_parallel_source_follows_pipeline_parallelism():
    class Files(Source):
        pass

    p = pipe(4)
    p.from_source(Files()).collect("o")
    plan = p.plan()
    assert [c.parallelism for c in plan.chains] == [4] and plan.chains[0].name == "Source: Files -> o"


def test_function_class_instead_of_instance_is_refused_at_declaration():
    from airflow_flinkchain import functions as f
    from airflow_flinkchain.io.sinks import CollectSink

    class Double(f.MapFunction):
        def map(self, value):
            return value * 2

    class ByParity:  # a plain class with the method, no Function base
        def get_key(self, value):
            return value % 2

    s = pipe().from_collection([1]).name("src")
    calls = {
        "map": lambda: s.map(Double), "flat_map": lambda: s.flat_map(f.FlatMapFunction),
        "filter": lambda: s.filter(f.FilterFunction), "process": lambda: s.process(f.ProcessFunction),
        "key_by": lambda: s.key_by(ByParity), "reduce": lambda: s.key_by(inc).reduce(f.ReduceFunction),
        "split": lambda: s.split(f.OutputSelector),
        "partition_custom": lambda: s.partition_custom(f.Partitioner, inc),
    }
    for what, call in calls.items():
        with pytest.raises(PlanningError, match=rf"{what}\(\) got the function class \w+, not an instance of it: "
                                                rf"pass \w+\(\)"):
            call()
    with pytest.raises(PlanningError, match=r"sink_to\(\) got the sink class CollectSink.*pass CollectSink\(...\)"):
        s.sink_to(CollectSink)
    s.map(str).filter(bool).collect("o")  # plain types are ordinary callables


def test_reduce_on_a_stream_that_is_not_keyed_says_to_key_by_first():
    s = pipe().from_collection([1]).name("src")
    with pytest.raises(AttributeError, match=r"DataStream has no reduce\(\).*operator 'src' is not keyed.*"
                                             r"key_by\(key_selector\) first"):
        s.reduce(lambda a, b: a)
    after_keyed_map = s.key_by(inc).map(inc).name("m")  # a keyed operator's output is not keyed (as in Flink)
    with pytest.raises(AttributeError, match="operator 'm' is not keyed"):
        after_keyed_map.reduce(lambda a, b: a)
    with pytest.raises(AttributeError, match=r"stream of rebalance partitioning is not keyed"):
        s.rebalance().reduce(lambda a, b: a)
    assert not hasattr(s, "reduce")
    with pytest.raises(AttributeError, match="'DataStream' object has no attribute 'no_such'"):
        s.no_such  # noqa: B018
