"""Vectorized keyed aggregations on Spark: Parquet (a typed source) -> key_by(field) ->
sum/min/max/min_by/max_by, against the same aggregation written as a `reduce` (the per-record
twin), multisets of (record, timestamp), in BATCH, in STREAMING, and over stream runs of a
monitored directory with the parallelism changed between runs, ending with a drain."""

from __future__ import annotations

from collections import Counter

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_flinkchain import StreamPipeline
from airflow_flinkchain.api.aggregations import AggregationFunction
from airflow_flinkchain.common import Duration, WatermarkStrategy
from airflow_flinkchain.io import ParquetSource
from airflow_flinkchain.runtime.spark.local import execute_pipeline
from airflow_flinkchain.planner.vectorized import takes_batches
from tests.conformance_cases import WithTimestamp

pytestmark = pytest.mark.spark
ROW = {"k": "string", "v": "int64", "ts": "int64"}


def write_slice(directory, name, seed, n):
    rows = [{"k": f"k{(i * 7 + seed) % 5}", "v": (i * 13 + seed) % 11 - 5, "ts": (i * 37 + seed * 5) % 200}
            for i in range(n)]
    directory.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows, schema=pa.schema([(k, pa.string() if t == "string" else pa.int64())
                                                                 for k, t in ROW.items()])),
                   directory / name, row_group_size=17)


def twin_reduce(kind):
    fn = AggregationFunction(kind, "v")
    return lambda a, b: fn.reduce(a, b)


def build(name, path, kind, mode, vectorized, parallelism=2, timestamps=False, checkpoint_dir=None, monitor=False):
    p = StreamPipeline(name, parallelism=parallelism, runtime_mode=mode, checkpoint_dir=checkpoint_dir)
    s = p.from_source(ParquetSource(str(path), monitor=monitor), name="src", output_type=ROW).uid("src")
    if timestamps:
        s = s.assign_timestamps_and_watermarks(WatermarkStrategy.for_bounded_out_of_orderness(
            Duration.of_millis(20)).with_timestamp_assigner(lambda r, _ts: r["ts"])).uid("wm")
    keyed = s.key_by(lambda r: r["k"])
    agg = getattr(keyed, kind)("v") if vectorized else keyed.reduce(twin_reduce(kind))
    agg.uid("agg").name("agg").process(WithTimestamp()).name("stamp").collect("out")
    return p


def assert_takes_batches(p):
    """The aggregation is the vectorized one and its input edge is typed: the chain head reads
    Arrow batches (stream_task.subtask_input)."""
    g = p.plan().stream_graph
    agg = next(n for n in g.nodes if n.name == "agg")
    assert takes_batches(agg)
    assert all(g.node(e.source_id).output_type is not None for e in g.edges if e.target_id == agg.id)


def as_multiset(values):
    return Counter((tuple(sorted(v.items())), ts) for v, ts in values)


@pytest.mark.parametrize("mode", ["batch", "streaming"])
def test_keyed_aggregations_equal_their_reduce_twin(spark, tmp_path, mode):
    data = tmp_path / "in"
    write_slice(data, "a.parquet", 1, 300)
    write_slice(data, "b.parquet", 2, 250)
    for kind in ("sum", "min", "max", "min_by", "max_by"):
        for timestamps in ((False, True) if kind == "sum" else (True,)):
            assert_takes_batches(build("check", data, kind, mode, True, timestamps=timestamps))
            got, want = (execute_pipeline(build(f"agg_{kind}_{vec}", data, kind, mode, vec, timestamps=timestamps),
                                          spark=spark).output("out") for vec in (True, False))
            assert as_multiset(got) == as_multiset(want), (kind, mode, timestamps)
            assert len(got) == (550 if mode == "streaming" else 5)


def stream_runs(spark, tmp_path, name, vectorized):
    """Three stream runs over a monitored directory (a file arrives before each; parallelism
    2, 3, 1) and a drain; `vectorized[k]`: whether run k uses sum's vectorized form."""
    data, ckpt, held = tmp_path / name / "log", tmp_path / name / "ckpt", tmp_path / name / "held"
    held.mkdir(parents=True)
    for k in range(3):
        write_slice(held, f"part-{k}.parquet", k, 120)
    got = []
    for k, parallelism in enumerate([2, 3, 1, 2]):
        if k < 3:
            data.mkdir(parents=True, exist_ok=True)
            (held / f"part-{k}.parquet").rename(data / f"part-{k}.parquet")
        p = build("agg_stream", data, "sum", "streaming", vectorized[k], parallelism, True, str(ckpt), monitor=True)
        if vectorized[k]:
            assert_takes_batches(p)
        got += p.execute(spark=spark, run_id=f"r{k}", drain=k == 3).output("out")
    return got


def test_stream_runs_with_rescaling_and_a_drain_equal_the_per_record_runs(spark, tmp_path):
    """Vectorized and per-record runs alternate over one checkpoint (their snapshots are one
    format); the results equal the per-record runs' (per key, the records arrive in the same
    order in both: rolling results depend on it)."""
    want = stream_runs(spark, tmp_path, "twin", [False] * 4)
    got = stream_runs(spark, tmp_path, "mixed", [True, False, True, True])
    assert len(want) == 360 and as_multiset(got) == as_multiset(want)


def build_window(name, path, kind, mode, vectorized):
    from airflow_flinkchain.window import TumblingEventTimeWindows

    p = StreamPipeline(name, parallelism=2, runtime_mode=mode)
    s = p.from_source(ParquetSource(str(path)), name="src", output_type=ROW)
    s = s.assign_timestamps_and_watermarks(WatermarkStrategy.for_bounded_out_of_orderness(
        Duration.of_millis(20)).with_timestamp_assigner(lambda r, _ts: r["ts"]))
    w = s.key_by(lambda r: r["k"]).window(TumblingEventTimeWindows.of(Duration.of_millis(30)))
    agg = getattr(w, kind)("v") if vectorized else w.reduce(twin_reduce(kind))
    agg.name("agg").process(WithTimestamp()).name("stamp").collect("out")
    return p


@pytest.mark.parametrize("mode", ["batch", "streaming"])
def test_tumbling_window_aggregations_equal_their_reduce_twin(spark, tmp_path, mode):
    data = tmp_path / "in"
    write_slice(data, "a.parquet", 3, 300)
    write_slice(data, "b.parquet", 4, 250)
    for kind in ("sum", "min_by"):
        p = build_window(f"win_{kind}", data, kind, mode, True)
        if mode == "batch":
            assert_takes_batches(p)
        got, want = (execute_pipeline(q, spark=spark).output("out")
                     for q in (p, build_window(f"twin_{kind}", data, kind, mode, False)))
        assert got and as_multiset(got) == as_multiset(want), (kind, mode)
