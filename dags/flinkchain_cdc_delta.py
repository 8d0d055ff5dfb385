"""Example: PostgreSQL change data capture into Delta Lake tables, two scheduled stream pipelines.

    cdc_orders:   PostgresCdcSource(public.orders)                  (first run: a snapshot, then changes)
                    -> key_by id -> latest_row: KeyedProcessFunction, ValueState = the row's last value
                       (no-op updates dropped; a delete becomes a tombstone: the last row, deleted=True)
                    -> DeltaSink(silver/orders, merge_keys=["id"])  (the table, one merge per run)
                  and the changes themselves
                    -> DeltaSink(bronze/order_changes)              (append-only changelog, one commit per run)
    orders_gold:  DeltaSource(bronze/order_changes)                 (the versions committed since its last run;
                                                                     scheduled on that table's asset events)
                    -> key_by op -> running count -> DeltaSink(gold/changes_per_op, merge_keys=["op"])

The merged silver table rewrites files on every merge, so it is no input for `DeltaSource`
(append-only tables); the second pipeline reads the changelog instead. Every run is exactly
once end to end (docs/connectors-postgres-cdc.md): the slot advances after the run committed,
each Delta commit carries the checkpoint id.

The source table: `public.orders(id int primary key, item text, qty int)` in the database of
$FLINKCHAIN_CDC_URL (default postgresql://postgres@127.0.0.1:5432/test), on a server with
wal_level=logical and a role with REPLICATION. Tables under $AIRFLOW_HOME/flinkchain/lake/,
checkpoints under $AIRFLOW_HOME/flinkchain/checkpoints/. Parsing connects to nothing.

DAGs: flinkchain_cdc_orders (every 10 minutes) and flinkchain_orders_gold (on the changelog's
asset events; unpause it first). FLINKCHAIN_CDC_URL is read at parse time, so the dag-processor
and the workers need it. docs/connectors-postgres-cdc.md ("Example") walks through it all.
"""

from __future__ import annotations

import datetime
import os

from airflow.sdk import DAG, Asset

import sample_data
from airflow_flinkchain import RuntimeExecutionMode, StreamPipeline
from airflow_flinkchain.common import Types
from airflow_flinkchain.functions import KeyedProcessFunction
from airflow_flinkchain.io.sinks import DeltaSink
from airflow_flinkchain.io.sources import DeltaSource, PostgresCdcSource
from airflow_flinkchain.state import ValueStateDescriptor

CDC_URL = os.environ.get("FLINKCHAIN_CDC_URL", "postgresql://postgres@127.0.0.1:5432/test")


def row_id(change: dict) -> int:
    return (change["after"] or change["before"])["id"]


class LatestRow(KeyedProcessFunction):
    """Per id the row's last value: emits the row when it changed, a tombstone on delete."""

    def open(self, runtime_context):
        self.row = runtime_context.get_state(ValueStateDescriptor("row", Types.PICKLED_BYTE_ARRAY()))

    def process_element(self, change, ctx):
        last = self.row.value()
        if change["op"] == "d":
            self.row.clear()
            yield {**(last or change["before"]), "deleted": True}
        elif change["after"] != last:
            self.row.update(change["after"])
            yield {**change["after"], "deleted": False}


def change_row(change: dict) -> dict:
    return {"op": change["op"], "id": row_id(change), "lsn": change["source"]["lsn"],
            "ts_ms": change["source"]["ts_ms"]}


def count_one(change: dict) -> dict:
    return {"op": change["op"], "changes": 1}


def add_counts(a: dict, b: dict) -> dict:
    return {"op": a["op"], "changes": a["changes"] + b["changes"]}


def paths(home: str = None) -> dict:
    root = os.path.join(home or sample_data.home(), "flinkchain")
    return {"silver": os.path.join(root, "lake", "silver", "orders"),
            "changes": os.path.join(root, "lake", "bronze", "order_changes"),
            "gold": os.path.join(root, "lake", "gold", "changes_per_op"),
            "checkpoints": os.path.join(root, "checkpoints")}


def cdc_pipeline(url: str, silver: str, changes: str, checkpoint_dir: str, name: str = "cdc_orders",
                 slot_name: str = "flinkchain_cdc_orders") -> StreamPipeline:
    env = StreamPipeline(name, runtime_mode=RuntimeExecutionMode.STREAMING, parallelism=1,
                         conn_id="spark_default", driver_memory="1g", checkpoint_dir=checkpoint_dir)
    orders = env.from_source(PostgresCdcSource(url, ("public.orders",), slot_name=slot_name,
                                               publication_name=slot_name), name="orders").uid("orders")
    (orders.key_by(row_id).process(LatestRow()).name("latest_row").uid("latest_row")
     .sink_to(DeltaSink(silver, merge_keys=["id"]), name="silver_orders").uid("silver_orders"))
    (orders.map(change_row).name("change_row").uid("change_row")
     .sink_to(DeltaSink(changes), name="order_changes").uid("order_changes"))
    return env


def gold_pipeline(changes: str, gold: str, checkpoint_dir: str, name: str = "orders_gold") -> StreamPipeline:
    env = StreamPipeline(name, runtime_mode=RuntimeExecutionMode.STREAMING, parallelism=1,
                         conn_id="spark_default", driver_memory="1g", checkpoint_dir=checkpoint_dir)
    (env.from_source(DeltaSource(changes), name="order_changes").uid("order_changes")
     .map(count_one).name("count_one").uid("count_one")
     .key_by(lambda c: c["op"]).reduce(add_counts).name("changes_per_op").uid("changes_per_op")
     .sink_to(DeltaSink(gold, merge_keys=["op"]), name="gold_changes_per_op").uid("gold_changes_per_op"))
    return env


_paths = paths()

with DAG("flinkchain_cdc_orders", schedule=datetime.timedelta(minutes=10), doc_md=__doc__, max_active_runs=1,
         **sample_data.example_dag_args("cdc", "delta", "stream-runs")) as cdc_dag:
    cdc_pipeline(CDC_URL, _paths["silver"], _paths["changes"],
                 os.path.join(_paths["checkpoints"], "cdc_orders")).to_airflow()

with DAG("flinkchain_orders_gold", schedule=[Asset("file://" + _paths["changes"])], doc_md=__doc__, max_active_runs=1,
         **sample_data.example_dag_args("cdc", "delta", "stream-runs")) as gold_dag:
    gold_pipeline(_paths["changes"], _paths["gold"], os.path.join(_paths["checkpoints"], "orders_gold")).to_airflow()
