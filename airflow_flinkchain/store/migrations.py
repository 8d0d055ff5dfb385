"""Versioned schema create/upgrade, run automatically on first connect.

`flinkchain_schema_version` holds one row with the schema version. STEPS[i]
upgrades version i to i+1, inside one transaction that also bumps the
version, under a lock (PostgreSQL: transaction-level advisory lock; SQLite:
BEGIN IMMEDIATE, the database write lock), so that many chain tasks starting
at once upgrade exactly once. To change the schema: append a step (never
edit a released one) and update schema.py to match."""

from __future__ import annotations

import contextlib
import logging
import time
from typing import Callable, Iterator

from sqlalchemy import Connection, Engine, inspect, select, text
from sqlalchemy.exc import DBAPIError

from airflow_flinkchain.metrics_schema import FRACTIONAL_COUNTERS, GAUGE_NAMES
from airflow_flinkchain.store import schema

log = logging.getLogger(__name__)

# Arbitrary constant identifying "the flinkchain store migration" among advisory locks.
PG_ADVISORY_LOCK_KEY = 0x666C6B63  # "flkc"
RETRIES = 5


def _v1_initial(conn: Connection) -> None:
    schema.metadata.create_all(conn, tables=schema.V1_TABLES)


def _v2_operator_gauges(conn: Connection) -> None:
    """The gauge columns of operator_metrics (metrics_schema.GAUGES: the watermark). A store
    created at v1 by this version already has them (v1 creates the tables as defined now)."""
    table = schema.operator_metrics
    present = {c["name"] for c in inspect(conn).get_columns(table.name)}
    for name in GAUGE_NAMES:
        if name not in present:
            column = table.c[name]
            conn.execute(text(f"ALTER TABLE {table.name} ADD COLUMN {column.name} "
                              f"{column.type.compile(dialect=conn.dialect)}"))


def _v3_fractional_counters(conn: Connection) -> None:
    """Operator time keeps its fraction (a chain's operators may take under a millisecond).
    SQLite keeps a REAL in a BIGINT column as it is; PostgreSQL gets the column retyped."""
    if conn.dialect.name == "sqlite":
        return
    table = schema.operator_metrics
    for name in FRACTIONAL_COUNTERS:
        kind = table.c[name].type.compile(dialect=conn.dialect)
        conn.execute(text(f"ALTER TABLE {table.name} ALTER COLUMN {name} TYPE {kind}"))


def _v4_stream_chains(conn: Connection) -> None:
    """The stream-run summary of a chain attempt (docs/stream-runs.md)."""
    schema.stream_chains.create(conn, checkfirst=True)


def _v5_run_error(conn: Connection) -> None:
    """Why a run failed before its chains ran (a refused stream run). A store created at v1
    by this version has the column already."""
    table = schema.runs
    if "error" not in {c["name"] for c in inspect(conn).get_columns(table.name)}:
        conn.execute(text(f"ALTER TABLE {table.name} ADD COLUMN error {table.c.error.type.compile(dialect=conn.dialect)}"))


STEPS: list[Callable[[Connection], None]] = [_v1_initial, _v2_operator_gauges, _v3_fractional_counters,
                                             _v4_stream_chains, _v5_run_error]
LATEST_VERSION = len(STEPS)


class SchemaTooNewError(RuntimeError):
    pass


def upgrade(engine: Engine) -> int:
    """Bring the store's schema to LATEST_VERSION; return the version found before."""
    with engine.connect() as conn:
        found = _read_version(conn)
        conn.rollback()
    _check_not_newer(found, engine)
    if found == LATEST_VERSION:
        return found
    for attempt in range(1, RETRIES + 1):
        try:
            with _locked_transaction(engine) as conn:
                version = _read_version(conn)
                _check_not_newer(version, engine)
                for step in range(version, LATEST_VERSION):
                    log.info("flinkchain store: upgrading schema %d -> %d", step, step + 1)
                    STEPS[step](conn)
                    _write_version(conn, step + 1)
                return version
        except DBAPIError:
            # Another process created the tables between our check and our lock on a
            # backend without a migration lock; re-read and try again.
            if attempt == RETRIES:
                raise
            time.sleep(0.2 * attempt)
    return found


def _check_not_newer(version: int, engine: Engine) -> None:
    if version > LATEST_VERSION:
        raise SchemaTooNewError(
            f"the flinkchain store at {engine.url.render_as_string(hide_password=True)} has schema "
            f"version {version}, newer than this airflow-flinkchain knows ({LATEST_VERSION}): "
            "upgrade the airflow-flinkchain package"
        )


@contextlib.contextmanager
def _locked_transaction(engine: Engine) -> Iterator[Connection]:
    with engine.connect() as conn:
        dialect = engine.dialect.name
        if dialect == "sqlite":
            conn = conn.execution_options(sqlite_begin="IMMEDIATE")
        with conn.begin():
            if dialect == "postgresql":
                conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": PG_ADVISORY_LOCK_KEY})
            schema.schema_version.create(conn, checkfirst=True)
            yield conn


def _read_version(conn: Connection) -> int:
    if not inspect(conn).has_table(schema.schema_version.name):
        return 0
    return conn.scalar(select(schema.schema_version.c.version).where(schema.schema_version.c.id == 1)) or 0


def _write_version(conn: Connection, version: int) -> None:
    table = schema.schema_version
    updated = conn.execute(table.update().where(table.c.id == 1).values(version=version)).rowcount
    if not updated:
        conn.execute(table.insert().values(id=1, version=version))
