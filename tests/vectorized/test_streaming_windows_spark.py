"""STREAMING vectorized tumbling windows on Spark: Parquet -> bounded-out-of-orderness
watermarks (a watermark after every record; stamped over whole batches, the twin per record) -> key_by(field) -> window with allowed lateness and
a late side output -> sum / min_by / Aggregates.of, against the per-record twin (reduce /
AggregateFunction), multisets of (record, timestamp), main and late output, parallelism 1 and
2; and stream runs over a monitored directory with a drain. The window's chain reads the typed
exchange as batches with their per-record watermarks (stream_task.subtask_input)."""

from __future__ import annotations

from collections import Counter

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_flinkchain import StreamPipeline
from airflow_flinkchain.api.aggregations import AggregationFunction, Aggregates
from airflow_flinkchain.common import Duration, WatermarkStrategy
from airflow_flinkchain.functions import KeyedProcessFunction, OutputTag
from airflow_flinkchain.io import ParquetSource
from airflow_flinkchain.planner.formats import format_text
from airflow_flinkchain.planner.vectorized import runs_vectorized, takes_watermarked_batches
from airflow_flinkchain.runtime.spark.local import execute_pipeline
from airflow_flinkchain.window import TumblingEventTimeWindows
from tests.conformance_cases import WithTimestamp

pytestmark = pytest.mark.spark
ROW = {"k": "string", "v": "int64", "ts": "int64"}
LATE = OutputTag("late")
AGG = Aggregates.of(key=("k", "first"), total=("v", "sum"), n=("v", "count"), mean=("v", "avg"))


class AggTwin(type(AGG)):
    vectorizable = False


def write_slice(directory, name, seed, n):
    """Timestamps mostly rising; of every seven records one far behind (late) and one behind
    the watermark but within the allowed lateness (its window fires again)."""
    rows = [{"k": f"k{(i * 7 + seed) % 5}", "v": (i * 13 + seed) % 11 - 5,
             "ts": i * 3 + seed * 1000 - (150 if i % 7 == 3 else 45 if i % 7 == 5 else (i * 5) % 17)} for i in range(n)]
    directory.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows, schema=pa.schema([(k, pa.string() if t == "string" else pa.int64())
                                                                 for k, t in ROW.items()])),
                   directory / name, row_group_size=37)


def stamp(r, _ts):
    return r["ts"]


def stamp_twin(r, _ts):
    """The same timestamps from a function that is not read as a field: stamped per record."""
    ts = r["ts"]
    return ts


def build(name, path, kind, vectorized, parallelism, checkpoint_dir=None, monitor=False):
    p = StreamPipeline(name, parallelism=parallelism, runtime_mode="streaming", checkpoint_dir=checkpoint_dir)
    s = p.from_source(ParquetSource(str(path), monitor=monitor), name="src", output_type=ROW).uid("src")
    s = s.assign_timestamps_and_watermarks(WatermarkStrategy.for_bounded_out_of_orderness(
        Duration.of_millis(20)).with_timestamp_assigner(stamp if vectorized else stamp_twin)).name("wm").uid("wm")
    w = s.key_by(lambda r: r["k"]).window(TumblingEventTimeWindows.of(Duration.of_millis(30))) \
        .allowed_lateness(40).side_output_late_data(LATE)
    if kind == "aggregates":
        agg = w.aggregate(AGG if vectorized else AggTwin(AGG.columns))
    else:
        fn = AggregationFunction(kind, "v")
        agg = getattr(w, kind)("v") if vectorized else w.reduce(lambda a, b: fn.reduce(a, b))
    agg.uid("agg").name("agg").process(WithTimestamp()).name("stamp").collect("out")
    agg.get_side_output(LATE).process(WithTimestamp()).name("late_stamp").collect("late")
    return p


def as_multiset(values):
    return Counter((tuple(sorted(v.items())), ts) for v, ts in values)


