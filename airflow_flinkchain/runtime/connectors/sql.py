"""SQL connectors at run time (SQLAlchemy).

A descriptor's `conn_id` names an Airflow connection. The runtime never imports
Airflow: the chain task resolves the connection before spark-submit and hands
its URL over in the environment variable `conn_url_env(conn_id)` (never written
to disk); set that variable, or pass `url=`, to run outside Airflow.

Tables created by a sink get a column per field of any record (the union over
all rows, missing = NULL), typed from the records' values (int and float give
a float column); a field whose values have irreconcilable types is refused,
naming the sink and the field. An insert the database refuses (constraint,
type) fails the sink naming it and the table.
"""

from __future__ import annotations

import datetime
import decimal
import os
import re
from typing import Any, Iterable, Iterator, NamedTuple, Optional

from airflow_flinkchain.io.database_urls import check_driver
from airflow_flinkchain.io.sinks import SqlSink
from airflow_flinkchain.io.sources import SqlSource
from airflow_flinkchain.runtime.connectors.base import (ConnectorContext, SinkConnector, SourceReader, register_sink,
                                                       register_source)
from airflow_flinkchain.runtime.connectors.collect import DatasetSinkWriter
from airflow_flinkchain.runtime.connectors.published import (Publication, register_publish_check,
                                                            register_publisher)
from airflow_flinkchain.runtime.core.elements import StreamRecord, Watermark
from airflow_flinkchain.runtime.exchange.dataset import DatasetWriter, open_channel


def conn_url_env(conn_id: str) -> str:
    """The environment variable holding the SQLAlchemy URL of Airflow connection `conn_id`
    ("SECRET" in the name: the Spark provider masks such values in the commands it logs)."""
    return "FLINKCHAIN_SECRET_URL_" + re.sub(r"[^A-Za-z0-9]", "_", conn_id).upper()


def connection_url(url: Optional[str], conn_id: Optional[str], where: str) -> str:
    """`url`, or the URI the chain task handed over for the Airflow connection `conn_id`."""
    url = url or os.environ.get(conn_url_env(conn_id))
    if url:
        return url
    env = conn_url_env(conn_id)
    raise RuntimeError(f"{where}: conn_id={conn_id!r} is an Airflow connection, resolved by the Airflow chain "
                       f"task; outside Airflow set ${env} to its URI or pass url= instead")


def resolve_url(url: Optional[str], conn_id: Optional[str], where: str) -> str:
    """The SQLAlchemy URL of a source/sink: `url`, or the one handed over for `conn_id`; its
    driver checked (an error naming `where` and the package to install)."""
    url = connection_url(url, conn_id, where)
    check_driver(url, where)
    return url


@register_source(SqlSource)
class SqlSourceReader(SourceReader):
    """Non-parallel: subtask 0 runs the query, one dict per row."""

    def __init__(self, descriptor: SqlSource, ctx: ConnectorContext):
        self.url = resolve_url(descriptor.url, descriptor.conn_id, ctx.label)  # on the driver
        self.query = descriptor.query
        self.params = dict(descriptor.params)

    def read(self, subtask: int, batches: Iterator[Any]) -> Iterable[Any]:
        return read_query(self.url, self.query, self.params) if subtask == 0 else ()


