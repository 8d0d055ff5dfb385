"""The authoring surface: defaults, keys, settings, hooks, registry, and that
planning imports neither Spark nor Airflow."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from airflow_flinkchain import DataStream, KeyedStream, OutputTag, StreamPipeline
from airflow_flinkchain.functions import FilterFunction, FlatMapFunction, MapFunction, ReduceFunction
from airflow_flinkchain.graph.model import ChainingStrategy, OperatorKind
from airflow_flinkchain.io.sinks import CollectSink, Sink


def inc(x):
    return x + 1


def test_default_operator_names_and_unique_keys():
    p = StreamPipeline("t")
    s = p.from_collection([1])
    s.map(inc).map(inc).flat_map(lambda x: [x]).filter(bool).process(lambda v, c: [v]) \
        .key_by(inc).reduce(max).key_by(inc).process(lambda v, c: [v]).sink_to(CollectSink("x"), name=None)
    g = p.stream_graph()
    assert [n.name for n in g.nodes] == [
        "Collection Source", "Map", "Map", "FlatMap", "Filter", "Process", "Keyed Reduce", "KeyedProcess", "x"]
    assert [n.key for n in g.nodes] == [
        "collection_source", "map", "map_2", "flatmap", "filter", "process", "keyed_reduce", "keyedprocess", "x"]


def test_keys_stable_under_unrelated_edits_and_reparse():
    def build(extra: bool):
        p = StreamPipeline("t")
        s = p.from_collection([1]).name("rows")
        if extra:
            s = s.map(inc).name("new step")
        s.map(inc).name("Map").map(inc).name("clean").uid("cleaner").collect("out")
        return {n.name: n.key for n in p.stream_graph().nodes}

    assert build(False) == build(False)
    before, after = build(False), build(True)
    assert {k: after[k] for k in before} == before
    assert before["clean"] == "cleaner"


def test_uid_wins_over_name_slug_and_unsafe_uid_is_made_safe():
    p = StreamPipeline("t")
    s = p.from_collection([1]).name("a")
    s.map(inc).name("b").collect("o1")
    s.map(inc).name("c").uid("b").collect("o2")
    s.map(inc).name("d").uid("my op/1").collect("o3")
    keys = {n.name: n.key for n in p.stream_graph().nodes}
    assert keys["c"] == "b" and keys["b"] == "b_2" and keys["d"] == "my_op_1"


def test_function_classes_and_callables_are_kept_as_given():
    class M(MapFunction):
        def map(self, v):
            return v

    class F(FilterFunction):
        def filter(self, v):
            return True

    class FM(FlatMapFunction):
        def flat_map(self, v):
            yield v

    class R(ReduceFunction):
        def reduce(self, a, b):
            return a

    m, f, fm, r = M(), F(), FM(), R()
    p = StreamPipeline("t")
    p.from_collection([1]).map(m).filter(f).flat_map(fm).key_by(inc).reduce(r).map(inc).collect("o")
    fns = [n.function for n in p.stream_graph().nodes]
    assert fns[1:6] == [m, f, fm, r, inc]
    assert isinstance(fns[-1], CollectSink) and fns[-1].name == "o"


def test_operator_settings_recorded():
    p = StreamPipeline("t", parallelism=3, conn_id="spark_default", executor_memory="2g")
    s = (p.from_collection([1], output_type={"x": int}).name("src")
         .map(inc, output_type={"y": int}).name("m").uid("m1").set_parallelism(2).set_max_parallelism(16)
         .slot_sharing_group("g").set_spark_settings(executor_memory="4g").disable_chaining())
    assert isinstance(s, DataStream)
    s.collect("out").start_new_chain()
    g = p.stream_graph()
    src, m, out = g.nodes
    assert src.output_type == {"x": int} and src.parallelism == 1
    assert (m.uid, m.parallelism, m.max_parallelism, m.slot_sharing_group) == ("m1", 2, 16, "g")
    assert m.settings == {"executor_memory": "4g"} and m.output_type == {"y": int}
    assert m.chaining_strategy is ChainingStrategy.NEVER and out.chaining_strategy is ChainingStrategy.HEAD
    assert out.parallelism == 3 and out.slot_sharing_group == "g"
    assert p.settings == {"conn_id": "spark_default", "executor_memory": "2g"}


def test_pipeline_parallelism_applies_at_plan_time():
    p = StreamPipeline("t")
    p.from_collection([1]).map(inc).collect("o")
    p.set_parallelism(4)
    assert [n.parallelism for n in p.stream_graph().nodes] == [1, 4, 4]


def test_hooks_and_flags():
    p = StreamPipeline("t")

    @p.on_setup
    def setup(ctx=None):
        pass

    p.on_dispose(print)
    assert p.setup_hooks == [setup] and p.dispose_hooks == [print]
    assert p.disable_operator_chaining() is p and not p.chaining_enabled
    assert p.set_object_reuse(True) is p and p.object_reuse


def test_key_by_returns_keyed_stream_and_key_selector_class():
    from airflow_flinkchain.functions import KeySelector

    class K(KeySelector):
        def get_key(self, v):
            return v

    k = K()
    p = StreamPipeline("t")
    keyed = p.from_collection([1]).key_by(k)
    assert isinstance(keyed, KeyedStream)
    keyed.reduce(max).collect("o")
    assert p.stream_graph().nodes[1].key_selector == k.get_key


def test_side_output_with_tag_id_string_and_yield_style_declaration():
    late = OutputTag("late")
    p = StreamPipeline("t")
    s = p.from_collection([1]).process(lambda v, ctx: [v], output_tags=late)
    s.get_side_output("late").collect("a")
    s.get_side_output(late).collect("b")
    assert [e.output_tag for e in p.stream_graph().edges][1:] == ["late", "late"]


def test_recording_finds_pipelines_without_global_names():
    with StreamPipeline.recording() as created:
        def build():
            StreamPipeline("inner").from_collection([1]).collect("o")
        build()
    assert [p.name for p in created] == ["inner"]
    StreamPipeline("outside")
    assert len(created) == 1 and StreamPipeline._recorders == []


def test_custom_sink_default_name():
    class Table(Sink):
        pass

    p = StreamPipeline("t")
    p.from_collection([1]).sink_to(Table())
    assert p.stream_graph().nodes[-1].name == "Sink: Table"
    assert p.stream_graph().nodes[-1].kind is OperatorKind.SINK


def test_planning_imports_neither_spark_nor_airflow():
    code = textwrap.dedent(
        """
        import sys
        from airflow_flinkchain import StreamPipeline, OutputTag
        p = StreamPipeline("t", parallelism=2)
        s = p.from_collection(range(5)).map(lambda x: x).key_by(lambda x: x).reduce(max)
        s.collect("o")
        p.plan().to_dict(); p.plan("none")
        heavy = sorted(m for m in sys.modules if m.split(".")[0] in ("pyspark", "airflow", "py4j", "sqlalchemy"))
        print(heavy)
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr


def test_keys_never_contain_double_underscore_so_edge_ids_are_unambiguous():
    p = StreamPipeline("t")
    p.from_collection([1]).name("a__b").map(inc).name("c").uid("x__y").collect("o")
    g = p.stream_graph()
    assert [n.key for n in g.nodes] == ["a_b", "x_y", "o"]
    assert g.node_by_key("x_y").name == "c"
    plan = p.plan("none")
    assert [e.id for e in plan.edges] == ["a_b__x_y", "x_y__o"]
    assert plan.chain_of(g.node_by_key("o").id).id == "o" and plan.edge("x_y__o").target == "o"
