"""An incremental SQL source on the real PostgreSQL (127.0.0.1:5432, database `test`) and
MariaDB (127.0.0.1:3306, root, database `test`) with writer connections of their own: a run
never waits for a transaction in progress, and a row whose transaction commits after a run
is read by a later run, once (sql_settle.py)."""

from __future__ import annotations

import os
import uuid

import pytest

from airflow_flinkchain import StreamPipeline
from airflow_flinkchain.io.sources import SqlSource
from airflow_flinkchain.runtime.connectors import sql_settle

URLS = {"postgresql": os.environ.get("FLINKCHAIN_TEST_PG_URL", "postgresql+psycopg2://postgres@127.0.0.1:5432/test"),
        "mariadb": os.environ.get("FLINKCHAIN_TEST_MYSQL_URL", "mysql+pymysql://root@127.0.0.1:3306/test")}
IDENTITY = {"postgresql": "id bigint generated always as identity primary key, v text",
            "mariadb": "id bigint auto_increment primary key, v text"}
KINDS = [pytest.param("mariadb", marks=pytest.mark.mysql), pytest.param("postgresql", marks=pytest.mark.postgres)]


@pytest.fixture(scope="module")
def pg_database():
    """A database of this module's own on the PostgreSQL server: a run lists the transactions in
    progress in its database, and other sessions' transactions in `test` would keep gaps open."""
    sa = pytest.importorskip("sqlalchemy")
    admin = sa.create_engine(URLS["postgresql"], isolation_level="AUTOCOMMIT")
    name = f"flinkchain_incr_{uuid.uuid4().hex[:8]}"
    try:
        with admin.connect() as conn:
            conn.execute(sa.text(f"create database {name}"))
    except Exception as exc:  # noqa: BLE001 - no server: nothing to test against
        admin.dispose()
        yield None, exc
        return
    yield URLS["postgresql"].rsplit("/", 1)[0] + "/" + name, None
    with admin.connect() as conn:
        conn.execute(sa.text(f"drop database if exists {name} with (force)"))
    admin.dispose()



def _unreachable(reason: str) -> None:
    """Skip where a database is not running; in CI (CI=true) every service runs, so fail."""
    if os.environ.get("CI") == "true":
        pytest.fail(reason)
    pytest.skip(reason)


@pytest.fixture(params=KINDS)
def db(request, pg_database):
    """(kind, url, a uniquely named table with an identity column, a writer factory); the
    table is dropped after the test."""
    sa = pytest.importorskip("sqlalchemy")
    kind = request.param
    if kind == "mariadb":
        pytest.importorskip("pymysql")
    url = pg_database[0] if kind == "postgresql" else URLS[kind]
    if url is None:
        _unreachable(f"PostgreSQL not reachable at {URLS[kind]}: {pg_database[1]}")
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            conn.execute(sa.text("select 1"))
    except Exception as exc:  # noqa: BLE001 - no server: nothing to test against
        _unreachable(f"{kind} not reachable at {url}: {exc}")
    name = f"flinkchain_incr_{uuid.uuid4().hex[:10]}"
    with engine.begin() as conn:
        conn.execute(sa.text(f"create table {name} ({IDENTITY[kind]})"))
    writers = []
    yield kind, url, name, lambda: writers.append(writer(engine)) or writers[-1]
    for conn in writers:
        conn.close()
    with engine.begin() as conn:
        conn.execute(sa.text(f"drop table if exists {name}"))
    engine.dispose()


def writer(engine):
    """A connection of its own, in a transaction from its first insert until committed."""
    conn = engine.raw_connection()
    if engine.dialect.name == "mysql":
        conn.dbapi_connection.autocommit(False)  # pymysql: a method
    else:
        conn.dbapi_connection.autocommit = False
    return conn


def insert(conn, name: str, value: str) -> int:
    cur = conn.cursor()
    cur.execute(f"insert into {name} (v) values (%s)", (value,))
    psycopg = "psycopg" in type(conn.dbapi_connection).__module__
    cur.execute("select lastval()" if psycopg else "select last_insert_id()")
    return cur.fetchone()[0]


def committed(open_writer, name: str, *values: str) -> None:
    conn = open_writer()
    for v in values:
        insert(conn, name, v)
    conn.commit()


