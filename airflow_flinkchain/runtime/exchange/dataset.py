"""Exchange datasets: how records leave one chain and enter the next.

Flink's network shuffle becomes one Parquet dataset per chain out-edge and run
(paths: see `exchange_fs`). Upstream subtask s writes, for every channel k of
the edge, exactly one file `channel={k}/part-{s}.parquet` (empty when no record
went there), so a reader can check it got every upstream subtask's file.
Downstream subtask k reads exactly `channel={k}` of each input edge.

File format
  * pickled (default): columns `payload` (binary: the pickled record) and `ts`
    (int64, nullable: the event timestamp), like PyFlink's default
    PickledByteArray type.
  * typed (the stream declares `output_type`): the declared columns plus `_ts`,
    readable by plain Spark/Arrow; see `exchange_types`.
  * watermarks are not rows: they are stored in the file's key-value metadata
    `flinkchain.watermarks` as JSON `[[position, watermark], ...]`, position =
    number of records of the file written before the watermark. Watermarks
    written in bulk (`write_watermarked_batch`: a columnar timestamp assigner's
    watermark after every record) are stored instead as `flinkchain.watermark_array`,
    the same pairs as zlib-compressed little-endian int64 (base64), when the file
    has no watermark status. The reader replays them at those positions, so each channel file is one ordered input
    channel for the downstream WatermarkValve. A watermark status is stored the
    same way, as `"idle"` or `"active"` in place of the watermark.
  * metadata `flinkchain.edge`, `flinkchain.channel`, `flinkchain.subtask`,
    `flinkchain.records`, `flinkchain.format` let the reader reject a foreign,
    misplaced or truncated file with an error naming the edge and the file.

Writers buffer records per channel into Arrow batches of `BATCH_ROWS` rows and
stream them into one Parquet file per channel (never one file per record).
Pickled records are serialized when written (so a later mutation of the object
cannot change what was sent, as Flink's RecordWriter serializes at once).
"""

from __future__ import annotations

import base64
import json
import pickle
import zlib
from typing import Any, Iterator, Optional

import cloudpickle
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from airflow_flinkchain.runtime.core.batches import batch_rows, conform
from airflow_flinkchain.runtime.core.elements import StreamRecord, Watermark, WatermarkStatus
from airflow_flinkchain.runtime.exchange.layout import Location, channel_dir_name, part_name
from airflow_flinkchain.runtime.exchange.handoff import ACTIVE, IDLE, ChannelMarks, merged_pairs
from airflow_flinkchain.runtime.exchange.schema import (
    RecordTypeError,
    batch_to_records,
    parse_output_type,
    records_to_batch,
    with_ts,
    TS_COLUMN,
)
from airflow_flinkchain.runtime.core.valve import WatermarkValve

BATCH_ROWS = 65536
_IDLE, _ACTIVE = IDLE, ACTIVE  # watermark statuses among the stored watermarks
PICKLED_SCHEMA = pa.schema([("payload", pa.binary()), ("ts", pa.int64())])
META_PREFIX = "flinkchain."


class ExchangeError(RuntimeError):
    """Exchange data is missing, incomplete, corrupt or foreign."""


class _Dumps:
    """pickle.dumps, falling back for good to cloudpickle once a record needs it
    (instances of classes defined in a DAG file loaded by value)."""

    def __init__(self):
        self.fn = pickle.dumps

    def __call__(self, obj: Any) -> bytes:
        try:
            return self.fn(obj, protocol=5)
        except (pickle.PicklingError, AttributeError, TypeError):
            if self.fn is cloudpickle.dumps:
                raise
            self.fn = cloudpickle.dumps
            return self.fn(obj, protocol=5)


