"""DAGs of the asset and lineage test (tests/airflow/test_assets_scheduler.py): a one-chain
pipeline reading a file asset and writing a typed Parquet asset and a SQL table asset, and
a DAG scheduled on the Parquet sink that records the asset events it was triggered by."""

import json
import os

import pendulum
from airflow.sdk import DAG, task

import sample_data
from airflow_flinkchain import StreamPipeline
from airflow_flinkchain.airflow.assets import asset_of
from airflow_flinkchain.io.sinks import ParquetSink, SqlSink
from airflow_flinkchain.io.sources import JsonLinesSource

START = pendulum.datetime(2026, 1, 1, tz="UTC")
ORDER_TYPE = {"order_id": "int64", "region": "string", "amount": "double"}
TOTALS = ParquetSink(sample_data.output_dir() + "/assets/{{ run_key }}/orders", output_type=ORDER_TYPE)
TABLE = SqlSink("asset_orders", url=sample_data.sqlite_url(), asset_name="asset_orders")
TRIGGERED = os.path.join(sample_data.output_dir(), "assets", "triggered.jsonl")


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
