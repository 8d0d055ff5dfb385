"""Example: clickstream analytics as a Flink-style pipeline on Airflow + Spark.

    clickstream CSV -> parse (malformed records -> side output -> JSON lines)
        -> drop_bots -> split by event type
            view/click -> engagement -> key_by user -> engagement_per_user -> Parquet
            purchase   -> revenue    -> key_by user -> revenue_per_user    -> Parquet + SQL table

Three chains (tasks): everything up to the split runs in ONE spark-submit
(Flink's operator chaining); each key_by starts a new chain. Outputs land in
$AIRFLOW_HOME/flinkchain/output/clickstream/<run_key>/ and the SQLite table
`revenue_per_user` in $AIRFLOW_HOME/flinkchain/examples.db.
"""

from __future__ import annotations

import datetime

from airflow.sdk import DAG

import sample_data
from airflow_flinkchain import OutputTag, StreamPipeline
from airflow_flinkchain.functions import ProcessFunction
from airflow_flinkchain.io.sinks import JsonLinesSink, ParquetSink, SqlSink
from airflow_flinkchain.io.sources import CsvSource

MALFORMED = OutputTag("malformed")
BOT_MARKERS = ("bot", "python-requests", "curl")


class ParseEvent(ProcessFunction):
    """CSV row (all strings) -> typed event; rows that don't parse go to MALFORMED."""

    output_tags = [MALFORMED]

    def process_element(self, row, ctx):
        problem = self.problem(row)
        if problem:
            ctx.output(MALFORMED, {"event_id": row.get("event_id"), "problem": problem, "row": dict(row)})
            return
        yield {
            "event_id": row["event_id"],
            "user_id": row["user_id"],
            "event_type": row["event_type"],
            "ts": row["ts"],
            "amount": float(row["amount"]) if row.get("amount") else 0.0,
            "user_agent": row["user_agent"] or "",
        }

    @staticmethod
    def problem(row):
        if not row.get("user_id"):
            return "missing user_id"
        try:
            datetime.datetime.strptime(row.get("ts") or "", "%Y-%m-%dT%H:%M:%SZ")
        except ValueError:
            return f"bad timestamp {row.get('ts')!r}"
        if row.get("event_type") not in sample_data.EVENT_TYPES:
            return f"unknown event type {row.get('event_type')!r}"
        if row.get("amount"):
            try:
                if float(row["amount"]) < 0:
                    return "negative amount"
            except ValueError:
                return f"bad amount {row['amount']!r}"
        return None


def is_human(event) -> bool:
    agent = event["user_agent"].lower()
    return not any(marker in agent for marker in BOT_MARKERS)


def engagement(event) -> dict:
    return {"user_id": event["user_id"], "views": int(event["event_type"] == "view"),
            "clicks": int(event["event_type"] == "click")}


def add_engagement(a, b) -> dict:
    return {"user_id": a["user_id"], "views": a["views"] + b["views"], "clicks": a["clicks"] + b["clicks"]}


def revenue(event) -> dict:
    return {"user_id": event["user_id"], "purchases": 1, "revenue": round(event["amount"], 2)}


def add_revenue(a, b) -> dict:
    return {"user_id": a["user_id"], "purchases": a["purchases"] + b["purchases"],
            "revenue": round(a["revenue"] + b["revenue"], 2)}


def clickstream_pipeline(sample_dir: str, output_dir: str, db_url: str, parallelism: int = 2) -> StreamPipeline:
    """The pipeline; output paths are keyed by `{{ run_key }}` (Airflow's run id, path-safe)."""
    out = f"{output_dir}/clickstream/{{{{ run_key }}}}"
    # BATCH: one total per user in the tables (STREAMING, the default, emits a rolling total per event).
    p = StreamPipeline("clickstream", parallelism=parallelism, runtime_mode="batch", conn_id="spark_default",
                       driver_memory="1g", spark_conf={"spark.sql.session.timeZone": "UTC"})
    p.on_setup(sample_data.ensure_sample_data)
    raw = p.from_source(CsvSource(f"{sample_dir}/clickstream", inferSchema=False), name="clickstream").uid("clickstream")
    events = raw.process(ParseEvent()).name("parse").uid("parse")
    events.get_side_output(MALFORMED).sink_to(JsonLinesSink(f"{out}/malformed"), name="malformed").uid("malformed")
    humans = events.filter(is_human).name("drop_bots").uid("drop_bots")
    by_type = humans.split(lambda e: [e["event_type"]], names=sample_data.EVENT_TYPES)
    (by_type.select("view", "click").map(engagement).name("engagement").uid("engagement")
        .key_by(lambda r: r["user_id"]).reduce(add_engagement).name("engagement_per_user").uid("engagement_per_user")
        .sink_to(ParquetSink(f"{out}/engagement_per_user"), name="engagement_parquet").uid("engagement_parquet"))
    per_user = (by_type.select("purchase").map(revenue).name("revenue").uid("revenue")
                .key_by(lambda r: r["user_id"]).reduce(add_revenue).name("revenue_per_user").uid("revenue_per_user"))
    per_user.sink_to(ParquetSink(f"{out}/revenue_per_user"), name="revenue_parquet").uid("revenue_parquet")
    per_user.sink_to(SqlSink("revenue_per_user", url=db_url), name="revenue_table").uid("revenue_table")
    return p


with DAG("flinkchain_clickstream", schedule=None, doc_md=__doc__, **sample_data.example_dag_args()) as dag:
    clickstream_pipeline(sample_data.sample_dir(), sample_data.output_dir(), sample_data.sqlite_url()).to_airflow()
