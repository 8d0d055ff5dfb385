"""The timestamp assigner over whole batches (timestamps.py `process_batch`): a source chain
Parquet-like batches -> assign_timestamps_and_watermarks(field) -> key_by(field) exchange writes
the same records, timestamps and watermark sequence per channel file as the per-record assigner
(an assigner the planner cannot read as a field), with the watermarks stored in bulk; several
splits, out-of-order and negative timestamps, several channels, auto_watermark_interval 0 and
BATCH mode. Then the exchange as a vectorized STREAMING window reads it."""

from __future__ import annotations

import random

import pyarrow as pa
import pytest

from airflow_flinkchain import StreamPipeline
from airflow_flinkchain.common import Duration, WatermarkStrategy
from airflow_flinkchain.io import ParquetSource
from airflow_flinkchain.planner.formats import format_text
from airflow_flinkchain.planner.vectorized import runs_vectorized
from airflow_flinkchain.runtime.core.batches import ColumnarInput, with_split_starts
from airflow_flinkchain.runtime.core.elements import StreamRecord, Watermark
from airflow_flinkchain.runtime.core.memory import MemoryWriters
from airflow_flinkchain.runtime.core.operator_chain import run_subtask
from airflow_flinkchain.runtime.core.splits import SourceSplits
from airflow_flinkchain.runtime.exchange.dataset import DatasetWriter, merged_input, open_channel
from airflow_flinkchain.runtime.exchange.layout import Location
from airflow_flinkchain.runtime.exchange.watermarked import merged_watermarked_batches
from airflow_flinkchain.runtime.stream_task import edge_record_type
from airflow_flinkchain.window import TumblingEventTimeWindows

ROW = {"k": "int64", "v": "int64", "ts": "int64"}


def stamp(r, _ts):
    return r["ts"]


def stamp_twin(r, _ts):
    """The same timestamps, in a function the planner does not read as a field."""
    ts = r["ts"]
    return ts


def plan(twin, channels, mode="streaming", delay=5, interval=None):
    p = StreamPipeline(f"ts_{twin}", parallelism=1, runtime_mode=mode)
    if interval is not None:
        p.get_config().set_auto_watermark_interval(interval)
    strategy = WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_millis(delay)).with_timestamp_assigner(
        stamp_twin if twin else stamp)
    s = p.from_source(ParquetSource("/nonexistent"), name="src", output_type=ROW) \
        .assign_timestamps_and_watermarks(strategy).name("wm")
    w = s.key_by(lambda r: r["k"]).window(TumblingEventTimeWindows.of(Duration.of_millis(20)))
    (w.reduce(add) if twin else w.sum("v")).set_parallelism(channels).name("agg").collect("out")
    return p


def add(a, b):
    return {**a, "v": a["v"] + b["v"]}


def splits(seed, n_splits, rows):
    rng = random.Random(seed)
    out = []
    for s in range(n_splits):
        top, recs = rng.randint(-500, 500), []
        for i in range(rows):
            top += rng.randint(0, 4)
            recs.append({"k": rng.randint(-3, 6), "v": rng.randint(-5, 9),
                         "ts": top - rng.randint(0, 60) if rng.random() < 0.3 else top})
        out.append(recs)
    return out


def run_source_chain(p, parts, columnar, tmp_path):
    job = p.plan()
    chain = next(c for c in job.chains if c.name.startswith("src"))
    (edge_id,) = chain.out_edges
    locations = {}

    def writer(chain_edge, subtask):
        output_type, label = edge_record_type(job, chain_edge.id)
        loc = locations[chain_edge.id] = Location(str(tmp_path / chain_edge.id))
        return DatasetWriter(loc, chain_edge.id, subtask, job.chain(chain_edge.target).parallelism, output_type, label)

    if columnar:
        batch_splits = [[pa.RecordBatch.from_pylist(part[i:i + 37]) for i in range(0, len(part), 37)]
                        for part in parts]
        inputs, plain = ColumnarInput(with_split_starts(batch_splits)), False
    else:
        inputs, plain = (SourceSplits(parts) if len(parts) > 1 else parts[0]), True
    run_subtask(job, chain.id, 0, "r", inputs, writer, MemoryWriters().sink_writer_factory, plain_values=plain)
    n = job.chain(job.edge(edge_id).target).parallelism
    return [open_channel(locations[edge_id], edge_id, k, 1)[0] for k in range(n)]


def sent(files):
    return [[("wm", e.timestamp) if type(e) is Watermark else
             (e.value, e.timestamp) if type(e) is StreamRecord else (e, None) for e in f.elements()] for f in files]


@pytest.mark.parametrize("n_splits,channels,interval,delay", [
    (1, 1, None, 5), (1, 3, None, 0), (3, 2, None, 7), (2, 2, 0, 5)])
