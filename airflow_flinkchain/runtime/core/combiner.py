"""Partial aggregation before a keyed exchange: a combiner, as in Flink's DataSet combinable
reduce and Spark's partial aggregate. In BATCH mode, a HASH edge into a vectorized keyed
aggregation (`KeyedStream.sum/min/max/min_by/max_by`; planner/vectorized.py: combined_edge)
carries one row per key and run of its producer's output instead of every row.

Exact, not approximate. A partial row is the fold of one contiguous run ("segment") of what
the subtask writes to the edge, for its key, computed as the consumer computes it
(core/grouped.py: `rolling`, rows in timestamp order, stable), and it keeps the timestamp of
the input row whose other fields it carries (the key's first row for sum/min/max, the chosen
one for min_by/max_by). These five folds are associative and choose by (timestamp, arrival
order), so the consumer's fold over partial rows equals its fold over the rows. A segment ends
at anything else the edge carries in order: a record written one by one, a watermark, a
status, the end of input.

A batch the fold cannot take (a missing or non-numeric field, a sum of another type than
int64, nulls, mixed timestamps, a sum that could leave int64) ends the segment and is written
as it is. When folding leaves more than half of the rows (keys nearly unique), the subtask
stops combining on that edge and writes its batches as they come.
"""

from __future__ import annotations

from typing import Callable, Optional

import pyarrow as pa

from airflow_flinkchain.runtime.core.grouped import held_rows, key_codes, rolling
from airflow_flinkchain.runtime.core.record_types import TS_COLUMN, timestamps

FOLD_AT = 1 << 17  # rows held before they are folded (and the size of the first check)


class KeyedCombiner:
    """The combiner of one out-edge of one subtask. `write(batch)` (set by the edge's batch
    emitter) writes a batch to the channels of its keys."""

    def __init__(self, key_field: str, kind: str, field: str):
        self.key_field, self.kind, self.field = key_field, kind, field
        self.write: Optional[Callable[[pa.RecordBatch], None]] = None
        self.active = True
        self.rows_in = 0  # rows taken into segments
        self.rows_out = 0  # partial rows written
        self._held: list = []
        self._held_rows = 0
        self._partial: Optional[pa.RecordBatch] = None

    def add(self, batch: pa.RecordBatch) -> bool:
        """Take `batch` into the current segment; False (after ending the segment) when the
        caller must write it as it is."""
        if not self.active or not self._takes(batch):
            self.flush()
            return False
        segment = self._held[0] if self._held else self._partial
        if segment is not None and batch.schema != segment.schema:
            self.flush()
        self._held.append(batch)
        self._held_rows += batch.num_rows
        self.rows_in += batch.num_rows
        if self._held_rows >= FOLD_AT:
            self._fold()
        return True

    def flush(self) -> None:
        """End the segment: its partial rows (or, if they could not be folded, its rows) go out.
        Nothing when no segment is open."""
        if self._held:
            self._fold()
        partial, self._partial = self._partial, None
        if partial is not None and partial.num_rows:
            self.rows_out += partial.num_rows
            self.write(partial)

    def discard(self) -> None:
        self._held, self._held_rows, self._partial = [], 0, None

    def _takes(self, batch: pa.RecordBatch) -> bool:
        names = batch.schema.names
        if self.key_field not in names or self.field not in names or batch.num_rows == 0:
            return False
        t = batch.schema.field(self.field).type
        if self.kind == "sum" and t != pa.int64():
            return False  # the partial sum keeps the column's type only for int64
        if TS_COLUMN in names:
            nulls = batch.column(TS_COLUMN).null_count
            if 0 < nulls < batch.num_rows:
                return False  # rows with and without timestamps: order them one by one
        return True

    def _fold(self) -> None:
        held = ([self._partial] if self._partial is not None else []) + self._held
        self._held, self._held_rows, self._partial = [], 0, None
        folded = fold(held, self.key_field, self.kind, self.field)
        if folded is None:  # written as they are: what the consumer folds is the same
            for batch in held:
                self.rows_out += batch.num_rows
                self.write(batch)
            return
        self._partial = folded
        rows = sum(b.num_rows for b in held)
        if self.rows_in >= FOLD_AT and 2 * folded.num_rows > rows:
            self.active = False  # keys nearly unique: combining costs more than it saves


def fold(batches: list, key_field: str, kind: str, field: str) -> Optional[pa.RecordBatch]:
    """One row per key of `batches` (same schema): the key's fold in the order the consumer
    folds them (grouped.held_rows), with the timestamp of the row whose fields it carries.
    None when the fold is not exact."""
    stamped = [timestamps(b) is not None for b in batches]
    if any(stamped) and not all(stamped):
        return None  # batches with and without timestamps: the consumer orders them, row by row
    sorted_rows = held_rows(batches)
    if sorted_rows is None:
        return None
    rows, ts = sorted_rows
    encoded = key_codes(rows.column(key_field))
    if encoded is None:
        return None
    result = rolling(rows, encoded[0], field, kind, {}, only_last=True)
    if result is None:
        return None
    schema, n = batches[0].schema, result.out.num_rows
    columns = [result.out.column(name) if name != TS_COLUMN
               else pa.nulls(n, schema.field(name).type) if ts is None
               else pa.array(ts[result.sources], schema.field(name).type) for name in schema.names]
    return pa.RecordBatch.from_arrays(columns, schema=schema)
