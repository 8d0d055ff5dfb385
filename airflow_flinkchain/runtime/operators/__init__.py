"""Stream operators of the chain runtime (Flink's StreamOperator family)."""

from airflow_flinkchain.graph.model import OperatorKind
from airflow_flinkchain.runtime.operators.base import ChainScope, StreamOperator
from airflow_flinkchain.runtime.operators.keyed import KeyedProcessOperator, ReduceOperator
from airflow_flinkchain.runtime.operators.process import ProcessOperator
from airflow_flinkchain.runtime.operators.simple import SIMPLE_OPERATORS, SinkOperator


def create_operator(node, scope: ChainScope, sink_writer_factory) -> StreamOperator:
    kind = node.kind
    if kind in SIMPLE_OPERATORS:
        return SIMPLE_OPERATORS[kind](node, scope)
    if kind is OperatorKind.SINK:
        return SinkOperator(node, scope, sink_writer_factory)
    if kind is OperatorKind.PROCESS:
        return ProcessOperator(node, scope)
    if kind is OperatorKind.KEYED_PROCESS:
        return KeyedProcessOperator(node, scope)
    if kind is OperatorKind.REDUCE:
        return ReduceOperator(node, scope)
    raise ValueError(f"operator {node.name!r}: unknown kind {kind!r}")


__all__ = ["ChainScope", "StreamOperator", "create_operator"]
