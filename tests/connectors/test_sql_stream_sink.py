"""SqlSink in stream runs, on SQLite and on the real PostgreSQL: a run's rows and its
(pipeline, sink, checkpoint) record are written in one transaction after the commit point;
a repeated publication writes nothing; N runs plus a drain equal one STREAMING run, also
with runs SIGKILLed while running or around the SQL transaction, then retried."""

from __future__ import annotations

import json
import socket
import uuid
from collections import Counter

import pytest
import sqlalchemy as sa

from airflow_flinkchain import StreamPipeline
from airflow_flinkchain.io.sinks import SqlSink
from airflow_flinkchain.runtime.connectors.sql import COMMITS_TABLE
from airflow_flinkchain.runtime.stream_run import StreamRunError
from tests.connectors.nats_server import unavailable
from tests.connectors.kill_runs import as_row, runs_killed_and_retried, window_sums
from tests.streamruns.cases import make_records, slices
from tests.streamruns.partitioned_log import PartitionedLog, append

POSTGRES = "postgresql+psycopg2://postgres@127.0.0.1:5432/test"


@pytest.fixture(params=["sqlite", "postgres"])
def db(request, tmp_path):
    """(url, a table name of the test's own)."""
    table = f"windows_{uuid.uuid4().hex[:8]}"
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'shop.db'}", table
        return
    try:
        socket.create_connection(("127.0.0.1", 5432), timeout=2).close()
    except OSError:
        unavailable("no PostgreSQL at 127.0.0.1:5432 (database `test`)")
    yield POSTGRES, table
    engine = sa.create_engine(POSTGRES)
    with engine.begin() as conn:
        conn.execute(sa.text(f"drop table if exists {table}"))
    engine.dispose()



def pipeline(name: str, log: str, ckpt, url=None, table=None, fail=None) -> StreamPipeline:
    """Tumbling-window sums into the SQL table (None: a collect sink only)."""
    return window_sums(name, log, ckpt, None if url is None else SqlSink(table, url=url), fail)


def table_rows(url: str, table: str) -> Counter:
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            return Counter((r.key, r.value, r.ts) for r in conn.execute(sa.text(f"select * from {table}")))
    finally:
        engine.dispose()


def expected(tmp_path, records) -> Counter:
    log = str(tmp_path / f"whole-{uuid.uuid4().hex[:6]}")
    append(log, "p0", records)
    return Counter(tuple(v) for v in pipeline("whole", log, None).execute_local().output("windows"))


def test_n_runs_and_a_drain_equal_one_streaming_run(tmp_path, db):
    url, table = db
    records = make_records(seed=31)
    log, ckpt = str(tmp_path / "log"), str(tmp_path / "ckpt")
    name = f"sql-{uuid.uuid4().hex[:6]}"
    for k, part in enumerate(slices(records, 3)):
        append(log, "p0", part)
        pipeline(name, log, ckpt, url, table).execute_local(run_id=f"r{k}")
    pipeline(name, log, ckpt, url, table).execute_local(run_id="drain", drain=True)
    assert table_rows(url, table) == expected(tmp_path, records)
    engine = sa.create_engine(url)
    with engine.connect() as conn:
        recorded = [tuple(r) for r in conn.execute(sa.text(
            f"select checkpoint from {COMMITS_TABLE} where pipeline = :p order by checkpoint"), {"p": name})]
    engine.dispose()
    assert [c for (c,) in recorded] == [1, 2, 3, 4]
    # re-running the published run would write its rows again: refused
    with pytest.raises(StreamRunError, match="re-running it is refused"):
        pipeline(name, log, ckpt, url, table).execute_local(run_id="drain", drain=True)
    assert table_rows(url, table) == expected(tmp_path, records)


@pytest.mark.parametrize("where", ["running", "before-sql-commit", "after-sql-commit"])
def test_runs_killed_and_retried_write_each_row_once(tmp_path, db, where):
    url, table = db
    records = make_records(seed=37)
    log, ckpt = str(tmp_path / "log"), str(tmp_path / "ckpt")
    name = f"sqlkill-{uuid.uuid4().hex[:6]}"
    runs_killed_and_retried(where, ("airflow_flinkchain.runtime.connectors.sql", "commit_table"),
                            "tests.connectors.test_sql_stream_sink", pipeline, (name, log, ckpt, url, table), log,
                            ckpt, tmp_path / "kill-now", records)
    assert table_rows(url, table) == expected(tmp_path, records)


