"""Planning of two-input operators: two in-edges with type numbers 1 and 2, always a chain
head, what follows chains as usual; the plan's text/JSON/dot/mermaid show both input edges."""

from __future__ import annotations

import json

import pytest

from airflow_flinkchain import PlanningError, StreamPipeline
from airflow_flinkchain.functions import BroadcastProcessFunction, CoMapFunction, KeyedBroadcastProcessFunction
from airflow_flinkchain.planner.formats import render
from airflow_flinkchain.state import MapStateDescriptor

from .pipelines import RATES, enrich_pipeline


class Tag(CoMapFunction):
    def map1(self, value):
        return ("a", value)

    def map2(self, value):
        return ("b", value)


def _connected(parallelism=1):
    p = StreamPipeline("co", parallelism=parallelism)
    a = p.from_collection([1]).name("a").map(lambda x: x).name("ma")
    b = p.from_collection([2]).name("b")
    a.connect(b).map(Tag()).name("tag").map(str).name("after").collect("out")
    return p


def test_two_input_operator_has_two_typed_in_edges_and_heads_its_chain():
    p = _connected()
    g = p.stream_graph()
    tag = g.node_by_key("tag")
    ins = g.in_edges(tag.id)
    assert [(g.node(e.source_id).key, e.type_number) for e in ins] == [("ma", 1), ("b", 2)]
    plan = p.plan()
    # FORWARD edges at equal parallelism, yet the two-input operator starts a chain; what follows chains
    assert [list(c.operator_names) for c in plan.chains] == [["a", "ma"], ["b"], ["tag", "after", "out"]]
    assert [(e.source, e.target, e.partitioner.value, e.input_number) for e in plan.edges] == [
        ("a", "tag", "FORWARD", 1), ("b", "tag", "FORWARD", 2)]
    assert plan.chain("tag").in_edges == ("ma__tag", "b__tag")


def test_connect_a_stream_with_itself_gives_two_edges():
    p = StreamPipeline("self")
    a = p.from_collection([1]).name("a")
    a.connect(a).map(Tag()).name("tag").collect("out")
    plan = p.plan()
    assert [(e.id, e.input_number) for e in plan.edges] == [("a__tag", 1), ("a__tag__1", 2)]
    assert sorted(p.execute_local().output("out")) == [("a", 1), ("b", 1)]


def test_plan_formats_show_both_input_edges():
    plans = [_connected(2).plan()]
    text = render(plans, "text")
    assert "ma => tag  (input 1)" in text and "b => tag  (input 2)" in text
    edges = json.loads(render(plans, "json"))["pipelines"][0]["edges"]
    assert [(e["id"], e.get("input")) for e in edges] == [("a__ma", None), ("ma__tag", 1), ("b__tag", 2)]
    assert render(plans, "dot").count("input ") == 2
    mermaid = render(plans, "mermaid")
    assert "FORWARD input 1" in mermaid and "REBALANCE input 2" in mermaid


def test_one_input_edges_carry_no_input_number():
    p = StreamPipeline("one")
    p.from_collection([1]).name("a").rebalance().map(str).name("m").collect("out")
    (edge,) = p.plan().edges
    assert edge.input_number == 0 and "input" not in edge.to_dict()


def test_keyed_co_process_and_keyed_broadcast_edges():
    plan = enrich_pipeline().plan()
    assert sorted((e.target_operator, e.input_number, e.source_operator, e.partitioner.value)
                  for e in plan.edges) == [
        ("convert", 1, "levels", "HASH"), ("convert", 2, "rates", "BROADCAST"),
        ("levels", 1, "customers", "HASH"), ("levels", 2, "orders", "HASH")]
    assert [list(c.operator_names) for c in plan.chains][-2:] == [["levels"], ["convert", "fmt", "out"]]


class Keyed(KeyedBroadcastProcessFunction):
    def process_element(self, value, ctx):
        yield value

    def process_broadcast_element(self, value, ctx):
        pass


class Plain(BroadcastProcessFunction):
    def process_element(self, value, ctx):
        yield value

    def process_broadcast_element(self, value, ctx):
        pass


def test_api_errors_say_the_fix():
    p = StreamPipeline("err")
    a, b = p.from_collection([1]), p.from_collection([2])
    with pytest.raises(PlanningError, match="map1\\(\\) and map2\\(\\)"):
        a.connect(b).map(lambda x: x)
    with pytest.raises(PlanningError, match="function class Tag"):
        a.connect(b).map(Tag)
    with pytest.raises(PlanningError, match="key_by"):
        a.connect(b.broadcast(RATES)).process(Keyed())
    with pytest.raises(PlanningError, match="KeyedBroadcastProcessFunction"):
        a.key_by(lambda x: x).connect(b.broadcast(RATES)).process(Plain())
    with pytest.raises(PlanningError, match="MapStateDescriptor"):
        b.broadcast("rates")
    with pytest.raises(PlanningError, match="only one is keyed"):
        a.key_by(lambda x: x).connect(b).process(_co())
    other = StreamPipeline("other").from_collection([3])
    with pytest.raises(PlanningError, match="same pipeline"):
        a.connect(other)
    # broadcast() without descriptors keeps the BROADCAST partitioning of a DataStream
    assert type(b.broadcast()).__name__ == "DataStream"
    assert type(b.broadcast(MapStateDescriptor("x", None, None))).__name__ == "BroadcastStream"


def _co():
    from airflow_flinkchain.functions import CoProcessFunction

    class Co(CoProcessFunction):
        def process_element1(self, value, ctx):
            yield value

        def process_element2(self, value, ctx):
            yield value

    return Co()
