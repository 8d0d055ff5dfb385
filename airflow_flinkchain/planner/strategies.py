"""Chaining strategies: which StreamEdges fuse their two operators into one chain.

`FlinkChaining` is Flink 2.x `StreamingJobGraphGenerator.isChainable`
(with `isChainableInput` and `areOperatorsChainable`), rule for rule:

1. the downstream operator has exactly one in-edge (so a two-input operator
   is always a chain head);
2. chaining is enabled for the pipeline;
3. both operators are in the same slot sharing group;
4. the upstream's chaining strategy is not NEVER and the downstream's is
   ALWAYS (HEAD = start_new_chain, NEVER = disable_chaining);
5. the edge's partitioner is FORWARD;
6. both operators have the same parallelism;
7. no other in-edge of the downstream has the same type number (unions
   only work through the network stack).

Flink also compares max parallelism, but only when
`pipeline.operator-chaining.chain-operators-with-different-max-parallelism`
is off; it is on by default, so max parallelism does not matter here either.
HEAD_WITH_SOURCES and legacy-source/yielding-operator rules have no
counterpart here (no such operators).
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from airflow_flinkchain.graph.errors import PlanningError
from airflow_flinkchain.graph.model import ChainingStrategy as Strategy
from airflow_flinkchain.graph.model import Partitioner, StreamEdge, StreamGraph


@runtime_checkable
class ChainingPolicy(Protocol):
    """A pluggable chaining rule: `name` is recorded in JobGraph.strategy."""

    name: str

    def is_chainable(self, edge: StreamEdge, graph: StreamGraph) -> bool: ...


class FlinkChaining:
    """Flink's rules (the default)."""

    name = "flink"

    def is_chainable(self, edge: StreamEdge, graph: StreamGraph) -> bool:
        in_edges = graph.in_edges(edge.target_id)
        return len(in_edges) == 1 and self.is_chainable_input(edge, graph)

    def is_chainable_input(self, edge: StreamEdge, graph: StreamGraph) -> bool:
        up, down = graph.node(edge.source_id), graph.node(edge.target_id)
        if not (
            graph.chaining_enabled
            and up.slot_sharing_group == down.slot_sharing_group
            and self.are_operators_chainable(up.chaining_strategy, down.chaining_strategy)
            and up.parallelism == down.parallelism
            and edge.partitioner.kind is Partitioner.FORWARD
        ):
            return False
        return not any(
            other is not edge and other.type_number == edge.type_number for other in graph.in_edges(edge.target_id)
        )

    @staticmethod
    def are_operators_chainable(upstream: Strategy, downstream: Strategy) -> bool:
        return upstream is not Strategy.NEVER and downstream is Strategy.ALWAYS

    def __repr__(self) -> str:
        return "FlinkChaining()"


class NoChaining:
    """Every operator alone (for debugging: see each operator's own task and metrics)."""

    name = "none"

    def is_chainable(self, edge: StreamEdge, graph: StreamGraph) -> bool:
        return False

    def __repr__(self) -> str:
        return "NoChaining()"


_BY_NAME = {"flink": FlinkChaining, "none": NoChaining, "no_chaining": NoChaining}


def resolve_strategy(strategy: Any = None) -> ChainingPolicy:
    """None / "flink" → FlinkChaining, "none" → NoChaining, or a strategy object as is."""
    if strategy is None:
        return FlinkChaining()
    if isinstance(strategy, str):
        try:
            return _BY_NAME[strategy.lower()]()
        except KeyError:
            raise PlanningError(
                f"unknown chaining strategy {strategy!r}: use 'flink', 'none' or a ChainingPolicy object"
            ) from None
    if isinstance(strategy, type):
        strategy = strategy()
    if not callable(getattr(strategy, "is_chainable", None)):
        raise PlanningError(f"chaining strategy {strategy!r} has no is_chainable(edge, graph) method")
    return strategy
