"""DAGs of the asset and lineage test (tests/airflow/test_assets_scheduler.py): a one-chain
pipeline reading a file asset and writing a typed Parquet asset and a SQL table asset, and
a DAG scheduled on the Parquet sink that records the asset events it was triggered by; a
stream-run pipeline (checkpoint_dir) writing JSON lines, and a DAG scheduled on that sink
that reads the files its triggering event names."""

import json
import os

import pendulum
from airflow.sdk import DAG, task

import sample_data
from airflow_flinkchain import StreamPipeline
from airflow_flinkchain.airflow.assets import asset_of
from airflow_flinkchain.io.sinks import JsonLinesSink, ParquetSink, SqlSink
from airflow_flinkchain.io.sources import JsonLinesSource

START = pendulum.datetime(2026, 1, 1, tz="UTC")
ORDER_TYPE = {"order_id": "int64", "region": "string", "amount": "double"}
TOTALS = ParquetSink(sample_data.output_dir() + "/assets/{{ run_key }}/orders", output_type=ORDER_TYPE)
TABLE = SqlSink("asset_orders", url=sample_data.sqlite_url(), asset_name="asset_orders")
TRIGGERED = os.path.join(sample_data.output_dir(), "assets", "triggered.jsonl")
STREAM_IN = os.path.join(sample_data.output_dir(), "assets", "stream_in")
STREAM_SINK = JsonLinesSink(os.path.join(sample_data.output_dir(), "assets", "stream_orders"))
STREAM_READ = os.path.join(sample_data.output_dir(), "assets", "stream_read.jsonl")


def amount(row) -> dict:
    return {"order_id": int(row["order_id"]), "region": row["region"],
            "amount": round(int(row["quantity"]) * float(row["unit_price"]), 2)}


with DAG("af_assets", schedule=None, start_date=START, catchup=False) as assets_dag:
    p = StreamPipeline("assets", parallelism=1)
    p.on_setup(sample_data.ensure_sample_data)
    orders = p.from_source(JsonLinesSource(sample_data.sample_dir() + "/orders"), name="orders").uid("orders")
    amounts = orders.map(amount).name("amount").uid("amount")
    amounts.sink_to(TOTALS, name="orders_parquet").uid("orders_parquet")
    amounts.sink_to(TABLE, name="orders_table").uid("orders_table")
    p.to_airflow()


@task
def record(triggering_asset_events=None):
    os.makedirs(os.path.dirname(TRIGGERED), exist_ok=True)
    with open(TRIGGERED, "a") as f:
        for asset, events in triggering_asset_events.items():
            for e in events:
                f.write(json.dumps({"uri": asset.uri, "source_dag_id": e.source_dag_id,
                                    "source_run_id": e.source_run_id, "extra": dict(e.extra)}) + "\n")


with DAG("af_assets_downstream", schedule=[asset_of(TOTALS)], start_date=START, catchup=False) as downstream:
    record()


def stream_input() -> None:
    sample_data.write_json_lines(STREAM_IN, sample_data.order_rows())


with DAG("af_assets_stream", schedule=None, start_date=START, catchup=False) as stream_dag:
    s = StreamPipeline("assets_stream", parallelism=1, runtime_mode="streaming",
                       checkpoint_dir=os.path.join(sample_data.output_dir(), "assets", "stream_checkpoints"))
    s.on_setup(stream_input)
    rows = s.from_source(JsonLinesSource(STREAM_IN, monitor=True), name="stream_orders_in").uid("stream_orders_in")
    rows.map(amount).name("stream_amount").uid("stream_amount") \
        .sink_to(STREAM_SINK, name="orders_published").uid("orders_published")
    s.to_airflow()


@task
def read_published(triggering_asset_events=None):
    """Reads exactly the files the event names (a stream sink's directory holds every run's)."""
    with open(STREAM_READ, "a") as out:
        for asset, events in triggering_asset_events.items():
            for e in events:
                rows = 0
                for path in e.extra["files"]:
                    with open(path) as f:
                        rows += sum(1 for line in f if line.strip())
                out.write(json.dumps({"uri": asset.uri, "source_run_id": e.source_run_id,
                                      "files": list(e.extra["files"]), "rows": rows}) + "\n")


with DAG("af_assets_stream_downstream", schedule=[asset_of(STREAM_SINK)], start_date=START,
         catchup=False) as stream_downstream:
    read_published()
