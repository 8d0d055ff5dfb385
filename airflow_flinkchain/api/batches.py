"""map_batches / filter_batches (vectorized operators, DataStream methods): argument checks
and the recorded BatchFunction."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterable, Optional

from airflow_flinkchain.api.validation import check_function, declared_tags
from airflow_flinkchain.batch_functions import BATCH_FORMATS, BatchFunction
from airflow_flinkchain.graph.errors import PlanningError
from airflow_flinkchain.functions import OutputTag
from airflow_flinkchain.graph.model import OperatorKind

if TYPE_CHECKING:  # pragma: no cover
    from airflow_flinkchain.api.datastream import DataStream


def batch_function(stream: Any, kind: OperatorKind, func: Any, batch_format: str, batch_size: Optional[int],
                   output_tags: Optional[Iterable[Any]]) -> tuple[BatchFunction, Optional[frozenset]]:
    """(the BatchFunction to record, its declared side output tag ids) or a PlanningError."""
    what = kind.value
    check_function(func, what, what)
    if stream._key_selector() is not None:
        raise PlanningError(
            f"{what}() on a KeyedStream: a batch function sees many keys at once and has no key context. "
            f"Call {what}() before key_by(), or use map/filter/process on the KeyedStream.")
    if batch_format not in BATCH_FORMATS:
        raise PlanningError(f"{what}(): batch_format must be one of {', '.join(map(repr, BATCH_FORMATS))}, "
                            f"got {batch_format!r}")
    if batch_format == "pandas":
        try:
            import pandas  # noqa: F401
        except ImportError:  # pragma: no cover - pandas ships with the project's dependencies
            raise PlanningError(f"{what}(batch_format='pandas') needs pandas installed; "
                                "use batch_format='pyarrow'") from None
    if batch_size is not None and (isinstance(batch_size, bool) or not isinstance(batch_size, int)
                                   or batch_size < 1):
        raise PlanningError(f"{what}(): batch_size must be a positive int or None, got {batch_size!r}")
    return BatchFunction(func, batch_format, batch_size), declared_tags(func, output_tags)


class BatchOperators:
    """The vectorized operators of DataStream: `map_batches`, `filter_batches`."""

    def map_batches(
        self,
        func: Any,
        batch_format: str = "pyarrow",
        batch_size: Optional[int] = None,
        output_type: Any = None,
        on_error: Optional[str] = None,
        output_tags: Optional[Iterable[OutputTag]] = None,
    ) -> "DataStream":
        """A vectorized map (Ray Data's `map_batches`, Flink's pandas UDFs): `func(batch)`
        gets many records as one `pyarrow.RecordBatch` (or `pandas.DataFrame` with
        `batch_format="pandas"`) and returns a batch, or yields several; a yielded
        `(OutputTag, batch)` goes to that side output. At most `batch_size` rows per call.
        `output_type` declares (and casts to) the output columns. Chains like map();
        see docs/vectorized.md for timestamps, dead letters and when to use it.

        Examples:
            >>> import pyarrow.compute as pc
            >>> from airflow_flinkchain import StreamPipeline
            >>> p = StreamPipeline("doc")
            >>> tripled = p.from_collection([{"x": 1}, {"x": 2}]).map_batches(
            ...     lambda b: b.set_column(0, "x", pc.multiply(b["x"], 3)))
            >>> _ = tripled.collect("out")
            >>> p.execute_local().output("out")
            [{'x': 3}, {'x': 6}]
        """
        spec, tags = batch_function(self, OperatorKind.MAP_BATCHES, func, batch_format, batch_size, output_tags)
        return self._add(OperatorKind.MAP_BATCHES, "MapBatches", spec, output_type=output_type, on_error=on_error,
                         declared_output_tags=tags)

    def filter_batches(
        self,
        func: Any,
        batch_format: str = "pyarrow",
        batch_size: Optional[int] = None,
        on_error: Optional[str] = None,
    ) -> "DataStream":
        """A vectorized filter: `func(batch)` returns a boolean mask (pyarrow, numpy or
        pandas, one entry per row); rows where it is true are kept (null: dropped).

        Examples:
            >>> import pyarrow.compute as pc
            >>> from airflow_flinkchain import StreamPipeline
            >>> p = StreamPipeline("doc")
            >>> evens = p.from_collection([{"x": 1}, {"x": 2}]).filter_batches(
            ...     lambda b: pc.equal(pc.bit_wise_and(b["x"], 1), 0))
            >>> _ = evens.collect("out")
            >>> p.execute_local().output("out")
            [{'x': 2}]
        """
        spec, _ = batch_function(self, OperatorKind.FILTER_BATCHES, func, batch_format, batch_size, None)
        return self._add(OperatorKind.FILTER_BATCHES, "FilterBatches", spec, on_error=on_error)