@register_sink(SqlSink)
class SqlSinkConnector(SinkConnector):
    """Subtasks stage their rows; the driver commits them in one transaction."""

    kind = "sql"
    commits_first = True

    def __init__(self, descriptor: SqlSink, ctx: ConnectorContext):
        self.descriptor = descriptor
        self.key = ctx.key
        self.label = ctx.label
        self.location = ctx.attempt.stage(ctx.key)
        self.dag_id = ctx.area.dag_id
        resolve_url(descriptor.url, descriptor.conn_id, self.label)  # fails before the chain runs

    def create_writer(self, subtask: int) -> DatasetSinkWriter:
        return DatasetSinkWriter(DatasetWriter(self.location, f"stage:{self.key}", subtask, 1, channel_dirs=False,
                                               label=self.label))

    def commit(self, run_id: str, records: int) -> dict:
        from airflow_flinkchain.runtime.exchange.schema import parse_output_type, records_to_batch

        d = self.descriptor
        rows = []
        for f in open_channel(self.location, f"stage:{self.key}", None) if self.location.exists() else []:
            # staged elements: bare values, StreamRecords (timestamped), Watermarks (skipped)
            rows.extend(el.value if type(el) is StreamRecord else el
                        for el in f.elements() if type(el) is not Watermark)
        url = resolve_url(d.url, d.conn_id, self.label)
        schema = parse_output_type(d.output_type, self.label)
        if schema is not None and rows:  # a declared type is checked, never left to the database
            records_to_batch(rows, None, schema, self.label)
        n = commit_table(url, d.table, d.run_id_column, run_id, rows, schema, self.label,
                         dag_id_column=d.dag_id_column, dag_id=self.dag_id)
        return {"kind": self.kind, "path": d.table, "records": n}


@register_publisher(SqlSink)
def publish_sql(sink: SqlSink, rows: list, publication: Publication) -> dict:
    """A stream run's rows and its (stream, pipeline, sink, checkpoint) record in one transaction."""
    from airflow_flinkchain.runtime.exchange.schema import parse_output_type, records_to_batch

    label = publication.label
    schema = parse_output_type(sink.output_type, label)
    if schema is not None and rows:
        records_to_batch(rows, None, schema, label)
    n = commit_table(resolve_url(sink.url, sink.conn_id, label), sink.table, sink.run_id_column,
                     publication.run_id, rows, schema, label, dag_id_column=sink.dag_id_column,
                     dag_id=publication.pipeline,
                     commit_record=CommitRecord(publication.stream_id, publication.pipeline, publication.sink_key,
                                                publication.checkpoint))
    return {"kind": "sql", "path": sink.table, "records": n}


@register_publish_check(SqlSink)
def check_sql_sink(sink: SqlSink, label: str) -> None:
    """At a stream run's begin: the URL resolves and its driver is installed."""
    resolve_url(sink.url, sink.conn_id, label)


def read_query(url: str, query: str, params: dict) -> Iterator[dict]:
    import sqlalchemy as sa

    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            result = conn.execution_options(stream_results=True).execute(sa.text(query), params or {})
            for row in result.mappings():
                yield dict(row)
    finally:
        engine.dispose()


#: Python type -> column type, most specific first (bool before int: bool is an int)
_PY_TYPES = ((bool, "Boolean"), (int, "BigInteger"), (float, "Float"), (decimal.Decimal, "Numeric"),
             (datetime.datetime, "DateTime"), (datetime.date, "Date"), (bytes, "LargeBinary"), (str, "Text"))
#: pairs of column types whose values fit the wider one
_WIDER = {frozenset(("BigInteger", "Float")): "Float", frozenset(("BigInteger", "Numeric")): "Numeric",
          frozenset(("Float", "Numeric")): "Float"}


def _type_name(value: Any) -> str:
    return _type_name_of(type(value))


def _columns_of(rows: list, where: str, columns=None) -> dict[str, str]:
    """Column name -> SQLAlchemy type name over all rows: the union of fields, types widened.
    `columns` (RowColumns of the rows, when they share their fields): decided per field from
    its set of value types; a conflict is reported by the per-value pass below."""
    if columns is not None:
        decided = {n: _column_type(columns.types[n]) for n in columns.names}
        if all(t is not False for t in decided.values()):
            return {k: t or "Text" for k, t in decided.items()}
    seen_types: dict[str, Optional[str]] = {}
    for row in rows:
        for k, v in row.items():
            seen = seen_types.get(k)
            if v is None:
                seen_types.setdefault(k, None)
                continue
            t = _type_name(v)
            if seen is None or seen == t:
                seen_types[k] = t
            elif frozenset((seen, t)) in _WIDER:
                seen_types[k] = _WIDER[frozenset((seen, t))]
            else:
                raise TypeError(f"{where}: field {k!r} holds {seen} values in some records and {t} in others "
                                f"(e.g. {v!r}); make the records agree or declare output_type on the sink")
    return {k: t or "Text" for k, t in seen_types.items()}


