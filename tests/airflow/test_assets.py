"""Sources and sinks as Airflow Assets, and the OpenLineage facets of a chain task, at
parse time (no scheduler, Spark or I/O). The asset events and lineage events of a real
run are checked in test_assets_scheduler.py."""

from __future__ import annotations

import json
import subprocess
import sys

import pendulum
import pytest
from airflow.sdk import DAG, Asset

from airflow_flinkchain import StreamPipeline
from airflow_flinkchain.airflow.assets import asset_of, asset_uri, event_extra, file_uri, plan_assets
from airflow_flinkchain.airflow.lineage import dataset_name, operator_lineage
from airflow_flinkchain.io import CollectSink, CsvSink, JsonLinesSink, JsonLinesSource, ParquetSink, ParquetSource, SqlSink, SqlSource
from af_pipelines import linear

START = pendulum.datetime(2026, 1, 1, tz="UTC")


def render(pipeline):
    with DAG("d", schedule=None, start_date=START, catchup=False) as dag:
        tasks = pipeline.to_airflow()
    return dag, tasks


@pytest.mark.parametrize("path, uri", [
    ("/data/out/orders", "file:///data/out/orders"),
    ("/data/out/orders/", "file:///data/out/orders"),
    ("file:/data/in", "file:///data/in"),
    ("file:///data/in", "file:///data/in"),
    ("/data/out/{{ run_key }}/totals", "file:///data/out/*/totals"),
    ("/data/in/day={{ ds }}/", "file:///data/in/day=*"),
    ("s3a://lake/orders/{{ ds }}", "s3://lake/orders/*"),
    ("s3://lake/orders", "s3://lake/orders"),
    ("hdfs://namenode:8020/warehouse/orders", "hdfs://namenode:8020/warehouse/orders"),
])
def test_file_uris_follow_airflow_conventions(path, uri):
    assert file_uri(path) == uri
    assert asset_uri(ParquetSink(path)) == Asset(uri).uri  # what a downstream Asset(...) compares equal to


