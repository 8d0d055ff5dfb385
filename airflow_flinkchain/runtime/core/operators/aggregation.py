"""The vectorized keyed aggregations: `KeyedStream.sum/min/max/min_by/max_by` with a batch path
(and `WindowedStream`'s over tumbling event-time windows, at the end of this module; their
STREAMING path is window_batches.py).

The operator is the per-record ReduceOperator (same state: one accumulator per key in the
`_reduce_state` ValueState of the keyed backend, heap or RocksDB; same snapshots; same
watermark handling) plus `process_batch`, taken when Arrow batches reach it: a typed
exchange edge read by the chain head (records keyed by a field: graph/field_keys.py).
Records that come one by one take the per-record path.

STREAMING: per batch, the keys' accumulators are read from state, the rolling accumulator of
every row is computed at once (core/grouped.py), emitted as one batch with each row stamped
with its input row's timestamp (the record the per-record reduce emits after that row, in
the same order), and each key's last accumulator goes back to state.

BATCH: batches are held to the end of input, then sorted by timestamp (stable, rows without
one first) and folded per key in that order: one result per key, stamped with the MAX
watermark, as the per-record BATCH reduce.

A batch the vectorized fold cannot compute exactly (core/grouped.py lists when) is handed to
the per-record path row by row: the results are the same, only slower.
"""

from __future__ import annotations

import time
from typing import Any, Optional

import numpy as np
import pyarrow as pa

from airflow_flinkchain.planner.vectorized import vectorized_aggregation, vectorized_window
from airflow_flinkchain.runtime.core.batches import batch_emitter, rows_emitter, timestamps, without_timestamps
from airflow_flinkchain.runtime.core.elements import MAX_WATERMARK_TS, MIN_WATERMARK_TS
from airflow_flinkchain.api.aggregations import AggregationFunction
from airflow_flinkchain.runtime.core.grouped import aggregate_groups, held_rows, key_codes, rolling, window_groups
from airflow_flinkchain.runtime.core.operators.keyed import ReduceOperator
from airflow_flinkchain.runtime.core.operators.window_batches import StreamingWindowBatches
from airflow_flinkchain.runtime.core.operators.window_stream import WindowStreamOperator
from airflow_flinkchain.runtime.core.record_types import TS_COLUMN


class VectorizedAggregationOperator(ReduceOperator):
    """ReduceOperator of an AggregationFunction over a field-keyed stream, with a batch path."""

    takes_batches = True

    def __init__(self, node, scope):
        super().__init__(node, scope)
        self.key_field = vectorized_aggregation(node)
        self.kind = node.function.kind
        self.field = node.function.position
        self._held: list = []  # BATCH: the batches, folded at the end of input
        self._batch_emit: Any = None

    # ---- batches -----------------------------------------------------------
    def process_batch(self, batch: pa.RecordBatch) -> None:
        n = batch.num_rows
        if n == 0:
            return
        if self.batch:
            self._held.append(batch)
            return
        t0 = time.perf_counter()
        done = self._rolling(batch)
        if done:
            self.sampled_time += time.perf_counter() - t0
            self.sampled_in += n
        else:
            self._per_record(batch)

    def _emit(self, out: pa.RecordBatch) -> None:
        emit_batch(self, out)

    def _codes(self, rows: pa.RecordBatch) -> Optional[tuple]:
        if self.key_field not in rows.schema.names:
            return None
        return key_codes(rows.column(self.key_field))

    def _rolling(self, batch: pa.RecordBatch) -> bool:
        """STREAMING: the rolling results of one batch, state read and written per key."""
        rows = without_timestamps(batch)
        encoded = self._codes(rows)
        if encoded is None:
            return False
        codes, keys = encoded
        backend, state = self.state_backend, self.acc_state
        prior = {}
        for code, key in enumerate(keys):
            backend.set_current_key(key)
            acc = state.value()
            if acc is not None:
                prior[code] = acc
        result = rolling(rows, codes, self.field, self.kind, prior)
        if result is None:
            return False
        self.metrics.records_in += batch.num_rows
        finals = result.out.take(pa.array(result.last)).to_pylist()
        for code, acc in zip(result.last_codes.tolist(), finals):
            backend.set_current_key(keys[code])
            state.update(acc)
        ts = timestamps(batch)
        out = result.out if ts is None else result.out.append_column(TS_COLUMN, ts)
        self._emit(out)
        return True

    def _per_record(self, batch: pa.RecordBatch) -> None:
        """The per-record path for a batch the vectorized fold does not take (STREAMING: at
        once; BATCH: into the per-key buffer)."""
        rows_emitter(self.handler(False), self.cell)(batch)

    # ---- BATCH: the end of input ---------------------------------------------
    def _replay_batch(self) -> None:
        held, self._held = self._held, []
        if held:
            t0 = time.perf_counter()
            n = sum(b.num_rows for b in held)
            if self._fold(held):
                self.sampled_time += time.perf_counter() - t0
                self.sampled_in += n
            else:
                for batch in held:
                    self._per_record(batch)
        super()._replay_batch()

    def _fold(self, held: list) -> bool:
        """BATCH: one result per key over every held batch, in timestamp order per key."""
        sorted_rows = held_rows(held)
        if sorted_rows is None:
            return False
        rows, _ts = sorted_rows
        encoded = self._codes(rows)
        if encoded is None:
            return False
        result = rolling(rows, encoded[0], self.field, self.kind, {}, only_last=True)
        if result is None:
            return False
        self.metrics.records_in += rows.num_rows
        stamps = np.full(result.out.num_rows, MAX_WATERMARK_TS, dtype=np.int64)
        self._emit(result.out.append_column(TS_COLUMN, pa.array(stamps, pa.int64())))
        return True


