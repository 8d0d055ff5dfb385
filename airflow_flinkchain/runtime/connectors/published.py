"""Sinks published after a stream run's commit point (Delta tables; docs/stream-runs.md).

In a stream run the subtasks of such a sink write its records into the chain's staging
under the run (a single-channel dataset, as SQL sinks stage their rows), with the pickled
descriptor beside them; they move with the run into checkpoint n. After the commit point
`publish_staged` hands the records to the publisher registered for the descriptor type,
with a `Publication` naming stream, pipeline, sink and checkpoint: the publisher writes them
in one transaction of the external system that records the stream and the checkpoint id,
and writes nothing when it finds that id recorded for that stream already (a publication
repeated after an interruption). Another stream's records (the same pipeline started afresh,
its checkpoint ids 1, 2, ... again) never match.

Outside stream runs such a table sink may have a *batch writer* (`register_batch_writer`):
the subtasks stage (`BatchTableSink`, Spark; in memory under execute_local) and the driver
hands the run's records to it once all succeeded; it replaces the rows of the run.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterable, Optional

from airflow_flinkchain.runtime.connectors.base import ConnectorContext, SinkConnector, TypeRegistry
from airflow_flinkchain.runtime.connectors.collect import DatasetSinkWriter
from airflow_flinkchain.runtime.core.elements import StreamRecord, Watermark
from airflow_flinkchain.runtime.exchange.dataset import DatasetWriter, open_channel
from airflow_flinkchain.runtime.exchange.layout import Location

DESCRIPTOR = "_sink.pkl"

_PUBLISHERS = TypeRegistry()  # publish(descriptor, rows, Publication) -> dict
_BATCH_WRITERS = TypeRegistry()  # write(descriptor, rows, BatchRun) -> dict
_CHECKS = TypeRegistry()  # check(descriptor, label): raises when the sink could not publish


@dataclass(frozen=True)
class Publication:
    """One sink's output of one committed checkpoint."""

    pipeline: str
    sink_key: str
    checkpoint: int
    label: str
    run_id: str = ""
    stream_id: str = ""  # "" for a stream begun without an identity (checkpoints.stream_id_of)

    @property
    def app_id(self) -> str:
        """The id the external system records the checkpoint under: one per stream, pipeline and
        sink (`flinkchain/{pipeline}/{sink}/{stream_id}`; a stream without an identity keeps
        `flinkchain/{pipeline}/{sink}`, so its earlier records still match)."""
        base = f"flinkchain/{self.pipeline}/{self.sink_key}"
        return f"{base}/{self.stream_id}" if self.stream_id else base


class PublicationError(RuntimeError):
    """A committed checkpoint's output could not be published: the message names the sink, the
    checkpoint, which settings were used and the way out."""


@dataclass(frozen=True)
class BatchRun:
    """One batch run's output of one table sink."""

    dag_id: str
    run_id: str
    label: str

    def columns(self, sink: Any) -> dict:
        """{column: value} keying this run's rows in the sink's table (`run_id_column`, and
        `dag_id_column` unless None): a retried run replaces the rows they select."""
        keys = {sink.run_id_column: self.run_id}
        if sink.dag_id_column is not None:
            keys[sink.dag_id_column] = self.dag_id
        return keys

    def check_columns(self, keys: dict, names: list, table: str) -> None:
        """Fails naming the first key column that the existing `table` (described, e.g. "Delta
        table '/lake/t'") lacks."""
        missing = [c for c in keys if c not in names]
        if missing:
            raise ValueError(f"{self.label}: {table} has no column {missing[0]!r}, which keys a batch run's rows "
                             "(a retried run replaces them); write batch runs to a table created by a batch run, "
                             "or name existing columns with run_id_column= / dag_id_column=")


def register_batch_writer(descriptor_type: type) -> Callable:
    """Decorator: `write(descriptor, rows, batch_run) -> {"records": n, ...}` for a sink type
    outside stream runs; it replaces the rows of the run (a retried run's output, not twice)."""
    return _BATCH_WRITERS.register(descriptor_type)


def batch_writer_of(descriptor: Any) -> Optional[Callable]:
    return _BATCH_WRITERS.get(descriptor)


