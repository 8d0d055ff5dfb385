"""StreamGraph → JobGraph: Flink's StreamingJobGraphGenerator.createChain.

A node whose in-edge is chainable is fused into its upstream's chain; since
a chainable edge is its target's only in-edge, every chain is a tree rooted
at its head. Per chain, as Flink:

- `operator_names`: head first, depth-first pre-order through chained
  outputs in out-edge order (the order OperatorChain builds its outputs);
- `name` (createChainedName): `a -> b`, fan-out `a -> (b -> c, d)`;
- `out_edges` (transitive out-edges): for each operator, first those of its
  chained outputs (recursively, in out-edge order), then its own
  non-chained out-edges.

Chains are listed in topological order, ties by head node id. Everything is
linear in nodes + edges and uses no recursion (deep pipelines are fine).
"""

from __future__ import annotations

import heapq
from typing import Any, Optional

from airflow_flinkchain.graph.errors import PlanningError
from airflow_flinkchain.graph.model import StreamEdge, StreamGraph, edge_id
from airflow_flinkchain.planner.jobgraph import Chain, ChainEdge, JobGraph
from airflow_flinkchain.planner.strategies import (
    ChainingPolicy,
    FlinkChaining,
    NoChaining,
    resolve_strategy,
)

__all__ = ["build_job_graph", "topological_node_order", "FlinkChaining", "NoChaining", "resolve_strategy"]


def topological_node_order(graph: StreamGraph) -> list[int]:
    """Node ids in topological order (ties by id); PlanningError on a cycle."""
    indegree = {n.id: len(graph.in_edges(n.id)) for n in graph.nodes}
    ready = [nid for nid, d in indegree.items() if d == 0]
    heapq.heapify(ready)
    order: list[int] = []
    while ready:
        nid = heapq.heappop(ready)
        order.append(nid)
        for e in graph.out_edges(nid):
            indegree[e.target_id] -= 1
            if indegree[e.target_id] == 0:
                heapq.heappush(ready, e.target_id)
    if len(order) != len(graph.nodes):
        stuck = sorted(graph.node(nid).name for nid, d in indegree.items() if d > 0)
        raise PlanningError(
            f"pipeline {graph.name!r} has a cycle through operators {stuck}: a pipeline must be a DAG. "
            "Remove the edge that feeds an operator's output back into its input.",
            operator=stuck[0],
        )
    return order


def build_job_graph(graph: StreamGraph, strategy: Optional[Any] = None) -> JobGraph:
    """Collapse chainable operators of `graph` into chains with `strategy`
    (FlinkChaining by default)."""
    policy: ChainingPolicy = resolve_strategy(strategy)
    node_order = topological_node_order(graph)

    chained_out: dict[int, list[StreamEdge]] = {}
    other_out: dict[int, list[StreamEdge]] = {}
    has_chained_input: set[int] = set()
    for nid in node_order:
        chained, other = [], []
        for e in graph.out_edges(nid):
            if policy.is_chainable(e, graph):
                chained.append(e)
                has_chained_input.add(e.target_id)
            else:
                other.append(e)
        chained_out[nid], other_out[nid] = chained, other

    heads = [nid for nid in node_order if nid not in has_chained_input]
    head_of: dict[int, int] = {}
    members: dict[int, list[int]] = {}
    transitive: dict[int, list[StreamEdge]] = {}
    names: dict[int, str] = {}
    for head in heads:
        order = _preorder(head, chained_out)
        members[head] = order
        for nid in order:
            head_of[nid] = head
        transitive[head] = _transitive_out_edges(order, chained_out, other_out)
        names[head] = _chained_name(order, chained_out, graph)

    chains_order = _topological_chains(heads, transitive, head_of)
    edge_ids = {id(e): edge_id(graph, e) for e in graph.edges}
    in_edges: dict[int, list[str]] = {h: [] for h in heads}
    for e in graph.edges:  # creation order
        if head_of[e.source_id] != head_of[e.target_id]:
            in_edges[head_of[e.target_id]].append(edge_ids[id(e)])

    chains: list[Chain] = []
    chain_edges: list[ChainEdge] = []
    for head in chains_order:
        order = members[head]
        node = graph.node(head)
        chains.append(
            Chain(
                id=node.key,
                head_id=head,
                node_ids=tuple(order),
                name=names[head],
                operator_names=tuple(graph.node(n).name for n in order),
                parallelism=node.parallelism,
                slot_sharing_group=node.slot_sharing_group,
                chained_edges=tuple(e for n in order for e in chained_out[n]),
                in_edges=tuple(in_edges[head]),
                out_edges=tuple(edge_ids[id(e)] for e in transitive[head]),
            )
        )
        for e in transitive[head]:
            chain_edges.append(
                ChainEdge(
                    id=edge_ids[id(e)],
                    source=node.key,
                    target=graph.node(head_of[e.target_id]).key,
                    source_operator=graph.node(e.source_id).name,
                    target_operator=graph.node(e.target_id).name,
                    partitioner=e.partitioner.kind,
                    output_tag=e.output_tag,
                    selected_names=e.selected_names,
                    stream_edge=e,
                )
            )
    return JobGraph(
        pipeline=graph.name,
        stream_graph=graph,
        chains=tuple(chains),
        edges=tuple(chain_edges),
        strategy=getattr(policy, "name", type(policy).__name__),
    )


def _preorder(head: int, chained_out: dict[int, list[StreamEdge]]) -> list[int]:
    order: list[int] = []
    stack = [head]
    while stack:
        nid = stack.pop()
        order.append(nid)
        stack.extend(e.target_id for e in reversed(chained_out[nid]))
    return order


def _transitive_out_edges(
    preorder: list[int], chained_out: dict[int, list[StreamEdge]], other_out: dict[int, list[StreamEdge]]
) -> list[StreamEdge]:
    """Flink's order: a node's chained outputs' transitive edges first (in
    out-edge order), then its own non-chained ones — computed children first."""
    result: dict[int, list[StreamEdge]] = {}
    for nid in reversed(preorder):  # every child comes after its parent in pre-order
        edges: list[StreamEdge] = []
        for e in chained_out[nid]:
            edges.extend(result.pop(e.target_id))
        edges.extend(other_out[nid])
        result[nid] = edges
    return result[preorder[0]]


def _chained_name(preorder: list[int], chained_out: dict[int, list[StreamEdge]], graph: StreamGraph) -> str:
    """Flink's createChainedName: `a -> b`, fan-out `a -> (b, c)`."""
    result: dict[int, str] = {}
    for nid in reversed(preorder):
        own = graph.node(nid).name
        children = [result.pop(e.target_id) for e in chained_out[nid]]
        if len(children) > 1:
            result[nid] = f"{own} -> ({', '.join(children)})"
        elif children:
            result[nid] = f"{own} -> {children[0]}"
        else:
            result[nid] = own
    return result[preorder[0]]


def _topological_chains(
    heads: list[int], transitive: dict[int, list[StreamEdge]], head_of: dict[int, int]
) -> list[int]:
    indegree = {h: 0 for h in heads}
    for h in heads:
        for e in transitive[h]:
            indegree[head_of[e.target_id]] += 1
    ready = [h for h in heads if indegree[h] == 0]
    heapq.heapify(ready)
    order: list[int] = []
    while ready:
        h = heapq.heappop(ready)
        order.append(h)
        for e in transitive[h]:
            target = head_of[e.target_id]
            indegree[target] -= 1
            if indegree[target] == 0:
                heapq.heappush(ready, target)
    return order  # acyclic: the node graph was checked already
