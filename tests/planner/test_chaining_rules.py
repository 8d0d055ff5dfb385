"""Each of Flink's isChainable rules, chain naming/ordering, partitioners,
fan-out, side outputs, split/select, unions and diamonds."""

from __future__ import annotations

import pytest

from airflow_flinkchain import OutputTag, PlanningError, StreamPipeline
from airflow_flinkchain.functions import DEAD_LETTER_TAG, ProcessFunction
from airflow_flinkchain.graph.model import (
    ChainingStrategy,
    OperatorKind,
    Partitioner,
    StreamEdge,
    StreamGraph,
    StreamNode,
    PartitionSpec,
)
from airflow_flinkchain.planner import FlinkChaining, NoChaining, build_job_graph

late = OutputTag("late")


def inc(x):
    return x + 1


def names(plan):
    return [list(c.operator_names) for c in plan.chains]


def edges(plan):
    return [(e.source_operator, e.target_operator, e.partitioner.value, e.output_tag, e.selected_names)
            for e in plan.edges]


def linear(p=1, **m2_opts):
    pipe = StreamPipeline("t", parallelism=p)
    s = pipe.from_collection([1]).name("src").map(inc).name("m1")
    m2 = s.map(inc).name("m2")
    for method, arg in m2_opts.items():
        m2 = getattr(m2, method)(*([] if arg is None else [arg]))
    m2.map(inc).name("m3").collect("out")
    return pipe


# -- rules -------------------------------------------------------------------
def test_all_rules_met_gives_one_chain():
    plan = linear().plan()
    assert names(plan) == [["src", "m1", "m2", "m3", "out"]]
    assert plan.chains[0].name == "src -> m1 -> m2 -> m3 -> out"
    assert plan.edges == ()


def test_downstream_with_two_inputs_is_not_chained():
    pipe = StreamPipeline("t")
    a = pipe.from_collection([1]).name("a")
    b = pipe.from_collection([2]).name("b")
    a.union(b).map(inc).name("m").collect("out")
    plan = pipe.plan()
    assert names(plan) == [["a"], ["b"], ["m", "out"]]


def test_chaining_disabled_for_pipeline():
    pipe = linear()
    pipe.disable_operator_chaining()
    assert names(pipe.plan()) == [["src"], ["m1"], ["m2"], ["m3"], ["out"]]


def test_different_slot_sharing_group_breaks_and_is_inherited():
    plan = linear(slot_sharing_group="g").plan()
    assert names(plan) == [["src", "m1"], ["m2", "m3", "out"]]
    assert [c.slot_sharing_group for c in plan.chains] == ["default", "g"]


def test_slot_sharing_group_of_mixed_inputs_is_default():
    pipe = StreamPipeline("t")
    a = pipe.from_collection([1]).name("a").slot_sharing_group("g")
    b = pipe.from_collection([1]).name("b").slot_sharing_group("g")
    c = pipe.from_collection([1]).name("c")
    a.union(b).map(inc).name("same").collect("o1")
    a.union(c).map(inc).name("mixed").collect("o2")
    g = pipe.stream_graph()
    groups = {n.name: n.slot_sharing_group for n in g.nodes}
    assert groups["same"] == "g" and groups["mixed"] == "default"


def test_start_new_chain_is_head_strategy():
    pipe = linear(start_new_chain=None)
    node = next(n for n in pipe.stream_graph().nodes if n.name == "m2")
    assert node.chaining_strategy is ChainingStrategy.HEAD
    plan = pipe.plan()
    assert names(plan) == [["src", "m1"], ["m2", "m3", "out"]]
    assert edges(plan) == [("m1", "m2", "FORWARD", None, ())]


def test_disable_chaining_is_never_strategy():
    plan = linear(disable_chaining=None).plan()
    assert names(plan) == [["src", "m1"], ["m2"], ["m3", "out"]]