def test_relative_paths_become_absolute(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert file_uri("out/totals") == f"file://{tmp_path}/out/totals"


@pytest.mark.parametrize("url, table, uri", [
    ("postgresql+psycopg2://etl:secret@db.example/shop", "revenue", "postgres://db.example:5432/shop/public/revenue"),
    ("postgresql://etl@db:6543/shop", "sales.revenue", "postgres://db:6543/shop/sales/revenue"),
    ("mysql+pymysql://etl:pw@db/shop", "revenue", "mysql://db:3306/shop/revenue"),
    ("mysql://db/shop", "other.revenue", "mysql://db:3306/other/revenue"),
    ("sqlite:////var/db/shop.db", "revenue", "sqlite:/var/db/shop.db/revenue"),
])
def test_sql_table_uris_per_backend_without_credentials(url, table, uri):
    assert asset_uri(SqlSink(table, url=url)) == uri
    assert "secret" not in uri


def test_sql_table_uri_from_the_connection_type(monkeypatch):
    monkeypatch.setenv("AIRFLOW_CONN_WAREHOUSE", json.dumps(
        {"conn_type": "postgres", "host": "wh", "login": "etl", "password": "pw", "schema": "dwh"}))
    monkeypatch.setenv("AIRFLOW_CONN_LOCALDB", json.dumps({"conn_type": "sqlite", "host": "/srv/local.db"}))
    assert asset_uri(SqlSink("revenue", conn_id="warehouse")) == "postgres://wh:5432/dwh/public/revenue"
    assert asset_uri(SqlSink("revenue", conn_id="localdb")) == "sqlite:/srv/local.db/revenue"
    # a connection the parser cannot read: the URI names it (and a warning says how to fix it)
    assert asset_uri(SqlSink("revenue", conn_id="absent_conn")) == "x-airflow-connection://absent_conn/revenue"


def test_sql_source_is_the_table_of_a_plain_query():
    url = "postgresql://db/shop"
    assert asset_uri(SqlSource("select * from orders where day = :d", url=url)) == \
        "postgres://db:5432/shop/public/orders"
    assert asset_uri(SqlSource("select o.id from orders o join customers c on o.c = c.id", url=url)) is None
    assert asset_uri(SqlSource("select * from orders o join customers c using (id)", url=url,
                               asset="postgres://db:5432/shop/public/orders_by_customer")) == \
        "postgres://db:5432/shop/public/orders_by_customer"


def test_uri_and_name_can_be_overridden_per_source_and_sink():
    assert asset_of(ParquetSink("/tmp/x", asset="s3://lake/totals")) == Asset("s3://lake/totals")
    named = asset_of(CsvSink("/tmp/y", asset_name="daily totals"))
    assert (named.uri, named.name) == ("file:///tmp/y", "daily totals")
    given = JsonLinesSource("/in", asset=Asset(uri="s3://lake/raw", name="raw events"))
    assert (given.asset, given.asset_name) == ("s3://lake/raw", "raw events")  # plain strings in the plan
    assert asset_of(given) == Asset(uri="s3://lake/raw", name="raw events")
    assert asset_of(ParquetSink("/tmp/z", asset=False)) is None
    assert asset_of(CollectSink("totals")) is None
    with pytest.raises(ValueError, match="fixed, non-empty"):
        ParquetSink("/out/{{ ds }}", asset="file:///out/{{ ds }}")
    with pytest.raises(ValueError, match="asset= must be a URI string"):
        ParquetSink("/out", asset=42)


def test_sources_are_inlets_and_sinks_outlets_of_their_chain_tasks():
    dag, tasks = render(linear())
    head, tail = tasks.chains.values()
    assert head.inlets == [Asset("file:///data/in/*")] and head.outlets == []
    assert tail.inlets == [] and tail.outlets == [Asset("file:///data/out/*/per_user")]
    # setup/teardown and the exchange between the chains are not assets
    assert tasks.setup.outlets == [] and tasks.teardown.inlets == []
    assert [r.operator for r in tail.asset_refs] == ["write"]


def test_the_plan_recorded_for_the_chains_tab_lists_the_assets():
    assert plan_assets(linear().plan()) == [
        {"operator": "events", "chain": "events", "role": "source", "uri": "file:///data/in/*",
         "name": "file:///data/in/*"},
        {"operator": "write", "chain": "per_user", "role": "sink", "uri": "file:///data/out/*/per_user",
         "name": "file:///data/out/*/per_user"}]


def test_collections_and_collect_sinks_are_not_assets():
    p = StreamPipeline("plain", parallelism=1)
    p.from_collection([1, 2]).map(lambda x: x).name("m").collect("out")
    p.from_source(ParquetSource("/in/a", asset=False)).sink_to(ParquetSink("/out/a", asset=False))
    _, tasks = render(p)
    assert all(t.inlets == [] and t.outlets == [] for t in tasks.chains.values())


def test_event_extra_is_json():
    _, tasks = render(linear())
    op = tasks.chains["per_user"]
    [ref] = op.asset_refs

    class Run:
        run_key, run_id = "manual__2026-01-01", "manual__2026-01-01T00:00:00+00:00"

    extra = event_extra(ref, {"sink": ref.operator_key, "records": 7, "path": "/data/out/k/per_user"},
                        Run, op.pipeline_spec, "per_user")
    assert json.loads(json.dumps(extra)) == {
        "records_written": 7, "path": "/data/out/k/per_user", "run_key": "manual__2026-01-01",
        "run_id": "manual__2026-01-01T00:00:00+00:00", "pipeline": "linear", "chain": "per_user",
        "operator": "write"}


@pytest.mark.parametrize("uri, ns_name", [
    ("file:///data/out/*/totals", ("file", "/data/out/*/totals")),
    ("s3://lake/orders/x", ("s3://lake", "orders/x")),
    ("hdfs://nn:8020/w/orders", ("hdfs://nn:8020", "/w/orders")),
    ("postgres://db:5432/shop/public/revenue", ("postgres://db:5432", "shop.public.revenue")),
    ("mysql://db:3306/shop/revenue", ("mysql://db:3306", "shop.revenue")),
    ("sqlite:/var/db/shop.db/revenue", ("sqlite:///var/db/shop.db", "revenue")),
    ("nats://127.0.0.1:4222/ORDERS", ("nats://127.0.0.1:4222", "ORDERS")),
])
def test_openlineage_dataset_naming(uri, ns_name):
    assert dataset_name(uri) == ns_name


@pytest.mark.parametrize("servers, uri", [
    ("nats://127.0.0.1:4222", "nats://127.0.0.1:4222/ORDERS"),
    (["nats://user:secret@n1.example:4333", "nats://n2.example"], "nats://n1.example:4333/ORDERS"),
    ("nats://broker", "nats://broker:4222/ORDERS"),
])
def test_nats_jetstream_source_asset(servers, uri):
    from airflow_flinkchain.io.sources import NatsJetStreamSource

    assert asset_uri(NatsJetStreamSource(servers=servers, stream="ORDERS")) == uri


def test_postgres_cdc_source_asset_is_its_table_without_credentials():
    from airflow_flinkchain.airflow.lineage import dataset_name
    from airflow_flinkchain.io.sources import PostgresCdcSource

    source = PostgresCdcSource("postgresql://cdc:secret@db:5433/shop", ("public.orders",))
    assert asset_uri(source) == "postgres://db:5433/shop/public/orders"
    assert dataset_name(asset_uri(source)) == ("postgres://db:5433", "shop.public.orders")
    assert asset_uri(PostgresCdcSource("postgresql://cdc@db/shop", ("a", "b"))) is None
    assert asset_uri(PostgresCdcSource("postgresql://cdc@db/shop", ("a", "b"), asset="postgres://db:5432/shop/public/a")) \
        == "postgres://db:5432/shop/public/a"


def test_delta_sink_asset_is_the_table_location():
    from airflow_flinkchain.io.sinks import DeltaSink

    assert asset_uri(DeltaSink("/lake/silver/orders/")) == "file:///lake/silver/orders"
    assert asset_uri(DeltaSink("s3a://lake/silver/orders", merge_keys="id")) == "s3://lake/silver/orders"
    from airflow_flinkchain.io.sources import DeltaSource

    assert asset_uri(DeltaSource("s3a://lake/silver/orders")) == "s3://lake/silver/orders"


def test_openlineage_facets_of_a_chain_task():
    p = StreamPipeline("typed", parallelism=1)
    (p.from_source(JsonLinesSource("/in/orders", schema={"id": "int64"}), name="orders")
        .map(lambda r: r).name("copy")
        .sink_to(ParquetSink("/out/{{ run_key }}/orders", output_type={"id": "int64", "amount": "double"}),
                 name="orders_parquet"))
    _, tasks = render(p)
    [op] = tasks.chains.values()
    start = operator_lineage(op, None)
    [source], [sink] = start.inputs, start.outputs
    assert (source.namespace, source.name) == ("file", "/in/orders")
    assert [(f.name, f.type) for f in source.facets["schema"].fields] == [("id", "int64")]
    assert (sink.namespace, sink.name) == ("file", "/out/*/orders")
    assert [(f.name, f.type) for f in sink.facets["schema"].fields] == [("id", "int64"), ("amount", "double")]
    facet = start.job_facets["flinkchain_chain"]
    assert [o["name"] for o in facet.operators] == ["orders", "copy", "orders_parquet"]
    assert (facet.pipeline, facet.chain, facet.parallelism) == ("typed", op.chain_spec.chain_id, 1)
    key = op.asset_refs[-1].operator_key
    done = operator_lineage(op, {"outputs": [{"edge": "e"}, {"sink": key, "records": 12}]})
    assert done.outputs[0].outputFacets["outputStatistics"].rowCount == 12
    failed = operator_lineage(op, None, failed=True)
    assert not getattr(failed.outputs[0], "outputFacets", None)


def test_parsing_loads_no_lineage_code():
    code = ("import sys; sys.path.insert(0, 'tests/airflow'); import pendulum; from airflow.sdk import DAG; "
            "from af_pipelines import linear\n"
            "with DAG('d', schedule=None, start_date=pendulum.datetime(2026, 1, 1)): linear().to_airflow()\n"
            "print(sorted(m for m in sys.modules if 'lineage' in m))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    # (the Spark provider's operator module itself imports OpenLineage helpers when installed)
    assert "airflow_flinkchain.airflow.lineage" not in out.stdout.splitlines()[-1]


def test_sink_events_get_their_extra_and_an_uncommitted_sink_fails_the_task():
    from airflow.sdk.exceptions import AirflowException
    from airflow.sdk.execution_time.context import OutletEventAccessors

    _, tasks = render(linear())
    op = tasks.chains["per_user"]

    class Run:
        run_key, run_id = "k1", "manual__1"

    events = OutletEventAccessors()
    summary = {"outputs": [{"sink": "write", "records": 3, "path": "/data/out/k1/per_user"}]}
    op._annotate_asset_events({"outlet_events": events}, Run, summary, "chain per_user")
    assert events[Asset("file:///data/out/*/per_user")].extra["records_written"] == 3
    with pytest.raises(AirflowException, match="sink 'write' reported no commit"):
        op._annotate_asset_events({"outlet_events": OutletEventAccessors()}, Run, {"outputs": []}, "chain per_user")


def test_a_stream_pipeline_is_scheduled_on_the_asset_its_producer_writes(tmp_path):
    """A producer pipeline writes a new folder of JSON lines per run under /landing/clicks; a
    stream pipeline monitors that folder. Naming both ends the same asset makes the producer's
    commit (its asset event) start the stream pipeline's next run, which reads just the new
    files (stream runs, docs/stream-runs.md)."""
    landing = str(tmp_path / "landing" / "clicks")
    producer = StreamPipeline("producer")
    (producer.from_collection([{"user": "a", "ts": 1}])
     .sink_to(JsonLinesSink(landing + "/{{ run_key }}", asset=f"file://{landing}"), name="land"))
    monitored = JsonLinesSource(landing, monitor=True)
    stream = StreamPipeline("clicks", runtime_mode="streaming", checkpoint_dir=str(tmp_path / "ckpt"))
    stream.from_source(monitored, name="clicks").sink_to(CollectSink("out"), name="out")

    with DAG("producer", schedule=None, start_date=START, catchup=False) as producer_dag:
        producer.to_airflow()
    with DAG("clicks", schedule=[asset_of(monitored)], start_date=START, catchup=False) as stream_dag:
        stream.to_airflow()
    outlets = {a.uri for t in producer_dag.tasks for a in (t.outlets or []) if isinstance(a, Asset)}
    inlets = {a.uri for t in stream_dag.tasks for a in (t.inlets or []) if isinstance(a, Asset)}
    assert outlets == inlets == {f"file://{landing}"}
    # Airflow triggers the stream DAG on exactly that asset
    assert [a.uri for a in stream_dag.timetable.asset_condition.objects] == [f"file://{landing}"]
