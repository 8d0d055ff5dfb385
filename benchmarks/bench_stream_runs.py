"""Stream runs over N slices beside Spark Structured Streaming `Trigger.AvailableNow` (part of the
`aggregations` section of `make bench`): the scheduled-stream alternative a user would compare.

The aggregations input's rows ({k, v, ts}, ts = record index in ms, in event-time order) are cut
into N consecutive slices, one Parquet file each. Slice i is copied into a monitored directory
(untimed), then, timed:

  ours   one stream run of `ParquetSource(dir, monitor=True)` -> timestamps (monotonous; both at
         parallelism 1, the window at P) ->
         key_by(k) -> tumbling 10 s event-time window .sum("v") -> Parquet sink, with a
         checkpoint_dir (`execute(drain=False)`); after the N runs one drain run (timed apart)
  spark  one `trigger(availableNow=True)` run of the same query as a Structured Streaming
         query over the same directory with a checkpoint: readStream.parquet ->
         withWatermark(ts, 0 s) -> groupBy(k, window(ts, "10 seconds")).sum(v) -> Parquet,
         output mode append

What is compared: Spark's append mode emits a window only once its watermark (the largest
event time seen, delay 0) has passed the window's end, and AvailableNow never ends the input,
so the last window per key stays in Spark's state. Our N runs emit exactly the windows their
watermark passed as well (the drain then fires the rest). The check: Spark's windows equal our
windows after the N runs (before the drain), and our drained output equals them plus one last
window per key (the windows still open in Spark's state).
"""

from __future__ import annotations

import os
import shutil
import time
import uuid

import pyarrow.parquet as pq

from benchmarks.bench_common import throughput

WINDOW_MS = 10_000
ROW = {"k": "int64", "v": "int64", "ts": "int64"}


def event_time(r, _record_timestamp=None):
    return r["ts"]


def key_of(r):
    return r["k"]


def build(directory: str, checkpoint: str, out: str, parallelism: int):
    from airflow_flinkchain import StreamPipeline
    from airflow_flinkchain.common import Duration, WatermarkStrategy
    from airflow_flinkchain.io import ParquetSink, ParquetSource
    from airflow_flinkchain.window import TumblingEventTimeWindows

    p = StreamPipeline("bench_stream_runs", parallelism=parallelism, runtime_mode="streaming",
                       checkpoint_dir=checkpoint)
    strategy = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(event_time)
    # source and timestamps at parallelism 1: one file per run would leave a second source subtask
    # without data, whose watermark holds the window's back until the drain
    (p.from_source(ParquetSource(directory, monitor=True), name="src", output_type=ROW).uid("src")
     .set_parallelism(1).assign_timestamps_and_watermarks(strategy).name("timestamps").uid("timestamps")
     .set_parallelism(1)
     .key_by(key_of).window(TumblingEventTimeWindows.of(Duration.of_millis(WINDOW_MS))).sum("v")
     .name("window").uid("window").sink_to(ParquetSink(out, output_type=ROW), name="sink"))
    return p


def spark_query(spark, directory: str, checkpoint: str, out: str):
    from pyspark.sql import functions as F
    from pyspark.sql.types import LongType, StructField, StructType

    schema = StructType([StructField(c, LongType()) for c in ("k", "v", "ts")])
    df = (spark.readStream.schema(schema).parquet(directory)
          .withColumn("t", F.timestamp_millis(F.col("ts"))).withWatermark("t", "0 seconds")
          .groupBy("k", F.window("t", "10 seconds")).agg(F.sum("v").alias("v"))
          .select("k", "v", F.unix_millis(F.col("window.start")).alias("start")))
    return (df.writeStream.format("parquet").outputMode("append").option("checkpointLocation", checkpoint)
            .trigger(availableNow=True).start(out))


