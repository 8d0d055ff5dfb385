"""Arrow record batches inside a chain: the boundary between batch and per-record operators.

A batch is a `pyarrow.RecordBatch` of dict records (one column per field),
plus the reserved `TS_COLUMN` when its rows carry event timestamps. Batches
pass between batch operators as they are (Arrow data is immutable: no copy
is needed where per-record outputs copy); they become records once, where a
per-record consumer (or a writer without a batch path) takes them, and records
become a batch once, where a batch operator takes records.

`batch_emitter(output, tag_id, timed, cell)` is the batch counterpart of an
Output's `main_emitter` / `side_emitter`: the fastest callable(batch) that
delivers a batch to everything consuming that output.
"""

from __future__ import annotations

from operator import itemgetter
from typing import Any, Callable, Iterable, Optional

import numpy as np
import pyarrow as pa

from airflow_flinkchain.runtime.core.arrow_records import batch_records
from airflow_flinkchain.graph.model import OperatorKind
from airflow_flinkchain.runtime.core.grouped import key_codes
from airflow_flinkchain.runtime.core.partitioners import channel_for_key
from airflow_flinkchain.runtime.core.elements import TimestampCell
from airflow_flinkchain.runtime.core.outputs import BroadcastingOutputCollector, ChainingOutput, Output, RecordWriterOutput
from airflow_flinkchain.runtime.core.record_types import TS_COLUMN, RecordTypeError, timestamps, without_timestamps
from airflow_flinkchain.runtime.core.splits import SplitLayout

BatchEmitter = Callable[[pa.RecordBatch], None]
_ONLY_DICT = frozenset({dict})
_CAST_ERRORS = (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError)


class ColumnarInput:
    """The input of a subtask whose head takes batches (a columnar source or exchange
    before a batch operator): RecordBatches, Watermarks and WatermarkStatuses in order."""

    def __init__(self, elements: Iterable[Any]):
        self.elements = elements


class SplitStart:
    """In a columnar source's batches: split `index` of the `count` the subtask reads one after
    another starts (core/splits.py); the chain's timestamp assigners are told (`start_split`)."""

    __slots__ = ("index", "count")

    def __init__(self, index: int, count: int):
        self.index, self.count = index, count


def with_split_starts(splits: list, continuous: bool = False, continues: bool = False,
                      continued: bool = False) -> Iterable:
    """The batches of `splits` (one iterable of batches each), after the subtask's `SplitLayout`
    (core/splits.py), a SplitStart before each when they are several splits (not one continuous
    stream)."""
    count = len(splits)
    yield SplitLayout(1 if continuous and count else count, continues, continued)
    for index, split in enumerate(splits):
        if count > 1 and not continuous:
            yield SplitStart(index, count)
        yield from split


class WatermarkedBatch:
    """A batch with the watermark in force before each of its rows (`arrivals`, int64, not
    decreasing) and, when known, every watermark advance inside it (`marks`: row positions
    and watermarks, each passed on before the row at its position): what a STREAMING window
    head reads from typed exchange files in place of one batch per record
    (exchange/watermarked.py)."""

    __slots__ = ("batch", "arrivals", "marks")

    def __init__(self, batch: pa.RecordBatch, arrivals: np.ndarray, marks: Optional[tuple] = None):
        self.batch = batch
        self.arrivals = arrivals
        self.marks = marks


def batch_rows(batch: pa.RecordBatch) -> tuple[list, Optional[list]]:
    """(the rows as dicts, their timestamps or None): one conversion per batch."""
    ts = timestamps(batch)
    return batch_records(without_timestamps(batch)), (None if ts is None else ts.to_pylist())


def rows_to_batch(values: list, ts: Optional[list], label: str) -> pa.RecordBatch:
    """Dict records (and their timestamps, None: none has one) as one batch; the columns
    are the records' fields in order of first appearance, a missing field is null."""
    if not _ONLY_DICT.issuperset(map(type, values)):
        bad = next(v for v in values if type(v) is not dict)
        raise TypeError(f"{label} takes records as dicts (field -> value) to build its batches, got a "
                        f"{type(bad).__name__}: {bad!r:.200}. Map the records to dicts before it.")
    names = list(values[0]) if values else []
    try:  # the common case, checked in C: every record has the first record's fields
        if set(map(len, values)) != {len(names)}:
            raise KeyError
        columns = {n: list(map(itemgetter(n), values)) for n in names}
    except KeyError:
        names = list(dict.fromkeys(k for v in values for k in v))
        columns = {n: [v.get(n) for v in values] for n in names}
    if TS_COLUMN in columns:
        raise ValueError(f"{label}: field name {TS_COLUMN!r} is reserved for event timestamps; rename it")
    if ts is not None:
        columns[TS_COLUMN] = pa.array(ts, pa.int64())
    return pa.RecordBatch.from_pydict(columns)