def assert_vectorized(p):
    job = p.plan()
    g = job.stream_graph
    agg = next(n for n in g.nodes if n.name == "agg")
    assert takes_watermarked_batches(g, agg) and runs_vectorized(g, agg)
    assert runs_vectorized(g, next(n for n in g.nodes if n.name == "wm"))
    assert next(o["vectorized"] for c in job.to_dict()["chains"] for o in c["operators"] if o["name"] == "agg")
    assert "[vectorized: agg]" in format_text([job])


@pytest.mark.parametrize("parallelism", [1, 2])
def test_streaming_windows_equal_their_per_record_twin(spark, tmp_path, parallelism):
    data = tmp_path / "in"
    write_slice(data, "a.parquet", 1, 400)
    write_slice(data, "b.parquet", 2, 300)
    for kind in ("sum", "min_by", "aggregates"):
        p = build(f"sw_{kind}", data, kind, True, parallelism)
        assert_vectorized(p)
        got, want = (execute_pipeline(q, spark=spark) for q in (p, build(f"tw_{kind}", data, kind, False, parallelism)))
        for name in ("out", "late"):
            assert as_multiset(got.output(name)) == as_multiset(want.output(name)), (kind, name, parallelism)
        assert want.output("late") and want.output("out")
        if kind == "sum":  # re-firings: more results than windows
            assert len(want.output("out")) > len({(v["k"], ts) for v, ts in want.output("out")})


def test_stream_runs_and_a_drain_equal_the_per_record_runs(spark, tmp_path):
    def runs(name, vectorized):
        data, ckpt, held = tmp_path / name / "log", tmp_path / name / "ckpt", tmp_path / name / "held"
        held.mkdir(parents=True)
        for k in range(3):
            write_slice(held, f"part-{k}.parquet", k, 150)
        out: dict = {"out": [], "late": []}
        for k, parallelism in enumerate([2, 1, 2, 2]):
            if k < 3:
                data.mkdir(parents=True, exist_ok=True)
                (held / f"part-{k}.parquet").rename(data / f"part-{k}.parquet")
            p = build("sw_runs", data, "sum", vectorized[k], parallelism, str(ckpt), monitor=True)
            result = p.execute(spark=spark, run_id=f"r{k}", drain=k == 3)
            for n in out:
                out[n] += result.output(n)
        return out

    want = runs("twin", [False] * 4)
    got = runs("mixed", [True, True, False, True])
    assert want["out"] and want["late"]
    for n in want:
        assert as_multiset(got[n]) == as_multiset(want[n]), n


class WithWatermark(KeyedProcessFunction):
    """`(value, timestamp, the watermark this record sees)`: the watermark sequence per channel."""

    def process_element(self, value, ctx):
        yield value, ctx.timestamp(), ctx.timer_service().current_watermark()


def test_assigner_over_batches_sends_the_per_record_records_timestamps_and_watermarks(spark, tmp_path):
    """Parquet (two files, parallelism 2: subtasks reading pieces of both) -> the assigner over
    batches vs per record -> key_by: each record arrives with the same timestamp and watermark."""
    data = tmp_path / "in"
    write_slice(data, "a.parquet", 1, 400)
    write_slice(data, "b.parquet", 2, 300)

    def build_keyed(name, vectorized):
        p = StreamPipeline(name, parallelism=2, runtime_mode="streaming")
        s = p.from_source(ParquetSource(str(data)), name="src", output_type=ROW)
        s = s.assign_timestamps_and_watermarks(WatermarkStrategy.for_bounded_out_of_orderness(
            Duration.of_millis(20)).with_timestamp_assigner(stamp if vectorized else stamp_twin)).name("wm")
        s.key_by(lambda r: r["k"]).process(WithWatermark()).name("seen").collect("out")
        return p

    p = build_keyed("ts_vec", True)
    assert runs_vectorized(p.plan().stream_graph, next(n for n in p.plan().stream_graph.nodes if n.name == "wm"))
    got, want = (execute_pipeline(q, spark=spark).output("out") for q in (p, build_keyed("ts_twin", False)))
    assert Counter((tuple(sorted(v.items())), ts, wm) for v, ts, wm in got) == \
        Counter((tuple(sorted(v.items())), ts, wm) for v, ts, wm in want)
    assert len(want) == 700 and len({wm for _v, _ts, wm in want}) > 50