def _column_type(value_types: set):
    """The column type name of a field whose values have these types (None: only None
    values), or False when they conflict."""
    names = sorted({_type_name_of(t) for t in value_types if t is not type(None)})
    if not names:
        return None
    widest = names[0]
    for name in names[1:]:  # the per-value pass's widening, over the set
        widest = _WIDER.get(frozenset((widest, name)))
        if widest is None:
            return False
    return widest


def _type_name_of(py_type: type) -> str:
    for py, name in _PY_TYPES:
        if issubclass(py_type, py):
            return name
    return "Text"


def _arrow_to_sa(t):
    import pyarrow as pa
    import sqlalchemy as sa

    if pa.types.is_boolean(t):
        return sa.Boolean()
    if pa.types.is_integer(t):
        return sa.BigInteger()
    if pa.types.is_floating(t):
        return sa.Float()
    if pa.types.is_timestamp(t):
        return sa.DateTime()
    if pa.types.is_date(t):
        return sa.Date()
    if pa.types.is_binary(t):
        return sa.LargeBinary()
    return sa.Text()


#: the (stream, pipeline, sink, checkpoint) records of stream runs' SQL publications
COMMITS_TABLE = "flinkchain_stream_commits"
#: the (pipeline, sink, checkpoint) records of streams begun before streams had an identity
LEGACY_COMMITS_TABLE = "flinkchain_commits"


class CommitRecord(NamedTuple):
    """What a stream run's SQL publication records beside its rows (docs/stream-runs.md)."""

    stream_id: str  # "" for a stream without an identity: recorded in LEGACY_COMMITS_TABLE
    pipeline: str
    sink: str
    checkpoint: int

    def table(self, meta):
        import sqlalchemy as sa

        key = [sa.Column("pipeline", sa.String(250), primary_key=True),
               sa.Column("sink", sa.String(250), primary_key=True),
               sa.Column("checkpoint", sa.BigInteger, primary_key=True)]
        if not self.stream_id:
            return sa.Table(LEGACY_COMMITS_TABLE, meta, *key)
        return sa.Table(COMMITS_TABLE, meta, sa.Column("stream_id", sa.String(64), primary_key=True), *key)

    def scope(self, table) -> list:
        """The conditions selecting this stream's records of the sink."""
        where = [table.c.pipeline == self.pipeline, table.c.sink == self.sink]
        return where + ([table.c.stream_id == self.stream_id] if self.stream_id else [])

    def row(self) -> dict:
        row = {"pipeline": self.pipeline, "sink": self.sink, "checkpoint": self.checkpoint}
        return {**row, "stream_id": self.stream_id} if self.stream_id else row


def _recorded(conn, record: CommitRecord) -> bool:
    """Whether the stream's sink published this checkpoint (or a later one) already; creates
    the table."""
    import sqlalchemy as sa

    meta = sa.MetaData()
    commits = record.table(meta)
    meta.create_all(conn, tables=[commits])
    done = conn.execute(sa.select(sa.func.max(commits.c.checkpoint)).where(*record.scope(commits))).scalar()
    return done is not None and done >= record.checkpoint