def emit_batch(op: Any, out: pa.RecordBatch) -> None:
    """A batch of results to what consumes the operator's main output (counted as records out)."""
    emit = op._batch_emit
    if emit is None:
        emit = op._batch_emit = batch_emitter(op.output, None, False, op.cell)
    op.metrics.records_out += out.num_rows
    if emit is not None:
        emit(out)


class VectorizedWindowAggregationOperator(StreamingWindowBatches, WindowStreamOperator):
    """A keyed tumbling event-time window reducing with an AggregationFunction (WindowedStream.sum
    and co.), keyed by a field. BATCH: the held batches are folded per key and window at the
    end of input (nothing is late in BATCH), each result stamped with its window's end - 1, as
    the per-record window operator fires them. STREAMING: window_batches.py."""

    takes_batches = True

    def __init__(self, node, scope):
        super().__init__(node, scope)
        self.key_field = vectorized_window(node)
        spec = node.function
        self.function = spec.function  # an AggregationFunction (reduce) or Aggregates (aggregate)
        self.size, self.offset = spec.assigner.get_size(), spec.assigner.get_offset()
        self._held: list = []
        self._batch_emit: Any = None

    def process_batch(self, batch: pa.RecordBatch) -> None:
        if batch.num_rows == 0:
            return
        if self.batch:
            self._held.append(batch)
        else:
            self._stream(batch, None)

    def _replay_batch(self) -> None:
        held, self._held = self._held, []
        if held and not self._fold(held):
            emit = rows_emitter(self.handler(False), self.cell)
            for batch in held:
                emit(batch)
        super()._replay_batch()

    def _fold(self, held: list) -> bool:
        t0 = time.perf_counter()
        sorted_rows = held_rows(held)
        if sorted_rows is None or sorted_rows[1] is None or self.key_field not in sorted_rows[0].schema.names:
            return False
        rows, ts = sorted_rows
        if (ts == MIN_WATERMARK_TS).any():
            return False  # a record without a timestamp: the per-record window reports it
        encoded = key_codes(rows.column(self.key_field))
        if encoded is None:
            return False
        starts = ts - (ts - self.offset) % self.size
        _group_codes, group_starts, _first, group_of_row = window_groups(encoded[0], starts, self.size)
        fn = self.function
        if isinstance(fn, AggregationFunction):
            result = rolling(rows, group_of_row, fn.position, fn.kind, {}, only_last=True)
            out, window_of = (None, None) if result is None else (result.out, result.last_codes)
        else:
            out = aggregate_groups(rows, group_of_row, fn.columns)
            window_of = np.arange(len(group_starts))
        if out is None:
            return False
        self.metrics.records_in += rows.num_rows
        stamps = group_starts[window_of] + (self.size - 1)  # the window's max timestamp
        emit_batch(self, out.append_column(TS_COLUMN, pa.array(stamps, pa.int64())))
        self.sampled_time += time.perf_counter() - t0
        self.sampled_in += rows.num_rows
        return True
