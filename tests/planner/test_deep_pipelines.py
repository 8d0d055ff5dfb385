"""Planning is iterative: thousands of unions, stacked partitionings or
chained operators plan (and render) without RecursionError."""

from __future__ import annotations

import json

from airflow_flinkchain import StreamPipeline
from airflow_flinkchain.graph.model import Partitioner
from airflow_flinkchain.planner.formats import render

DEPTH = 3000


def inc(x):
    return x + 1


def test_thousands_of_nested_unions():
    p = StreamPipeline("unions")
    stream = p.from_collection([0]).name("src0")
    for i in range(1, DEPTH + 1):
        stream = stream.union(p.from_collection([i]).name(f"src{i}"))
    stream.map(inc).name("m").collect("out")
    plan = p.plan()
    graph = plan.stream_graph
    m = next(n for n in graph.nodes if n.name == "m")
    sources = [graph.node(e.source_id).name for e in graph.in_edges(m.id)]
    assert sources == [f"src{i}" for i in range(DEPTH + 1)]  # every input, in union order
    assert len(plan.chains) == DEPTH + 2
    for fmt in ("text", "json", "dot", "mermaid"):
        assert render([plan], fmt)


def test_thousands_of_stacked_partitionings_the_last_wins():
    p = StreamPipeline("partitionings", parallelism=2)
    stream = p.from_collection([1, 2, 3]).name("src")
    methods = ("rebalance", "rescale", "shuffle")
    for i in range(DEPTH):
        stream = getattr(stream, methods[i % 3])()
    stream.map(inc).name("m").collect("out")
    plan = p.plan()
    (edge,) = [e for e in plan.edges if e.target_operator == "m"]
    assert edge.partitioner is getattr(Partitioner, methods[(DEPTH - 1) % 3].upper())


def test_unions_of_partitioned_streams_mixed():
    p = StreamPipeline("mixed", parallelism=2)
    stream = p.from_collection([0]).name("src0")
    for i in range(1, 1001):
        other = p.from_collection([i]).name(f"src{i}").rebalance()
        stream = stream.union(other).shuffle() if i % 2 else stream.union(other)
    stream.map(inc).name("m").collect("out")
    plan = p.plan()
    into_m = {e.source_operator: e.partitioner for e in plan.edges if e.target_operator == "m"}
    assert len(into_m) == 1001
    # a union's inputs keep their own partitioning; a later partitioning overrides all of them
    assert into_m.pop("src1000") is Partitioner.REBALANCE
    assert set(into_m.values()) == {Partitioner.SHUFFLE}

def test_a_chain_of_thousands_of_operators_plans_as_one_chain():
    p = StreamPipeline("long")
    stream = p.from_collection([1])
    for i in range(DEPTH):
        stream = stream.map(inc).name(f"m{i}") if i % 2 else stream.filter(bool).name(f"f{i}")
    stream.collect("out")
    plan = p.plan()
    (chain,) = plan.chains
    assert len(chain.node_ids) == DEPTH + 2
    assert json.loads(render([plan], "json"))
