"""The pyarrow-in-tasks ceiling of the runtime and vectorized sections: P Spark tasks, task k
reading its share of the input files with pyarrow, running the pipeline's functions hand-fused,
and writing Parquet with pyarrow. No JVM data path, no framework: what any Python runtime on
Spark can reach at best with the same functions."""

from __future__ import annotations

import os
import shutil

import pyarrow as pa
import pyarrow.parquet as pq

from benchmarks import runtime_bench as rb

X = pa.schema([("x", pa.int64())])
BATCH_ROWS = 65536


def task_files(path: str, k: int, parallelism: int) -> list:
    """Task k's input files: every P-th of the directory's Parquet files, in name order."""
    files = sorted(f for f in os.listdir(path) if f.endswith(".parquet") and not f.startswith((".", "_")))
    return [os.path.join(path, f) for f in files[k::parallelism]]


def file_batches(files: list):
    for f in files:
        yield from pq.ParquetFile(f).iter_batches(batch_size=BATCH_ROWS)


def in_tasks(spark, path: str, out: str, parallelism: int, task) -> int:
    """Run task(files, out, k) in P Spark tasks (task k: its input files); records written."""
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)

    def run(_):
        from pyspark import TaskContext

        k = TaskContext.get().partitionId()
        yield task(task_files(path, k, parallelism), out, k)

    return sum(spark.sparkContext.parallelize(range(parallelism), parallelism).mapPartitions(run).collect())


def pyarrow3(files: list, out: str, k: int) -> int:
    """map -> filter -> flat_map per record (runtime_bench's functions)."""
    writer, n = pq.ParquetWriter(os.path.join(out, f"part-{k:05d}.parquet"), X), 0
    for batch in file_batches(files):
        rows = []
        for r in batch.to_pylist():
            r = rb.mapper(r)
            if rb.keep(r):
                rows.extend(rb.expand(r))
        writer.write_batch(pa.RecordBatch.from_pylist(rows, schema=X))
        n += len(rows)
    writer.close()
    return n


def batch_task(*functions):
    """A task running batch functions (RecordBatch -> RecordBatch, or -> a filter mask) in order."""
    def task(files: list, out: str, k: int) -> int:
        writer, n = pq.ParquetWriter(os.path.join(out, f"part-{k:05d}.parquet"), X), 0
        for batch in file_batches(files):
            for fn in functions:
                result = fn(batch)
                batch = result if isinstance(result, pa.RecordBatch) else batch.filter(result)
            writer.write_batch(batch)
            n += batch.num_rows
        writer.close()
        return n

    return task