def commit_table(url: str, table: str, run_id_column: str, run_id: str, rows: list[dict],
                 schema=None, where: str = "", dag_id_column: Optional[str] = None,
                 dag_id: Optional[str] = None, commit_record: Optional[CommitRecord] = None) -> int:
    """In ONE transaction: delete this run's rows, insert `rows`. Returns rows inserted.

    A run is (dag id, run id) when `dag_id_column` is given and the table has it
    (tables created here get it): scheduled runs of two DAGs have the same run id,
    and one DAG's retry must not delete the other's rows. A pre-existing table
    without that column is keyed by the run id alone.

    `commit_record` (stream runs): the same transaction first reads the commits table and
    writes nothing (returns 0) when that stream's sink has a checkpoint at or above this one
    recorded, else records it with the rows."""
    import sqlalchemy as sa

    from airflow_flinkchain.runtime.connectors.sql_copy import RowColumns

    reserved = {c for c in (run_id_column, dag_id_column) if c}
    columns = RowColumns.of(rows)  # None: records of several shapes (or not dicts): checked one by one
    for i, row in enumerate(rows if columns is None else rows[:1]):
        if not isinstance(row, dict):
            raise TypeError(f"{where}: SQL sink records must be dicts of column -> value, got {row!r}")
        clash = reserved.intersection(row)
        if clash:
            raise ValueError(f"{where}: record has the reserved column {sorted(clash)[0]!r}: {row!r}")
    fields = _columns_of(rows, where, columns) if schema is None else {f.name: None for f in schema}
    engine = sa.create_engine(url)
    try:
        with engine.begin() as conn:
            if commit_record is not None and _recorded(conn, commit_record):
                return 0
            meta = sa.MetaData()
            insp = sa.inspect(conn)
            if insp.has_table(table):
                tbl = sa.Table(table, meta, autoload_with=conn)
                if run_id_column not in tbl.c:
                    raise ValueError(f"{where}: table {table!r} has no {run_id_column!r} column, needed to "
                                     "replace a run's rows on retry; add it (text) or let the sink create the table")
                missing = [k for k in fields if k not in tbl.c]
                if missing:
                    raise ValueError(f"{where}: table {table!r} has no column {missing[0]!r} for that field of the "
                                     f"records (missing columns: {missing}); add the column(s) to the table or "
                                     "drop the field before the sink")
            else:
                if schema is not None:
                    cols = [sa.Column(f.name, _arrow_to_sa(f.type)) for f in schema]
                elif rows:
                    cols = [sa.Column(k, getattr(sa, t)()) for k, t in fields.items()]
                else:
                    return 0  # nothing to write and no table to create from
                if dag_id_column and dag_id is not None:
                    cols.append(sa.Column(dag_id_column, sa.String(250), index=True))
                tbl = sa.Table(table, meta, *cols, sa.Column(run_id_column, sa.String(250), index=True))
                meta.create_all(conn)
            scope = {run_id_column: run_id}
            if dag_id_column and dag_id is not None and dag_id_column in tbl.c:
                scope[dag_id_column] = dag_id
            conn.execute(tbl.delete().where(*(tbl.c[k] == v for k, v in scope.items())))
            try:
                _insert(conn, tbl, rows, fields, columns, scope)
            except (sa.exc.SQLAlchemyError, conn.dialect.dbapi.Error) as exc:
                cause = getattr(exc, "orig", None) or exc
                raise RuntimeError(
                    f"{where}: the database refused the rows for table {table!r} ({type(cause).__name__}: "
                    f"{str(cause).splitlines()[0] if str(cause) else ''}); nothing of this run was written. "
                    "Make the records fit the table's columns and constraints (types, NOT NULL, unique "
                    "keys), e.g. with a filter or map before the sink, or change the table") from None
            if commit_record is not None:
                conn.execute(commit_record.table(sa.MetaData()).insert(), [commit_record.row()])
        return len(rows)
    finally:
        engine.dispose()


def _insert(conn, tbl, rows: list, fields: dict, columns, scope: dict) -> None:
    """The rows into `tbl`: PostgreSQL's COPY where it stores what an INSERT would (sql_copy),
    else executemany in chunks."""
    from airflow_flinkchain.runtime.connectors.sql_copy import RowColumns, copy_rows

    if rows and conn.dialect.name == "postgresql":
        if columns is not None and set(fields) == set(columns.names):
            columns.names = list(fields)  # the table's field order (a declared output_type's)
        else:
            columns = RowColumns.filled(rows, list(fields))
        if copy_rows(conn, tbl, columns, scope):
            return
    empty = dict.fromkeys(fields)  # every row binds every column: a missing field is NULL
    for start in range(0, len(rows), 5000):
        conn.execute(tbl.insert(), [{**empty, **r, **scope} for r in rows[start:start + 5000]])
