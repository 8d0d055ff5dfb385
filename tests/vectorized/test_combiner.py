"""The combiner before a keyed exchange (runtime/core/combiner.py): what the consumer folds from
the partial rows equals what it folds from the rows, for every built-in aggregation, with and
without timestamps (ties across channels and segments included), segments ended at random
points, several folds per segment; the planner takes it only where it applies; on Spark, the
combined BATCH run writes fewer rows to the exchange and equals the per-record twin."""

from __future__ import annotations

import random

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_flinkchain import StreamPipeline
from airflow_flinkchain.api.aggregations import AggregationFunction
from airflow_flinkchain.io import ParquetSource
from airflow_flinkchain.planner.formats import format_text
from airflow_flinkchain.planner.vectorized import combined_edge
from airflow_flinkchain.runtime.core import combiner as combiner_module
from airflow_flinkchain.runtime.core.combiner import KeyedCombiner
from airflow_flinkchain.runtime.core.record_types import TS_COLUMN

KINDS = ("sum", "min", "max", "min_by", "max_by")


def channel_batches(rng, channel, timestamps, n_batches=6):
    """Batches of one producer subtask: few keys, small value range (ties in the aggregated
    field), timestamps with ties inside and across channels; `tag` tells rows apart."""
    out = []
    for b in range(n_batches):
        n = rng.randrange(1, 40)
        cols = {"k": [f"k{rng.randrange(4)}" for _ in range(n)], "v": [rng.randrange(-3, 4) for _ in range(n)],
                "tag": [f"c{channel}b{b}r{i}" for i in range(n)]}
        if timestamps:
            cols[TS_COLUMN] = [rng.randrange(12) for _ in range(n)]
        out.append(pa.RecordBatch.from_pydict(
            cols, schema=pa.schema([("k", pa.string()), ("v", pa.int64()), ("tag", pa.string())]
                                   + ([(TS_COLUMN, pa.int64())] if timestamps else []))))
    return out


def consumer_fold(batches, kind):
    """What the consumer computes (Flink's BATCH keyed reduce): the rows of every channel in
    order, sorted by timestamp (stable), folded per key with the aggregation's reduce."""
    rows = [r for b in batches for r in b.to_pylist()]
    if rows and TS_COLUMN in rows[0]:
        rows.sort(key=lambda r: r[TS_COLUMN])
    fn, acc = AggregationFunction(kind, "v"), {}
    for r in rows:
        r.pop(TS_COLUMN, None)
        acc[r["k"]] = fn.reduce(acc[r["k"]], r) if r["k"] in acc else r
    return acc


def combined(channels, kind, rng):
    """Each channel's batches through its own combiner, the segment ended at random points."""
    written = []
    for batches in channels:
        c = KeyedCombiner("k", kind, "v")
        c.write = written.append
        for batch in batches:
            if not c.add(batch):
                written.append(batch)
            if rng.random() < 0.3:
                c.flush()  # a record, a watermark or a status written in between
        c.flush()
    return written


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("timestamps", [False, True])
def test_the_consumer_folds_the_same_from_partial_rows(kind, timestamps, monkeypatch):
    monkeypatch.setattr(combiner_module, "FOLD_AT", 25)  # several folds per segment
    for seed in range(40):
        rng = random.Random(seed)
        channels = [channel_batches(rng, ch, timestamps) for ch in range(3)]
        written = combined(channels, kind, rng)
        rows_in = sum(b.num_rows for batches in channels for b in batches)
        assert sum(b.num_rows for b in written) < rows_in
        assert consumer_fold(written, kind) == consumer_fold([b for c in channels for b in c], kind), (kind, seed)


def test_batches_the_fold_cannot_take_go_as_they_are_in_order():
    c = KeyedCombiner("k", "sum", "v")
    written = []
    c.write = written.append
    small = pa.RecordBatch.from_pydict({"k": ["a", "a"], "v": pa.array([1, 2], pa.int32())})
    big = pa.RecordBatch.from_pydict({"k": ["a", "a"], "v": [2**62, 2**62]})
    plain = pa.RecordBatch.from_pydict({"k": ["a", "b", "a"], "v": [1, 2, 3]})
    assert c.add(plain)
    assert not c.add(small)  # a sum of int32 would change the column's type: not taken, segment ended
    assert written == [pa.RecordBatch.from_pydict({"k": ["a", "b"], "v": [4, 2]})]
    assert c.add(big)
    c.flush()  # the sum could leave int64: the rows go out unfolded
    assert written[1:] == [big]
    mixed = pa.RecordBatch.from_pydict({"k": ["a", "a"], "v": [1, 1], TS_COLUMN: [5, None]})
    assert not c.add(mixed)


