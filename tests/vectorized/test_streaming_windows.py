"""STREAMING tumbling windows over whole batches (window_batches.py) against the per-record
window operator running the same aggregation as a reduce / AggregateFunction: out-of-order
and late records, a watermark after every record, allowed lateness, the late side output,
stream runs with snapshots handed between the two paths (heap and RocksDB), multisets of
(record, timestamp) compared. Also: the exchange's per-row watermarks (exchange/watermarked.py)
are the WatermarkValve's, file by file."""

from __future__ import annotations

import random
from collections import Counter

import numpy as np
import pyarrow as pa
import pytest

from airflow_flinkchain import StreamPipeline
from airflow_flinkchain.api.aggregations import AggregationFunction, Aggregates
from airflow_flinkchain.functions import OutputTag
from airflow_flinkchain.runtime.core.batches import ColumnarInput, WatermarkedBatch
from airflow_flinkchain.runtime.core.elements import StreamRecord, Watermark
from airflow_flinkchain.runtime.core.memory import MemoryWriters
from airflow_flinkchain.runtime.core.operator_chain import run_subtask
from airflow_flinkchain.runtime.core.operators.aggregation import VectorizedWindowAggregationOperator
from airflow_flinkchain.window import TumblingEventTimeWindows
from tests.vectorized.test_vectorized_aggregations import MemoryCheckpoint

KINDS = ("sum", "min", "max", "min_by", "max_by")
LATE = OutputTag("late")
AGGREGATES = Aggregates.of(key=("k", "first"), total=("v", "sum"), n=("v", "count"), mean=("v", "avg"),
                           low=("v", "min"), high=("v", "max"), first_seq=("seq", "first"))


class AggregatesTwin(type(AGGREGATES)):
    """The same AggregateFunction, not vectorizable: the per-record window operator."""

    vectorizable = False


def window_plan(kind, twin, lateness, backend="hashmap"):
    p = StreamPipeline(f"sw_{kind}_{twin}", parallelism=1, runtime_mode="streaming").set_state_backend(backend)
    w = p.from_collection([{"k": "a", "v": 1, "seq": 0}]).key_by(lambda r: r["k"]).window(
        TumblingEventTimeWindows.of(10, 3)).allowed_lateness(lateness).side_output_late_data(LATE)
    if kind == "aggregates":
        result = w.aggregate(AggregatesTwin(AGGREGATES.columns) if twin else AGGREGATES)
    else:
        fn = AggregationFunction(kind, "v")
        result = w.reduce(lambda a, b: fn.reduce(a, b)) if twin else getattr(w, kind)("v")
    result.uid("agg").name("agg").collect("out")
    result.get_side_output(LATE).collect("late")
    job = p.plan()
    return job, next(c for c in job.chains if c.name.startswith("agg")).id


def elements(rng, n, keys="abc", delay=4):
    """Out-of-order records (some far behind: late), each followed by the bounded-out-of-
    orderness watermark (running maximum - delay - 1), emitted when it advances."""
    out, top, wm = [], -10**9, -10**9
    for i in range(n):
        ts = max(0, top - rng.randint(0, 60)) if rng.random() < 0.25 else (top if top > 0 else 0) + rng.randint(0, 4)
        out.append(StreamRecord({"k": rng.choice(keys), "v": rng.randint(-5, 9), "seq": i}, ts))
        top = max(top, ts)
        if top - delay - 1 > wm:
            wm = top - delay - 1
            out.append(Watermark(wm))
    return out


def watermarked(elements, rng):
    """The elements as a typed exchange head reads them now: batches of random sizes, each with
    the watermark in force before each row and every watermark inside it (positions, values);
    a watermark before a batch's first row sometimes goes on alone, those after the last row do."""
    out, recs, arrivals, wm, positions, values = [], [], [], -2**63, [], []

    def flush():
        if recs:
            batch = pa.RecordBatch.from_pylist([r.value for r in recs]).append_column(
                "_ts", pa.array([r.timestamp for r in recs], pa.int64()))
            marks = (np.array(positions, dtype=np.int64), np.array(values, dtype=np.int64))
            out.append(WatermarkedBatch(batch, np.array(arrivals, dtype=np.int64), marks))
            for part in (recs, arrivals, positions, values):
                part.clear()

    for e in elements:
        if type(e) is Watermark:
            wm = e.timestamp
            if not recs and rng.random() < 0.5:
                out.append(e)
            else:
                positions.append(len(recs))
                values.append(wm)
            continue
        recs.append(e)
        arrivals.append(wm)
        if rng.random() < 0.05:
            flush()
    trailing = [Watermark(v) for p, v in zip(positions, values) if p == len(recs)]
    del values[len(values) - len(trailing):], positions[len(positions) - len(trailing):]
    flush()
    return out + trailing


