"""Chain runtime vs hand-fused mapInArrow: same input, same three functions.

    .venv/bin/python -m benchmarks.runtime_bench [--records 2000000] [--parallelism 2]

Input: N small dict records {"x": int} in P Parquet files (Spark reads them as P
splits, no shuffle). Both variants run map -> filter -> flat_map and write Parquet:
  * chain: `run_chain` of a one-chain pipeline (source -> map -> filter ->
    flat_map -> Parquet sink), i.e. the OperatorChain runtime with its outputs,
    counters and commit;
  * fused: the three functions inlined in one mapInArrow function, written with
    DataFrame.write.parquet.
With object reuse off (Flink's default) the chain deep-copies each dict record
between chained operators, as CopyingChainingOutput must; `--object-reuse`
measures the chain without those copies. Runs are interleaved (chain, fused,
chain, ...) after one warm-up round of each, so a busy machine slows both
alike; prints records/s (input records) and the ratio chain/fused of the
median wall time over `--repeat` runs (target >= 0.9), with min and max.
Not a timed test.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time

import pyarrow as pa


def mapper(r):
    return {"x": r["x"] * 3 + 1}


def keep(r):
    return r["x"] % 2 == 0


def expand(r):
    return [r, {"x": r["x"] + 1}]


def run_fused(spark, path: str, out: str, parallelism: int) -> None:
    schema = pa.schema([("x", pa.int64())])

    def fused(batches):
        for batch in batches:
            out_rows = []
            for r in batch.to_pylist():
                r = mapper(r)
                if keep(r):
                    out_rows.extend(expand(r))
            yield pa.RecordBatch.from_pylist(out_rows, schema=schema)

    spark.read.parquet(path).mapInArrow(fused, "x long").write.mode("overwrite").parquet(out)


def build_chain(path: str, out: str, parallelism: int, object_reuse: bool = False):
    from airflow_flinkchain import StreamPipeline
    from airflow_flinkchain.io import ParquetSink, ParquetSource

    p = StreamPipeline("bench", parallelism=parallelism, runtime_mode="batch")
    if object_reuse:  # no defensive copy of dict records between chained operators (Flink's enableObjectReuse)
        p.set_object_reuse(True)
    (p.from_source(ParquetSource(path), name="src").map(mapper).name("map").filter(keep).name("filter")
     .flat_map(expand).name("flat_map").sink_to(ParquetSink(out, output_type={"x": "int64"}), name="sink"))
    job = p.plan()
    assert len(job.chains) == 1, [c.operator_names for c in job.chains]
    return job


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=2_000_000)
    ap.add_argument("--parallelism", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--object-reuse", action="store_true",
                    help="enable object reuse (default off: the core deep-copies dict records per chained output)")
    args = ap.parse_args(argv)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from airflow_flinkchain.runtime.core.serialize import dumps_plan
    from airflow_flinkchain.runtime.spark.session import get_or_create_spark
    from airflow_flinkchain.runtime.spark.job import run_chain

    spark = get_or_create_spark(master=f"local[{args.parallelism}]", app_name="flinkchain-bench")
    tmp = tempfile.mkdtemp(prefix="flinkchain-bench-")
    try:
        from benchmarks.bench_spark import write_input

        path = os.path.join(tmp, "input")
        write_input(path, args.records, args.parallelism)
        job = build_chain(path, os.path.join(tmp, "chain_out"), args.parallelism, args.object_reuse)
        plan = dumps_plan(job)
        chain_id = job.chains[0].id
        times = {"chain": [], "fused": []}
        for i in range(args.repeat + 1):  # first round warms up Spark and the Python workers
            t = time.perf_counter()
            res = run_chain(spark, job, chain_id, f"bench{i}", os.path.join(tmp, "exchange"), plan_bytes=plan)
            times["chain"].append(time.perf_counter() - t)
            t = time.perf_counter()
            run_fused(spark, path, os.path.join(tmp, "fused_out"), args.parallelism)
            times["fused"].append(time.perf_counter() - t)
        sink_out = sum(o["records"] for o in res.outputs)
        fused_out = spark.read.parquet(os.path.join(tmp, "fused_out")).count()
        assert sink_out == fused_out == args.records, (sink_out, fused_out)
        runs = {k: v[1:] for k, v in times.items()}
        med = {k: statistics.median(v) for k, v in runs.items()}
        for k in ("chain", "fused"):
            print(f"{k:6s}: {args.records / med[k]:>12,.0f} records/s  (median {med[k]:.2f}s, min {min(runs[k]):.2f}s,"
                  f" max {max(runs[k]):.2f}s of {len(runs[k])} runs)")
        pair = [f / c for c, f in zip(runs["chain"], runs["fused"])]  # each chain run vs the fused run right after it
        print(f"ratio chain/fused throughput: {med['fused'] / med['chain']:.2f} of medians; per interleaved pair:"
              f" median {statistics.median(pair):.2f}, min {min(pair):.2f}, max {max(pair):.2f}  (target >= 0.9)")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
