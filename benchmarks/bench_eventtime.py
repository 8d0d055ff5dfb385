"""Event-time section of `make bench` (`eventtime`): the per-record cost of keyed state and timers.

One generated input ({"k", "v", "ts"}: 100 keys, a record every 10 ms of event time, in order),
one pipeline shape - Parquet source (parallelism 1, so the records keep their order) ->
assign_timestamps_and_watermarks (bounded 1 s) -> key_by(k) -> OPERATOR (parallelism P) ->
Parquet sink - run whole with `execute()` on Spark, records/s of the input:

  reduce_batch       keyed reduce, BATCH mode: one result per key          (the baseline)
  window_streaming   tumbling 10 s event-time window, reduce, STREAMING    (a watermark per record)
  window_batch       the same window in BATCH mode (sorted per key)
  timers_streaming   KeyedProcessFunction: ValueState count + an event-time timer at the end of
                     each 10 s bucket, on_timer emits (k, bucket end, count); STREAMING
  timers_batch       the same in BATCH mode

Ratios: each variant over reduce_batch (issue target: window and timer pipelines >= 1/3). With an
interpreter that has apache-flink (see bench_flink), the tumbling window pipeline also runs in
PyFlink, STREAMING mode, over the same values as text lines.
"""

from __future__ import annotations

import os
import uuid

import pyarrow as pa
import pyarrow.parquet as pq

from airflow_flinkchain.common import Duration, WatermarkStrategy
from airflow_flinkchain.functions import KeyedProcessFunction
from airflow_flinkchain.state import ValueStateDescriptor
from airflow_flinkchain.window import TumblingEventTimeWindows
from benchmarks.bench_common import summarize, throughput, timed

KEYS = 100
STEP_MS = 10
WINDOW_MS = 10_000
OUT_OF_ORDERNESS_MS = 1_000
VARIANTS = ("reduce_batch", "window_streaming", "window_batch", "timers_streaming", "timers_batch")
BASELINE = "reduce_batch"
TARGET_RATIO = 1 / 3
OUT_TYPE = {"k": "int64", "v": "int64", "ts": "int64"}


def write_events(path: str, records: int) -> None:
    """`records` events in event-time order, one row group (one input split: the order stays)."""
    table = pa.table({"k": pa.array([i % KEYS for i in range(records)], pa.int64()),
                      "v": pa.array([i % 7 for i in range(records)], pa.int64()),
                      "ts": pa.array([i * STEP_MS for i in range(records)], pa.int64())})
    pq.write_table(table, path, row_group_size=max(records, 1))


def event_time(r, _record_timestamp=None):
    return r["ts"]


def key_of(r):
    return r["k"]


def add(a, b):
    return {"k": a["k"], "v": a["v"] + b["v"], "ts": max(a["ts"], b["ts"])}


class CountPerBucket(KeyedProcessFunction):
    """ValueState count per key; an event-time timer at the end of each record's bucket."""

    def open(self, runtime_context):
        self.count = runtime_context.get_state(ValueStateDescriptor("count"))

    def process_element(self, value, ctx):
        self.count.update((self.count.value() or 0) + 1)
        ts = ctx.timestamp()
        ctx.timer_service().register_event_time_timer(ts - ts % WINDOW_MS + WINDOW_MS - 1)
        return None

    def on_timer(self, timestamp, ctx):
        return [{"k": ctx.get_current_key(), "v": self.count.value(), "ts": timestamp}]


def build(variant: str, path: str, out: str, parallelism: int):
    from airflow_flinkchain import StreamPipeline
    from airflow_flinkchain.io import ParquetSink, ParquetSource

    op, mode = variant.split("_")
    p = StreamPipeline(f"bench_{variant}", parallelism=parallelism, runtime_mode=mode)
    strategy = WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_millis(OUT_OF_ORDERNESS_MS))
    keyed = (p.from_source(ParquetSource(path), name="events").set_parallelism(1)
             .assign_timestamps_and_watermarks(strategy.with_timestamp_assigner(event_time)).name("timestamps")
             .set_parallelism(1).key_by(key_of))
    if op == "reduce":
        result = keyed.reduce(add)
    elif op == "window":
        result = keyed.window(TumblingEventTimeWindows.of(Duration.of_millis(WINDOW_MS))).reduce(add)
    else:
        result = keyed.process(CountPerBucket())
    result.name(op).sink_to(ParquetSink(out, output_type=OUT_TYPE), name="sink")
    return p