class ChannelFileWriter:
    """One Parquet file: one channel of one edge written by one upstream subtask."""

    def __init__(self, location: Location, schema: Optional[pa.Schema], label: str, meta: dict):
        self.location = location
        self.schema = schema
        self.label = label
        self.meta = meta
        self.arrow_schema = with_ts(schema) if schema is not None else PICKLED_SCHEMA
        self.fields = schema.names if schema is not None else None
        self.dumps = _Dumps()
        self.values: list = []  # pickled payloads, or dict records for typed files
        self.ts: list = []
        self.watermarks: list = []  # (position, watermark or status) pairs, and (n, 2) arrays of them
        self.bulk = False  # whether an array is among them
        self.count = 0
        self._writer: Optional[pq.ParquetWriter] = None

    def add(self, record: Any, ts: Optional[int] = None) -> None:
        if self.fields is None:
            self.values.append(self.dumps(record))
        else:
            self.values.append(dict(record) if isinstance(record, dict) else record)
        self.ts.append(ts)
        if len(self.values) >= BATCH_ROWS:
            self.flush()

    def add_batch(self, batch: pa.RecordBatch) -> None:
        """A whole batch of dict records (with or without the `_ts` column): written as it is
        to a typed file (cast to the declared columns), pickled record by record otherwise."""
        if self.fields is None:
            rows, ts = batch_rows(batch)
            for row, t in zip(rows, ts or [None] * len(rows)):
                self.add(row, t)
            return
        self.flush()
        batch = conform(batch, self.schema, self.label)
        if TS_COLUMN not in batch.schema.names:
            batch = batch.append_column(TS_COLUMN, pa.nulls(batch.num_rows, pa.int64()))
        self._open().write_batch(batch)
        self.count += batch.num_rows

    def add_watermark(self, watermark: int) -> None:
        self.watermarks.append((self.count + len(self.values), int(watermark)))

    def add_watermark_status(self, idle: bool) -> None:
        self.watermarks.append((self.count + len(self.values), _IDLE if idle else _ACTIVE))

    def add_watermark_block(self, pairs: np.ndarray) -> None:
        """Watermarks in bulk: an (n, 2) int64 array of [position, watermark]."""
        if len(pairs):
            self.watermarks.append(pairs)
            self.bulk = True

    def _stored_watermarks(self) -> dict:
        """The metadata entries of the watermarks: JSON pairs, or one array when written in bulk."""
        if not self.bulk:
            return {"watermarks": self.watermarks}
        blocks = [np.asarray([m], dtype=np.int64) if type(m) is tuple else m for m in self.watermarks
                  if type(m) is not tuple or type(m[1]) is int]
        if len(blocks) != len(self.watermarks):  # a watermark status: JSON
            return {"watermarks": [m for w in self.watermarks
                                   for m in (w.tolist() if isinstance(w, np.ndarray) else [w])]}
        pairs = np.concatenate(blocks).astype("<i8", copy=False)
        return {"watermarks": [], "watermark_array": base64.b64encode(zlib.compress(pairs.tobytes(), 1)).decode()}

    def flush(self) -> None:
        if not self.values:
            return
        if self.fields is None:
            batch = pa.RecordBatch.from_arrays(
                [pa.array(self.values, pa.binary()), pa.array(self.ts, pa.int64())], schema=PICKLED_SCHEMA
            )
        else:
            batch = records_to_batch(self.values, self.ts, self.schema, self.label)
        self._open().write_batch(batch)
        self.count += len(self.values)
        self.values, self.ts = [], []

    def _open(self) -> pq.ParquetWriter:
        if self._writer is None:
            self.location.parent().makedirs()
            # written once and read once: no dictionary pages (their encoding is most of the
            # writing time of unique values such as timestamps) nor column statistics
            self._writer = pq.ParquetWriter(self.location.path, self.arrow_schema, filesystem=self.location.fs,
                                            use_dictionary=False, write_statistics=False)
        return self._writer

    def close(self) -> int:
        self.flush()
        writer = self._open()
        meta = {**self.meta, "records": self.count, **self._stored_watermarks(),
                "format": "pickle" if self.fields is None else "typed"}
        writer.add_key_value_metadata({META_PREFIX + k: json.dumps(v) for k, v in meta.items()})
        writer.close()
        return self.count

    def abort(self) -> None:
        if self._writer is not None:
            try:
                self._writer.close()
            except Exception:
                pass


