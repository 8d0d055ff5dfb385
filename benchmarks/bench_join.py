"""Join section of `make bench`: two-input operators beside a single-input keyed process.

Three pipelines over the same number of input records N, each run whole with
`StreamPipeline.execute(spark=...)` (source chains, HASH exchange, the keyed chain, Parquet sink):

  keyed_process  one input of N records -> key_by(k) -> KeyedProcessFunction (ValueState sum)
  co_process     two inputs of N/2 -> connect().key_by(k, k) -> KeyedCoProcessFunction (ValueState)
  interval_join  two inputs of N/2 -> key_by(k).interval_join(key_by(k)).between(-10 ms, 10 ms)
                 -> ProcessJoinFunction (each left record meets exactly one right record)

Records are {"k", "x", "ts"}: record i has key i % KEYS and event time i ms. BATCH runtime
mode (the inputs are bounded files): each key's records of both inputs are processed together,
sorted by timestamp, so nothing is late however the file source's partitions interleave.
records/s = input records / wall time of the whole pipeline.
"""

from __future__ import annotations

import os
import uuid

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from airflow_flinkchain.functions import KeyedCoProcessFunction, KeyedProcessFunction, ProcessJoinFunction
from airflow_flinkchain.state import ValueStateDescriptor
from benchmarks.bench_common import summarize, throughput, timed

KEYS = 1_000
VARIANTS = ("keyed_process", "co_process", "interval_join")
OUT_TYPE = {"k": "int64", "x": "int64"}


def write_records(path: str, start: int, count: int) -> None:
    i = pa.array(range(start, start + count), pa.int64())
    pq.write_table(pa.table({"k": pc.remainder(i, KEYS), "x": i, "ts": i}), path, row_group_size=256_000)


def key(r):
    return r["k"]


def event_time(r, _previous):
    return r["ts"]


class RunningSum(KeyedProcessFunction):
    def open(self, runtime_context):
        self.total = runtime_context.get_state(ValueStateDescriptor("total"))

    def process_element(self, value, ctx):
        total = (self.total.value() or 0) + value["x"]
        self.total.update(total)
        yield {"k": value["k"], "x": total}


class LatestPlus(KeyedCoProcessFunction):
    """Input 1 sets the key's latest value; input 2 adds it to its own."""

    def open(self, runtime_context):
        self.latest = runtime_context.get_state(ValueStateDescriptor("latest"))

    def process_element1(self, value, ctx):
        self.latest.update(value["x"])
        yield {"k": value["k"], "x": value["x"]}

    def process_element2(self, value, ctx):
        yield {"k": value["k"], "x": value["x"] + (self.latest.value() or 0)}


class PairSum(ProcessJoinFunction):
    def process_element(self, left, right, ctx):
        yield {"k": left["k"], "x": left["x"] + right["x"]}


class JoinBench:
    """Builds the three pipelines once per input size; each call = one timed execute()."""

    def __init__(self, spark, tmp: str, records: int, parallelism: int):
        self.spark, self.tmp, self.records, self.p = spark, tmp, records, parallelism
        half = records // 2
        self.inputs = {name: os.path.join(tmp, "join_in", name) for name in ("all", "left", "right")}
        for name, (start, count) in {"all": (0, records), "left": (0, half), "right": (0, half)}.items():
            os.makedirs(self.inputs[name], exist_ok=True)
            write_records(os.path.join(self.inputs[name], "part-0.parquet"), start, count)
        self.expected_outputs = {"keyed_process": records, "co_process": 2 * half, "interval_join": half}
        self.input_records = {"keyed_process": records, "co_process": 2 * half, "interval_join": 2 * half}

    def out(self, variant: str) -> str:
        return os.path.join(self.tmp, "join_out", variant)

    def _source(self, p, name: str):
        from airflow_flinkchain import WatermarkStrategy
        from airflow_flinkchain.io import ParquetSource

        strategy = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(event_time)
        return (p.from_source(ParquetSource(self.inputs[name]), name=name)
                .assign_timestamps_and_watermarks(strategy).name(f"{name}_time"))

    def pipeline(self, variant: str):
        from airflow_flinkchain import Duration, StreamPipeline
        from airflow_flinkchain.io import ParquetSink

        p = StreamPipeline(f"bench_{variant}", parallelism=self.p, runtime_mode="batch")
        if variant == "keyed_process":
            out = self._source(p, "all").key_by(key).process(RunningSum()).name("running_sum")
        elif variant == "co_process":
            out = (self._source(p, "left").connect(self._source(p, "right")).key_by(key, key)
                   .process(LatestPlus()).name("latest_plus"))
        else:
            out = (self._source(p, "left").key_by(key).interval_join(self._source(p, "right").key_by(key))
                   .between(Duration.of_millis(-10), Duration.of_millis(10)).process(PairSum()).name("pair_sum"))
        out.sink_to(ParquetSink(self.out(variant), output_type=OUT_TYPE), name="sink")
        return p

    def run(self, variant: str) -> None:
        self.pipeline(variant).execute(spark=self.spark, run_id=f"j{uuid.uuid4().hex[:8]}",
                                       exchange_root=os.path.join(self.tmp, "join_exchange"))


def run_join(spark, tmp: str, records: int, parallelism: int, repeat: int, warmup: bool) -> dict:
    from benchmarks.bench_spark import parquet_rows

    bench = JoinBench(spark, tmp, records, parallelism)
    if warmup:  # first-job overheads: not measured
        bench.run("keyed_process")
    times = {v: [] for v in VARIANTS}
    for _ in range(repeat):
        for v in VARIANTS:  # interleaved: machine load hits every variant alike
            times[v].append(timed(lambda: bench.run(v)))
    secs = {v: summarize(times[v]) for v in VARIANTS}
    tput = {v: throughput(bench.input_records[v], secs[v]) for v in VARIANTS}
    outputs = {v: parquet_rows(bench.out(v)) for v in VARIANTS}
    return {
        "records": records, "parallelism": parallelism, "repeat": repeat, "keys": KEYS,
        "warmup": "one untimed keyed_process run first" if warmup else "none",
        "shapes": {"keyed_process": "1 input of N -> key_by -> KeyedProcessFunction -> Parquet",
                   "co_process": "2 inputs of N/2 -> connect.key_by -> KeyedCoProcessFunction -> Parquet",
                   "interval_join": "2 inputs of N/2 -> interval_join.between(-10, 10) -> ProcessJoinFunction "
                                    "-> Parquet"},
        "input_records": bench.input_records, "seconds": secs, "records_per_s": tput,
        "output_records": outputs, "expected_output_records": bench.expected_outputs,
        "ratios": {f"{v}_over_keyed_process": tput[v]["median"] / tput["keyed_process"]["median"]
                   for v in VARIANTS if v != "keyed_process"},
    }
