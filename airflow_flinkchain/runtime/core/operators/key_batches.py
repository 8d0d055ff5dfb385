"""BATCH input of a keyed operator keyed by a field, held as Arrow batches (planner/vectorized.py:
`buffers_batches`): what the per-record buffer of KeyedOperator holds, without a Python object
per record until its key is replayed.

Flink's sort-based batch execution sorts a keyed input by key, then timestamp, before the
operator sees it. The per-record buffer does that with a dict of per-key lists, a tuple and a
dict per record alive until the end of input (and the cyclic GC walking them over and over).
Held as batches, the input is sorted once at the end (stable: key codes in first-seen order,
then timestamp, rows without one first, else in arrival order), and each key's rows become
dict records (the exchange's own conversion, `to_pylist`) just before the key is replayed:
keys in first-seen order, each key's records in timestamp order, exactly as the buffer gives them.
"""

from __future__ import annotations

from typing import Any, Iterator, Optional

import numpy as np
import pyarrow as pa

from airflow_flinkchain.runtime.core.batches import batch_rows
from airflow_flinkchain.runtime.core.elements import MIN_WATERMARK_TS
from airflow_flinkchain.runtime.core.grouped import key_codes
from airflow_flinkchain.runtime.core.record_types import TS_COLUMN

#: rows turned into records at once (whole keys): bounds the Python objects alive
BLOCK_ROWS = 65536


def groupable(column: pa.ChunkedArray) -> bool:
    """Whether a key column's values group as Python's equality groups them (key_codes)."""
    t = column.type
    return pa.types.is_integer(t) or pa.types.is_string(t) or pa.types.is_large_string(t)


class KeyBatches:
    """The batches a keyed operator holds, and their rows per key at the end of input."""

    def __init__(self, key_field: str):
        self.key_field = key_field
        self.batches: list = []

    def __bool__(self) -> bool:
        return bool(self.batches)

    def add(self, batch: pa.RecordBatch) -> bool:
        """Hold `batch`; False (not held) when its key column is missing or of another type."""
        field = self.key_field
        if field not in batch.schema.names or not groupable(batch.column(field)):
            return False
        if self.batches and not self.batches[0].schema.equals(batch.schema):
            return False
        self.batches.append(batch)
        return True

    def release(self, buffer: dict) -> None:
        """The held rows into a per-record buffer {key: [(timestamp, value)]}, in arrival order
        (before records that must go per record after them)."""
        held = list(self.batches)
        self.batches.clear()
        for batch in held:
            rows, ts = batch_rows(batch)
            keys = batch.column(self.key_field).to_pylist()
            for key, t, value in zip(keys, ts or [None] * len(rows), rows):
                records = buffer.get(key)
                if records is None:
                    buffer[key] = [(t, value)]
                else:
                    records.append((t, value))

    def by_key(self) -> Iterator[tuple[Any, list]]:
        """(key, [(timestamp, value)] in timestamp order) per key, keys in first-seen order; the
        held batches are dropped."""
        held = list(self.batches)
        self.batches.clear()
        if not held:
            return
        table = pa.Table.from_batches(held)
        del held
        codes, keys = key_codes(table.column(self.key_field).combine_chunks())
        ts, missing = _timestamps(table)
        if ts is None:
            order = np.argsort(codes, kind="stable")
        else:
            order = np.argsort(ts, kind="stable")
            order = order[np.argsort(codes[order], kind="stable")]
        rows = (table.drop_columns([TS_COLUMN]) if TS_COLUMN in table.schema.names else table).take(pa.array(order))
        sorted_codes = codes[order]
        stamps = None if ts is None else ts[order]
        missing = None if missing is None else missing[order]
        del table, codes, order
        starts = np.flatnonzero(np.r_[True, sorted_codes[1:] != sorted_codes[:-1]])
        ends = np.r_[starts[1:], len(sorted_codes)]
        group_codes = sorted_codes[starts].tolist()
        starts, ends = starts.tolist(), ends.tolist()
        g = 0
        while g < len(starts):  # a block of whole keys at a time
            lo = starts[g]
            last = g
            while last + 1 < len(starts) and ends[last + 1] - lo <= BLOCK_ROWS:
                last += 1
            hi = ends[last]
            values = rows.slice(lo, hi - lo).to_pylist()
            if stamps is None:
                block_ts = [None] * (hi - lo)
            else:
                block_ts = stamps[lo:hi].tolist()
                if missing is not None:
                    for i in np.flatnonzero(missing[lo:hi]).tolist():
                        block_ts[i] = None
            for k in range(g, last + 1):
                a, b = starts[k] - lo, ends[k] - lo
                yield keys[group_codes[k]], list(zip(block_ts[a:b], values[a:b]))
            g = last + 1


def _timestamps(table: pa.Table) -> tuple[Optional[np.ndarray], Optional[np.ndarray]]:
    """(each row's timestamp for sorting (int64; a row without one as Long.MIN_VALUE: first,
    stable), the rows without one (None: no such row)); (None, None) when no row has one."""
    if TS_COLUMN not in table.schema.names:
        return None, None
    col = table.column(TS_COLUMN)
    if col.null_count == len(col):
        return None, None
    missing = None
    if col.null_count:
        missing = col.is_null().to_numpy(zero_copy_only=False)
    return col.fill_null(MIN_WATERMARK_TS).to_numpy().astype(np.int64, copy=False), missing