@pytest.mark.parametrize(
    "up, down, chainable",
    [
        (ChainingStrategy.ALWAYS, ChainingStrategy.ALWAYS, True),
        (ChainingStrategy.HEAD, ChainingStrategy.ALWAYS, True),
        (ChainingStrategy.NEVER, ChainingStrategy.ALWAYS, False),
        (ChainingStrategy.ALWAYS, ChainingStrategy.HEAD, False),
        (ChainingStrategy.ALWAYS, ChainingStrategy.NEVER, False),
        (ChainingStrategy.HEAD, ChainingStrategy.HEAD, False),
    ],
)
def test_are_operators_chainable(up, down, chainable):
    assert FlinkChaining.are_operators_chainable(up, down) is chainable


def test_parallelism_change_breaks_chain_with_rebalance():
    pipe = StreamPipeline("t", parallelism=2)
    pipe.from_collection([1]).name("src").map(inc).name("m").collect("out")
    plan = pipe.plan()
    assert names(plan) == [["src"], ["m", "out"]]
    assert edges(plan) == [("src", "m", "REBALANCE", None, ())]
    assert [c.parallelism for c in plan.chains] == [1, 2]


@pytest.mark.parametrize("method", ["rebalance", "rescale", "shuffle", "broadcast", "global_"])
def test_non_forward_partitioner_breaks_chain(method):
    pipe = StreamPipeline("t")
    s = pipe.from_collection([1]).name("src")
    getattr(s, method)().map(inc).name("m").collect("out")
    plan = pipe.plan()
    assert names(plan) == [["src"], ["m", "out"]]
    assert plan.edges[0].partitioner is Partitioner[method.rstrip("_").upper()]


def test_custom_partitioner_edge():
    pipe = StreamPipeline("t", parallelism=3)
    part = lambda key, n: key % n  # noqa: E731
    pipe.from_collection([1]).name("src").partition_custom(part, inc).map(inc).name("m").collect("out")
    g = pipe.stream_graph()
    (e,) = [e for e in g.edges if e.partitioner.kind is Partitioner.CUSTOM]
    assert e.partitioner.custom_partitioner is part and e.partitioner.key_selector is inc
    assert edges(pipe.plan()) == [("src", "m", "CUSTOM", None, ())]


def test_key_by_gives_hash_with_selector_and_target_max_parallelism():
    pipe = StreamPipeline("t", parallelism=2)
    key = lambda x: x % 3  # noqa: E731
    pipe.from_collection([1]).name("src").key_by(key).reduce(lambda a, b: a + b).name("r") \
        .set_max_parallelism(64).collect("out")
    g = pipe.stream_graph()
    (e,) = [e for e in g.edges if e.partitioner.kind is Partitioner.HASH]
    assert e.partitioner.key_selector is key and e.partitioner.max_parallelism == 64
    r = next(n for n in g.nodes if n.name == "r")
    assert r.kind is OperatorKind.REDUCE and r.key_selector is key
    assert next(n for n in g.nodes if n.name == "out").key_selector is None  # reduce's output is not keyed


def test_default_max_parallelism_follows_flink():
    from airflow_flinkchain.graph.builder import default_max_parallelism

    assert default_max_parallelism(1) == 128
    assert default_max_parallelism(100) == 256
    assert default_max_parallelism(30000) == 32768


def test_keyed_ops_after_key_by_are_keyed():
    class Count(ProcessFunction):
        def process_element(self, value, ctx):
            yield value

    pipe = StreamPipeline("t")
    keyed = pipe.from_collection([1]).key_by(inc)
    keyed.process(Count()).name("kp").collect("o1")
    keyed.map(inc).name("km").collect("o2")
    g = pipe.stream_graph()
    kinds = {n.name: (n.kind, n.key_selector) for n in g.nodes}
    assert kinds["kp"] == (OperatorKind.KEYED_PROCESS, inc)
    assert kinds["km"] == (OperatorKind.MAP, inc)


def test_union_type_number_check():
    # Two in-edges with the same type number: even a hand-made graph with a
    # lone forward edge into a union input is refused by the union rule.
    n = [StreamNode(id=i, key=f"n{i}", kind=OperatorKind.MAP, name=f"n{i}", parallelism=1) for i in range(3)]
    fwd = PartitionSpec(Partitioner.FORWARD)
    g = StreamGraph("t", tuple(n), (StreamEdge(0, 2, fwd), StreamEdge(1, 2, fwd)))
    chaining = FlinkChaining()
    assert not chaining.is_chainable_input(g.edges[0], g)
    g2 = StreamGraph("t", tuple(n), (StreamEdge(0, 2, fwd), StreamEdge(1, 2, fwd, type_number=2)))
    assert chaining.is_chainable_input(g2.edges[0], g2)  # different input positions
    assert not chaining.is_chainable(g2.edges[0], g2)  # ... but still two inputs