class DatasetWriter:
    """What one subtask writes to one dataset (an edge with `num_channels`
    channels, or a collect sink: one channel, no channel directories)."""

    def __init__(self, location: Location, dataset: str, subtask: int, num_channels: int = 1,
                 output_type: Any = None, label: str = "", channel_dirs: bool = True):
        self.location = location
        self.dataset = dataset
        self.subtask = subtask
        self.num_channels = num_channels
        self.label = label or dataset
        self.schema = parse_output_type(output_type, self.label)
        self.channel_dirs = channel_dirs
        self.channels: list[Optional[ChannelFileWriter]] = [None] * num_channels

    def channel(self, k: int) -> ChannelFileWriter:
        w = self.channels[k]
        if w is None:
            loc = self.location.join(channel_dir_name(k), part_name(self.subtask)) if self.channel_dirs \
                else self.location.join(part_name(self.subtask))
            meta = {"edge": self.dataset, "channel": k, "subtask": self.subtask}
            w = self.channels[k] = ChannelFileWriter(loc, self.schema, self.label, meta)
        return w

    def write(self, channel: int, record: Any, ts: Optional[int] = None) -> None:
        w = self.channels[channel]
        if w is None:
            w = self.channel(channel)
        w.add(record, ts)

    @property
    def records(self) -> int:
        """Records written so far (all channels)."""
        return sum(w.count + len(w.values) for w in self.channels if w is not None)

    def write_batch(self, channel: int, batch: pa.RecordBatch) -> None:
        self.channel(channel).add_batch(batch)

    def write_watermark(self, channel: int, watermark: int) -> None:
        self.channel(channel).add_watermark(watermark)

    def write_watermarked_batch(self, channels: np.ndarray, batch: pa.RecordBatch, after: np.ndarray,
                                watermarks: np.ndarray) -> None:
        """Row i of `batch` to channel `channels[i]`, and watermark j to every channel right after
        row `after[j]`: what writing the rows one by one with `broadcast_watermark` after the
        rows in `after` stores, with the watermarks kept in bulk."""
        for k in range(self.num_channels):
            w = self.channel(k)
            mask = channels == k
            base = w.count + len(w.values)
            if mask.any():
                w.add_batch(batch.filter(pa.array(mask)))
            if len(after):
                positions = base + np.cumsum(mask, dtype=np.int64)[after]
                w.add_watermark_block(np.column_stack([positions, watermarks]))

    def broadcast_watermark(self, watermark: int) -> None:
        """The same watermark to every channel (the per-record path of STREAMING mode)."""
        channels = self.channels
        if None in channels:
            for k in range(self.num_channels):
                self.channel(k)
        watermark = int(watermark)
        for w in channels:
            w.watermarks.append((w.count + len(w.values), watermark))

    def write_watermark_status(self, channel: int, idle: bool) -> None:
        self.channel(channel).add_watermark_status(idle)

    def close(self) -> list[int]:
        """Write every channel's file (empty ones too); records per channel."""
        return [self.channel(k).close() for k in range(self.num_channels)]

    def abort(self) -> None:
        for w in self.channels:
            if w is not None:
                w.abort()


class ChannelFile:
    """One committed channel file, checked on open; `elements()` yields the
    core's input elements: bare values (no timestamp), StreamRecord(value, ts),
    Watermark(ts) at the positions they were written."""

    def __init__(self, fs, path: str, dataset: str, channel: Optional[int]):
        self.path = path
        self.dataset = dataset
        try:
            self.file = pq.ParquetFile(fs.open_input_file(path))
            raw = self.file.metadata.metadata or {}
        except Exception as exc:
            raise self._bad(f"is not a readable Parquet file ({type(exc).__name__}: {exc})") from None
        meta = {k.decode()[len(META_PREFIX):]: json.loads(v) for k, v in raw.items()
                if k.decode().startswith(META_PREFIX)}
        if meta.get("edge") != dataset or (channel is not None and meta.get("channel") != channel):
            raise self._bad(f"was not written for this dataset/channel (found edge={meta.get('edge')!r}, "
                            f"channel={meta.get('channel')!r})")
        if self.file.metadata.num_rows != meta.get("records"):
            raise self._bad(f"holds {self.file.metadata.num_rows} rows but was written with {meta.get('records')}")
        self.format = meta.get("format")
        packed = meta.get("watermark_array")
        #: the stored [position, watermark] pairs as an (n, 2) int64 array when written in bulk
        self.watermark_array = None if packed is None else np.frombuffer(
            zlib.decompress(base64.b64decode(packed)), dtype="<i8").reshape(-1, 2)
        self._watermarks = meta.get("watermarks") or []
        self.records = meta["records"]
        self.marks = ChannelMarks.of_pairs(self._watermarks, self.records)  # statuses: exchange/handoff.py
        self.initially_idle = self.marks.initially_idle

    @property
    def watermarks(self) -> list:
        """The stored watermarks as [position, watermark or status] pairs, in order."""
        if self.watermark_array is not None and not self._watermarks:
            self._watermarks = self.watermark_array.tolist()
        return self._watermarks

    def _bad(self, why: str) -> ExchangeError:
        return ExchangeError(f"exchange dataset {self.dataset!r}: file {self.path} {why}; "
                             "clear the upstream task to rewrite the dataset")

    def elements(self) -> Iterator:
        try:
            yield from self._elements()
        except ExchangeError:
            raise
        except Exception as exc:
            raise self._bad(f"could not be decoded ({type(exc).__name__}: {exc})") from None

    def _elements(self) -> Iterator:
        marks = self.watermarks
        n_marks = len(marks)
        m = 0  # next stored watermark (an index: the list may hold one entry per record)
        position = 0
        loads, wm_type = pickle.loads, Watermark
        for batch in self.file.iter_batches(batch_size=BATCH_ROWS):
            if self.format == "pickle":
                values = [loads(p) for p in batch.column(0).to_pylist()]
                ts_col = batch.column(1)
            else:
                values, _ = batch_to_records(batch)
                ts_col = batch.column(TS_COLUMN)
            if ts_col.null_count == len(ts_col):
                elements = values
            else:
                elements = [v if t is None else StreamRecord(v, t) for v, t in zip(values, ts_col.to_pylist())]
            end = position + len(elements)
            if m == n_marks or marks[m][0] >= end:
                yield from elements  # no watermark inside this batch
                position = end
                continue
            start = position
            while m < n_marks and marks[m][0] < end:
                at = marks[m][0]
                if at > position:
                    yield from elements[position - start:at - start]
                    position = at
                mark = marks[m][1]
                yield wm_type(mark) if type(mark) is int else _marker(mark)
                m += 1
            yield from elements[position - start:]
            position = end
        while m < n_marks:
            yield _marker(marks[m][1])
            m += 1