def run(url: str, name: str, ckpt: str, run_id: str, spark=None, **options):
    p = StreamPipeline("incr", runtime_mode="streaming", checkpoint_dir=ckpt)
    p.from_source(SqlSource(f"select id, v from {name}", url=url, incremental_column="id", **options),
                  name="rows").map(lambda r: (r["id"], r["v"])).collect("out")
    result = p.execute_local(run_id=run_id) if spark is None else p.execute(spark=spark, run_id=run_id)
    return [tuple(r) for r in result.output("out")], result.stream["sources"]["rows"]


@pytest.mark.timeout(60)
def test_a_transaction_open_across_a_run_is_read_by_the_next_run_once(db, tmp_path):
    kind, url, name, open_writer = db
    ckpt = str(tmp_path / "ckpt")
    committed(open_writer, name, "a")
    held = open_writer()
    assert insert(held, name, "b") == 2  # held open across the whole run
    committed(open_writer, name, "c")
    rows, positions = run(url, name, ckpt, "r1")
    assert rows == [(1, "a"), (3, "c")]  # read without waiting for the open transaction
    assert sql_settle._complement(positions["emitted"], positions["value"], 3)[-1] == [2, 2]  # the open gap
    held.commit()
    committed(open_writer, name, "d")
    assert run(url, name, ckpt, "r2")[0] == [(2, "b"), (4, "d")]
    rows, positions = run(url, name, ckpt, "r3")
    assert rows == [] and positions == {"value": 4, "emitted": [], "holds": []}


@pytest.mark.spark
@pytest.mark.timeout(600)
def test_on_spark_a_transaction_open_across_a_run_is_read_by_the_next_run_once(db, tmp_path, spark):
    kind, url, name, open_writer = db
    ckpt = str(tmp_path / "ckpt")
    committed(open_writer, name, "a")
    held = open_writer()
    insert(held, name, "b")
    committed(open_writer, name, "c")
    assert run(url, name, ckpt, "r1", spark)[0] == [(1, "a"), (3, "c")]
    held.commit()
    committed(open_writer, name, "d")
    assert run(url, name, ckpt, "r2", spark)[0] == [(2, "b"), (4, "d")]
    assert run(url, name, ckpt, "r3", spark)[0] == []


@pytest.mark.timeout(60)
def test_a_lower_id_committed_after_higher_ones_over_several_runs(db, tmp_path):
    kind, url, name, open_writer = db
    ckpt = str(tmp_path / "ckpt")
    committed(open_writer, name, "a", "b")
    late = open_writer()
    assert insert(late, name, "c") == 3
    committed(open_writer, name, "d")
    assert run(url, name, ckpt, "r1")[0] == [(1, "a"), (2, "b"), (4, "d")]
    committed(open_writer, name, "e")
    assert run(url, name, ckpt, "r2")[0] == [(5, "e")]  # id 3 still open: kept, not read, not waited for
    late.commit()
    committed(open_writer, name, "f")
    assert run(url, name, ckpt, "r3")[0] == [(3, "c"), (6, "f")]
    assert run(url, name, ckpt, "r4") == ([], {"value": 6, "emitted": [], "holds": []})


@pytest.mark.timeout(60)
def test_a_rolled_back_transactions_gap_is_retired_once_it_ended(db, tmp_path):
    kind, url, name, open_writer = db
    ckpt = str(tmp_path / "ckpt")
    committed(open_writer, name, "a")
    undone = open_writer()
    insert(undone, name, "x")  # id 2, rolled back after the run
    committed(open_writer, name, "c")
    rows, positions = run(url, name, ckpt, "r1")
    assert rows == [(1, "a"), (3, "c")] and len(positions["holds"]) == 1
    undone.rollback()
    assert run(url, name, ckpt, "r2") == ([], {"value": 3, "emitted": [], "holds": []})
    committed(open_writer, name, "d")
    assert run(url, name, ckpt, "r3")[0] == [(4, "d")]


@pytest.mark.timeout(60)
def test_settle_bounds_how_long_a_gap_stays_open(db, tmp_path):
    """settle=0: the next run retires the gap of a transaction still open; its row, committed
    later, is not read (the documented price of a bounded wait)."""
    kind, url, name, open_writer = db
    ckpt = str(tmp_path / "ckpt")
    committed(open_writer, name, "a")
    held = open_writer()
    insert(held, name, "b")
    committed(open_writer, name, "c")
    assert run(url, name, ckpt, "r1", settle=0)[0] == [(1, "a"), (3, "c")]
    assert run(url, name, ckpt, "r2", settle=0) == ([], {"value": 3, "emitted": [], "holds": []})
    held.commit()
    assert run(url, name, ckpt, "r3", settle=0)[0] == []


