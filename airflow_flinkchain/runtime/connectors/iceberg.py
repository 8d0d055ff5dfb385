"""Iceberg tables at run time (pyiceberg): publisher and batch writer of `IcebergSink`.

Stream runs: one publication = one appended snapshot whose summary holds
`flinkchain.app-id` (stream, pipeline and sink: `Publication.app_id`), `flinkchain.stream`
and `flinkchain.checkpoint`. Before appending, the
current snapshot and its ancestors are searched for the app id: a checkpoint at or below
the newest one found is in the table already and nothing is written (the check Flink's
Iceberg committer makes with its max committed checkpoint id). The catalog commit is a
compare-and-swap of the table's metadata location: a concurrent commit makes ours fail, and
it is tried again after the check is repeated on the refreshed table.

Batch runs: one catalog commit that deletes the rows of this (DAG id, run id) and appends
the run's (pyiceberg's `overwrite` with a filter on the run columns).
"""

from __future__ import annotations

import warnings
from typing import Any, Optional

from airflow_flinkchain.io.sinks import IcebergSink
from airflow_flinkchain.runtime.connectors.base import ConnectorContext, register_sink
from airflow_flinkchain.runtime.connectors.published import (BatchRun, BatchTableSink, Publication,
                                                            register_batch_writer, register_publisher)

APP_ID = "flinkchain.app-id"
CHECKPOINT = "flinkchain.checkpoint"
STREAM = "flinkchain.stream"
COMMIT_TRIES = 5


def load_catalog(sink: IcebergSink, label: str):
    from pyiceberg.catalog import load_catalog as load

    from airflow_flinkchain.runtime.exchange.storage import iceberg_io_properties

    io = iceberg_io_properties()  # the storage layer's S3 settings for pyiceberg's pyarrow FileIO
    try:
        if isinstance(sink.catalog, str):
            return load(sink.catalog, **io)
        return load(sink.catalog_name, **io, **{k: str(v) for k, v in sink.catalog.items() if k != "name"})
    except Exception as exc:  # pyiceberg raises ValueError, SQLAlchemy and driver errors alike
        raise RuntimeError(f"{label}: cannot open Iceberg catalog {sink.catalog_name!r} of {sink.describe()} "
                           f"({type(exc).__name__}: {exc}); check the catalog properties (type, uri, warehouse) "
                           "and that its database is reachable") from None


def open_table(catalog: Any, sink: IcebergSink) -> Optional[Any]:
    from pyiceberg.exceptions import NoSuchTableError

    try:
        return catalog.load_table(sink.table)
    except NoSuchTableError:
        return None


def committed_checkpoint(table: Any, app_id: str) -> Optional[int]:
    """The newest checkpoint the app id published to the table's current history, or None."""
    by_id = {s.snapshot_id: s for s in table.snapshots()}
    snapshot = table.current_snapshot()
    while snapshot is not None:
        summary = snapshot.summary.additional_properties if snapshot.summary is not None else {}
        if summary.get(APP_ID) == app_id and summary.get(CHECKPOINT) is not None:
            return int(summary[CHECKPOINT])
        snapshot = by_id.get(snapshot.parent_snapshot_id)
    return None


def arrow_records(sink: IcebergSink, rows: list, table: Optional[Any], label: str):
    """The records as an Arrow table: their own schema for a new table, else the table's
    (a field the table lacks or a value of another type fails naming the field)."""
    import pyarrow as pa

    for row in rows:
        if not isinstance(row, dict):
            raise TypeError(f"{label}: Iceberg sink records must be dicts of column -> value, got {row!r}; map "
                            "the records to dicts before the sink")
    if table is None:
        names = list(dict.fromkeys(k for row in rows for k in row))
        columns = []
        for name in names:
            try:
                columns.append(pa.array([row.get(name) for row in rows]))
            except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError) as exc:
                raise TypeError(f"{label}: field {name!r} has values of different types ({exc}), so it gives "
                                f"Iceberg table {sink.table!r} no column type; give it one type before the "
                                "sink") from None
            if pa.types.is_null(columns[-1].type):
                raise TypeError(f"{label}: field {name!r} is None in every record of the write creating Iceberg "
                                f"table {sink.table!r}, so its column type is unknown; create the table first "
                                "(catalog.create_table with a schema) or drop the field")
        return pa.Table.from_arrays(columns, names=names)
    schema = table.schema().as_arrow()
    extra = sorted({k for row in rows for k in row} - set(schema.names))
    if extra:
        raise ValueError(f"{label}: the records have field {extra[0]!r} that Iceberg table {sink.table!r} has no "
                         f"column for (its columns: {schema.names}); drop it before the sink, or add the column "
                         f"(table.update_schema().add_column(...)), or write to a new table")
    columns = []
    for f in schema:
        try:
            columns.append(pa.array([row.get(f.name) for row in rows], type=f.type))
        except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError) as exc:
            raise TypeError(f"{label}: field {f.name!r} does not fit column {f.name!r} ({f.type}) of Iceberg table "
                            f"{sink.table!r} ({exc}); convert it before the sink or write to a new table") from None
        if not f.nullable and columns[-1].null_count:
            raise ValueError(f"{label}: field {f.name!r} is missing or None in some records, but column {f.name!r} "
                             f"of Iceberg table {sink.table!r} is required; give every record a value")
    return pa.Table.from_arrays(columns, schema=schema)


