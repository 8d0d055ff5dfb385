"""Rolling keyed aggregations over an Arrow batch: what `KeyedStream.sum/min/max/min_by/max_by`
compute per record (api/aggregations.py), for every row of a batch at once.

`rolling(rows, codes, field, kind, prior)`: row i of the result is the key's accumulator after
row i, exactly the record the per-record reduce emits after it:
  * sum / min / max: the key's first record (its accumulator from state when it has one) with
    the field replaced by the running sum / minimum / maximum;
  * min_by / max_by: the first record holding the running minimum / maximum (a record replaces
    the accumulator only when strictly smaller / larger).
`prior` holds the accumulators kept in state for keys of the batch: they go in front of their
key's rows, as the per-record reduce starts from them.

Computed with numpy over the rows sorted by key (stable: each key's rows keep their order):
a cumulative sum less each group's base; running minima and maxima over dense value ranks
shifted by group so that one `minimum.accumulate` restarts at every group. Only what equals the
per-record fold exactly is computed here; `None` sends the batch to the per-record path: a
field that is not an integer or float column (or, for `sum`, not an integer one: float
addition depends on its order of evaluation), nulls, NaN, a sum that could leave int64, or an
accumulator in state that does not fit the batch's columns.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from airflow_flinkchain.runtime.core.elements import MIN_WATERMARK_TS
from airflow_flinkchain.runtime.core.record_types import timestamps, without_timestamps

_INT64_LIMIT = 2**63 - 1


def key_codes(column: pa.Array) -> Optional[tuple[np.ndarray, list]]:
    """(a code per row, the key of each code in first-seen order) of an integer or string key
    column (keys equal as Arrow values are equal in Python, and distinct ones distinct); None
    for other key types."""
    t = column.type
    if not (pa.types.is_integer(t) or pa.types.is_string(t) or pa.types.is_large_string(t)):
        return None
    encoded = pc.dictionary_encode(column, null_encoding="encode")
    return encoded.indices.to_numpy(zero_copy_only=False).astype(np.int64), encoded.dictionary.to_pylist()


def window_groups(codes: np.ndarray, starts: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The distinct (key code, window start) pairs of rows, in that order: (the code and the start
    of each group, the first row of each group, the group of each row), as
    `np.unique(pairs, axis=0, return_index=True, return_inverse=True)` gives them, computed over
    one int64 per row (a code times the number of windows spanned plus the window's index):
    row-wise unique sorts generic records and takes most of a window fold's time."""
    if len(codes) == 0:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty, empty, empty
    lo, hi = int(starts.min()), int(starts.max())
    span = (hi - lo) // size + 1
    if (hi - lo) < 2**62 and (int(codes.max()) + 1) * span < 2**62:
        index = (starts - lo) // size  # starts lie on the window grid: exact
        uniq, first, inverse = np.unique(codes.astype(np.int64) * span + index, return_index=True,
                                         return_inverse=True)
        return uniq // span, lo + (uniq % span) * size, first, inverse.reshape(-1).astype(np.int64)
    pairs, first, inverse = np.unique(np.stack([codes, starts], axis=1), axis=0, return_index=True,
                                      return_inverse=True)
    return pairs[:, 0], pairs[:, 1], first, inverse.reshape(-1).astype(np.int64)


@dataclass
class Rolling:
    """The accumulator after every row (`out`, the rows' columns) and the position in `out` of
    each key's last row (`last`) with its code (`last_codes`): the key's new accumulator.
    `sources`: per row of `out`, the input row whose other fields it carries (the key's first
    row for sum/min/max, the chosen one for min_by/max_by; counted with the prior rows first)."""

    out: pa.RecordBatch
    last: np.ndarray
    last_codes: np.ndarray
    sources: np.ndarray