@pytest.mark.timeout(120)
def test_the_checkpoint_keeps_a_bounded_number_of_gaps(db, tmp_path, monkeypatch):
    """Rolled-back inserts while a transaction stays open leave gaps that cannot be retired by
    the transactions ending: beyond MAX_OPEN_GAPS the lowest are retired, the open one's kept."""
    kind, url, name, open_writer = db
    ckpt = str(tmp_path / "ckpt")
    monkeypatch.setattr(sql_settle, "MAX_OPEN_GAPS", 3)
    committed(open_writer, name, "a")
    undone = open_writer()
    for _ in range(4):  # ids 2..5, rolled back
        insert(undone, name, "x")
        insert(undone, name, "x")
        committed(open_writer, name, "c")
    held = open_writer()
    insert(held, name, "h")  # the last gap, open
    committed(open_writer, name, "z")
    undone.rollback()
    rows, positions = run(url, name, ckpt, "r1")
    assert [r[1] for r in rows] == ["a", "c", "c", "c", "c", "z"]
    assert len(sql_settle._complement(positions["emitted"], positions["value"], rows[-1][0])) == 2
    for k in (2, 3):  # two more rolled-back gaps: 4 open, the lowest (below the held one) retired
        undone = open_writer()
        insert(undone, name, "x")
        insert(undone, name, "x")
        undone.rollback()
        committed(open_writer, name, f"c{k}")
        rows, positions = run(url, name, ckpt, f"r{k}")
        assert [r[1] for r in rows] == [f"c{k}"]
        gaps = sql_settle._complement(positions["emitted"], positions["value"], rows[-1][0])
        assert len(gaps) <= 3 and [14, 14] in gaps  # the held transaction's id
    held.commit()
    assert [r[1] for r in run(url, name, ckpt, "r4")[0]] == ["h"]


def test_a_non_integer_incremental_column_fails_the_run_naming_it(tmp_path):
    import sqlite3

    from airflow_flinkchain.runtime.pipeline_run import ChainRunError

    db = tmp_path / "t.db"
    con = sqlite3.connect(db)
    con.execute("create table events (at text, v text)")
    con.execute("insert into events values ('2026-01-01', 'a')")
    con.commit()
    p = StreamPipeline("incr-text", runtime_mode="streaming", checkpoint_dir=str(tmp_path / "ckpt"))
    p.from_source(SqlSource("select at, v from events", url=f"sqlite:///{db}", incremental_column="at"),
                  name="events").collect("out")
    with pytest.raises(ChainRunError, match=r"incremental_column 'at' holds str values.*integer column"):
        p.execute_local(run_id="r1")


@pytest.mark.timeout(300)
def test_runs_beside_concurrent_writers_read_every_committed_row_once(db, tmp_path):
    """Writers on three connections insert, commit and roll back at random while runs go on
    (bounded: 240 operations); after they stopped, two more runs. Every committed id is read
    exactly once, no rolled-back one."""
    import random
    import threading
    import time

    kind, url, name, open_writer = db
    ckpt = str(tmp_path / "ckpt")
    conns = [open_writer() for _ in range(3)]
    pending: list[list[int]] = [[] for _ in conns]
    kept: list[int] = []
    failure: list[BaseException] = []

    def write():
        rng = random.Random(29)
        try:
            for _ in range(240):
                time.sleep(0.02)  # pacing only: spreads the writes over several runs
                k = rng.randrange(len(conns))
                op = rng.random()
                if op < 0.6:
                    pending[k].append(insert(conns[k], name, "w"))
                elif op < 0.85:
                    conns[k].commit()
                    kept.extend(pending[k])
                    pending[k] = []
                else:
                    conns[k].rollback()
                    pending[k] = []
            for k, conn in enumerate(conns):
                conn.commit()
                kept.extend(pending[k])
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            failure.append(exc)

    writer_thread = threading.Thread(target=write)
    writer_thread.start()
    read: list[int] = []
    n = 0
    while writer_thread.is_alive():
        n += 1
        read += [r[0] for r in run(url, name, ckpt, f"r{n}")[0]]
    writer_thread.join()
    assert not failure, failure
    for k in (1, 2):
        read += [r[0] for r in run(url, name, ckpt, f"after{k}")[0]]
    assert sorted(read) == sorted(kept) and len(set(read)) == len(read)
    assert run(url, name, ckpt, "last")[1] == {"value": max(read), "emitted": [], "holds": []}