def rows_emitter(emit: Callable[[Any], None], cell: TimestampCell) -> BatchEmitter:
    """Hands a batch's rows one by one to a per-record emitter, each with its timestamp in
    the cell (restored afterwards: the batch may have been flushed mid-record upstream)."""
    def emit_rows(batch: pa.RecordBatch) -> None:
        rows, ts = batch_rows(batch)
        if ts is None:
            saved, cell.value = cell.value, None
            for v in rows:
                emit(v)
        else:
            saved = cell.value
            for v, t in zip(rows, ts):
                cell.value = t
                emit(v)
        cell.value = saved

    return emit_rows


def _fan_out(emitters: list) -> Optional[BatchEmitter]:
    if not emitters:
        return None
    if len(emitters) == 1:
        return emitters[0]

    def fan_out(batch: pa.RecordBatch) -> None:
        for e in emitters:
            e(batch)

    return fan_out


def batch_emitter(output: Output, tag_id: Optional[str], timed: bool, cell: TimestampCell) -> Optional[BatchEmitter]:
    """callable(batch) delivering to what consumes `output`'s main (tag_id None) or side
    output `tag_id`; None when nothing does."""
    if isinstance(output, ChainingOutput):
        if output.output_tag != tag_id:
            return None
        target = output.target
        if getattr(target, "takes_batches", False):
            return target.process_batch
        if target.kind is OperatorKind.SINK:
            direct = sink_batch_emitter(target)
            if direct is not None:
                return direct
        return rows_emitter(target.handler(timed), cell)
    if isinstance(output, RecordWriterOutput):
        if output.output_tag != tag_id:
            return None
        return record_writer_batch_emitter(output, cell)
    if isinstance(output, BroadcastingOutputCollector):
        return _fan_out([e for o in output.outputs if (e := batch_emitter(o, tag_id, timed, cell)) is not None])
    # split/select (DirectedOutput) and any other output: record by record
    emit = output.main_emitter(timed) if tag_id is None else output.side_emitter(tag_id, timed)
    return None if emit is None else rows_emitter(emit, cell)


def sink_batch_emitter(sink_op) -> Optional[BatchEmitter]:
    """A sink whose writer takes batches (`write_batch`): a batch goes in whole."""
    write_batch = getattr(sink_op.writer, "write_batch", None)
    if write_batch is None:
        return None
    metrics = sink_op.metrics

    def write(batch: pa.RecordBatch) -> None:
        metrics.records_in += batch.num_rows
        sink_op.guarded("process", lambda: write_batch(batch))

    return write


def record_writer_batch_emitter(output: RecordWriterOutput, cell: TimestampCell) -> BatchEmitter:
    """An edge leaving the chain: a whole batch to one channel when the partitioner sends
    every record to the same one (FORWARD, GLOBAL) and the writer takes batches; split by
    channel per column on a HASH edge keyed by a field (graph/field_keys.py); else per
    record through the partitioner."""
    rw = output.record_writer
    write_batch = getattr(rw.channel_sink, "write_batch", None)
    per_record = rows_emitter(output.main_emitter(False) if output.output_tag is None
                              else output.side_emitter(output.output_tag, False), cell)
    if write_batch is None:
        return per_record
    fail = output.fail
    if type(rw.selector) is int:
        channel = rw.selector

        def write(batch: pa.RecordBatch) -> None:
            try:
                write_batch(channel, batch)
            except Exception as exc:
                fail(exc, f"<a batch of {batch.num_rows} rows>")

        return _combining(rw.combiner, write)
    key_field = getattr(rw.selector, "key_field", None)
    if key_field is None:
        return per_record
    channel_of = _channels_by_key(rw.selector.max_parallelism, rw.selector.num_channels)

    def write_by_key(batch: pa.RecordBatch) -> None:
        encoded = key_codes(batch.column(key_field)) if key_field in batch.schema.names else None
        if encoded is None:  # no such column, or keys of a type grouped per record
            per_record(batch)
            return
        codes, keys = encoded
        channels = np.fromiter(map(channel_of, keys), dtype=np.int64, count=len(keys))[codes]
        try:
            for ch in np.unique(channels).tolist():
                write_batch(ch, batch.filter(pa.array(channels == ch)))
        except Exception as exc:
            fail(exc, f"<a batch of {batch.num_rows} rows>")

    return _combining(rw.combiner, write_by_key)


def _combining(combiner, write: BatchEmitter) -> BatchEmitter:
    """`write`, or batches through the edge's combiner (core/combiner.py) into `write`."""
    if combiner is None:
        return write
    combiner.write = write

    def combine(batch: pa.RecordBatch) -> None:
        if not combiner.add(batch):
            write(batch)

    return combine


def batch_channels(rw) -> Callable[[pa.RecordBatch], Optional[np.ndarray]]:
    """callable(batch) -> each row's channel (int64) on a record writer whose selector is one
    channel or HASH keyed by a field, as per record; None for a batch whose keys are grouped
    per record (no such column, or keys of another type)."""
    if type(rw.selector) is int:
        return lambda batch: np.full(batch.num_rows, rw.selector, dtype=np.int64)
    key_field = rw.selector.key_field
    channel_of = _channels_by_key(rw.selector.max_parallelism, rw.selector.num_channels)

    def channels(batch: pa.RecordBatch) -> Optional[np.ndarray]:
        encoded = key_codes(batch.column(key_field)) if key_field in batch.schema.names else None
        if encoded is None:
            return None
        codes, keys = encoded
        return np.fromiter(map(channel_of, keys), dtype=np.int64, count=len(keys))[codes]

    return channels