def _values(column: pa.Array, kind: str) -> Optional[np.ndarray]:
    t = column.type
    if column.null_count or not (pa.types.is_integer(t) or pa.types.is_floating(t)):
        return None
    if kind == "sum" and not pa.types.is_integer(t):
        return None
    v = column.to_numpy(zero_copy_only=False)
    if pa.types.is_floating(t) and np.isnan(v).any():
        return None
    if pa.types.is_unsigned_integer(t):
        if len(v) and int(v.max()) > _INT64_LIMIT:
            return None
        v = v.astype(np.int64)
    return v.astype(np.int64) if pa.types.is_integer(t) else v


def _prior_rows(rows: pa.RecordBatch, prior: dict, field: str) -> Optional[tuple[pa.RecordBatch, np.ndarray]]:
    """The accumulators in state as rows of the batch's schema, and their codes."""
    names = set(rows.schema.names)
    codes = np.fromiter(prior, dtype=np.int64, count=len(prior))
    accs = list(prior.values())
    if any(type(a) is not dict or a.keys() != names for a in accs):
        return None
    try:
        batch = pa.RecordBatch.from_pylist(accs, schema=rows.schema)
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
        return None
    if batch.column(field).null_count:
        return None
    return batch, codes


def _group_cumulative(vs: np.ndarray, gid: np.ndarray, groups: int, smallest: bool) -> np.ndarray:
    """Running min (smallest) or max of `vs` within each group (`gid`: 0, 0, 1, 1, 1, 2, ...):
    on dense ranks shifted so that every earlier group lies beyond the current one."""
    uniq, rank = np.unique(vs, return_inverse=True)
    span = np.int64(len(uniq))
    shift = (groups - 1 - gid if smallest else gid).astype(np.int64) * span
    acc = (np.minimum if smallest else np.maximum).accumulate(rank.reshape(-1).astype(np.int64) + shift)
    return uniq[acc - shift]


def rolling(rows: pa.RecordBatch, codes: np.ndarray, field: str, kind: str, prior: dict,
            only_last: bool = False) -> Optional[Rolling]:
    """See the module docstring. `rows`: the batch without its timestamp column; `codes`: its
    key codes (key_codes); `prior`: {code: accumulator dict} of the keys that have one.
    `only_last`: `out` holds each key's last accumulator only (BATCH: one result per key)."""
    if field not in rows.schema.names:
        return None
    v = _values(rows.column(field), kind)
    if v is None:
        return None
    table, skip = rows, 0
    if prior:
        front = _prior_rows(rows, prior, field)
        if front is None:
            return None
        batch, prior_codes = front
        pv = _values(batch.column(field), kind)
        if pv is None or pv.dtype != v.dtype:
            return None
        table = pa.Table.from_batches([batch, rows])
        codes, v, skip = np.concatenate([prior_codes, codes]), np.concatenate([pv, v]), batch.num_rows
    n = len(codes)
    if kind == "sum" and n and max(abs(int(v.max())), abs(int(v.min()))) * n > _INT64_LIMIT:
        return None  # the sum could leave int64 (Python ints do not overflow): fold per record
    order = np.argsort(codes, kind="stable")
    sc = codes[order]
    start = np.ones(n, dtype=bool)
    start[1:] = sc[1:] != sc[:-1]
    end = np.ones(n, dtype=bool)
    end[:-1] = start[1:]
    positions = np.arange(n)
    group_start = np.maximum.accumulate(np.where(start, positions, 0))  # per sorted row: its group's first
    vs = v[order]
    # the sorted rows whose accumulators are output: all (in input order, less the state rows) or the last per key
    wanted = np.flatnonzero(end) if only_last else np.argsort(order, kind="stable")[skip:]
    if kind in ("min_by", "max_by"):
        gid = np.cumsum(start) - 1
        best = _group_cumulative(vs, gid, int(gid[-1]) + 1, kind == "min_by")
        changed = start.copy()
        changed[1:] |= best[1:] != best[:-1]
        sources = order[np.maximum.accumulate(np.where(changed, positions, 0))][wanted]
        out = table.take(pa.array(sources))
    else:
        if kind == "sum":
            cs = np.cumsum(vs)
            result = cs - cs[group_start] + vs[group_start]
        else:
            gid = np.cumsum(start) - 1
            result = _group_cumulative(vs, gid, int(gid[-1]) + 1, kind == "min")
        sources = order[group_start][wanted]
        out = table.take(pa.array(sources))
        col_type = pa.int64() if kind == "sum" else rows.schema.field(field).type
        out = out.set_column(out.schema.get_field_index(field), rows.schema.field(field).with_type(col_type),
                             pa.array(result[wanted], type=col_type))
    if isinstance(out, pa.Table):
        out = out.combine_chunks().to_batches()[0] if out.num_rows else rows.slice(0, 0)
    last = np.arange(int(end.sum())) if only_last else order[end] - skip
    return Rolling(out, last, sc[end], sources)