def run(job, chain_id, inputs, checkpoint=None, ordered=False):
    """{sink: multiset of (record, timestamp)}; `ordered`: the list, in output order."""
    writers = MemoryWriters()
    extra = {} if checkpoint is None else {"checkpoint": checkpoint}
    run_subtask(job, chain_id, 0, "r", inputs, writers.record_writer_factory, writers.sink_writer_factory, **extra)
    return {name[0]: (list if ordered else Counter)((tuple(sorted(r.value.items())), r.timestamp) for r in w.records)
            for name, w in writers.sink.items()}


@pytest.fixture
def spied(monkeypatch):
    """Counts the rows folded by the batch path (proof that it was taken)."""
    folded = []
    original = VectorizedWindowAggregationOperator._fold_on_time
    monkeypatch.setattr(VectorizedWindowAggregationOperator, "_fold_on_time",
                        lambda self, rows, idx, *a: folded.append(len(idx) if original(self, rows, idx, *a) else 0)
                        or folded[-1] > 0)
    return folded


@pytest.mark.parametrize("kind", KINDS + ("aggregates",))
@pytest.mark.parametrize("lateness", [0, 7, 25])
def test_watermarked_batches_equal_the_per_record_twin(kind, lateness, spied):
    job, chain_id = window_plan(kind, False, lateness)
    twin, twin_chain = window_plan(kind, True, lateness)
    for seed in range(4):
        rng = random.Random(seed)
        els = elements(rng, rng.randint(50, 300))
        want = run(twin, twin_chain, list(els))
        assert sum(want["late"].values()) > 0 and sum(want["out"].values()) > 0
        assert run(job, chain_id, list(els)) == want  # the vectorized operator fed records
        assert run(job, chain_id, ColumnarInput(watermarked(els, rng))) == want, (kind, lateness, seed)
        # and in the same order (main and late output each)
        assert run(job, chain_id, ColumnarInput(watermarked(els, rng)), ordered=True) == \
            run(twin, twin_chain, list(els), ordered=True)
    assert sum(spied) > 0


@pytest.mark.parametrize("backend", ["hashmap", "rocksdb"])
@pytest.mark.parametrize("kind", ["sum", "aggregates"])
def test_stream_runs_hand_snapshots_between_the_paths(kind, backend):
    """Three runs and a drain over one input, alternating vectorized (batches) and per-record
    twin runs over the same operator uid: the same results as one per-record run."""
    job, chain_id = window_plan(kind, False, 7, backend)
    twin, twin_chain = window_plan(kind, True, 7, backend)
    rng = random.Random(11)
    els = elements(rng, 400)
    want = run(twin, twin_chain, list(els))
    cuts = [0, 120, 260, 330, len(els)]
    got: dict = {"out": Counter(), "late": Counter()}
    previous = None
    for k, (lo, hi) in enumerate(zip(cuts, cuts[1:])):
        cp = MemoryCheckpoint(previous, drain=k == 3)
        part = els[lo:hi]
        out = run(job, chain_id, ColumnarInput(watermarked(part, rng)), cp) if k % 2 == 0 \
            else run(twin, twin_chain, list(part), cp)
        for name, c in out.items():
            got[name] += c
        previous = cp.written
    assert got == {n: want.get(n, Counter()) for n in got}


def test_float_sums_and_records_without_timestamps_go_per_record():
    job, chain_id = window_plan("sum", False, 5)
    twin, twin_chain = window_plan("sum", True, 5)
    rows = [{"k": "a", "v": 0.1, "seq": 0}, {"k": "a", "v": 0.2, "seq": 1}, {"k": "b", "v": 1e16, "seq": 2},
            {"k": "b", "v": 1.0, "seq": 3}]
    els = [StreamRecord(r, ts) for r, ts in zip(rows, [1, 2, 15, 3])] + [Watermark(40)]
    batch = pa.RecordBatch.from_pylist(rows).append_column("_ts", pa.array([1, 2, 15, 3], pa.int64()))
    got = run(job, chain_id, ColumnarInput([WatermarkedBatch(batch, np.array([-2**63, 0, 0, 12])), Watermark(40)]))
    want = run(twin, twin_chain, els[:3] + [Watermark(12), els[3], Watermark(40)])
    assert got == want and sum(want["late"].values()) == 0


