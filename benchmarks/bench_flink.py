"""Flink for comparison (section 5 of `make bench`): the same map -> filter ->
flat_map (the functions of runtime_bench) over the same values, in PyFlink's
DataStream API, BATCH mode, parallelism P, records/s.

PyFlink pins its own pyarrow/pandas/numpy/apache-beam, so it lives in its own
venv, never in the Airflow one: `make bench-flink-venv` creates `.venv-flink`
(apache-flink 2.3.0, ~850 MB). The section runs when an interpreter with
pyflink is found - `FLINKCHAIN_FLINK_PYTHON`, else `.venv-flink/bin/python`,
else this interpreter if it can import pyflink - and is skipped otherwise.
Each run is a fresh `python -m benchmarks.bench_flink --worker ...` process.

Differences from the Spark variants, recorded in the report: PyFlink has no
Python Parquet source without the table connectors, so the same values are
read from a text file (one integer per line, Flink's Java text-line source)
and written back as text lines with Flink's FileSink; the time is that of
`env.execute()` (a local mini-cluster, started per run, as Spark's local mode
is reused) - the JVM start is excluded, the mini-cluster start included.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

from benchmarks.bench_common import REPO, summarize, throughput


def flink_python() -> str | None:
    """An interpreter that can import pyflink, or None."""
    candidates = [os.environ.get("FLINKCHAIN_FLINK_PYTHON"), os.path.join(REPO, ".venv-flink", "bin", "python"),
                  sys.executable]
    for py in candidates:
        if py and os.path.exists(py):
            ok = subprocess.run([py, "-c", "import pyflink"], capture_output=True).returncode == 0
            if ok:
                return py
    return None


def write_text_input(parquet_path: str, text_path: str) -> None:
    import pyarrow.parquet as pq

    xs = pq.read_table(parquet_path).column("x").to_pylist()
    with open(text_path, "w") as fh:
        fh.write("".join(f"{x}\n" for x in xs))


def run_workers(py: str, command: list[str], text: str, out_prefix: str, parallelism: int,
                repeat: int) -> tuple[list[float], list[int]]:
    """`repeat` fresh PyFlink processes `py -m COMMAND TEXT OUT PARALLELISM` (OUT = out_prefix + i):
    their seconds and output record counts."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (REPO, os.environ.get("PYTHONPATH")) if p)}
    samples, outputs = [], []
    for i in range(repeat):
        proc = subprocess.run([py, "-m", *command, text, f"{out_prefix}{i}", str(parallelism)],
                              cwd=REPO, env=env, capture_output=True, text=True, timeout=3600)
        if proc.returncode != 0:
            raise RuntimeError(f"PyFlink run {command[0]} failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}")
        result = json.loads(proc.stdout.strip().splitlines()[-1])
        samples.append(result["seconds"])
        outputs.append(result["records_out"])
    return samples, outputs


def execute_and_report(env, job_name: str, out: str) -> None:
    """Run the PyFlink job and print `{"seconds", "records_out"}` (lines written under `out`)."""
    t = time.perf_counter()
    env.execute(job_name)
    seconds = time.perf_counter() - t
    n = 0
    for root, _, files in os.walk(out):
        for f in files:
            if not f.startswith("."):
                with open(os.path.join(root, f), "rb") as fh:
                    n += sum(1 for _ in fh)
    print(json.dumps({"seconds": seconds, "records_out": n}))


def run_flink(input_path: str, records: int, parallelism: int, repeat: int, tmp: str | None = None) -> dict:
    py = flink_python()
    if py is None:
        return {"status": "skipped: no interpreter with apache-flink (make bench-flink-venv creates .venv-flink)"}
    tmp = tmp or os.path.dirname(input_path)
    text = os.path.join(tmp, "flink_input.txt")
    write_text_input(input_path, text)
    version = subprocess.run([py, "-c", "from importlib.metadata import version; print(version('apache-flink'))"],
                             capture_output=True, text=True).stdout.strip()
    samples, outputs = run_workers(py, ["benchmarks.bench_flink", "--worker"], text,
                                   os.path.join(tmp, "flink_out_"), parallelism, repeat)
    if any(n != records for n in outputs):  # map -> filter(half) -> flat_map(x2): as many out as in
        raise RuntimeError(f"PyFlink wrote {outputs} records, expected {records} per run")
    secs = summarize(samples)
    return {"status": "measured", "apache_flink": version, "python": py, "records": records,
            "parallelism": parallelism, "seconds": secs, "records_per_s": throughput(records, secs),
            "note": "same values and functions; text-line file source and FileSink (no Python Parquet source in "
                    "PyFlink's DataStream API); time of env.execute() including the local mini-cluster start"}


def text_job(mode: str, parallelism: int, text: str, source_name: str):
    """A PyFlink environment in runtime mode `mode` ("BATCH" or "STREAMING") and the lines of the
    text file as its source stream."""
    from pyflink.common import WatermarkStrategy
    from pyflink.datastream import RuntimeExecutionMode, StreamExecutionEnvironment
    from pyflink.datastream.connectors.file_system import FileSource, StreamFormat

    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_runtime_mode(getattr(RuntimeExecutionMode, mode))
    env.set_parallelism(parallelism)
    env.set_python_executable(sys.executable)  # Flink's Python workers: this venv, not `python` on PATH
    source = FileSource.for_record_stream_format(StreamFormat.text_line_format(), text).build()
    return env, env.from_source(source, WatermarkStrategy.no_watermarks(), source_name)


def text_sink(out: str):
    """A FileSink writing one line per (string) record under `out`."""
    from pyflink.common import Encoder
    from pyflink.datastream.connectors.file_system import FileSink

    return FileSink.for_row_format(out, Encoder.simple_string_encoder()).build()


def worker(text: str, out: str, parallelism: int) -> None:
    from pyflink.common import Types

    from benchmarks import runtime_bench as rb

    env, lines = text_job("BATCH", parallelism, text, "src")
    (lines
     .map(lambda s: rb.mapper({"x": int(s)}), output_type=Types.PICKLED_BYTE_ARRAY()).name("map")
     .filter(rb.keep).name("filter")
     .flat_map(rb.expand, output_type=Types.PICKLED_BYTE_ARRAY()).name("flat_map")
     .map(lambda r: str(r["x"]), output_type=Types.STRING())
     .sink_to(text_sink(out)))
    execute_and_report(env, "flinkchain-bench", out)


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--worker", nargs=3, metavar=("TEXT", "OUT", "PARALLELISM"), required=True)
    a = ap.parse_args()
    worker(a.worker[0], a.worker[1], int(a.worker[2]))
