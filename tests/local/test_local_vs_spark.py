"""execute_local() and execute() (Spark) give the same outputs and counters on a mixed pipeline."""

from __future__ import annotations

import pytest

from airflow_flinkchain import OutputTag, StreamPipeline
from airflow_flinkchain.functions import KeyedProcessFunction, ProcessFunction, ValueStateDescriptor
from airflow_flinkchain.runtime.core.elements import StreamRecord, Watermark
from airflow_flinkchain.testing import TestingSink, TestingSource

pytestmark = pytest.mark.spark


class Route(ProcessFunction):
    def process_element(self, value, ctx):
        if value % 3 == 0:
            ctx.output(OutputTag("threes"), value)
        else:
            yield value


class Sessionize(KeyedProcessFunction):
    def open(self, ctx):
        self.total = ctx.get_state(ValueStateDescriptor("total"))

    def process_element(self, value, ctx):
        total = (self.total.value() or 0) + value
        self.total.update(total)
        ctx.timer_service().register_event_time_timer(ctx.timestamp() + 10)
        yield ("running", ctx.get_current_key(), total)

    def on_timer(self, timestamp, ctx):
        yield ("timer", ctx.get_current_key(), timestamp, self.total.value())


def mixed_pipeline():
    p = StreamPipeline("mixed", parallelism=2)
    items = [StreamRecord(i, 10 * i) if i % 4 else Watermark(10 * i - 5) for i in range(1, 25)]
    src = p.from_source(TestingSource(items), name="src")
    routed = src.rebalance().process(Route()).name("route")
    routed.key_by(lambda x: x % 4).reduce(lambda a, b: a + b).name("sum").collect("sums")
    routed.get_side_output(OutputTag("threes")).broadcast().map(lambda x: -x).name("neg").set_parallelism(3) \
        .collect("negs")
    rows = routed.map(lambda x: {"x": x, "inv": 100 // (x % 5)}, output_type={"x": "int64", "inv": "int64"},
                      on_error="dead_letter").name("rows")
    rows.rescale().map(lambda r: r["x"] + r["inv"]).name("mix").set_parallelism(3).collect("mixed")
    rows.dead_letters().global_().map(lambda d: (d["record"], d["error_type"])).name("dl").collect("dead")
    sessions = TestingSink("sessions")
    routed.key_by(lambda x: x % 2).process(Sessionize()).name("session").sink_to(sessions)
    routed.map(lambda x: x).name("pre_split").split(lambda x: ["low"] if x < 10 else ["high"]).select("high").shuffle() \
        .map(lambda x: x * 2).name("high").collect("highs")
    return p, sessions


def counters(result):
    return sorted((doc["chain"], m["name"], m["subtask"], m["records_in"], m["records_out"],
                   tuple(sorted(m["side_outputs"].items())), m["dead_lettered"], m["skipped"], m["filtered"])
                  for doc in result.metrics.values() for m in doc["operators"])


def test_local_equals_spark(spark):
    local_pipeline, local_sessions = mixed_pipeline()
    spark_pipeline, spark_sessions = mixed_pipeline()
    local = local_pipeline.execute_local()
    on_spark = spark_pipeline.execute(spark=spark)
    assert set(local.outputs) == {"sums", "negs", "mixed", "dead", "sessions", "highs"}
    assert local.outputs == on_spark.outputs  # same records, in the same (subtask, input) order
    assert counters(local) == counters(on_spark)
    assert local.output("dead") and local.output("negs")
    assert local_sessions.records == spark_sessions.records == local.output("sessions") != []