def batch_elements(f: ChannelFile) -> Iterator:
    """A typed channel file as Arrow batches (declared columns and `_ts`), with its watermarks
    at their positions (a batch is split where a watermark falls): the input of a batch head."""
    pending = list(f.watermarks)
    position = 0
    try:
        for batch in f.file.iter_batches(batch_size=BATCH_ROWS):
            while pending:
                at = pending[0][0] - position
                if at >= batch.num_rows:
                    break
                if at > 0:
                    yield batch.slice(0, at)
                    batch, position = batch.slice(at), position + at
                yield _marker(pending.pop(0)[1])
            position += batch.num_rows
            yield batch
    except Exception as exc:
        raise f._bad(f"could not be decoded ({type(exc).__name__}: {exc})") from None
    for _, wm in pending:
        yield _marker(wm)


def merged_batches(files: list[ChannelFile]) -> Iterator:
    """As `merged_input`, for typed channel files read as batches (`batch_elements`)."""
    if not any(f.watermarks for f in files):
        return (el for f in files for el in batch_elements(f))
    valve = WatermarkValve(len(files))
    for i, f in enumerate(files):
        if f.initially_idle:
            valve.input_watermark_status(i, True)
    return valve.merge(merged_pairs(files, batch_elements, valve))


def _marker(mark: Any) -> Any:
    """A stored watermark (an int) or watermark status ("idle" / "active")."""
    if isinstance(mark, str):
        return WatermarkStatus.IDLE if mark == _IDLE else WatermarkStatus.ACTIVE
    return Watermark(mark)


def open_channel(location: Location, dataset: str, channel: Optional[int],
                 expected_files: Optional[int] = None) -> list[ChannelFile]:
    """The files of one channel of a committed dataset, in upstream-subtask order
    (`channel=None`: a dataset without channel directories, e.g. collect)."""
    if not location.exists():
        raise ExchangeError(
            f"exchange dataset {dataset!r} is not committed at {location.uri}: the upstream chain "
            "has not finished successfully for this run; run (or clear) the upstream task first"
        )
    folder = location.join(channel_dir_name(channel)) if channel is not None else location
    files = folder.list_files(recursive=False)
    if expected_files is not None and len(files) != expected_files:
        raise ExchangeError(
            f"exchange dataset {dataset!r} channel {channel} at {folder.uri} has {len(files)} part files, "
            f"expected {expected_files} (one per upstream subtask): the dataset is incomplete or was "
            "modified; clear the upstream task to rewrite it"
        )
    return [ChannelFile(location.fs, path, dataset, channel) for path in files]


def merged_input(files: list[ChannelFile], statuses: bool = False) -> Iterator:
    """The input of one downstream subtask: its channel files one after the other
    (deterministic: input edges in order, then upstream subtask order). When any
    file carries watermarks, they go through a WatermarkValve (one input
    channel per file): the subtask's watermark is the minimum over its inputs.
    `statuses`: also yield the combined WatermarkStatus when it changes (an input of a
    two-input operator, which leaves an input that is idle as a whole out of its watermark)."""
    if not files:
        return iter(())
    if not any(f.watermarks for f in files):
        return (el for f in files for el in f.elements())
    valve = WatermarkValve(len(files))
    for i, f in enumerate(files):
        if getattr(f, "initially_idle", False):
            # the files are read one after the other: a channel idle from its start must not
            # hold back the watermark while the files before it are read
            valve.input_watermark_status(i, True)
    if len(files) == 1:
        return valve.merge_single(files[0].elements(), statuses)
    return valve.merge(merged_pairs(files, _elements_of, valve), statuses)


def _elements_of(f: ChannelFile) -> Iterator:
    return f.elements()


def read_records(location: Location, dataset: str) -> list:
    """All record values of a committed single-channel dataset (collect sinks)."""
    out = []
    for f in open_channel(location, dataset, None):
        out.extend(el.value if type(el) is StreamRecord else el
                   for el in f.elements() if type(el) is not Watermark)
    return out


__all__ = [
    "BATCH_ROWS", "ChannelFile", "DatasetWriter", "ExchangeError", "RecordTypeError",
    "merged_input", "open_channel", "read_records",
]