def test_a_segment_of_batches_with_and_without_timestamps_goes_unfolded():
    c = KeyedCombiner("k", "min_by", "v")
    written = []
    c.write = written.append
    stamped = pa.RecordBatch.from_pydict({"k": ["a", "a"], "v": [1, 1], TS_COLUMN: [9, 3]})
    unstamped = pa.RecordBatch.from_pydict({"k": ["a"], "v": [1], TS_COLUMN: pa.nulls(1, pa.int64())})
    assert c.add(stamped) and c.add(unstamped)
    c.flush()
    assert written == [stamped, unstamped]


def test_nearly_unique_keys_stop_the_combining(monkeypatch):
    monkeypatch.setattr(combiner_module, "FOLD_AT", 100)
    c = KeyedCombiner("k", "max", "v")
    written = []
    c.write = written.append
    batch = pa.RecordBatch.from_pydict({"k": np.arange(100), "v": np.arange(100)})
    assert c.add(batch)  # folded: 100 rows stay 100
    assert not c.active
    assert not c.add(batch) and c.rows_out == 100  # the partial went out first, this one goes as it is


def _pipeline(mode, parallelism=2, selector=lambda r: r["k"], kind="sum"):
    p = StreamPipeline("combine_plan", parallelism=parallelism, runtime_mode=mode)
    s = p.from_source(ParquetSource("/unused"), name="src", output_type={"k": "string", "v": "int64"})
    getattr(s.key_by(selector), kind)("v").name("agg").print()
    return p


def test_the_planner_combines_only_a_hash_edge_into_a_vectorized_aggregation_in_batch():
    def edge_of(p):
        g = p.plan().stream_graph
        agg = next(n for n in g.nodes if n.name == "agg")
        return g, g.in_edges(agg.id)[0]

    g, e = edge_of(_pipeline("batch"))
    assert combined_edge(g, e) == "k"
    assert "combined per key before the exchange" in format_text([_pipeline("batch").plan()])
    for p in (_pipeline("streaming"), _pipeline("batch", selector=lambda r: r["k"].lower())):
        g, e = edge_of(p)
        assert combined_edge(g, e) is None
        assert "combined per key" not in format_text([p.plan()])


@pytest.mark.spark
@pytest.mark.parametrize("kind", KINDS)
def test_a_combined_batch_run_on_spark_equals_the_per_record_twin(spark, tmp_path, kind):
    from airflow_flinkchain.runtime.spark.local import execute_pipeline

    rng = random.Random(7)
    data = tmp_path / "in"
    data.mkdir()
    for f in range(3):
        rows = [{"k": rng.randrange(6), "v": rng.randrange(-5, 6), "tag": f"f{f}r{i}"} for i in range(400)]
        pq.write_table(pa.Table.from_pylist(rows), data / f"part-{f}.parquet", row_group_size=50)
    fn = AggregationFunction(kind, "v")

    def run(vectorized):
        p = StreamPipeline(f"combine_{kind}_{vectorized}", parallelism=3, runtime_mode="batch")
        keyed = p.from_source(ParquetSource(str(data)), name="src").key_by(lambda r: r["k"])
        agg = getattr(keyed, kind)("v") if vectorized else keyed.reduce(lambda a, b: fn.reduce(a, b))
        agg.name("agg").set_parallelism(2).collect("out")
        return execute_pipeline(p, spark=spark)

    got, want = run(True), run(False)
    assert sorted(got.output("out"), key=str) == sorted(want.output("out"), key=str)
    counts = [m["combined"] for doc in got.metrics.values() for m in doc["operators"] if "combined" in m]
    assert len(counts) == 3 and all(rows_out < rows_in for c in counts for rows_in, rows_out in c.values())
    assert not any("combined" in m for doc in want.metrics.values() for m in doc["operators"])
