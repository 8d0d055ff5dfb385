"""The PostgreSQL URL forms `postgresql://`, `postgresql+psycopg2://` and `postgresql+psycopg://`
work for SqlSource, SqlSink, PostgresCdcSource and the run store, against real servers; a URL
whose driver is not installed fails naming the source, sink or store and the package to
install, before anything is committed."""

from __future__ import annotations

import uuid

import pytest
import sqlalchemy as sa

from airflow_flinkchain import StreamPipeline
from airflow_flinkchain.io.sinks import SqlSink
from airflow_flinkchain.io.sources import PostgresCdcSource, SqlSource
from airflow_flinkchain.runtime.pipeline_run import ChainRunError
from tests.connectors.nats_server import unavailable
from tests.connectors.pg_logical import pg_cluster  # noqa: F401

FORMS = ["postgresql", "postgresql+psycopg2", "postgresql+psycopg"]
DRIVERS = {"postgresql": "psycopg", "postgresql+psycopg2": "psycopg2", "postgresql+psycopg": "psycopg"}
SERVER = "postgresql+psycopg2://postgres@127.0.0.1:5432"
ROWS = [{"k": "a", "v": 1, "ok": True}, {"k": "b", "v": 2, "ok": False}]


@pytest.fixture(scope="module")
def database():
    """'postgres@127.0.0.1:5432/<a fresh database>' (the URL after the scheme), dropped after."""
    admin = sa.create_engine(f"{SERVER}/test", isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            conn.execute(sa.text("select 1"))
    except sa.exc.OperationalError:
        unavailable("no PostgreSQL at 127.0.0.1:5432")
    name = f"urls_{uuid.uuid4().hex[:10]}"
    with admin.connect() as conn:
        conn.execute(sa.text(f"create database {name}"))
    yield f"postgres@127.0.0.1:5432/{name}"
    from airflow_flinkchain.store.engine import dispose_engines

    dispose_engines()
    with admin.connect() as conn:
        conn.execute(sa.text(f"drop database {name} with (force)"))
    admin.dispose()


def tables(rest: str) -> set:
    engine = sa.create_engine(f"postgresql+psycopg2://{rest}")
    try:
        return set(sa.inspect(engine).get_table_names())
    finally:
        engine.dispose()


def write_and_read(url: str, table: str, ckpt: str) -> list:
    """ROWS through a SqlSink in a stream run (published after the commit point), then read back
    with a SqlSource."""
    p = StreamPipeline(f"urls-{table}", runtime_mode="streaming", checkpoint_dir=ckpt)
    p.from_collection(ROWS).sink_to(SqlSink(table, url=url), name="out")
    p.execute_local(run_id="r1")
    q = StreamPipeline("read")
    q.from_source(SqlSource(f"select k, v, ok from {table} order by k", url=url), name="rows").collect("rows")
    return q.execute_local().output("rows")


@pytest.mark.parametrize("form", FORMS)
def test_sql_sink_and_source_take_each_postgresql_url_form(tmp_path, database, form):
    url = f"{form}://{database}"
    assert sa.create_engine(url).dialect.driver == DRIVERS[form]  # the installed driver of each form
    table = f"t_{form.replace('+', '_')}"
    assert write_and_read(url, table, str(tmp_path / "ckpt")) == ROWS


@pytest.mark.parametrize("form", FORMS)
def test_the_run_store_takes_each_postgresql_url_form(database, form):
    from airflow_flinkchain.store.run_store import RunStore
    from tests.store.sample import PLAN

    store = RunStore(f"{form}://{database}")
    store.record_plan(f"dag_{DRIVERS[form]}_{form[-1]}", PLAN)
    assert f"dag_{DRIVERS[form]}_{form[-1]}" in {p["dag_id"] for p in store.list_pipelines()}


@pytest.mark.parametrize("form", FORMS)
def test_postgres_cdc_source_takes_each_postgresql_url_form(tmp_path, pg_cluster, form):
    db = pg_cluster.new_database()
    try:
        pg_cluster.execute(db, "create table orders (id int primary key, ok bool)", "insert into orders values (1, true)")
        source = PostgresCdcSource(pg_cluster.url(db).replace("postgresql://", f"{form}://"), ("public.orders",))

        def run(run_id):
            p = StreamPipeline("cdc-urls", runtime_mode="streaming", checkpoint_dir=str(tmp_path / "ckpt"))
            p.from_source(source, name="pg").uid("pg").collect("changes")
            return [(c["op"], c["after"]) for c in p.execute_local(run_id=run_id).output("changes")]

        assert run("r1") == [("r", {"id": 1, "ok": True})]  # the snapshot: a replication connection
        pg_cluster.execute(db, "insert into orders values (2, false)")
        assert run("r2") == [("c", {"id": 2, "ok": False})]  # the slot's changes
    finally:
        pg_cluster.drop_database(db)


MISSING = r"names the SQLAlchemy driver 'postgresql\+pg8000', whose module 'pg8000' is not installed here: " \
          r"pip install 'pg8000'"


def test_a_missing_driver_fails_a_stream_run_naming_the_sink_before_the_commit_point(tmp_path, database):
    ckpt = tmp_path / "ckpt"
    p = StreamPipeline("urls-missing", runtime_mode="streaming", checkpoint_dir=str(ckpt))
    p.from_collection(ROWS).sink_to(SqlSink("never", url=f"postgresql+pg8000://{database}"), name="out")
    with pytest.raises(ModuleNotFoundError, match=f"sink 'out': URL postgresql\\+pg8000://.*{MISSING}"):
        p.execute_local(run_id="r1")
    assert not (ckpt / "_latest.json").exists()  # nothing committed: fixing the URL runs the stream on
    assert "never" not in tables(database)
    p = StreamPipeline("urls-missing", runtime_mode="streaming", checkpoint_dir=str(ckpt))
    p.from_collection(ROWS).sink_to(SqlSink("never", url=f"postgresql://{database}"), name="out")
    p.execute_local(run_id="r1")
    assert "never" in tables(database)


def test_a_missing_driver_fails_a_batch_run_naming_the_sink_before_writing(spark, tmp_path, database):
    p = StreamPipeline("urls-missing-batch")
    p.from_collection(ROWS).sink_to(SqlSink("never_batch", url=f"postgresql+pg8000://{database}"), name="out")
    with pytest.raises(ChainRunError, match=f"sink 'out': URL .*{MISSING}"):
        p.execute(spark=spark)
    assert "never_batch" not in tables(database)


def test_a_missing_driver_or_a_wrong_url_fails_naming_the_source_or_store(tmp_path, database):
    from airflow_flinkchain.store.run_store import RunStore

    q = StreamPipeline("read")
    q.from_source(SqlSource("select 1 as one", url=f"postgresql+pg8000://{database}"), name="rows").collect("rows")
    with pytest.raises(ChainRunError, match=f"source 'rows': URL .*{MISSING}"):
        q.execute_local()
    with pytest.raises(ModuleNotFoundError, match=f"flinkchain run store .*{MISSING}"):
        RunStore(f"postgresql+pg8000://{database}")
    with pytest.raises(ValueError, match=r"run store .*knows no dialect 'postgres'"):
        RunStore(f"postgres://{database}")
    with pytest.raises(ValueError, match=r"url must be a postgresql://.*postgresql\+psycopg2://"):
        PostgresCdcSource(f"postgresql+pg8000://{database}", ("public.orders",))