class BatchTableSink(SinkConnector):
    """A table sink with a batch writer in a (non-stream) Spark run: the subtasks stage, the
    driver writes the run's records through the batch writer when all succeeded."""

    kind = "table"
    commits_first = True  # the external commit can fail: before anything else becomes visible

    def __init__(self, descriptor: Any, ctx: ConnectorContext):
        self.descriptor, self.key, self.label = descriptor, ctx.key, ctx.label
        self.location = ctx.attempt.stage(ctx.key)
        self.dag_id = ctx.area.dag_id

    def create_writer(self, subtask: int) -> DatasetSinkWriter:
        return staged_writer(self.location, self.key, subtask, self.label)

    def commit(self, run_id: str, records: int) -> dict:
        rows = staged_rows(self.location, self.key) if self.location.exists() else []
        return batch_writer_of(self.descriptor)(self.descriptor, rows, BatchRun(self.dag_id, run_id, self.label))


def register_publisher(descriptor_type: type) -> Callable:
    """Decorator: `publish(descriptor, rows, publication) -> {"records": n, ...}` for a sink type."""
    return _PUBLISHERS.register(descriptor_type)


def publisher_of(descriptor: Any) -> Optional[Callable]:
    return _PUBLISHERS.get(descriptor)


def register_publish_check(descriptor_type: type) -> Callable:
    """Decorator: `check(descriptor, label)` for a published sink type, raising an error that
    names the sink when it could not publish (e.g. its database driver is missing)."""
    return _CHECKS.register(descriptor_type)


def check_publishable(sinks: Iterable[tuple]) -> None:
    """Runs the check of each (descriptor, label): at a stream run's begin, so that a sink that
    could not publish fails the run before its commit point, not after it."""
    for descriptor, label in sinks:
        check = _CHECKS.get(descriptor)
        if check is not None:
            check(descriptor, label)


class StagedSinkConnector(SinkConnector):
    """A published sink inside a stream run's chain attempt: the subtasks stage, nothing is
    committed with the chain (the run's commit carries the staging into the checkpoint)."""

    kind = "staged"

    def __init__(self, location: Location, key: str, label: str):
        self.location, self.key, self.label = location, key, label

    def create_writer(self, subtask: int) -> DatasetSinkWriter:
        return staged_writer(self.location, self.key, subtask, self.label)

    def commit(self, run_id: str, records: int) -> dict:
        return {"kind": self.kind, "path": self.location.uri, "records": records}


def staged_writer(location: Location, key: str, subtask: int, label: str) -> DatasetSinkWriter:
    return DatasetSinkWriter(DatasetWriter(location, f"stage:{key}", subtask, 1, channel_dirs=False, label=label))


def write_descriptor(location: Location, descriptor: Any) -> None:
    import cloudpickle

    location.makedirs()
    with location.join(DESCRIPTOR).open_output() as f:
        f.write(cloudpickle.dumps(descriptor))


def staged_rows(location: Location, key: str) -> list:
    """The staged records in subtask order (values; timestamps and watermarks dropped)."""
    rows = []
    for f in open_channel(location, f"stage:{key}", None):
        rows.extend(el.value if type(el) is StreamRecord else el for el in f.elements() if type(el) is not Watermark)
    return rows


def read_descriptor(location: Location) -> Any:
    """The sink descriptor staged beside its records (as the run that committed had it)."""
    import pickle

    with location.fs.open_input_stream(location.join(DESCRIPTOR).path) as f:
        return pickle.loads(f.read())


def publication_target(descriptor: Any) -> str:
    """What a published sink writes to, apart from how it connects: a Delta path, an Iceberg or
    SQL table name."""
    return str(getattr(descriptor, "path", None) or getattr(descriptor, "table", None) or descriptor.describe())


def same_target(current: Any, recorded: Any) -> bool:
    """Whether the sink the pipeline has now writes where the recorded one did (its connection
    settings may differ: those are what a user fixes)."""
    return type(current) is type(recorded) and publication_target(current) == publication_target(recorded)


def publish_staged(location: Location, publication: Publication, descriptor: Any = None) -> dict:
    """Publish what `location` staged (idempotent by stream and checkpoint id: see the module
    docstring), with `descriptor`'s settings (default: the staged descriptor's)."""
    if descriptor is None:
        descriptor = read_descriptor(location)
    publish = publisher_of(descriptor)
    if publish is None:
        raise TypeError(f"{publication.label}: no publisher registered for {type(descriptor).__name__}")
    return publish(descriptor, staged_rows(location, publication.sink_key), publication)
