"""Batch operators: map_batches and filter_batches (vectorized user functions).

A batch operator takes batches (`process_batch`) from a batch operator or a
columnar input before it, and records (its per-record `handler`) from a
per-record operator, which it gathers into batches of `batch_size` rows
(DEFAULT_BATCH_ROWS when unset). Gathered records are handed on before any
watermark and at end of input, so records and watermarks keep their order.

Errors: under `fail` a failing call fails the subtask. Under `dead_letter` /
`skip` a failing batch is bisected until the failing rows are single: each is
dead-lettered (or skipped) as the record it is, the rest is processed in its
halves. This finds exactly the rows a row-independent function fails on (its
result for a slice = the slice of its result); a function that looks at other
rows of its batch may fail differently on the halves.

Typed output (`output_type`): a main output batch must have exactly the
declared fields (the timestamp column aside) and is cast to the declared types
with Arrow's safe cast (integers take integers and whole floats only, as the
per-record conversion); a batch that does not fit fails the subtask under
every on_error policy, as a record not fitting its edge or sink does.
"""

from __future__ import annotations

import sys
import time
from typing import Any, Optional

import pyarrow as pa

from airflow_flinkchain.functions import Function, OutputTag
from airflow_flinkchain.graph.model import ErrorPolicy
from airflow_flinkchain.runtime.core.batches import batch_emitter, batch_rows, conform, rows_to_batch, timestamps
from airflow_flinkchain.runtime.core.errors import ChainExecutionError
from airflow_flinkchain.runtime.core.operators.base import StreamOperator
from airflow_flinkchain.runtime.core.record_types import TS_COLUMN, RecordTypeError, parse_output_type

