"""Hand-built StreamGraph/JobGraph objects for runtime-core tests (no Spark)."""

from __future__ import annotations

from airflow_flinkchain.graph.model import (OperatorKind, Partitioner, PartitionSpec, StreamEdge, StreamGraph,
                                            StreamNode, edge_id)
from airflow_flinkchain.planner.jobgraph import Chain, ChainEdge, JobGraph
from airflow_flinkchain.runtime.core.memory import MemoryWriters
from airflow_flinkchain.runtime.core.operator_chain import run_subtask

K = OperatorKind
FWD = PartitionSpec(Partitioner.FORWARD)


def node(i, kind, fn=None, name=None, parallelism=1, **kw):
    name = name or f"{kind.value}{i}"
    return StreamNode(i, name, kind, name, parallelism, function=fn, **kw)


def edge(a, b, partitioner=FWD, **kw):
    return StreamEdge(a, b, partitioner, **kw)


def build_job(nodes, edges, chains=None, object_reuse=False, on_error="fail", name="p", runtime_mode="batch"):
    graph = StreamGraph(name, tuple(nodes), tuple(edges), object_reuse=object_reuse, on_error=on_error,
                        runtime_mode=runtime_mode)
    chains = chains or [[n.id for n in nodes]]
    chain_of = {nid: ci for ci, ids in enumerate(chains) for nid in ids}
    chain_edges = []
    built = []
    for ci, ids in enumerate(chains):
        head = graph.node(ids[0])
        chained = tuple(e for e in edges if chain_of[e.source_id] == ci and chain_of[e.target_id] == ci)
        outs = []
        for e in edges:
            if chain_of[e.source_id] == ci and chain_of[e.target_id] != ci:
                eid = edge_id(graph, e)
                outs.append(eid)
                chain_edges.append(ChainEdge(eid, f"c{ci}", f"c{chain_of[e.target_id]}",
                                             graph.node(e.source_id).key, graph.node(e.target_id).key,
                                             e.partitioner.kind, e.output_tag, e.selected_names, e))
        ins = tuple(edge_id(graph, e) for e in edges
                    if chain_of[e.target_id] == ci and chain_of[e.source_id] != ci)
        built.append(Chain(f"c{ci}", head.id, tuple(ids), " -> ".join(graph.node(i).name for i in ids),
                           tuple(graph.node(i).name for i in ids), head.parallelism, "default", chained,
                           ins, tuple(outs)))
    return JobGraph(name, graph, tuple(built), tuple(chain_edges))


def run(job, inputs, chain_id="c0", subtask=0, writers=None, **kw):
    writers = writers or MemoryWriters()
    metrics = run_subtask(job, chain_id, subtask, "run-1", inputs, writers.record_writer_factory,
                          writers.sink_writer_factory, **kw)
    return writers, metrics