def test_the_airflow_commit_step_resolves_a_sink_conn_id(tmp_path, monkeypatch):
    """The stream_commit / setup tasks publish: they put the SQL sinks' Airflow connections in
    the environment for the publication (as the chain tasks do for spark-submit)."""
    from airflow_flinkchain.airflow.stream_runs import sql_connections
    from airflow_flinkchain.runtime.connectors.sql import conn_url_env

    monkeypatch.setenv("AIRFLOW_CONN_SHOP_DB", "postgres://etl:secret@db.example:5432/shop")
    monkeypatch.delenv(conn_url_env("shop_db"), raising=False)
    log, ckpt = str(tmp_path / "log"), str(tmp_path / "ckpt")
    append(log, "p0", [("a", 1, 100), ("a", 2, 2000)])
    p = StreamPipeline("conn", runtime_mode="streaming", checkpoint_dir=ckpt)
    p.from_source(PartitionedLog(directory=log), name="log").map(as_row).sink_to(
        SqlSink("events", conn_id="shop_db"), name="events")
    with sql_connections(p.plan(), "test"):
        url = __import__("os").environ[conn_url_env("shop_db")]
    assert "db.example:5432/shop" in url and "secret" in url
    assert conn_url_env("shop_db") not in __import__("os").environ
    with pytest.raises(Exception, match="sink 'events': conn_id='shop_db' is an Airflow connection"):
        p.execute_local(run_id="r0")  # the URL is missing: the run's begin fails, before its commit point
    assert not (tmp_path / "ckpt" / "_latest.json").exists()
    monkeypatch.setenv(conn_url_env("shop_db"), f"sqlite:///{tmp_path / 's.db'}")
    p.execute_local(run_id="r1")
    assert table_rows(f"sqlite:///{tmp_path / 's.db'}", "events") == Counter({("a", 1, 100): 1, ("a", 2, 2000): 1})


UNREACHABLE = "postgresql+psycopg2://postgres@127.0.0.1:1/test"  # nothing listens on port 1


def rows_pipeline(name: str, log: str, ckpt: str, sink: SqlSink, sink_name: str = "events") -> StreamPipeline:
    p = StreamPipeline(name, runtime_mode="streaming", checkpoint_dir=ckpt)
    p.from_source(PartitionedLog(directory=log), name="log").uid("log").map(as_row).name("row") \
        .sink_to(sink, name=sink_name)
    return p


def test_a_pending_publication_is_repaired_by_fixing_the_dag_file(tmp_path):
    """The publication after the commit point fails (the sink's database cannot be reached): the
    output stays staged in the committed checkpoint; the DAG file's sink fixed (same name and
    table, another URL), the next run's begin publishes it with the current settings."""
    from airflow_flinkchain.runtime.connectors.published import PublicationError

    log, ckpt, good = str(tmp_path / "log"), str(tmp_path / "ckpt"), f"sqlite:///{tmp_path / 'shop.db'}"
    append(log, "p0", [("a", 1, 100), ("b", 2, 200)])
    with pytest.raises(PublicationError, match=r"sink 'events': publishing the output of committed checkpoint "
                                               r"chk-000001 to SQL table events on .* failed \(OperationalError: .*\); "
                                               r"the next run \(or a retry of the commit step\) publishes it again "
                                               r"with the settings of sink 'events' in the DAG file: fix them there"):
        rows_pipeline("pending", log, ckpt, SqlSink("events", url=UNREACHABLE)).execute_local(run_id="r0")
    assert json.loads((tmp_path / "ckpt" / "_latest.json").read_text())["run_id"] == "r0"
    with pytest.raises(PublicationError):  # the DAG file unchanged: stuck, saying so
        rows_pipeline("pending", log, ckpt, SqlSink("events", url=UNREACHABLE)).execute_local(run_id="r1")
    append(log, "p0", [("c", 3, 300)])
    rows_pipeline("pending", log, ckpt, SqlSink("events", url=good)).execute_local(run_id="r1")
    assert table_rows(good, "events") == Counter({("a", 1, 100): 1, ("b", 2, 200): 1, ("c", 3, 300): 1})


def test_a_pending_publication_of_a_sink_the_pipeline_no_longer_has_names_the_way_out(tmp_path):
    """The failing sink renamed in the DAG file: the recorded settings are used, and the error
    says to put the sink back or to restore the checkpoint before (whose run then reads the
    input again and publishes it to the pipeline's current sinks) - which works."""
    from airflow_flinkchain.cli import main
    from airflow_flinkchain.runtime.connectors.published import PublicationError

    log, ckpt, good = str(tmp_path / "log"), str(tmp_path / "ckpt"), f"sqlite:///{tmp_path / 'shop.db'}"
    append(log, "p0", [("a", 1, 100)])
    rows_pipeline("moved", log, ckpt, SqlSink("events", url=good)).execute_local(run_id="r0")
    append(log, "p0", [("b", 2, 200)])
    with pytest.raises(PublicationError):
        rows_pipeline("moved", log, ckpt, SqlSink("events", url=UNREACHABLE)).execute_local(run_id="r1")
    renamed = rows_pipeline("moved", log, ckpt, SqlSink("events", url=good), sink_name="events_v2")
    with pytest.raises(PublicationError, match=r"the pipeline has no sink 'events' of type SqlSink writing to "
                                               r"'events' any more, so the settings recorded in chk-000002 were used: "
                                               r"put the sink back under that name and target with working "
                                               rf"settings, or `flinkchain checkpoints {ckpt} --restore 1` to drop "
                                               r"chk-000002"):
        renamed.execute_local(run_id="r2")
    assert main(["checkpoints", ckpt, "--restore", "1"]) == 0
    renamed.execute_local(run_id="r2")
    assert table_rows(good, "events") == Counter({("a", 1, 100): 1, ("b", 2, 200): 1})
