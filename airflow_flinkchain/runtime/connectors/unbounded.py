"""Sources of stream runs: what a run reads, from the positions the last run committed.

`plan_stream_source` runs on the driver at the start of a chain attempt (Flink's split
enumerator): it asks the source what is available now and assigns each split's range
[committed position, available end) to a subtask. `StreamSourceReader` reads those ranges
in the subtasks (Flink's split reader). The splits of an `UnboundedSource` go to subtask
(index among the sorted split ids) % parallelism in every run, so a split stays with its
subtask (and its watermark generator) while the parallelism is unchanged; new files go
in contiguous ranges of their sorted paths. Every source kind goes through the same three steps - discover, assign, read:

* `UnboundedSource` (io/sources.py): the user's discover / initial_position / read_split,
  or for a built-in one (`NatsJetStreamSource`) the implementation registered for its
  type with `register_unbounded`;
* `FileSource(monitor=True)`: splits are the files not read before (sorted; names
  starting with '.' or '_' skipped), a read file whose size or modification time
  changed is an error; positions {"files": {path: [size, mtime_ns]}};
* `SqlSource(incremental_column=...)`: the id ranges (above, upto] of the rows visible now
  and not read before, without waiting for writers in progress; the gaps between them are
  read by later runs (`sql_settle`); positions {"value", "emitted", "holds"};
* any other (bounded) source: read once, in the first run; positions {"bounded": "read"}.
"""

from __future__ import annotations

from itertools import chain
from typing import Any, Callable, Iterator, Optional

import pyarrow as pa

from airflow_flinkchain.io.sources import FileSource, SqlSource, UnboundedSource
from airflow_flinkchain.runtime.connectors.base import ConnectorContext, SourceReader, TypeRegistry, register_source
from airflow_flinkchain.runtime.core.batches import with_split_starts
from airflow_flinkchain.runtime.core.splits import SourceSplits
from airflow_flinkchain.runtime.exchange.layout import Location

BOUNDED_READ = {"bounded": "read"}

_IMPLEMENTATIONS = TypeRegistry()  # factory(descriptor) -> discover / initial_position / read_split


def register_unbounded(descriptor_type: type) -> Callable:
    """Class decorator: `factory(descriptor)` -> an object with `discover`, `initial_position`
    and `read_split` (as `UnboundedSource`'s) for a built-in unbounded source's descriptor."""
    return _IMPLEMENTATIONS.register(descriptor_type)


def splits_of(source: UnboundedSource) -> Any:
    """What discovers and reads the splits of `source`: its registered implementation, or itself."""
    factory = _IMPLEMENTATIONS.get(source)
    return source if factory is None else factory(source)


def is_unbounded(descriptor: Any) -> bool:
    return (isinstance(descriptor, UnboundedSource)
            or (isinstance(descriptor, FileSource) and descriptor.monitor)
            or (isinstance(descriptor, SqlSource) and descriptor.incremental_column is not None))