def test_exchange_arrivals_are_the_valves_watermarks(tmp_path):
    """Typed channel files from three upstream subtasks (watermarks after most records, some
    going back): the per-row watermarks of merged_watermarked_batches are those the valve gives
    the per-record path before each record, and the watermarks left over are the same."""
    from airflow_flinkchain.runtime.exchange.dataset import DatasetWriter, merged_input, open_channel
    from airflow_flinkchain.runtime.exchange.layout import Location
    from airflow_flinkchain.runtime.exchange.watermarked import merged_watermarked_batches

    rng = random.Random(4)
    loc = Location(str(tmp_path / "edge"))
    for s in range(3):
        w = DatasetWriter(loc, "e", s, 1, {"k": "string", "v": "int64"})
        wm = rng.randint(-5, 5)
        for i in range(rng.randint(0, 100_000 if s == 1 else 300)):
            w.write(0, {"k": "a", "v": i}, i)
            if rng.random() < 0.7:
                wm += rng.randint(-3, 5)
                w.write_watermark(0, wm)
        w.write_watermark(0, 2**63 - 1 if s != 2 else wm + 3)
        w.close()

    def per_record():
        current, out = None, []
        for el in merged_input(open_channel(loc, "e", 0)):
            if type(el) is Watermark:
                current = el.timestamp
            else:
                out.append(("row", current))
        return out + [("end", current)]

    got, current = [], -2**63
    for el in merged_watermarked_batches(open_channel(loc, "e", 0)):
        if type(el) is Watermark:
            current = el.timestamp
        else:
            assert type(el) is WatermarkedBatch
            got += [("row", None if a == -2**63 else int(a)) for a in el.arrivals]
            current = int(el.arrivals[-1])
    assert got + [("end", current)] == per_record()


def test_the_window_head_reads_the_typed_exchange_as_watermarked_batches(tmp_path):
    """stream_task.subtask_input: a STREAMING vectorized window head over typed channel files
    with a watermark after every record gets whole batches with their watermarks."""
    from airflow_flinkchain.runtime.exchange.dataset import DatasetWriter, open_channel
    from airflow_flinkchain.runtime.exchange.layout import Location
    from airflow_flinkchain.runtime.stream_task import subtask_input

    job, chain_id = window_plan("sum", False, 0)
    twin, twin_chain = window_plan("sum", True, 0)
    loc = Location(str(tmp_path / "edge"))
    for s in range(2):
        w = DatasetWriter(loc, "e", s, 1, {"k": "string", "v": "int64", "seq": "int64"})
        for i in range(500):
            w.write(0, {"k": "ab"[i % 2], "v": i % 7, "seq": i}, i * 2 + s)
            w.write_watermark(0, i * 2 + s - 5)
        w.close()

    class IO:
        def input_channels(self, subtask, edges=None):
            return open_channel(loc, "e", 0)

    for plan, chain in ((job, chain_id), (twin, twin_chain)):
        inputs, _ = subtask_input(plan, chain, 0, IO())
        if plan is job:
            kinds = Counter(type(e).__name__ for e in inputs.elements)
            assert kinds == {"WatermarkedBatch": 2, "Watermark": 1}  # one batch per file, the final watermark
            inputs, _ = subtask_input(plan, chain, 0, IO())
        assert isinstance(inputs, ColumnarInput) == (plan is job)
    assert run(job, chain_id, subtask_input(job, chain_id, 0, IO())[0]) == \
        run(twin, twin_chain, subtask_input(twin, twin_chain, 0, IO())[0])


def test_plan_marks_the_streaming_window_vectorized():
    from airflow_flinkchain.planner.formats import format_text

    def plan(mode, typed):
        p = StreamPipeline("marks", parallelism=2, runtime_mode=mode)
        s = p.from_collection([{"k": "a", "v": 1}], output_type={"k": "string", "v": "int64"} if typed else None)
        s.key_by(lambda r: r["k"]).window(TumblingEventTimeWindows.of(10)).sum("v").name("win").collect("out")
        return p.plan()

    for mode in ("streaming", "batch"):
        job = plan(mode, True)
        assert {o["name"]: o["vectorized"] for c in job.to_dict()["chains"] for o in c["operators"]}["win"]
        assert "[vectorized: win]" in format_text([job])
    assert "[vectorized: win]" not in format_text([plan("streaming", False)])  # pickled exchange: per record


