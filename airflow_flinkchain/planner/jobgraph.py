"""JobGraph: chains (Flink's JobVertex + chained StreamConfigs) and the edges
between them (JobEdge). Plain frozen data; `to_dict()` is the JSON form used
by the CLI, the run store and the UI plugin (it holds no user functions)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

from airflow_flinkchain.planner.vectorized import per_record_reason, runs_vectorized, shows_combined
from airflow_flinkchain.graph.model import OperatorKind, Partitioner, StreamEdge, StreamGraph, StreamNode, edge_id


@dataclass(frozen=True)
class ChainEdge:
    """An edge leaving one chain and entering another (one exchange dataset per run)."""

    id: str
    source: str
    target: str
    source_operator: str
    target_operator: str
    partitioner: Partitioner
    output_tag: Optional[str]
    selected_names: tuple[str, ...]
    stream_edge: StreamEdge = field(compare=False, repr=False)

    @property
    def input_number(self) -> int:
        """1 or 2 when the target operator has two inputs (the edge's type number), else 0."""
        return self.stream_edge.type_number

    def to_dict(self) -> dict[str, Any]:
        d = {
            "id": self.id,
            "source": self.source,
            "target": self.target,
            "source_operator": self.source_operator,
            "target_operator": self.target_operator,
            "partitioner": self.partitioner.value,
            "output_tag": self.output_tag,
            "selected_names": list(self.selected_names),
        }
        if self.input_number:
            d["input"] = self.input_number  # which input of a two-input operator it feeds
        return d


@dataclass(frozen=True)
class Chain:
    """Operators fused into one task. `node_ids` / `operator_names`: head first,
    depth-first through chained outputs (the order Flink walks them).
    `out_edges` are ChainEdge ids in Flink's transitive-out-edge order."""

    id: str
    head_id: int
    node_ids: tuple[int, ...]
    name: str
    operator_names: tuple[str, ...]
    parallelism: int
    slot_sharing_group: str
    chained_edges: tuple[StreamEdge, ...] = field(repr=False)
    in_edges: tuple[str, ...] = ()
    out_edges: tuple[str, ...] = ()


@dataclass(frozen=True, eq=False)
class JobGraph:
    pipeline: str
    stream_graph: StreamGraph = field(repr=False)
    chains: tuple[Chain, ...]
    edges: tuple[ChainEdge, ...]
    strategy: str = "flink"
    # Lookup indexes (built once; chain()/edge()/chain_of() are O(1)).
    _chains_by_id: dict = field(init=False, repr=False, compare=False)
    _edges_by_id: dict = field(init=False, repr=False, compare=False)
    _chain_of_node: dict = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_chains_by_id", {c.id: c for c in self.chains})
        object.__setattr__(self, "_edges_by_id", {e.id: e for e in self.edges})
        object.__setattr__(self, "_chain_of_node", {n: c for c in self.chains for n in c.node_ids})

    def chain(self, chain_id: str) -> Chain:
        try:
            return self._chains_by_id[chain_id]
        except KeyError:
            raise KeyError(f"no chain {chain_id!r} in pipeline {self.pipeline!r}") from None

    def edge(self, edge_id_: str) -> ChainEdge:
        try:
            return self._edges_by_id[edge_id_]
        except KeyError:
            raise KeyError(f"no edge {edge_id_!r} in pipeline {self.pipeline!r}") from None

    def chain_of(self, node_id: int) -> Chain:
        return self._chain_of_node[node_id]

    def to_dict(self) -> dict[str, Any]:
        """JSON-able description (no functions). Schema:
        {"pipeline", "strategy", "runtime_mode" ("streaming" | "batch"), "object_reuse",
         "chains": [{"id", "name", "parallelism", "slot_sharing_group",
                     "in_edges", "out_edges",
                     "operators": [{"id", "key", "name", "uid", "kind",
                                    "parallelism", "chaining_strategy", "vectorized",
                                    "per_record_reason"; sources and sinks: "connector",
                                    "incremental_column"}]}],
         "edges": [{"id", "source", "target", "source_operator", "target_operator",
                    "partitioner", "output_tag", "selected_names"; "combined": true when the
                    producer sends partial aggregates per key (runtime/core/combiner.py)}],
         "chained_edges": [{"id", "chain", "source_operator", "target_operator",
                            "output_tag", "selected_names"}]}"""
        g = self.stream_graph
        chained = []
        for c in self.chains:
            for e in c.chained_edges:
                chained.append(
                    {
                        "id": edge_id(g, e),
                        "chain": c.id,
                        "source_operator": g.node(e.source_id).name,
                        "target_operator": g.node(e.target_id).name,
                        "output_tag": e.output_tag,
                        "selected_names": list(e.selected_names),
                    }
                )
        return {
            "pipeline": self.pipeline,
            "strategy": self.strategy,
            "runtime_mode": g.runtime_mode,
            "object_reuse": g.object_reuse,
            "chains": [
                {
                    "id": c.id,
                    "name": c.name,
                    "parallelism": c.parallelism,
                    "slot_sharing_group": c.slot_sharing_group,
                    "in_edges": list(c.in_edges),
                    "out_edges": list(c.out_edges),
                    "operators": [_operator_dict(g, g.node(n)) for n in c.node_ids],
                }
                for c in self.chains
            ],
            "edges": [{**e.to_dict(), **({"combined": True} if shows_combined(g, e.stream_edge) else {})}
                      for e in self.edges],
            "chained_edges": chained,
        }


def _operator_dict(g: StreamGraph, n: StreamNode) -> dict[str, Any]:
    d = {
        "id": n.id,
        "key": n.key,
        "name": n.name,
        "uid": n.uid,
        "kind": n.kind.value,
        "parallelism": n.parallelism,
        "chaining_strategy": n.chaining_strategy.value,
        "vectorized": runs_vectorized(g, n),
        # why a reduce, window or timestamp assigner runs per record (None: vectorized, or another kind)
        "per_record_reason": per_record_reason(g, n),
    }
    if n.kind in (OperatorKind.SOURCE, OperatorKind.SINK):
        # what its positions and outputs are (the Chains tab shows a source's range read as
        # its users read it: an LSN range, stream sequences, table versions, column values)
        d["connector"] = type(n.function).__name__
        column = getattr(n.function, "incremental_column", None)
        if column is not None:
            d["incremental_column"] = column
    return d