def held_rows(held: list) -> Optional[tuple]:
    """BATCH: the held batches as one batch sorted by timestamp (stable, rows without one first,
    as keyed.sort_by_timestamp) and its timestamps (None: no row has one); None when the
    batches' columns differ (the per-record path takes any records)."""
    rows_list, ts_list = [], []
    for b in held:
        ts = timestamps(b)
        rows_list.append(without_timestamps(b))
        ts_list.append(pa.nulls(b.num_rows, pa.int64()) if ts is None else ts.cast(pa.int64()))
    try:
        table = pa.Table.from_batches(rows_list)
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        return None
    ts_all = pa.chunked_array(ts_list, pa.int64())
    ts = None
    if ts_all.null_count < len(ts_all):
        ts = ts_all.fill_null(MIN_WATERMARK_TS).to_numpy()
        order = np.argsort(ts, kind="stable")
        table, ts = table.take(pa.array(order)), ts[order]
    return table.combine_chunks().to_batches()[0], ts


def aggregate_groups(rows: pa.RecordBatch, groups: np.ndarray, columns: dict) -> Optional[pa.RecordBatch]:
    """`Aggregates.of(...)` (api/aggregations.py) per group (`groups`: a group per row, 0..n-1,
    every group present; rows in the order the per-record path adds them): one row per group,
    in group order, equal to the per-record accumulator's result. None: a case the per-record
    path must compute (nulls; a sum or avg of floats, whose result depends on the order of the
    additions; NaN; a sum that could leave int64 or an avg whose sum is not exact as a float)."""
    order = np.argsort(groups, kind="stable")
    starts = np.flatnonzero(np.r_[True, groups[order][1:] != groups[order][:-1]])
    sizes = np.diff(np.r_[starts, len(order)])
    arrays, names = [], []
    for name, (field, how) in columns.items():
        names.append(name)
        if how == "count":
            arrays.append(pa.array(sizes, pa.int64()))
            continue
        if field not in rows.schema.names:
            return None
        column = rows.column(field)
        if how == "first":
            if column.null_count:
                return None
            arrays.append(column.take(pa.array(order[starts])))
            continue
        v = _values(column, "sum" if how in ("sum", "avg") else how)
        if v is None:
            return None
        vs = v[order]
        if how in ("sum", "avg"):
            bound = _INT64_LIMIT if how == "sum" else 2**53  # avg: the sum converts to a float exactly
            if len(v) and max(abs(int(v.max())), abs(int(v.min()))) * len(v) > bound:
                return None
            sums = np.add.reduceat(vs, starts)
            arrays.append(pa.array(sums, pa.int64()) if how == "sum" else pa.array(sums / sizes, pa.float64()))
        else:
            reduced = (np.minimum if how == "min" else np.maximum).reduceat(vs, starts)
            arrays.append(pa.array(reduced, type=column.type))
    return pa.RecordBatch.from_arrays(arrays, names=names)
