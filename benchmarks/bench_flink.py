"""Flink for comparison (section 5 of `make bench`): only when the optional
`apache-flink` extra is installed (`import pyflink` succeeds); the harness never
installs it. Same map -> filter -> flat_map over the same Parquet input, PyFlink
DataStream API in BATCH mode, records/s."""

from __future__ import annotations

from benchmarks import runtime_bench as rb
from benchmarks.bench_common import summarize, throughput, timed


def flink_available() -> bool:
    try:
        import pyflink  # noqa: F401
    except ImportError:
        return False
    return True


def run_flink(input_path: str, records: int, parallelism: int, repeat: int) -> dict:
    if not flink_available():
        return {"status": "skipped: apache-flink not installed"}
    import pyarrow.parquet as pq
    from pyflink.common import Types
    from pyflink.datastream import RuntimeExecutionMode, StreamExecutionEnvironment

    xs = pq.read_table(input_path).column("x").to_pylist()  # same input; read outside the timed region

    def once():
        env = StreamExecutionEnvironment.get_execution_environment()
        env.set_runtime_mode(RuntimeExecutionMode.BATCH)
        env.set_parallelism(parallelism)
        ds = env.from_collection(xs, type_info=Types.LONG())
        out = (ds.map(lambda x: rb.mapper({"x": x})["x"], output_type=Types.LONG())
               .filter(lambda x: rb.keep({"x": x}))
               .flat_map(lambda x: [r["x"] for r in rb.expand({"x": x})], output_type=Types.LONG()))
        with out.execute_and_collect() as results:
            for _ in results:
                pass

    samples = [timed(once) for _ in range(repeat)]
    secs = summarize(samples)
    return {"status": "measured (untested path: written without pyflink installed)", "records": records,
            "parallelism": parallelism, "seconds": secs, "records_per_s": throughput(records, secs),
            "note": "input passed with from_collection (PyFlink has no Python Parquet source without the "
                    "table connectors); output collected to the client instead of written to Parquet"}
