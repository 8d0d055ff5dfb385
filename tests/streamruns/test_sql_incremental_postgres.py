"""An incremental SQL source on the real PostgreSQL (127.0.0.1:5432, database `test`), with
two writer connections: a transaction that took a lower id and commits after another that
took a higher one is read by a run, never skipped (sql_settle.py)."""

from __future__ import annotations

import os
import threading
import uuid

import pytest

from airflow_flinkchain import StreamPipeline
from airflow_flinkchain.io.sources import SqlSource
from airflow_flinkchain.runtime.connectors import sql_settle
from airflow_flinkchain.runtime.pipeline_run import ChainRunError

URL = os.environ.get("FLINKCHAIN_TEST_PG_URL", "postgresql+psycopg2://postgres@127.0.0.1:5432/test")
pytestmark = pytest.mark.postgres


@pytest.fixture
def table():
    """A uniquely named table with an identity column, dropped after the test."""
    sa = pytest.importorskip("sqlalchemy")
    engine = sa.create_engine(URL)
    try:
        with engine.connect() as conn:
            conn.execute(sa.text("select 1"))
    except Exception as exc:  # noqa: BLE001 - no server: nothing to test against
        pytest.skip(f"PostgreSQL not reachable at {URL}: {exc}")
    name = f"flinkchain_incr_{uuid.uuid4().hex[:10]}"
    with engine.begin() as conn:
        conn.execute(sa.text(f"create table {name} (id bigint generated always as identity primary key, v text)"))
    yield engine, name
    with engine.begin() as conn:
        conn.execute(sa.text(f"drop table if exists {name}"))
    engine.dispose()


def writer(engine):
    """A connection of its own, in a transaction until committed."""
    conn = engine.raw_connection()
    conn.autocommit = False
    return conn


def insert(conn, name: str, value: str) -> int:
    cur = conn.cursor()
    cur.execute(f"insert into {name} (v) values (%s) returning id", (value,))
    return cur.fetchone()[0]


def run(name: str, ckpt: str, run_id: str) -> list:
    p = StreamPipeline("incr", runtime_mode="streaming", checkpoint_dir=ckpt)
    p.from_source(SqlSource(f"select id, v from {name}", url=URL, incremental_column="id"), name="rows") \
        .map(lambda r: (r["id"], r["v"])).collect("out")
    return p.execute_local(run_id=run_id).output("out")


def test_a_lower_id_committed_after_a_higher_one_is_not_lost(table, tmp_path):
    engine, name = table
    ckpt = str(tmp_path / "ckpt")
    first = writer(engine)
    for v in ("a", "b"):
        insert(first, name, v)
    first.commit()
    late, early = writer(engine), writer(engine)
    assert insert(late, name, "c") == 3  # takes id 3, commits only while the run is going
    assert insert(early, name, "d") == 4
    early.commit()
    committer = threading.Timer(1.5, late.commit)
    committer.start()
    try:
        assert run(name, ckpt, "r1") == [(1, "a"), (2, "b"), (3, "c"), (4, "d")]
    finally:
        committer.join()
    insert(first, name, "e")
    first.commit()
    assert run(name, ckpt, "r2") == [(5, "e")]
    for conn in (first, late, early):
        conn.close()


def test_a_transaction_left_open_fails_the_run_naming_it(table, tmp_path, monkeypatch):
    engine, name = table
    ckpt = str(tmp_path / "ckpt")
    monkeypatch.setattr(sql_settle, "PG_WAIT_SECONDS", 1.0)
    committed, idle = writer(engine), writer(engine)
    insert(committed, name, "a")
    committed.commit()
    insert(idle, name, "b")  # id 2, held open
    pid = idle.cursor().connection.info.backend_pid
    with pytest.raises(ChainRunError, match=rf"pid {pid} \(idle in transaction.*end those transactions"):
        run(name, ckpt, "r1")
    idle.commit()
    assert run(name, ckpt, "r1") == [(1, "a"), (2, "b")]  # the retry: nothing was committed by the failed try
    for conn in (committed, idle):
        conn.close()