def write_slices(source_dir: str, target: str, n: int) -> list:
    """The rows of the Parquet files in `source_dir` (in ts order) as `n` files under `target`."""
    table = pq.read_table(source_dir).sort_by("ts")
    os.makedirs(target, exist_ok=True)
    size = -(-table.num_rows // n)
    paths = []
    for i in range(n):
        path = os.path.join(target, f"slice-{i:03d}.parquet")
        pq.write_table(table.slice(i * size, size), path)
        paths.append(path)
    return paths


def windows(path: str, start_of) -> dict:
    if not os.path.isdir(path) or not any(f.endswith(".parquet") for _, _, fs in os.walk(path) for f in fs):
        return {}
    rows = pq.read_table(path).to_pylist()
    result = {}
    for r in rows:
        key = (r["k"], start_of(r))
        if key in result:
            raise AssertionError(f"window {key} emitted twice in {path}")
        result[key] = r["v"]
    return result


def _ours(r):
    return r["ts"] - r["ts"] % WINDOW_MS


def _spark(r):
    return r["start"]


def run_stream_runs(spark, root: str, input_dir: str, records: int, parallelism: int, slices: int) -> dict:
    """One pass (stateful: each run continues the last one's checkpoint), N slices, both systems."""
    base = os.path.join(root, "stream_runs")
    shutil.rmtree(base, ignore_errors=True)
    parts = write_slices(input_dir, os.path.join(base, "slices"), slices)
    dirs = {who: os.path.join(base, who, "input") for who in ("ours", "spark")}
    ckpt = {who: os.path.join(base, who, "checkpoint") for who in ("ours", "spark")}
    out = {who: os.path.join(base, who, "out") for who in ("ours", "spark")}
    for d in dirs.values():
        os.makedirs(d)
    exchange = os.path.join(base, "exchange")
    runs: dict = {"ours": [], "spark": []}
    for i, part in enumerate(parts):
        for who in ("ours", "spark"):  # each system reads its own copy: no file is half-written when read
            shutil.copy(part, os.path.join(dirs[who], os.path.basename(part)))
        t = time.perf_counter()
        build(dirs["ours"], ckpt["ours"], out["ours"], parallelism).execute(
            spark=spark, run_id=f"r{i}_{uuid.uuid4().hex[:6]}", exchange_root=exchange)
        runs["ours"].append(time.perf_counter() - t)
        t = time.perf_counter()
        spark_query(spark, dirs["spark"], ckpt["spark"], out["spark"]).awaitTermination()
        runs["spark"].append(time.perf_counter() - t)
    before_drain = windows(out["ours"], _ours)
    t = time.perf_counter()
    build(dirs["ours"], ckpt["ours"], out["ours"], parallelism).execute(
        spark=spark, run_id=f"drain_{uuid.uuid4().hex[:6]}", exchange_root=exchange, drain=True)
    drain_seconds = time.perf_counter() - t
    drained, theirs = windows(out["ours"], _ours), windows(out["spark"], _spark)
    open_in_spark = {key: v for key, v in drained.items() if key not in theirs}
    last_start = {}
    for k, start in drained:
        last_start[k] = max(start, last_start.get(k, start))
    equal = (theirs == before_drain and all(k in theirs or last_start[k[0]] == k[1] for k in drained)
             and {k: v for k, v in drained.items() if k in theirs} == theirs)
    if not equal:
        raise AssertionError(f"stream runs vs Spark AvailableNow: results differ ({len(theirs)} Spark windows, "
                             f"{len(before_drain)} ours before the drain, {len(drained)} after)")
    report = {"slices": slices, "records": records, "parallelism": parallelism, "results_equal": True,
              "windows_compared": len(theirs), "windows_open_in_spark_state": len(open_in_spark),
              "drain_seconds": drain_seconds,
              "compared": "Spark's emitted windows == ours after the N runs; ours after the drain == those plus "
                          "one last window per key (still open in Spark's state: AvailableNow never ends the input)"}
    for who, label in (("ours", "stream_runs"), ("spark", "spark_available_now")):
        total = sum(runs[who]) + (drain_seconds if who == "ours" else 0.0)
        report[label] = {"run_seconds": [round(s, 4) for s in runs[who]], "total_seconds": total,
                         "seconds_per_run": sum(runs[who]) / slices,
                         "records_per_s": throughput(records, {"median": total, "min": total, "max": total})["median"]}
    report["stream_runs"]["total_includes_drain"] = True
    # records/s of ours over Spark's, both over the whole input (ours with its drain)
    report["ratio_stream_runs_over_spark_available_now"] = report["spark_available_now"]["total_seconds"] / \
        report["stream_runs"]["total_seconds"]
    return report
