"""Engines for the store, one per URL and process, upgraded on first use."""

from __future__ import annotations

import threading
from pathlib import Path

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import make_url

from airflow_flinkchain.io.database_urls import check_driver
from airflow_flinkchain.store.migrations import upgrade

_engines: dict[str, Engine] = {}
_lock = threading.Lock()

SQLITE_BUSY_TIMEOUT_S = 60


def get_engine(url: str) -> Engine:
    """The (cached) engine for `url`, its schema upgraded to the latest version."""
    with _lock:
        engine = _engines.get(url)
        if engine is None:
            engine = _create(url)
            upgrade(engine)
            _engines[url] = engine
        return engine


def dispose_engines() -> None:
    """Forget cached engines (tests that drop their database call this)."""
    with _lock:
        for engine in _engines.values():
            engine.dispose()
        _engines.clear()


def _create(url: str) -> Engine:
    check_driver(url, "flinkchain run store ($FLINKCHAIN_STORE_URL or Airflow's [flinkchain] store_url)")
    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite":
        return create_engine(url, pool_pre_ping=True, future=True)
    if parsed.database and parsed.database != ":memory:":
        Path(parsed.database).parent.mkdir(parents=True, exist_ok=True)
    engine = create_engine(url, connect_args={"timeout": SQLITE_BUSY_TIMEOUT_S})
    _make_sqlite_transactional(engine)
    return engine


def _make_sqlite_transactional(engine: Engine) -> None:
    """pysqlite starts transactions lazily and not before DDL; take control so that
    BEGIN is explicit (migrations run under BEGIN IMMEDIATE, i.e. hold the write
    lock) and several chain tasks can write to one file (WAL, busy timeout)."""

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection, _record):
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_S * 1000}")
        try:
            cursor.execute("PRAGMA journal_mode=WAL")
        except Exception:  # e.g. a read-only directory: keep the default journal
            pass
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn):
        mode = conn.get_execution_options().get("sqlite_begin", "")
        conn.exec_driver_sql(f"BEGIN {mode}".strip())