# -- naming, ordering, ids ---------------------------------------------------
def fan_out():
    pipe = StreamPipeline("t")
    m = pipe.from_collection([1]).name("a").map(inc).name("b")
    c = m.map(inc).name("c")
    m.filter(inc).name("d").collect("e")
    c.collect("f")
    c.rebalance().map(inc).name("x").collect("y")
    m.shuffle().map(inc).name("z").collect("w")
    return pipe


def test_fan_out_name_and_depth_first_order():
    plan = fan_out().plan()
    head = plan.chains[0]
    assert head.name == "a -> b -> (c -> f, d -> e)"
    assert list(head.operator_names) == ["a", "b", "c", "f", "d", "e"]


def test_transitive_out_edges_in_flink_order():
    plan = fan_out().plan()
    head = plan.chains[0]
    # chained outputs' edges first (c's rebalance to x), then b's own (shuffle to z)
    assert head.out_edges == ("c__x", "b__z")
    assert [e.id for e in plan.edges] == ["c__x", "b__z"]
    assert [c.id for c in plan.chains] == ["a", "x", "z"]
    assert plan.chain("x").in_edges == ("c__x",)
    assert plan.edges[0].source == "a" and plan.edges[0].target == "x"


def test_chains_topological_with_ties_by_head_id():
    pipe = StreamPipeline("t", parallelism=2)
    late_src = pipe.from_collection([1]).name("second")
    first = pipe.from_collection([1]).name("first")
    late_src.union(first).map(inc).name("m").collect("out")
    plan = pipe.plan()
    assert [c.id for c in plan.chains] == ["second", "first", "m"]


def test_no_chaining_strategy_puts_every_operator_alone():
    plan = fan_out().plan(strategy="none")
    assert all(len(c.node_ids) == 1 for c in plan.chains)
    assert len(plan.chains) == 10 and plan.strategy == "none"
    assert len(plan.edges) == 9
    assert build_job_graph(fan_out().stream_graph(), NoChaining()).strategy == "none"
    assert fan_out().plan(NoChaining).strategy == "none"


def test_custom_strategy_object():
    class OnlyMaps:
        name = "only-maps"

        def is_chainable(self, edge, graph):
            return graph.node(edge.target_id).kind is OperatorKind.MAP and FlinkChaining().is_chainable(edge, graph)

    plan = linear().plan(OnlyMaps())
    assert names(plan) == [["src", "m1", "m2", "m3"], ["out"]] and plan.strategy == "only-maps"


def test_to_dict_is_json_and_complete():
    import json

    d = json.loads(json.dumps(fan_out().plan().to_dict()))
    assert [c["id"] for c in d["chains"]] == ["a", "x", "z"]
    assert d["edges"][0]["partitioner"] == "REBALANCE"
    assert {e["id"] for e in d["chained_edges"]} >= {"a__b", "b__c"}


# -- side outputs, split/select ----------------------------------------------
class Flag(ProcessFunction):
    output_tags = [late]

    def process_element(self, value, ctx):
        yield value


def test_side_output_chained_and_across_chains():
    pipe = StreamPipeline("t", parallelism=2)
    f = pipe.from_collection([1]).name("src").rebalance().process(Flag()).name("flag")
    f.get_side_output(late).map(inc).name("chained").collect("o1")
    f.get_side_output(late).key_by(inc).reduce(lambda a, b: a).name("r").collect("o2")
    f.collect("main")
    plan = pipe.plan()
    assert names(plan) == [["src"], ["flag", "chained", "o1", "main"], ["r", "o2"]]
    assert edges(plan)[1] == ("flag", "r", "HASH", "late", ())
    g = pipe.stream_graph()
    chained = [e for e in g.edges if g.node(e.target_id).name == "chained"][0]
    assert chained.output_tag == "late" and chained.partitioner.kind is Partitioner.FORWARD