def _channels_by_key(max_parallelism: int, num_channels: int) -> Callable[[Any], int]:
    """key -> channel as the HASH partitioner assigns it (cached: few keys, many batches)."""
    cache: dict = {}

    def channel_of(key: Any) -> int:
        ch = cache.get(key)
        if ch is None:
            ch = channel_for_key(key, max_parallelism, num_channels)
            if len(cache) < 65536:
                cache[key] = ch
        return ch

    return channel_of


def run_columnar(head, inputs: ColumnarInput, split_listeners: Iterable = (), layout_listeners: Iterable = ()) -> None:
    """The input loop of a head fed batches: a batch operator takes them as they are; a
    source hands them on (counting its records) to what its output feeds."""
    from airflow_flinkchain.runtime.core.elements import Watermark, WatermarkStatus
    from airflow_flinkchain.runtime.core.errors import READ_INPUT, ChainExecutionError

    if getattr(head, "takes_batches", False):
        take = head.process_batch
    else:
        emit = batch_emitter(head.output, None, False, head.cell)
        metrics = head.metrics

        def take(batch: pa.RecordBatch) -> None:
            metrics.records_in += batch.num_rows
            metrics.records_out += batch.num_rows
            if emit is not None:
                emit(batch)
    try:
        for element in inputs.elements:
            t = type(element)
            if t is Watermark:
                head.process_watermark(element)
            elif t is WatermarkStatus:
                head.process_watermark_status(element)
            elif t is SplitStart:
                for listener in split_listeners:
                    listener(element.index, element.count)
            elif t is SplitLayout:
                for listener in layout_listeners:
                    listener(element)
            elif t is WatermarkedBatch:
                if element.batch.num_rows:
                    head.process_watermarked_batch(element.batch, element.arrivals, element.marks)
            elif element.num_rows:
                take(element)
    except ChainExecutionError:
        raise
    except Exception as exc:
        raise head.error(READ_INPUT, exc) from exc


def conform(batch: pa.RecordBatch, schema: pa.Schema, label: str) -> pa.RecordBatch:
    """`batch` as the declared schema (its timestamp column kept), or RecordTypeError."""
    names = [n for n in batch.schema.names if n != TS_COLUMN]
    missing = [n for n in schema.names if n not in names]
    extra = [n for n in names if n not in schema.names]
    if missing or extra:
        what = ", ".join(w for w in (missing and f"missing field(s) {missing}", extra and
                                     f"undeclared field(s) {extra}") if w)
        raise RecordTypeError(f"{label}: output batch with columns {names} does not fit output_type: {what}. "
                              "Add the fields to output_type or change the function.")
    arrays, fields = [], list(schema)
    for f in schema:
        col = batch.column(f.name)
        if not col.type.equals(f.type):
            t = col.type
            if not _castable(t, f.type):
                raise RecordTypeError(f"{label}: field {f.name!r} expects {f.type} but the batch has {t}. "
                                      "Fix the function or declare a wider type in output_type.")
            try:
                col = col.cast(f.type, safe=True)
            except _CAST_ERRORS as exc:
                raise RecordTypeError(f"{label}: field {f.name!r} expects {f.type} but the batch has {t} "
                                      f"values that do not fit: {exc}. Fix the function or declare a wider "
                                      "type in output_type.") from None
        if not f.nullable and col.null_count:
            raise RecordTypeError(f"{label}: field {f.name!r} is declared not null but {col.null_count} rows "
                                  "of the batch are null.")
        arrays.append(col)
    if TS_COLUMN in batch.schema.names:
        arrays.append(batch.column(TS_COLUMN))
        fields.append(pa.field(TS_COLUMN, pa.int64()))
    return pa.RecordBatch.from_arrays(arrays, schema=pa.schema(fields))


_FAMILIES = (pa.types.is_integer, pa.types.is_floating, pa.types.is_decimal, pa.types.is_boolean,
             lambda t: pa.types.is_string(t) or pa.types.is_large_string(t),
             lambda t: pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t),
             pa.types.is_temporal)
# numbers widen as the per-record conversion takes them: an int into a float or decimal field,
# a (whole) float into an integer one; anything else only within its own kind
_ALSO = {pa.types.is_integer: (pa.types.is_floating,), pa.types.is_floating: (pa.types.is_integer,),
         pa.types.is_decimal: (pa.types.is_integer,)}


def _castable(source: pa.DataType, target: pa.DataType) -> bool:
    """Whether a column of `source` may be cast into a declared `target` field (Arrow also
    casts numbers to strings and strings to numbers; records of those types do not fit)."""
    if pa.types.is_null(source) or not any(f(target) for f in _FAMILIES):
        return True
    for family in _FAMILIES:
        if family(target):
            return family(source) or any(other(source) for other in _ALSO.get(family, ()))
    return True  # pragma: no cover