def test_results_leaving_the_chain_carry_every_watermark():
    """A window whose results leave the chain on an exchange passes every watermark advance on,
    as per record: the written channel (records and watermarks, in order) is the twin's."""
    def plan(twin):
        p = StreamPipeline(f"ex_{twin}", parallelism=1, runtime_mode="streaming")
        w = p.from_collection([{"k": "a", "v": 1, "seq": 0}]).key_by(lambda r: r["k"]).window(
            TumblingEventTimeWindows.of(10, 3)).allowed_lateness(7).side_output_late_data(LATE)
        fn = AggregationFunction("sum", "v")
        result = (w.reduce(lambda a, b: fn.reduce(a, b)) if twin else w.sum("v")).name("agg")
        result.rebalance().map(lambda r: r).collect("out")
        result.get_side_output(LATE).collect("late")
        job = p.plan()
        return job, next(c for c in job.chains if c.name.startswith("agg")).id

    def written(job, chain_id, inputs):
        writers = MemoryWriters()
        run_subtask(job, chain_id, 0, "r", inputs, writers.record_writer_factory, writers.sink_writer_factory)
        (writer,) = writers.channel.values()
        sent = [("wm", e.timestamp) if type(e) is Watermark else (e.value, e.timestamp) for e in writer.channels[0]]
        return sent, {n[0]: [(r.value, r.timestamp) for r in w.records] for n, w in writers.sink.items()}

    job, chain_id = plan(False)
    twin, twin_chain = plan(True)
    for seed in range(3):
        rng = random.Random(seed)
        els = elements(rng, 300)
        got, want = written(job, chain_id, ColumnarInput(watermarked(els, rng))), written(twin, twin_chain, list(els))
        assert got == want and sum(e[0] == "wm" for e in want[0]) > 100 and want[1]["late"], seed


def test_random_sizes_offsets_lateness_and_keys_equal_the_twin_in_order():
    """Window sizes down to 1 ms, offsets of either sign, negative timestamps, int keys, with and
    without a late side output: the same output, in the same order."""
    def plan(kind, twin, size, offset, lateness, tag):
        p = StreamPipeline("fuzz", parallelism=1, runtime_mode="streaming")
        w = p.from_collection([{"k": 1, "v": 1, "seq": 0}]).key_by(lambda r: r["k"]).window(
            TumblingEventTimeWindows.of(size, offset)).allowed_lateness(lateness)
        w = w.side_output_late_data(LATE) if tag else w
        if kind == "aggregates":
            result = w.aggregate(AggregatesTwin(AGGREGATES.columns) if twin else AGGREGATES)
        else:
            fn = AggregationFunction(kind, "v")
            result = w.reduce(lambda a, b: fn.reduce(a, b)) if twin else getattr(w, kind)("v")
        result.name("agg").collect("out")
        if tag:
            result.get_side_output(LATE).collect("late")
        job = p.plan()
        return job, next(c for c in job.chains if c.name.startswith("agg")).id

    for trial in range(40):
        rng = random.Random(trial)
        kind, size = rng.choice(KINDS + ("aggregates",)), rng.choice([1, 3, 7, 25])
        offset, lateness, tag = rng.randint(1 - size, size - 1), rng.choice([0, 1, 30, 200]), rng.random() < 0.7
        els, top, wm = [], -100, -10**9
        for i in range(rng.randint(1, 300)):
            ts = top - rng.randint(0, 80) if rng.random() < 0.3 else top + rng.randint(0, 6)
            els.append(StreamRecord({"k": rng.choice([1, 2, 40, -5]), "v": rng.randint(-9, 9), "seq": i}, ts))
            top = max(top, ts)
            if top - 4 > wm and rng.random() < 0.8:
                wm = top - 4
                els.append(Watermark(wm))
        vec, twin = plan(kind, False, size, offset, lateness, tag), plan(kind, True, size, offset, lateness, tag)
        assert run(*vec, ColumnarInput(watermarked(els, rng)), ordered=True) == run(*twin, list(els), ordered=True), trial
