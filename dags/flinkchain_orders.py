"""Example: the orders pipeline of the README, Flink style on Airflow + Spark, and a
DAG scheduled on one of its sinks.

    orders (JSON lines) -> parse -> valid -> flag_late (late orders -> side output)
        on time -> key_by region   -> revenue_per_region -> SQL table + Parquet
        late    -> key_by customer -> late_per_customer  -> Parquet

`parse -> valid -> flag_late` is one chain: one Spark job, records handed from
operator to operator by method call. Scheduled daily; manual runs work too
(paths are keyed by run, not by logical date).

The `revenue_per_region` table is an Airflow Asset, an outlet of the chain task
that writes it: `flinkchain_revenue_report` runs each time that task commits the
table and reads the rows of the run that wrote them (the asset event's extra
names the run, `run_key` = the table's `_run_id`, and the records it wrote).
"""

from __future__ import annotations

import json
import os

from airflow.sdk import DAG, task

import sample_data
from airflow_flinkchain import OutputTag, StreamPipeline
from airflow_flinkchain.airflow.assets import asset_of
from airflow_flinkchain.io.sinks import ParquetSink, SqlSink
from airflow_flinkchain.io.sources import JsonLinesSource

LATE = OutputTag("late")


def parse(row) -> dict:
    return {"order_id": int(row["order_id"]), "customer": row["customer"], "region": row["region"],
            "quantity": int(row["quantity"]), "amount": round(int(row["quantity"]) * float(row["unit_price"]), 2),
            "days_late": int(row["delivered_days"]) - int(row["promised_days"])}


def flag_late(order, ctx):
    if order["days_late"] > 0:
        ctx.output(LATE, {"customer": order["customer"], "late_orders": 1, "days_late": order["days_late"]})
    yield {"region": order["region"], "orders": 1, "revenue": order["amount"]}


def add_region(a, b) -> dict:
    return {"region": a["region"], "orders": a["orders"] + b["orders"], "revenue": round(a["revenue"] + b["revenue"], 2)}


def add_late(a, b) -> dict:
    return {"customer": a["customer"], "late_orders": a["late_orders"] + b["late_orders"],
            "days_late": a["days_late"] + b["days_late"]}


def revenue_table(db_url: str) -> SqlSink:
    """The revenue table sink: the Airflow Asset flinkchain_revenue_report is scheduled on."""
    return SqlSink("revenue_per_region", url=db_url, asset_name="orders.revenue_per_region")


def orders_pipeline(sample_dir: str, output_dir: str, db_url: str, parallelism: int = 2) -> StreamPipeline:
    out = f"{output_dir}/orders/{{{{ run_key }}}}"
    # BATCH: one revenue row per region (STREAMING, the default, emits a rolling sum per order).
    p = StreamPipeline("orders", parallelism=parallelism, runtime_mode="batch", conn_id="spark_default")
    p.on_setup(sample_data.ensure_sample_data)
    orders = p.from_source(JsonLinesSource(f"{sample_dir}/orders"), name="orders").uid("orders")
    valid = orders.map(parse).name("parse").uid("parse").filter(lambda o: o["quantity"] > 0).name("valid").uid("valid")
    flagged = valid.process(flag_late, output_tags=[LATE]).name("flag_late").uid("flag_late")
    per_region = (flagged.key_by(lambda r: r["region"]).reduce(add_region)
                  .name("revenue_per_region").uid("revenue_per_region"))
    per_region.sink_to(revenue_table(db_url), name="region_table").uid("region_table")
    per_region.sink_to(ParquetSink(f"{out}/revenue_per_region", asset_name="orders.revenue_per_region.parquet"),
                       name="region_parquet").uid("region_parquet")
    (flagged.get_side_output(LATE).key_by(lambda r: r["customer"]).reduce(add_late)
        .name("late_per_customer").uid("late_per_customer")
        .sink_to(ParquetSink(f"{out}/late_per_customer", asset_name="orders.late_per_customer.parquet"),
                 name="late_parquet").uid("late_parquet"))
    return p


with DAG("flinkchain_orders", schedule="@daily", doc_md=__doc__, **sample_data.example_dag_args()) as dag:
    orders_pipeline(sample_data.sample_dir(), sample_data.output_dir(), sample_data.sqlite_url()).to_airflow()


REVENUE = asset_of(revenue_table(sample_data.sqlite_url()))


@task
def report(triggering_asset_events=None) -> dict:
    """The regions of each triggering run, by revenue, into reports/<run_key>.json."""
    import sqlalchemy as sa

    written = {}
    engine = sa.create_engine(sample_data.sqlite_url())
    for event in triggering_asset_events[REVENUE]:
        extra = dict(event.extra)
        with engine.connect() as con:
            rows = con.execute(sa.text("select region, revenue from revenue_per_region where _run_id = :run "
                                       "and _dag_id = :dag order by revenue desc"),
                               {"run": extra["run_key"], "dag": event.source_dag_id}).fetchall()
        doc = {"event": extra, "source_dag_id": event.source_dag_id,
               "regions": [{"region": r[0], "revenue": r[1]} for r in rows]}
        out = os.path.join(sample_data.output_dir(), "reports", f"{extra['run_key']}.json")
        os.makedirs(os.path.dirname(out), exist_ok=True)
        with open(out, "w") as f:
            json.dump(doc, f, indent=2)
        written[out] = len(rows)
    return written


with DAG("flinkchain_revenue_report", schedule=[REVENUE], doc_md=__doc__,
         **sample_data.example_dag_args("assets")) as report_dag:
    report()
