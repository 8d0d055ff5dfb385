"""The vectorized section of `make bench`: batch operators vs native Spark expressions.

The runtime section's pipeline (map -> filter -> flat_map, Parquet in and out,
{"x": int64} records, x -> 3x + 1, keep even, x -> [x, x + 1]) in these forms,
on the same input (P Parquet files: Spark reads P splits, no shuffle), in the same run:

  native        Spark DataFrame expressions (no Python per record)              (the reference)
  pyarrow       the batch functions below in P Spark tasks reading and writing Parquet with
                pyarrow (bench_tasks: the ceiling of the vectorized path)
  vectorized    map_batches -> filter_batches -> map_batches over pyarrow.compute (batch head to
                batch tail: Parquet batches in, Parquet batches out)
  mixed_brb     map_batches -> filter (per record) -> map_batches               (batch -> record -> batch)
  mixed_rb      map (per record) -> filter_batches -> map_batches               (record -> batch)
  per_record    map -> filter -> flat_map (the runtime section's chain)
  fused         the per-record functions hand-fused in one mapInArrow function
  pyarrow_records  the per-record functions in P pyarrow tasks (the ceiling of per_record)

Each chain variant is one `run_chain` (one Spark job, commit included). Wall time and the
CPU seconds of the whole process tree are recorded per run.
Target: vectorized >= 0.8 x native (median wall time).
"""

from __future__ import annotations

import os
import statistics
import uuid

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from benchmarks import runtime_bench as rb
from benchmarks.bench_common import summarize, throughput, timed_cpu
from benchmarks.bench_spark import input_partitions, parquet_rows
from benchmarks.bench_tasks import batch_task, in_tasks, pyarrow3

VARIANTS = ("native", "pyarrow", "vectorized", "mixed_brb", "mixed_rb", "per_record", "fused", "pyarrow_records")
CHAINS = ("vectorized", "mixed_brb", "mixed_rb", "per_record")
TARGET = 0.8
X = {"x": "int64"}


def map_batch(batch: pa.RecordBatch) -> pa.RecordBatch:
    return pa.RecordBatch.from_arrays([pc.add(pc.multiply(batch.column(0), 3), 1)], names=["x"])


def keep_batch(batch: pa.RecordBatch):
    return pc.equal(pc.bit_wise_and(batch.column(0), 1), 0)


def expand_batch(batch: pa.RecordBatch) -> pa.RecordBatch:
    x = batch.column(0).to_numpy()
    return pa.RecordBatch.from_arrays([pa.array(np.column_stack([x, x + 1]).ravel())], names=["x"])


def build(kind: str, path: str, out: str, parallelism: int):
    from airflow_flinkchain import StreamPipeline
    from airflow_flinkchain.io import ParquetSink, ParquetSource

    p = StreamPipeline(f"bench_vec_{kind}", parallelism=parallelism, runtime_mode="batch")
    s = p.from_source(ParquetSource(path), name="src")
    if kind == "vectorized":
        s = s.map_batches(map_batch).name("map").filter_batches(keep_batch).name("filter")
        s = s.map_batches(expand_batch).name("flat_map")
    elif kind == "mixed_brb":
        s = s.map_batches(map_batch).name("map").filter(rb.keep).name("filter")
        s = s.map_batches(expand_batch).name("flat_map")
    elif kind == "mixed_rb":
        s = s.map(rb.mapper).name("map").filter_batches(keep_batch).name("filter")
        s = s.map_batches(expand_batch).name("flat_map")
    else:
        s = s.map(rb.mapper).name("map").filter(rb.keep).name("filter").flat_map(rb.expand).name("flat_map")
    s.sink_to(ParquetSink(out, output_type=X), name="sink")
    job = p.plan()
    assert len(job.chains) == 1, [c.operator_names for c in job.chains]
    return job