def test_split_select_edges_carry_selected_names():
    pipe = StreamPipeline("t")
    s = pipe.from_collection([1]).name("src").map(inc).name("m")
    sizes = s.split(lambda x: ["big"] if x > 1 else ["small"], names=["big", "small"])
    sizes.select("big").map(inc).name("big").collect("o1")
    sizes.select("small", "big").rebalance().map(inc).name("both").collect("o2")
    sizes.map(inc).name("all").collect("o3")
    g = pipe.stream_graph()
    m = next(n for n in g.nodes if n.name == "m")
    assert m.output_selector is not None
    sel = {g.node(e.target_id).name: e.selected_names for e in g.out_edges(m.id)}
    assert sel == {"big": ("big",), "both": ("small", "big"), "all": ()}
    plan = pipe.plan()
    assert names(plan) == [["src", "m", "big", "o1", "all", "o3"], ["both", "o2"]]
    assert edges(plan) == [("m", "both", "REBALANCE", None, ("small", "big"))]


@pytest.mark.parametrize("side_first", [True, False])
def test_split_and_side_output_on_same_operator_are_refused_as_in_flink(side_first):
    pipe = StreamPipeline("t")
    f = pipe.from_collection([1]).process(Flag()).name("flag")
    steps = [lambda: f.get_side_output(late).collect("late"), lambda: f.split(lambda x: ["a"]).select("a").collect("a")]
    for step in steps if side_first else steps[::-1]:
        step()
    with pytest.raises(PlanningError, match="operator 'flag' is split .* side output 'late' .* Add a map"):
        pipe.plan()


def test_split_operator_keeps_its_dead_letter_output():
    pipe = StreamPipeline("t", on_error="dead_letter")
    m = pipe.from_collection([1]).map(inc).name("m")
    m.split(lambda x: ["a"]).select("a").collect("a")
    m.dead_letters().collect("dlq")
    g = pipe.stream_graph()
    m_id = next(n.id for n in g.nodes if n.name == "m")
    assert sorted((e.output_tag or "", e.selected_names) for e in g.out_edges(m_id)) == [
        ("", ("a",)), (DEAD_LETTER_TAG.tag_id, ())]


def test_diamond_with_key_by_reconverging():
    pipe = StreamPipeline("t", parallelism=2)
    src = pipe.from_collection([1]).name("src")
    left = src.map(inc).name("left")
    right = src.filter(inc).name("right")
    left.union(right).key_by(inc).reduce(lambda a, b: a).name("r").collect("out")
    plan = pipe.plan()
    assert names(plan) == [["src"], ["left"], ["right"], ["r", "out"]]
    assert [e[:3] for e in edges(plan)] == [
        ("src", "left", "REBALANCE"), ("src", "right", "REBALANCE"),
        ("left", "r", "HASH"), ("right", "r", "HASH")]
    assert plan.chain("r").in_edges == ("left__r", "right__r")


def test_union_with_itself_has_indexed_edges():
    pipe = StreamPipeline("t")
    m = pipe.from_collection([1]).name("src").map(inc).name("m")
    m.union(m).map(inc).name("twice").collect("out")
    plan = pipe.plan()
    assert [e.id for e in plan.edges] == ["m__twice", "m__twice__1"]
    assert plan.chain("twice").in_edges == ("m__twice", "m__twice__1")


def test_nearest_partitioning_wins():
    pipe = StreamPipeline("t")
    pipe.from_collection([1]).name("src").shuffle().broadcast().map(inc).name("m").collect("out")
    assert edges(pipe.plan()) == [("src", "m", "BROADCAST", None, ())]


def test_object_reuse_and_on_error_reach_the_graph():
    pipe = StreamPipeline("t", on_error="skip")
    pipe.set_object_reuse(True)
    pipe.from_collection([1]).map(inc, on_error="dead_letter").collect("out")
    g = pipe.stream_graph()
    assert g.object_reuse and g.on_error == "skip"
    assert [n.on_error for n in g.nodes] == [None, "dead_letter", None]
