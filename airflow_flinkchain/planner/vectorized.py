"""Which operators compute over Arrow batches: batch functions, and the built-in aggregations
(`KeyedStream.sum/min/max/min_by/max_by`, the same on a tumbling event-time `WindowedStream`)
of a stream keyed by a field (graph/field_keys.py). Used by the runtime (which operator to
build, whether a chain head reads batches) and by `flinkchain plan` / the Chains tab (the
"vectorized" mark); docs/vectorized.md says when the batch path is taken."""

from __future__ import annotations

from typing import Any, Optional

from airflow_flinkchain.graph.field_keys import field_key, timestamp_field
from airflow_flinkchain.graph.model import OperatorKind
from airflow_flinkchain.graph.windows import WindowFunctionKind
from airflow_flinkchain.window import TumblingEventTimeWindows


def vectorized_aggregation(node: Any) -> Optional[str]:
    """The key field of a keyed built-in aggregation (`KeyedStream.sum/min/max/min_by/max_by`)
    that takes Arrow batches, or None when the operator runs per record only."""
    fn = node.function
    if node.kind is not OperatorKind.REDUCE or not getattr(fn, "vectorizable", False) or \
            type(getattr(fn, "position", None)) is not str:
        return None  # a position (tuples, lists) has no column
    return field_key(node.key_selector)


def vectorized_window(node: Any) -> Optional[str]:
    """The key field of a keyed tumbling event-time window computing a built-in aggregation
    (`WindowedStream.sum/min/max/min_by/max_by`, or `aggregate(Aggregates.of(...))`) with the
    default trigger and no window function: it has a batch path (in STREAMING mode, fed batches
    with their per-record watermarks: takes_watermarked_batches). None otherwise."""
    spec = node.function
    if node.kind is not OperatorKind.WINDOW or getattr(spec, "all_windows", True) or spec.trigger is not None \
            or spec.window_function is not None or type(spec.assigner) is not TumblingEventTimeWindows:
        return None
    fn = spec.function
    if not getattr(fn, "vectorizable", False):
        return None
    if spec.function_kind is WindowFunctionKind.AGGREGATE:
        fields = [f for f, _how in getattr(fn, "columns", {}).values()]
    else:
        fields = [getattr(fn, "position", None)]
    return field_key(node.key_selector) if all(type(f) is str for f in fields) else None


def vectorized_timestamps(node: Any) -> Optional[str]:
    """The field an `assign_timestamps_and_watermarks` operator's TimestampAssigner reads
    (graph/field_keys.py: `timestamp_field`): it stamps whole batches from that column. None
    when the assigner is anything else (or absent)."""
    if node.kind is not OperatorKind.TIMESTAMPS_AND_WATERMARKS:
        return None
    get = getattr(node.function, "get_timestamp_assigner", None)
    return None if get is None else timestamp_field(get())


def takes_batches(node: Any) -> bool:
    """Whether the operator has a batch path (batch functions, vectorized aggregations,
    a timestamp assigner reading a field)."""
    return node.kind in (OperatorKind.MAP_BATCHES, OperatorKind.FILTER_BATCHES) or \
        vectorized_aggregation(node) is not None or vectorized_window(node) is not None or \
        vectorized_timestamps(node) is not None


def takes_watermarked_batches(graph: Any, node: Any) -> bool:
    """Whether the operator, as a chain head reading typed exchange files, takes whole batches
    with their per-record watermarks (a vectorized window in STREAMING mode)."""
    return graph is not None and graph.runtime_mode == "streaming" and vectorized_window(node) is not None


def runs_vectorized(graph: Any, node: Any) -> bool:
    """Whether the operator computes over Arrow batches (what `flinkchain plan` and the Chains
    tab mark "vectorized"): a batch function always; a vectorized aggregation or window
    aggregation when its input is typed (every in-edge's records declare a type: the chain head then reads the exchange
    as batches), else it runs per record."""
    if node.kind in (OperatorKind.MAP_BATCHES, OperatorKind.FILTER_BATCHES):
        return True
    if vectorized_aggregation(node) is None and vectorized_window(node) is None and \
            vectorized_timestamps(node) is None:
        return False
    edges = graph.in_edges(node.id)
    return bool(edges) and all(
        (graph.node(e.source_id).output_type if e.output_tag is None else e.output_type) is not None for e in edges)
