"""Pipelines used by the rendering tests (plain API, no Airflow, no Spark)."""

from __future__ import annotations

from airflow_flinkchain import OutputTag, StreamPipeline
from airflow_flinkchain.io.sinks import ParquetSink
from airflow_flinkchain.io.sources import JsonLinesSource

LATE = OutputTag("late")


def linear(name: str = "linear", **settings) -> StreamPipeline:
    """source -> map -> filter (one chain) -> key_by -> reduce -> sink (second chain)."""
    p = StreamPipeline(name, parallelism=2, **settings)
    s = p.from_source(JsonLinesSource("/data/in/{{ ds }}/"), name="events").uid("events")
    s = s.map(lambda r: r).name("parse").filter(lambda r: True).name("valid")
    s.key_by(lambda r: r["user"]).reduce(lambda a, b: a).name("per_user").sink_to(
        ParquetSink("/data/out/{{ run_key }}/per_user"), name="write")
    return p


def flag_late(value, ctx):
    if value.get("late"):
        ctx.output(LATE, value)
    else:
        yield value


def branching(name: str = "orders") -> StreamPipeline:
    """Side output, split/select, a slot-sharing boundary and a per-operator Spark setting."""
    p = StreamPipeline(name, parallelism=2, conn_id="spark_default", executor_memory="1g",
                       spark_conf={"spark.sql.ansi.enabled": "true"}, env_vars={"TZ": "UTC"})
    orders = p.from_collection([{"id": i, "late": i % 5 == 0, "kind": "a" if i % 2 else "b"} for i in range(20)]).name("orders")
    parsed = orders.map(dict).name("parse").set_parallelism(2)
    flagged = parsed.process(flag_late, output_tags=[LATE]).name("flag_late").set_spark_settings(
        executor_memory="2g", spark_conf={"spark.task.cpus": "1"})
    flagged.get_side_output(LATE).collect("late")
    # split() from a map after flag_late: an operator with a side output cannot be split (as in Flink)
    split = flagged.map(dict).name("route").split(lambda r: [r["kind"]], names=["a", "b"])
    split.select("a").map(lambda r: r).name("kind_a").collect("a")
    split.select("b").key_by(lambda r: r["id"] % 3).reduce(lambda x, y: x).name("kind_b").collect("b")
    return p
