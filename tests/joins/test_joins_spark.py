"""A window join and an interval join in one pipeline on Spark (parallelism 2, Parquet
exchanges between the taggers, the window and the two-input interval join): the same outputs
as the in-process runner and as the joins' definitions."""

from __future__ import annotations

from collections import Counter

from airflow_flinkchain import Duration, StreamPipeline, TumblingEventTimeWindows, WatermarkStrategy
from airflow_flinkchain.functions import JoinFunction, ProcessJoinFunction
from airflow_flinkchain.runtime.spark.local import execute_pipeline

from tests.windows.util import event_time, key, stamped

CLICKS = [(f"u{i % 5}", i, 100 * i) for i in range(40)]
VIEWS = [(f"u{i % 5}", -i, 100 * i + 40) for i in range(0, 40, 3)]


class WindowPair(JoinFunction):
    def join(self, first, second):
        return ("w", first[1], second[1])


class IntervalPair(ProcessJoinFunction):
    def process_element(self, left, right, ctx):
        yield ("i", left[1], right[1])


def _pipeline():
    p = StreamPipeline("joins-spark", parallelism=2, runtime_mode="streaming")
    strategy = WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_millis(5000)).with_timestamp_assigner(
        event_time)
    clicks = p.from_collection(CLICKS).name("clicks").assign_timestamps_and_watermarks(strategy)
    views = p.from_collection(VIEWS).name("views").assign_timestamps_and_watermarks(strategy)
    clicks.join(views).where(key).equal_to(key).window(TumblingEventTimeWindows.of(1000)).apply(
        WindowPair()).process(stamped).collect("window")
    clicks.key_by(key).interval_join(views.key_by(key)).between(-150, 50).process(IntervalPair()).process(
        stamped).collect("interval")
    return p


def test_window_join_and_interval_join_on_spark(spark):
    result = execute_pipeline(_pipeline(), spark=spark)
    local = _pipeline().execute_local()
    window = Counter((("w", c[1], v[1]), c[2] // 1000 * 1000 + 999) for c in CLICKS for v in VIEWS
                     if c[0] == v[0] and c[2] // 1000 == v[2] // 1000)
    interval = Counter((("i", c[1], v[1]), max(c[2], v[2])) for c in CLICKS for v in VIEWS
                       if c[0] == v[0] and c[2] - 150 <= v[2] <= c[2] + 50)
    assert window and interval
    assert Counter(result.output("window")) == Counter(local.output("window")) == window
    assert Counter(result.output("interval")) == Counter(local.output("interval")) == interval