def test_columnar_assigner_writes_what_the_per_record_one_writes(tmp_path, n_splits, channels, interval, delay):
    for seed in range(2):
        parts = splits(seed, n_splits, 150)
        got_files = run_source_chain(plan(False, channels, delay=delay, interval=interval), parts, True,
                                     tmp_path / f"v{seed}")
        want_files = run_source_chain(plan(True, channels, delay=delay, interval=interval), parts, False,
                                      tmp_path / f"t{seed}")
        got, want = sent(got_files), sent(want_files)
        assert got == want, (seed, n_splits, channels)
        marks = sum(e[0] == "wm" for ch in want for e in ch)
        if interval == 0:
            assert marks == channels  # only the final MAX watermark
        else:
            assert marks > 50 and all(f.watermark_array is not None for f in got_files)
        # a batch head reading the files gets the per-record reader's watermarks
        seq = [(type(e).__name__, getattr(e, "timestamp", None) or getattr(e, "arrivals", [None]).tolist())
               for e in merged_watermarked_batches(got_files)]
        seq_twin = [(type(e).__name__, getattr(e, "timestamp", None) or getattr(e, "arrivals", [None]).tolist())
                    for e in merged_watermarked_batches(want_files)]
        assert seq == seq_twin


def test_batch_mode_stamps_the_same_timestamps(tmp_path):
    parts = splits(3, 2, 100)
    got = sent(run_source_chain(plan(False, 2, mode="batch"), parts, True, tmp_path / "v"))
    want = sent(run_source_chain(plan(True, 2, mode="batch"), parts, False, tmp_path / "t"))
    assert got == want and all(ts is not None for ch in want for v, ts in ch if v != "wm")


def test_plan_marks_the_assigner_vectorized_only_when_it_reads_a_field():
    for twin in (False, True):
        job = plan(twin, 2).plan()
        g = job.stream_graph
        wm = next(n for n in g.nodes if n.name == "wm")
        assert runs_vectorized(g, wm) is not twin
        assert ("vectorized: wm" in format_text([job])) is not twin


def test_rows_the_column_cannot_stamp_go_per_record(tmp_path):
    """A null timestamp: the batch goes through the per-record path (no timestamp for that row)."""
    parts = splits(4, 1, 60)
    parts[0][10]["ts"] = None
    got = sent(run_source_chain(plan(False, 1), parts, True, tmp_path / "v"))
    want = sent(run_source_chain(plan(True, 1), parts, False, tmp_path / "t"))
    assert got == want


def test_the_whole_vectorized_window_pipeline_equals_the_per_record_twin(tmp_path):
    """Columnar assigner -> bulk watermarks in the exchange -> window over watermarked batches,
    against per-record assigner -> JSON watermarks -> per-record window (reduce), per channel."""
    for seed in range(2):
        parts = splits(10 + seed, 3, 200)
        p, twin = plan(False, 2, delay=3), plan(True, 2, delay=3)
        got_files = run_source_chain(p, parts, True, tmp_path / f"v{seed}")
        want_files = run_source_chain(twin, parts, False, tmp_path / f"t{seed}")
        for k, (g, w) in enumerate(zip(got_files, want_files)):
            got = run_window_chain(p, ColumnarInput(merged_watermarked_batches([g])), k)
            want = run_window_chain(twin, merged_input([w]), k)
            assert got == want and sum(e[0] != "wm" for e in want) > 20, (seed, k)


def run_window_chain(p, inputs, subtask):
    job = p.plan()
    chain = next(c for c in job.chains if c.name.startswith("agg"))
    writers = MemoryWriters()
    run_subtask(job, chain.id, subtask, "r", inputs, writers.record_writer_factory, writers.sink_writer_factory)
    (writer,) = writers.channel.values()  # to the collect sink's chain: records and watermarks
    return [("wm", e.timestamp) if type(e) is Watermark else (e.value, e.timestamp) for e in writer.channels[0]]


def test_timestamp_fields_are_recognized_and_other_assigners_are_not():
    from airflow_flinkchain.common.watermark_strategy import TimestampAssigner
    from airflow_flinkchain.graph.field_keys import timestamp_field

    class ByTs(TimestampAssigner):
        def extract_timestamp(self, value, record_timestamp):
            return value["ts"]

    def with_default(r, _record_timestamp=None):
        return r["ts"]

    def assigner(a):
        return WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(a).get_timestamp_assigner()

    for a in (stamp, with_default, lambda r, ts: r["ts"], ByTs()):
        assert timestamp_field(assigner(a)) == "ts", a
    for a in (stamp_twin, lambda r, ts: r["ts"] + 1, lambda r, ts: ts, lambda r, ts: r[0], lambda r: r["ts"]):
        assert timestamp_field(assigner(a)) is None, a
