"""Delta Lake tables at run time (deltalake, i.e. delta-rs): the publisher of `DeltaSink`.

One publication = one Delta commit: an append (`write_deltalake(mode="append")`) or a
merge (`DeltaTable.merge`, update all columns when the keys match, insert otherwise),
carrying the application transaction (app id, checkpoint id) Spark's and delta-rs's
writers use for idempotent streaming writes; the app id names the stream, pipeline and
sink (`Publication.app_id`), so a stream started afresh never finds an earlier one's.
Before writing, the table's recorded version for the app id is read: at or above the
checkpoint id, the output is in the table already and nothing is written. Delta's
optimistic concurrency makes a concurrent writer's commit and ours both land or ours
retry; the transaction version is checked again by the conflict checker, so two
publications of one checkpoint cannot both commit.
"""

from __future__ import annotations

import os
import urllib.parse
from typing import Any, Optional

from airflow_flinkchain.io.sinks import DeltaSink
from airflow_flinkchain.io.sources import DeltaSource
from airflow_flinkchain.runtime.connectors.base import ConnectorContext, register_sink
from airflow_flinkchain.runtime.connectors.published import (BatchRun, BatchTableSink, Publication,
                                                            register_batch_writer, register_publisher)
from airflow_flinkchain.runtime.connectors.unbounded import register_unbounded
from airflow_flinkchain.runtime.exchange.storage import delta_storage_options


def storage_of(table: Any) -> Optional[dict]:
    """delta-rs storage options of a DeltaSink / DeltaSource: the storage layer's credentials
    and endpoint, safe (conditional) commits on S3, then the descriptor's own options."""
    return delta_storage_options(table.path, table.storage_options)


def open_table(sink: DeltaSink) -> Optional[Any]:
    from deltalake import DeltaTable

    if not DeltaTable.is_deltatable(sink.path, storage_options=storage_of(sink)):
        return None
    return DeltaTable(sink.path, storage_options=storage_of(sink))


def local_table_root(path: str) -> Optional[str]:
    """The directory of a table on the local file system (a path or a file:// URI), else None."""
    parsed = urllib.parse.urlparse(path)
    if parsed.scheme == "file":
        return urllib.parse.unquote(parsed.path)
    return os.path.abspath(path) if not parsed.scheme else None


def pyarrow_dataset(table: Any, path: str):
    """The pyarrow dataset of a Delta table (`table` opened at `path`), read through a native
    pyarrow filesystem (the storage layer's, for object stores): deltalake's default filesystem
    is a Python handler whose buffers are Python objects, and a pre-buffered Parquet read can
    release the last of them on an Arrow I/O thread while the interpreter exits, which aborts
    the process ("terminate called without an active exception", exit 134; apache/arrow#34314)."""
    import pyarrow.fs as pafs

    root = local_table_root(path)
    if root is not None:
        return table.to_pyarrow_dataset(filesystem=pafs.SubTreeFileSystem(root, pafs.LocalFileSystem()))
    from airflow_flinkchain.runtime.exchange.layout import Location

    loc = Location(path)
    return table.to_pyarrow_dataset(filesystem=pafs.SubTreeFileSystem(loc.path, loc.fs))


def _arrow(sink: DeltaSink, rows: list, table: Optional[Any], label: str):
    import pyarrow as pa

    for row in rows:
        if not isinstance(row, dict):
            raise TypeError(f"{label}: Delta sink records must be dicts of column -> value, got {row!r}; map "
                            "the records to dicts before the sink")
    if sink.merge_keys:  # a keyed reduce emits every update: per key the run's last record wins
        latest = {}
        for row in rows:
            missing = [k for k in sink.merge_keys if row.get(k) is None]
            if missing:
                raise ValueError(f"{label}: record without a value for merge key {missing[0]!r}: {row!r}")
            latest[tuple(row[k] for k in sink.merge_keys)] = row
        rows = list(latest.values())
    if table is None:
        try:
            return pa.Table.from_pylist(rows)
        except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
            raise TypeError(f"{label}: the records do not make one table ({exc}); give every field one type")
    schema = pa.schema(table.schema().to_arrow())
    extra = sorted({k for row in rows for k in row} - set(schema.names))
    if extra:
        raise ValueError(f"{label}: the records have field(s) {extra} that Delta table {sink.path!r} has no column "
                         f"for (its columns: {schema.names}); drop them before the sink or add the columns")
    try:
        return pa.Table.from_pylist(rows, schema=schema)
    except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
        raise TypeError(f"{label}: the records do not fit the schema of Delta table {sink.path!r} ({exc}); "
                        f"its schema: {schema}") from None


def append_or_merge(sink: DeltaSink, data: Any, table: Any, props: Any, merge: bool) -> None:
    """One Delta commit: an append (a new table is always created by one), or an upsert on
    `sink.merge_keys`."""
    from deltalake import write_deltalake

    if table is None or not merge:
        write_deltalake(sink.path, data, mode="append", partition_by=list(sink.partition_by or ()) or None,
                        storage_options=storage_of(sink), commit_properties=props)
        return
    on = " AND ".join(f"t.`{k}` = s.`{k}`" for k in sink.merge_keys)
    (table.merge(data, on, source_alias="s", target_alias="t", commit_properties=props)
     .when_matched_update_all().when_not_matched_insert_all().execute())


