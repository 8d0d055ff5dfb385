"""SQL connectors at run time (SQLAlchemy). Airflow is imported only to resolve
a `conn_id`, never otherwise, so chains run under plain spark-submit."""

from __future__ import annotations

import datetime
import decimal
from typing import Any, Iterator, Optional


def resolve_url(url: Optional[str], conn_id: Optional[str], where: str) -> str:
    """The SQLAlchemy URL of a source/sink: `url`, or the Airflow connection's."""
    if url:
        return url
    try:
        try:
            from airflow.sdk import BaseHook  # Airflow 3
        except ImportError:  # pragma: no cover - Airflow 2
            from airflow.hooks.base import BaseHook
        conn = BaseHook.get_connection(conn_id)
    except ImportError:
        raise RuntimeError(f"{where}: conn_id={conn_id!r} needs Airflow installed; pass url= instead") from None
    except Exception as exc:
        raise RuntimeError(f"{where}: Airflow connection {conn_id!r} could not be read ({exc}); "
                           "define it (UI, env AIRFLOW_CONN_...) or pass url=") from None
    try:
        hook_url = getattr(conn.get_hook(), "sqlalchemy_url", None)
        if hook_url is not None:
            return hook_url.render_as_string(hide_password=False) if hasattr(hook_url, "render_as_string") else str(hook_url)
    except Exception:
        pass  # no provider hook for this conn type: fall back to the connection URI
    uri = conn.get_uri()
    return "postgresql" + uri[len("postgres"):] if uri.startswith("postgres://") else uri


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


def _sa_type(value: Any):
    import sqlalchemy as sa

    for py, typ in ((bool, sa.Boolean), (int, sa.BigInteger), (float, sa.Float), (decimal.Decimal, sa.Numeric),
                    (datetime.datetime, sa.DateTime), (datetime.date, sa.Date), (bytes, sa.LargeBinary)):
        if isinstance(value, py):
            return typ()
    return sa.Text()


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


def commit_table(url: str, table: str, run_id_column: str, run_id: str, rows: list[dict],
                 schema=None, where: str = "", dag_id_column: Optional[str] = None,
                 dag_id: Optional[str] = None) -> int:
    """In ONE transaction: delete this run's rows, insert `rows`. Returns rows inserted.

    A run is (dag id, run id) when `dag_id_column` is given and the table has it
    (tables created here get it): scheduled runs of two DAGs have the same run id,
    and one DAG's retry must not delete the other's rows. A pre-existing table
    without that column is keyed by the run id alone."""
    import sqlalchemy as sa

    reserved = {c for c in (run_id_column, dag_id_column) if c}
    for i, row in enumerate(rows):
        if not isinstance(row, dict):
            raise TypeError(f"{where}: SQL sink records must be dicts of column -> value, got {row!r}")
        clash = reserved.intersection(row)
        if clash:
            raise ValueError(f"{where}: record has the reserved column {sorted(clash)[0]!r}: {row!r}")
    engine = sa.create_engine(url)
    try:
        with engine.begin() as conn:
            meta = sa.MetaData()
            insp = sa.inspect(conn)
            if insp.has_table(table):
                tbl = sa.Table(table, meta, autoload_with=conn)
                if run_id_column not in tbl.c:
                    raise ValueError(f"{where}: table {table!r} has no {run_id_column!r} column, needed to "
                                     "replace a run's rows on retry; add it (text) or let the sink create the table")
            else:
                if schema is not None:
                    cols = [sa.Column(f.name, _arrow_to_sa(f.type)) for f in schema]
                elif rows:
                    cols = [sa.Column(k, _sa_type(v)) for k, v in rows[0].items()]
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
            for start in range(0, len(rows), 5000):
                chunk = [{**r, **scope} for r in rows[start:start + 5000]]
                conn.execute(tbl.insert(), chunk)
        return len(rows)
    finally:
        engine.dispose()
