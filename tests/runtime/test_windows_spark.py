"""Windows, watermarks and idleness on Spark give what execute_local() gives: timestamps and
watermarks (and an idle input's status) cross Parquet exchanges to parallelism 2."""

from __future__ import annotations

from collections import Counter

from airflow_flinkchain import Duration, StreamPipeline, TumblingEventTimeWindows, WatermarkStrategy

from tests.windows.util import LATE, add, event_time, key, stamped

def _pipeline():
    p = StreamPipeline("windows_spark", parallelism=2, runtime_mode="streaming")
    strategy = WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_millis(0)) \
        .with_timestamp_assigner(event_time).with_idleness(Duration.of_seconds(10))
    records = [(k, i, i * 100) for i in range(1, 30) for k in ("a", "b")] + [("a", 1000, 150)]
    fast = p.from_collection(records).assign_timestamps_and_watermarks(strategy).set_parallelism(1)
    empty = p.from_collection([]).assign_timestamps_and_watermarks(strategy)
    sums = fast.union(empty).key_by(key).window(TumblingEventTimeWindows.of(Duration.of_millis(1000)))
    sums = sums.side_output_late_data(LATE).reduce(add)
    sums.process(stamped).collect("out")
    sums.get_side_output(LATE).process(stamped).collect("late")
    return p


def test_windows_on_spark_equal_execute_local(spark):
    local = _pipeline().execute_local()
    result = _pipeline().execute(spark=spark)
    for sink in ("out", "late"):
        assert Counter(result.output(sink)) == Counter(local.output(sink)), sink
    # the idle empty input did not hold the watermark back: the record at 150 came too late
    assert local.output("late") == [(("a", 1000, 150), 150)]
    assert (("a", 45, 900), 999) in local.output("out")