class StreamSourceReader(SourceReader):
    """Subtask k reads its assigned ranges [(split_id, start, end)] in order."""

    def __init__(self, descriptor: Any, path: Optional[str], label: str, assignments: list[list]):
        self.descriptor = descriptor
        self.path = path
        self.label = label
        self.assignments = assignments
        self.plain_values = isinstance(descriptor, FileSource)

    def _mine(self, subtask: int) -> list:
        return self.assignments[subtask] if subtask < len(self.assignments) else []

    def read(self, subtask: int, batches: Iterator[Any]) -> SourceSplits:
        """The subtask's ranges as one stream with one watermark (none: nothing new for it in
        this run, and it does not hold the watermark back: `core.splits`)."""
        if isinstance(self.descriptor, FileSource):  # rows without a Python frame each
            return SourceSplits([chain.from_iterable(map(pa.RecordBatch.to_pylist, self._file_batches(split_id)))
                                 for split_id, _start, _end in self._mine(subtask)], continuous=True)
        return SourceSplits([self._records(subtask)] if self._mine(subtask) else [], continuous=True)

    def _records(self, subtask: int) -> Iterator[Any]:
        if isinstance(self.descriptor, SqlSource):  # id ranges of one query, over one connection
            from airflow_flinkchain.runtime.connectors.sql_settle import read_rows

            d = self.descriptor
            return read_rows(_sql_url(d, self.label), d.query, dict(d.params), d.incremental_column,
                             self._mine(subtask))
        # chained, not re-yielded: no generator frame per record
        return chain.from_iterable(splits_of(self.descriptor).read_split(split_id, start, end)
                                   for split_id, start, end in self._mine(subtask))

    def read_batches(self, subtask: int, batches: Iterator[Any]) -> Optional[Iterator[Any]]:
        """A monitored file source's rows as Arrow batches (for a batch operator at the head of
        the chain), in file order; None for other sources (read as records)."""
        if not isinstance(self.descriptor, FileSource):
            return None
        return with_split_starts([self._file_batches(split_id) for split_id, _s, _e in self._mine(subtask)],
                                 continuous=True)

    def _file_batches(self, split_id: str) -> Iterator[pa.RecordBatch]:
        from airflow_flinkchain.runtime.connectors.file_rows import read_file_table
        from airflow_flinkchain.runtime.connectors.parquet_batches import BATCH_ROWS

        yield from read_file_table(self.descriptor, split_id, self.label)[0].to_batches(max_chunksize=BATCH_ROWS)


class NothingReader(SourceReader):
    """A bounded source after its first stream run."""

    plain_values = True

    def read(self, subtask: int, batches: Iterator[Any]) -> SourceSplits:
        return SourceSplits([])  # no split: does not hold the watermark back