def expected_outputs(variant: str, records: int) -> int:
    """Results of a variant: one per key (reduce), one per key and 10 s bucket (window, timers)."""
    if variant == BASELINE:
        return min(records, KEYS)
    buckets = {(i % KEYS, i * STEP_MS // WINDOW_MS) for i in range(records)}
    return len(buckets)


def run_eventtime(spark, tmp: str, records: int, parallelism: int, repeat: int, warmup: bool = True) -> dict:
    from airflow_flinkchain.runtime.spark.local import execute_pipeline
    from benchmarks.bench_spark import parquet_rows

    path = os.path.join(tmp, f"events_{records}.parquet")
    write_events(path, records)
    samples: dict = {v: [] for v in VARIANTS}
    outputs: dict = {}
    for round_ in range(repeat + (1 if warmup else 0)):
        for variant in VARIANTS:  # interleaved: a slow phase of the machine hits every variant
            out = os.path.join(tmp, "eventtime_out", f"{variant}_{uuid.uuid4().hex[:6]}")
            pipeline = build(variant, path, out, parallelism)
            seconds = timed(lambda: execute_pipeline(pipeline, spark=spark,
                                                     exchange_root=os.path.join(tmp, "eventtime_exchange")))
            outputs[variant] = parquet_rows(out)
            if round_ >= (1 if warmup else 0):
                samples[variant].append(seconds)
    for variant, n in outputs.items():
        if n != expected_outputs(variant, records):
            raise RuntimeError(f"eventtime {variant}: {n} results, expected {expected_outputs(variant, records)} "
                               "(records dropped as late?)")
    seconds = {v: summarize(s) for v, s in samples.items()}
    rates = {v: throughput(records, s) for v, s in seconds.items()}
    base = rates[BASELINE]["median"]
    ratios = {f"{v}_over_{BASELINE}": rates[v]["median"] / base for v in VARIANTS if v != BASELINE}
    report = {
        "records": records, "keys": KEYS, "window_ms": WINDOW_MS, "parallelism": parallelism,
        "seconds": seconds, "records_per_s": rates, "ratios": ratios, "output_records": outputs,
        "target_ratio": TARGET_RATIO, "meets_target": all(r >= TARGET_RATIO for r in ratios.values()),
        "note": "whole pipeline through execute(): Parquet source (p=1) -> timestamps -> HASH -> keyed operator "
                "(p=P) -> Parquet sink; records/s of the input",
    }
    report["flink"] = run_flink_window(path, records, parallelism, repeat, tmp)
    return report


# ---- PyFlink: the tumbling window pipeline, STREAMING ------------------------------------------

def run_flink_window(parquet_path: str, records: int, parallelism: int, repeat: int, tmp: str) -> dict:
    from benchmarks.bench_flink import flink_python, run_workers

    py = flink_python()
    if py is None:
        return {"status": "skipped: no interpreter with apache-flink (make bench-flink-venv creates .venv-flink)"}
    text = os.path.join(tmp, "eventtime_flink_input.txt")
    rows = pq.read_table(parquet_path).to_pylist()
    with open(text, "w") as fh:
        fh.write("".join(f"{r['k']},{r['v']},{r['ts']}\n" for r in rows))
    samples, outputs = run_workers(py, ["benchmarks.bench_eventtime", "--flink-worker"], text,
                                   os.path.join(tmp, "eventtime_flink_out_"), parallelism, repeat)
    secs = summarize(samples)
    return {"status": "measured", "variant": "window_streaming", "records": records, "seconds": secs,
            "records_per_s": throughput(records, secs), "output_records": outputs[-1],
            "note": "text-line file source and FileSink; time of env.execute() including the mini-cluster start"}


def flink_worker(text: str, out: str, parallelism: int) -> None:
    from pyflink.common import Duration as FlinkDuration
    from pyflink.common import Time, Types
    from pyflink.common import WatermarkStrategy as FlinkWatermarkStrategy
    from pyflink.common.watermark_strategy import TimestampAssigner
    from pyflink.datastream.window import TumblingEventTimeWindows as FlinkTumbling

    from benchmarks.bench_flink import execute_and_report, text_job, text_sink

    class Ts(TimestampAssigner):
        def extract_timestamp(self, value, record_timestamp):
            return value[2]

    env, lines = text_job("STREAMING", parallelism, text, "events")
    strategy = (FlinkWatermarkStrategy.for_bounded_out_of_orderness(FlinkDuration.of_millis(OUT_OF_ORDERNESS_MS))
                .with_timestamp_assigner(Ts()))
    (lines.set_parallelism(1)
     .map(lambda s: tuple(int(x) for x in s.split(",")), output_type=Types.PICKLED_BYTE_ARRAY()).set_parallelism(1)
     .assign_timestamps_and_watermarks(strategy).set_parallelism(1)
     .key_by(lambda r: r[0])
     .window(FlinkTumbling.of(Time.milliseconds(WINDOW_MS)))  # PyFlink's window assigners take a Time
     .reduce(lambda a, b: (a[0], a[1] + b[1], max(a[2], b[2])))
     .map(lambda r: f"{r[0]},{r[1]},{r[2]}", output_type=Types.STRING())
     .sink_to(text_sink(out)))
    execute_and_report(env, "flinkchain-bench-eventtime", out)


if __name__ == "__main__":
    import argparse

    ap = argparse.ArgumentParser()
    ap.add_argument("--flink-worker", nargs=3, metavar=("TEXT", "OUT", "PARALLELISM"), required=True)
    a = ap.parse_args()
    flink_worker(a.flink_worker[0], a.flink_worker[1], int(a.flink_worker[2]))