class BatchOperator(StreamOperator):
    takes_batches = True
    method = ""

    def __init__(self, node, scope):
        super().__init__(node, scope)
        self.spec = node.function  # a BatchFunction
        self.label = f"operator {node.name!r}"
        self.pending: list = []
        self.pending_ts: list = []
        self.self_time = 0.0
        self._emitters: dict = {}

    # ---- lifecycle ---------------------------------------------------------
    def setup(self, runtime_context) -> None:
        super().setup(runtime_context)
        self.fn = self.spec.resolve(self.method)
        self.pandas = self.spec.batch_format == "pandas"
        self.schema = parse_output_type(self.node.output_type, self.label)
        self.clock = time.perf_counter

    def open(self) -> None:
        fn = self.spec.fn
        if isinstance(fn, Function):
            self._function_open = True
            fn.open(self.runtime_context)

    def end_input(self) -> None:
        self.flush_records()

    def close(self) -> None:
        fn = self.spec.fn
        if isinstance(fn, Function):
            self._function_open = False
            fn.close()

    def dispose(self) -> None:
        if getattr(self, "_function_open", False):
            self._function_open = False
            self.spec.fn.close()

    # ---- records in: gathered into batches ---------------------------------
    def _build_handler(self, timed: bool):
        pending, pending_ts, cell, limit = self.pending, self.pending_ts, self.cell, self.spec.rows_per_batch
        flush = self.flush_records

        def gather(value: Any) -> None:
            pending.append(value)
            pending_ts.append(cell.value)
            if len(pending) >= limit:
                flush()

        return self._timing(gather) if timed else gather

    def flush_records(self) -> None:
        if not self.pending:
            return
        values, ts = self.pending[:], self.pending_ts[:]
        self.pending.clear()
        self.pending_ts.clear()
        try:
            batch = rows_to_batch(values, None if ts.count(None) == len(ts) else ts, self.label)
        except Exception as exc:
            raise self.error("process", exc) from exc
        self.process_batch(batch)

    def process_watermark(self, watermark) -> None:
        self.flush_records()  # the records before the watermark go first
        super().process_watermark(watermark)

    def process_watermark_status(self, status) -> None:
        self.flush_records()
        super().process_watermark_status(status)

    # ---- batches -----------------------------------------------------------
    def process_batch(self, batch: pa.RecordBatch) -> None:
        n = batch.num_rows
        if n == 0:
            return
        if TS_COLUMN in batch.schema.names and timestamps(batch) is None:
            batch = batch.drop_columns([TS_COLUMN])  # no row has a timestamp: the function sees no column
        limit = self.spec.batch_size
        if limit is not None and n > limit:
            for offset in range(0, n, limit):
                self._process(batch.slice(offset, limit))
        else:
            self._process(batch)

    def _process(self, batch: pa.RecordBatch) -> None:
        self.metrics.records_in += batch.num_rows
        t0 = self.clock()
        outputs = self._apply(batch)
        self.self_time += self.clock() - t0
        for tag_id, out in outputs:
            if tag_id is None:
                if self.schema is not None:
                    out = self._conform(out)
                self.metrics.records_out += out.num_rows
            emit = self._emitter(tag_id)
            if emit is not None and out.num_rows:
                emit(out)

    def _emitter(self, tag_id: Optional[str]):
        try:
            return self._emitters[tag_id]
        except KeyError:
            e = self._emitters[tag_id] = batch_emitter(self.output, tag_id, False, self.cell)
            return e

    def _apply(self, batch: pa.RecordBatch) -> list:
        """[(tag id or None, output batch)] of the function over `batch`, the on_error
        policy applied (bisecting a failing batch, see the module docstring)."""
        try:
            return self._call(batch)
        except ChainExecutionError:
            raise
        except Exception as exc:
            if self.on_error is ErrorPolicy.FAIL:
                raise self.error("process", exc, f"<a batch of {batch.num_rows} rows>", True) from exc
            return self._bisect(batch, exc)

    def _bisect(self, batch: pa.RecordBatch, exc: BaseException) -> list:
        n = batch.num_rows
        if n == 1:
            rows, ts = batch_rows(batch)
            saved, self.cell.value = self.cell.value, (ts[0] if ts else None)
            try:
                self.error_handler(False)(exc, rows[0])
            finally:
                self.cell.value = saved
            return []
        results = []
        for part in (batch.slice(0, n // 2), batch.slice(n // 2)):
            try:
                results += self._call(part)
            except ChainExecutionError:
                raise
            except Exception as part_exc:
                results += self._bisect(part, part_exc)
        return results

    def _argument(self, batch: pa.RecordBatch) -> Any:
        return batch.to_pandas() if self.pandas else batch

    def _call(self, batch: pa.RecordBatch) -> list:
        raise NotImplementedError

    def _conform(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        try:
            return conform(batch, self.schema, self.label)
        except RecordTypeError as exc:
            raise self.error("process", exc) from exc

    # ---- metrics -------------------------------------------------------------
    def finish_metrics(self):
        m = super().finish_metrics()
        m.time_ms = self.self_time * 1000.0
        return m


class MapBatchesOperator(BatchOperator):
    method = "map_batches"

    def _call(self, batch: pa.RecordBatch) -> list:
        result = self.fn(self._argument(batch))
        outputs = []
        for tag, value in _results(result):
            for out in _as_batches(value, self.label):
                outputs.append((tag, out))
        ts = timestamps(batch)
        if ts is not None:  # a row-preserving output without the column keeps the input's timestamps
            outputs = [(tag, out.append_column(TS_COLUMN, ts)
                        if TS_COLUMN not in out.schema.names and out.num_rows == batch.num_rows else out)
                       for tag, out in outputs]
        return outputs


class FilterBatchesOperator(BatchOperator):
    method = "filter_batches"

    def _call(self, batch: pa.RecordBatch) -> list:
        mask = _as_mask(self.fn(self._argument(batch)))
        if len(mask) != batch.num_rows:
            raise self.error("process", ValueError(
                f"the mask has {len(mask)} entries for a batch of {batch.num_rows} rows; return one boolean "
                "per row (e.g. a pyarrow.compute comparison of a column)"))
        kept = batch.filter(mask, null_selection_behavior="drop")
        self.metrics.filtered += batch.num_rows - kept.num_rows
        return [(None, kept)]


def _results(result: Any):
    """(tag id or None, value) pairs of what a map_batches function returned or yielded."""
    if result is None:
        return
    if _is_batch_like(result):
        yield None, result
        return
    if type(result) is tuple and len(result) == 2 and isinstance(result[0], OutputTag):
        yield result[0].tag_id, result[1]
        return
    for item in result:
        if type(item) is tuple and len(item) == 2 and isinstance(item[0], OutputTag):
            yield item[0].tag_id, item[1]
        elif item is not None:
            yield None, item


def _is_batch_like(value: Any) -> bool:
    if isinstance(value, (pa.RecordBatch, pa.Table, dict)):
        return True
    pd = sys.modules.get("pandas")
    return pd is not None and isinstance(value, pd.DataFrame)


def _as_batches(value: Any, label: str) -> list:
    if isinstance(value, pa.RecordBatch):
        return [value]
    if isinstance(value, pa.Table):
        return value.to_batches()
    if isinstance(value, dict):
        return [pa.RecordBatch.from_pydict(value)]
    pd = sys.modules.get("pandas")
    if pd is not None and isinstance(value, pd.DataFrame):
        return [pa.RecordBatch.from_pandas(value, preserve_index=False)]
    raise TypeError(f"{label}: a batch function returns a pyarrow.RecordBatch, pyarrow.Table, pandas.DataFrame "
                    f"or dict of columns (or yields them, or (OutputTag, batch) pairs), got {type(value).__name__}")


def _as_mask(mask: Any) -> Any:
    if isinstance(mask, (pa.Array, pa.ChunkedArray)):
        return mask
    pd = sys.modules.get("pandas")
    if pd is not None and isinstance(mask, pd.Series):
        mask = mask.to_numpy()
    return pa.array(mask, pa.bool_())