def plan_stream_source(descriptor: Any, path: Optional[str], positions: Optional[dict], parallelism: int,
                       label: str, scope: Optional[str] = None) -> tuple[Optional[SourceReader], dict]:
    """(the reader of this run, or None: the source's ordinary reader reads it whole; the
    positions to commit when the run commits). `scope`: the stream reading the source
    (`stream_scope`; None outside stream runs)."""
    positions = dict(positions or {})
    if not is_unbounded(descriptor):
        if positions.get("bounded") == "read":
            return NothingReader(), positions
        return None, dict(BOUNDED_READ)
    if isinstance(descriptor, FileSource):
        ranges, new = _discover_files(descriptor, path, positions, label)
    elif isinstance(descriptor, SqlSource):
        ranges, new = _discover_rows(descriptor, positions, label)
    else:
        ranges, new = _discover_splits(descriptor, positions, label, scope)
    parallelism = parallelism if descriptor.parallel else 1
    n = len(ranges)
    if isinstance(descriptor, UnboundedSource):  # split i of all known splits -> subtask i % p, in every run
        assignments = [[r for i, r in enumerate(ranges) if i % parallelism == k and r[1] != r[2]]
                       for k in range(parallelism)]
    else:
        assignments = [ranges[k * n // parallelism:(k + 1) * n // parallelism] for k in range(parallelism)]
    return StreamSourceReader(descriptor, path, label, assignments), new


def stream_scope(pipeline: str, source_key: str, checkpoint_dir: str) -> str:
    """Who reads a source in stream runs: an implementation with a `scope` attribute is told
    (e.g. to own server-side state such as a replication slot)."""
    return f"pipeline {pipeline!r} source {source_key!r} checkpoint_dir {checkpoint_dir}"


def scoped_splits(source: UnboundedSource, scope: Optional[str]) -> Any:
    splits = splits_of(source)
    if hasattr(splits, "scope"):
        splits.scope = scope
    return splits


def confirm_committed(sources: dict, positions: dict, scopes: dict) -> None:
    """After a checkpoint committed: each unbounded source's implementation with a
    `committed(split positions)` method is told the positions it holds (e.g. to release
    what the server keeps for it). A failure is logged: the next run's discover retries."""
    import logging

    for key, descriptor in sources.items():
        if not isinstance(descriptor, UnboundedSource) or key not in positions:
            continue
        splits = scoped_splits(descriptor, scopes.get(key))
        if hasattr(splits, "committed"):
            try:
                splits.committed(dict(positions[key].get("splits") or {}))
            except Exception as exc:  # noqa: BLE001  (committed already; the next run catches up)
                logging.getLogger(__name__).warning("source %r: after the commit: %s", key, exc)


def _discover_splits(source: UnboundedSource, positions: dict, label: str,
                     scope: Optional[str] = None) -> tuple[list, dict]:
    committed = dict(positions.get("splits") or {})
    splits = scoped_splits(source, scope)
    try:
        available = splits.discover(dict(committed))
    except Exception as exc:
        raise RuntimeError(f"{label}: discover() of {type(source).__name__} failed: {exc}") from exc
    if not isinstance(available, dict):
        raise TypeError(f"{label}: {type(source).__name__}.discover() must return {{split_id: end position}}, "
                        f"got {type(available).__name__}")
    ranges = []
    for split_id in sorted(set(available) | set(committed), key=str):
        if split_id not in available:  # gone from the source: keeps its position
            ranges.append((split_id, committed[split_id], committed[split_id]))
            continue
        start = committed[split_id] if split_id in committed else splits.initial_position(split_id)
        end = available[split_id]
        ranges.append((split_id, start, end))  # empty ranges too: they keep the split -> subtask mapping
        committed[split_id] = end
    return ranges, {"splits": committed}


def _discover_files(source: FileSource, path: Optional[str], positions: dict, label: str) -> tuple[list, dict]:
    loc = Location(path or source.path)
    if not loc.exists():
        raise FileNotFoundError(f"{label}: monitored directory {loc.uri!r} does not exist; create it")
    read = dict(positions.get("files") or {})
    fresh = []
    for file_path in loc.list_files():  # sorted; '.'- and '_'-prefixed names (in progress) skipped
        info = loc.fs.get_file_info(file_path)
        stamp = [info.size, info.mtime_ns]
        uri = loc.uri + file_path[len(loc.path):] if "://" in loc.uri else file_path
        if uri in read:
            if list(read[uri]) != stamp:
                raise RuntimeError(f"{label}: file {uri!r} changed after an earlier run read it (size/modification "
                                   "time differ); files of a monitored directory must not change once visible: "
                                   "write them under a name starting with '.' or '_' and rename when complete")
            continue
        fresh.append((uri, 0, stamp))
        read[uri] = stamp
    return fresh, {"files": read}


def _sql_url(source: SqlSource, label: str) -> str:
    from airflow_flinkchain.runtime.connectors.sql import resolve_url

    return resolve_url(source.url, source.conn_id, label)


def _discover_rows(source: SqlSource, positions: dict, label: str) -> tuple[list, dict]:
    from airflow_flinkchain.runtime.connectors.sql_settle import plan_rows

    return plan_rows(source, _sql_url(source, label), positions, label)


@register_source(UnboundedSource)
class UnboundedSourceReader(SourceReader):
    """An unbounded source outside stream runs: read once, from its initial positions (the
    splits are planned on the driver when Spark asks for the input)."""

    def __init__(self, descriptor: UnboundedSource, ctx: ConnectorContext):
        self.descriptor = descriptor
        self.label = ctx.label
        self.planned: Optional[SourceReader] = None

    def input_dataframe(self, spark: Any, parallelism: int) -> Any:
        self.planned, _ = plan_stream_source(self.descriptor, None, None, parallelism, self.label)
        return None

    def read(self, subtask: int, batches: Iterator[Any]) -> Iterator[Any]:
        return self.planned.read(subtask, batches)