@pytest.mark.mysql
@pytest.mark.timeout(120)
def test_without_the_process_privilege_gaps_wait_for_settle(tmp_path):
    """A MariaDB user that cannot read information_schema.innodb_trx: a rolled-back
    transaction's gap stays open (nothing says it ended) until settle retires it."""
    sa = pytest.importorskip("sqlalchemy")
    pytest.importorskip("pymysql")
    admin = sa.create_engine(URLS["mariadb"])
    try:
        with admin.connect() as conn:
            conn.execute(sa.text("select 1"))
    except Exception as exc:  # noqa: BLE001 - no server: nothing to test against
        _unreachable(f"MariaDB not reachable at {URLS['mariadb']}: {exc}")
    suffix = uuid.uuid4().hex[:10]
    user, name = f"fc_np_{suffix}", f"flinkchain_incr_{suffix}"
    with admin.begin() as conn:
        conn.execute(sa.text(f"create table {name} ({IDENTITY['mariadb']})"))
        conn.execute(sa.text(f"create user '{user}'@'%' identified by 'pw'"))
        conn.execute(sa.text(f"grant select on test.{name} to '{user}'@'%'"))
    url = URLS["mariadb"].replace("root@", f"{user}:pw@")
    ckpt = str(tmp_path / "ckpt")
    writers = [writer(admin) for _ in range(2)]
    try:
        insert(writers[0], name, "a")
        writers[0].commit()
        insert(writers[1], name, "x")  # id 2, rolled back after the run
        insert(writers[0], name, "c")
        writers[0].commit()
        rows, positions = run(url, name, ckpt, "r1")
        assert rows == [(1, "a"), (3, "c")] and positions["holds"][0]["waiting"] is None
        writers[1].rollback()
        rows, positions = run(url, name, ckpt, "r2")
        assert rows == [] and len(positions["holds"]) == 1  # 300 s by default
        assert run(url, name, ckpt, "r3", settle=0) == ([], {"value": 3, "emitted": [], "holds": []})
    finally:
        for conn in writers:
            conn.close()
        with admin.begin() as conn:
            conn.execute(sa.text(f"drop table if exists {name}"))
            conn.execute(sa.text(f"drop user if exists '{user}'@'%'"))
        admin.dispose()


@pytest.mark.mysql
@pytest.mark.timeout(60)
def test_innodb_transactions_listed_fresh_or_not_at_all():
    """InnoDB serves innodb_trx from a cache that another session reading it every 50 ms keeps
    stale: a transaction begun just before the list is in it, or the list is None (gaps then
    wait `settle`), never a list without it."""
    import threading
    import time

    sa = pytest.importorskip("sqlalchemy")
    pytest.importorskip("pymysql")
    engine = sa.create_engine(URLS["mariadb"], isolation_level="AUTOCOMMIT")
    try:
        with engine.connect() as conn:
            conn.execute(sa.text("select 1"))
    except Exception as exc:  # noqa: BLE001 - no server: nothing to test against
        _unreachable(f"mariadb not reachable at {URLS['mariadb']}: {exc}")
    stop = threading.Event()

    def hammer(period: float) -> None:
        with engine.connect() as conn:
            while not stop.is_set():
                conn.execute(sa.text("select count(*) from information_schema.innodb_trx")).scalar()
                time.sleep(period)

    try:
        for period in (0.05, 0.2):  # starved cache, then one that refreshes between reads
            stop.clear()
            reader = threading.Thread(target=hammer, args=(period,), daemon=True)
            reader.start()
            time.sleep(0.3)
            with engine.connect() as txn:
                thread = txn.execute(sa.text("select connection_id()")).scalar()
                txn.exec_driver_sql("start transaction with consistent snapshot")
                with engine.connect() as conn:
                    listed = sql_settle._in_progress(conn)
                txn.exec_driver_sql("rollback")
            stop.set()
            reader.join()
            if period > 0.12:
                assert listed is not None
            assert listed is None or any(t.startswith(f"{thread}@") for t in listed), (period, listed)
    finally:
        stop.set()
        engine.dispose()