def create_table(catalog: Any, sink: IcebergSink, schema: Any, label: str):
    from pyiceberg.exceptions import TableAlreadyExistsError

    catalog.create_namespace_if_not_exists(sink.namespace)
    try:
        return catalog.create_table(sink.table, schema=schema)
    except TableAlreadyExistsError:  # created meanwhile by another writer
        return catalog.load_table(sink.table)


@register_publisher(IcebergSink)
def publish_iceberg(sink: IcebergSink, rows: list, publication: Publication) -> dict:
    from pyiceberg.exceptions import CommitFailedException

    label, app_id = publication.label, publication.app_id
    catalog = load_catalog(sink, label)
    done = {"kind": "iceberg", "path": sink.table, "records": 0, "snapshot": None}
    for attempt in range(COMMIT_TRIES):
        table = open_table(catalog, sink)
        if table is not None:
            committed = committed_checkpoint(table, app_id)
            if committed is not None and committed >= publication.checkpoint:
                return {**done, "already": True}
        if not rows:
            return done
        data = arrow_records(sink, rows, table, label)
        if table is None:
            table = create_table(catalog, sink, data.schema, label)
            data = arrow_records(sink, rows, table, label)
        try:
            table.append(data, snapshot_properties={APP_ID: app_id, CHECKPOINT: str(publication.checkpoint),
                                                    STREAM: publication.stream_id,
                                                    "flinkchain.run-id": publication.run_id})
        except CommitFailedException:
            if attempt == COMMIT_TRIES - 1:
                raise
            continue  # another writer committed first: check again on the refreshed table
        return {**done, "records": data.num_rows, "snapshot": table.current_snapshot().snapshot_id}
    return done


@register_sink(IcebergSink)
def batch_iceberg_sink(sink: IcebergSink, ctx: ConnectorContext) -> BatchTableSink:
    return BatchTableSink(sink, ctx)


@register_batch_writer(IcebergSink)
def write_iceberg_run(sink: IcebergSink, rows: list, run: BatchRun) -> dict:
    from pyiceberg.exceptions import CommitFailedException
    from pyiceberg.expressions import And, EqualTo

    keys = run.columns(sink)
    rows = [{**row, **keys} if isinstance(row, dict) else row for row in rows]
    catalog = load_catalog(sink, run.label)
    props = {"flinkchain.dag-id": run.dag_id, "flinkchain.run-id": run.run_id}
    row_filter = None
    for column, value in keys.items():
        row_filter = EqualTo(column, value) if row_filter is None else And(row_filter, EqualTo(column, value))
    for attempt in range(COMMIT_TRIES):
        table = open_table(catalog, sink)
        if table is None and not rows:
            return {"kind": "iceberg", "path": sink.table, "records": 0}
        if table is not None:
            run.check_columns(keys, table.schema().as_arrow().names, f"Iceberg table {sink.table!r}")
        data = arrow_records(sink, rows, table, run.label) if rows else None
        if table is None:
            table = create_table(catalog, sink, data.schema, run.label)
            data = arrow_records(sink, rows, table, run.label)
        try:
            if data is None:
                table.delete(row_filter, snapshot_properties=props)
            else:
                with warnings.catch_warnings():  # a first attempt has no rows to replace
                    warnings.filterwarnings("ignore", "Delete operation did not match any records")
                    table.overwrite(data, overwrite_filter=row_filter, snapshot_properties=props)
        except CommitFailedException:
            if attempt == COMMIT_TRIES - 1:
                raise
            continue
        return {"kind": "iceberg", "path": sink.table, "records": 0 if data is None else data.num_rows}
    return {"kind": "iceberg", "path": sink.table, "records": 0}