@register_publisher(DeltaSink)
def publish_delta(sink: DeltaSink, rows: list, publication: Publication) -> dict:
    from deltalake import CommitProperties, Transaction

    table = open_table(sink)
    if table is not None:
        done = table.transaction_version(publication.app_id)
        if done is not None and done >= publication.checkpoint:
            return {"kind": "delta", "path": sink.path, "records": 0, "version": None, "already": True}
    if not rows:
        return {"kind": "delta", "path": sink.path, "records": 0, "version": None}
    data = _arrow(sink, rows, table, publication.label)
    props = CommitProperties(
        app_transactions=[Transaction(app_id=publication.app_id, version=publication.checkpoint)],
        custom_metadata={"flinkchain.pipeline": publication.pipeline, "flinkchain.sink": publication.sink_key,
                         "flinkchain.stream": publication.stream_id,
                         "flinkchain.checkpoint": str(publication.checkpoint)})
    append_or_merge(sink, data, table, props, merge=sink.mode != "append")
    return {"kind": "delta", "path": sink.path, "records": data.num_rows,
            "version": open_table(sink).version()}


@register_sink(DeltaSink)
def batch_delta_sink(sink: DeltaSink, ctx: ConnectorContext) -> BatchTableSink:
    return BatchTableSink(sink, ctx)


def sql_literal(value: str) -> str:
    return "'" + str(value).replace("'", "''") + "'"


@register_batch_writer(DeltaSink)
def write_delta_run(sink: DeltaSink, rows: list, run: BatchRun) -> dict:
    """A batch run's output as one Delta commit: a merge (`merge_keys`: the run's rows per
    key replace the table's, so a retry gives the same table), or an overwrite of the rows
    of this (DAG id, run id) by the run's (`replaceWhere` on the run columns)."""
    from deltalake import CommitProperties, write_deltalake

    table = open_table(sink)
    props = CommitProperties(custom_metadata={"flinkchain.dag_id": run.dag_id, "flinkchain.run_id": run.run_id})
    done = {"kind": "delta", "path": sink.path, "records": 0, "version": None}
    if sink.merge_keys:
        if not rows:
            return done
        data = _arrow(sink, rows, table, run.label)
        append_or_merge(sink, data, table, props, merge=True)
        return {**done, "records": data.num_rows, "version": open_table(sink).version()}
    keys = run.columns(sink)
    predicate = " AND ".join(f"`{c}` = {sql_literal(v)}" for c, v in keys.items())
    if table is not None:
        run.check_columns(keys, table.schema().to_arrow().names, f"Delta table {sink.path!r}")
    if not rows:
        if table is not None:
            table.delete(predicate, commit_properties=props)  # an earlier attempt's rows, if any
        return {**done, "version": open_table(sink).version() if table is not None else None}
    for row in rows:
        if not isinstance(row, dict):
            break  # _arrow names it
    else:
        rows = [{**row, **keys} for row in rows]
    data = _arrow(sink, rows, table, run.label)
    partition_by = list(sink.partition_by or ()) or None
    if table is None:
        write_deltalake(sink.path, data, mode="append", partition_by=partition_by,
                        storage_options=storage_of(sink), commit_properties=props)
    else:
        write_deltalake(sink.path, data, mode="overwrite", predicate=predicate, partition_by=partition_by,
                        storage_options=storage_of(sink), commit_properties=props)
    return {**done, "records": data.num_rows, "version": open_table(sink).version()}


@register_unbounded(DeltaSource)
class DeltaVersions:
    """The one split of a DeltaSource: positions are table versions, [start, end) read."""

    SPLIT = "versions"

    def __init__(self, source: DeltaSource):
        self.source = source
        self.where = f"DeltaSource({source.path!r})"

    def _table(self, version: Optional[int] = None):
        from deltalake import DeltaTable

        if not DeltaTable.is_deltatable(self.source.path, storage_options=storage_of(self.source)):
            raise LookupError(f"{self.where}: no Delta table at {self.source.path!r}; create it first (e.g. with a "
                              "DeltaSink) or fix the path")
        return DeltaTable(self.source.path, version=version, storage_options=storage_of(self.source))

    def initial_position(self, split_id: str) -> int:
        return 0

    def discover(self, positions: dict) -> dict:
        return {self.SPLIT: self._table().version() + 1}

    def read_split(self, split_id: str, start: int, end: int):

        table = self._table()
        operations = {h["version"]: h.get("operation") for h in table.history()}
        before = set(self._files(start - 1)) if start > 0 else set()
        for version in range(start, end):
            files = self._files(version)
            removed = before - set(files)
            if operations.get(version) == "OPTIMIZE":  # compaction: same rows in new files
                before = set(files)
                continue
            if removed:
                raise RuntimeError(f"{self.where}: version {version} is not an append (operation "
                                   f"{operations.get(version)!r} removed {len(removed)} file(s)); DeltaSource reads "
                                   "append-only tables; reset the reading pipeline (its checkpoint_dir) to read "
                                   "the table afresh")
            added = [f for f in files if f not in before]
            before = set(files)
            if added:
                dataset = pyarrow_dataset(self._table(version), self.source.path)
                by_path = {frag.path.rsplit("/", 1)[-1]: frag for frag in dataset.get_fragments()}
                for name in sorted(added):
                    frag = by_path[name.rsplit("/", 1)[-1]]
                    yield from frag.to_table(schema=dataset.schema).to_pylist()  # partition columns too

    def _files(self, version: int) -> list:
        actions = self._table(version).get_add_actions(flatten=True)
        return [str(p) for p in actions.column("path").to_pylist()]
