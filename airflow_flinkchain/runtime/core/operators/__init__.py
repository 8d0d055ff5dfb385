"""Stream operators of the chain runtime (Flink's StreamOperator family)."""

from airflow_flinkchain.planner.vectorized import vectorized_aggregation, vectorized_window
from airflow_flinkchain.graph.model import OperatorKind
from airflow_flinkchain.runtime.core.operators.aggregation import (VectorizedAggregationOperator,
                                                                  VectorizedWindowAggregationOperator)
from airflow_flinkchain.runtime.core.operators.base import ChainScope, StreamOperator
from airflow_flinkchain.runtime.core.operators.batch import FilterBatchesOperator, MapBatchesOperator
from airflow_flinkchain.runtime.core.operators.co_broadcast import (BroadcastProcessOperator,
                                                                    KeyedBroadcastProcessOperator)
from airflow_flinkchain.runtime.core.operators.co_process import (CoFlatMapOperator, CoMapOperator,
                                                                  CoProcessOperator, KeyedCoFlatMapOperator,
                                                                  KeyedCoMapOperator, KeyedCoProcessOperator)
from airflow_flinkchain.runtime.core.operators.interval_join import IntervalJoinOperator
from airflow_flinkchain.runtime.core.operators.keyed import KEYED_OPERATORS
from airflow_flinkchain.runtime.core.operators.process import ProcessOperator
from airflow_flinkchain.runtime.core.operators.simple import SIMPLE_OPERATORS, SinkOperator
from airflow_flinkchain.runtime.core.operators.timestamps import TimestampsAndWatermarksOperator
from airflow_flinkchain.runtime.core.operators.window_stream import WindowStreamOperator


TWO_INPUT_OPERATORS = {
    OperatorKind.CO_MAP: CoMapOperator,
    OperatorKind.CO_FLAT_MAP: CoFlatMapOperator,
    OperatorKind.CO_PROCESS: CoProcessOperator,
    OperatorKind.KEYED_CO_PROCESS: KeyedCoProcessOperator,
    OperatorKind.BROADCAST_PROCESS: BroadcastProcessOperator,
    OperatorKind.KEYED_BROADCAST_PROCESS: KeyedBroadcastProcessOperator,
    OperatorKind.INTERVAL_JOIN: IntervalJoinOperator,
}

BATCH_OPERATORS = {OperatorKind.MAP_BATCHES: MapBatchesOperator, OperatorKind.FILTER_BATCHES: FilterBatchesOperator}

KEYED_CO_MAPS = {OperatorKind.CO_MAP: KeyedCoMapOperator, OperatorKind.CO_FLAT_MAP: KeyedCoFlatMapOperator}


def create_operator(node, scope: ChainScope, sink_writer_factory) -> StreamOperator:
    kind = node.kind
    if kind in TWO_INPUT_OPERATORS:
        if node.key_selector is not None and kind in KEYED_CO_MAPS:
            return KEYED_CO_MAPS[kind](node, scope)
        return TWO_INPUT_OPERATORS[kind](node, scope)
    if node.key_selector is not None and kind is OperatorKind.REDUCE and vectorized_aggregation(node):
        return VectorizedAggregationOperator(node, scope)
    if node.key_selector is not None and kind in KEYED_OPERATORS:
        return KEYED_OPERATORS[kind](node, scope)
    if kind in BATCH_OPERATORS:
        return BATCH_OPERATORS[kind](node, scope)
    if kind in SIMPLE_OPERATORS:
        return SIMPLE_OPERATORS[kind](node, scope)
    if kind is OperatorKind.SINK:
        return SinkOperator(node, scope, sink_writer_factory)
    if kind is OperatorKind.PROCESS:
        return ProcessOperator(node, scope)
    if kind is OperatorKind.TIMESTAMPS_AND_WATERMARKS:
        return TimestampsAndWatermarksOperator(node, scope)
    if kind is OperatorKind.WINDOW:
        if vectorized_window(node):
            return VectorizedWindowAggregationOperator(node, scope)
        return WindowStreamOperator(node, scope)
    if kind in (OperatorKind.KEYED_PROCESS, OperatorKind.REDUCE):
        raise ValueError(f"operator {node.name!r} is keyed ({kind}) but has no key selector: use key_by()")
    raise ValueError(f"operator {node.name!r}: unknown kind {kind!r}")


__all__ = ["ChainScope", "StreamOperator", "create_operator"]