class VectorizedBench:
    def __init__(self, spark, tmp: str, path: str, parallelism: int):
        from airflow_flinkchain.runtime.core.serialize import dumps_plan

        self.spark, self.path, self.p = spark, path, parallelism
        self.root = os.path.join(tmp, "vectorized")
        self.exchange = os.path.join(self.root, "exchange")
        self.jobs = {v: build(v, path, self.out(v), parallelism) for v in CHAINS}
        self.plans = {v: dumps_plan(job) for v, job in self.jobs.items()}

    def out(self, name: str) -> str:
        return os.path.join(self.root, "out", name)

    def run(self, variant: str) -> None:
        if variant == "native":
            from pyspark.sql import functions as F

            x = F.col("x")
            df = self.spark.read.parquet(self.path).select((x * 3 + 1).alias("x"))
            df = df.filter(x % 2 == 0).select(F.explode(F.array(x, x + 1)).alias("x"))
            df.write.mode("overwrite").parquet(self.out("native"))
            return
        if variant == "pyarrow":
            in_tasks(self.spark, self.path, self.out(variant), self.p, batch_task(map_batch, keep_batch, expand_batch))
            return
        if variant == "pyarrow_records":
            in_tasks(self.spark, self.path, self.out(variant), self.p, pyarrow3)
            return
        if variant == "fused":
            rb.run_fused(self.spark, self.path, self.out(variant), self.p)
            return
        from airflow_flinkchain.runtime.spark.job import run_chain

        job = self.jobs[variant]
        run_chain(self.spark, job, job.chains[0].id, f"r{uuid.uuid4().hex[:8]}", self.exchange,
                  plan_bytes=self.plans[variant])


def run_vectorized(spark, tmp: str, records: int, parallelism: int, repeat: int, warmup: bool,
                   input_path: str) -> dict:
    bench = VectorizedBench(spark, tmp, input_path, parallelism)
    if warmup:  # JVM JIT, Python workers, first-job overheads: not measured
        for v in ("native", "pyarrow", "vectorized"):
            bench.run(v)
    times = {v: [] for v in VARIANTS}
    cpu = {v: [] for v in VARIANTS}
    for _ in range(repeat):
        for v in VARIANTS:  # interleaved: machine load hits every variant alike
            wall, used = timed_cpu(lambda: bench.run(v))
            times[v].append(wall)
            cpu[v].append(used)
    secs = {v: summarize(times[v]) for v in VARIANTS}
    tput = {v: throughput(records, secs[v]) for v in VARIANTS}
    ratios = {f"{v}_over_native": tput[v]["median"] / tput["native"]["median"] for v in VARIANTS if v != "native"}
    ceilings = {"vectorized_over_pyarrow": ("vectorized", "pyarrow"), "per_record_over_fused": ("per_record", "fused"),
                "per_record_over_pyarrow_records": ("per_record", "pyarrow_records")}
    ratios.update({k: tput[a]["median"] / tput[b]["median"] for k, (a, b) in ceilings.items()})
    cpu_med = {v: statistics.median(cpu[v]) for v in VARIANTS}
    cpu_ratios = {f"{v}_over_native": cpu_med["native"] / cpu_med[v] for v in VARIANTS if v != "native" and cpu_med[v]}
    cpu_ratios.update({k: cpu_med[b] / cpu_med[a] for k, (a, b) in ceilings.items() if cpu_med[a]})
    counts = {v: parquet_rows(bench.out(v)) for v in VARIANTS}
    return {
        "records": records, "parallelism": parallelism, "repeat": repeat,
        "shape": "map -> filter -> flat_map, Parquet in and out",
        "input": f"{parallelism} Parquet files, read by Spark as {input_partitions(spark, input_path)} splits",
        "variants": {"native": "Spark DataFrame expressions",
                     "vectorized": "map_batches -> filter_batches -> map_batches (pyarrow.compute)",
                     "mixed_brb": "map_batches -> filter -> map_batches",
                     "mixed_rb": "map -> filter_batches -> map_batches",
                     "per_record": "map -> filter -> flat_map",
                     "pyarrow": "the batch functions in P Spark tasks, pyarrow in and out",
                     "fused": "the per-record functions hand-fused in one mapInArrow function",
                     "pyarrow_records": "the per-record functions in P Spark tasks, pyarrow in and out"},
        "seconds": secs, "records_per_s": tput, "ratios": ratios, "output_records": counts,
        "cpu_seconds": {v: summarize(cpu[v]) for v in VARIANTS},
        "cpu_ratios": cpu_ratios,  # records per CPU second (whole process tree), this over that
        "target_vectorized_over_native": TARGET, "meets_target": ratios["vectorized_over_native"] >= TARGET,
    }
