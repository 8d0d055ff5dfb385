"""Vectorized keyed aggregations (KeyedStream.sum/min/max/min_by/max_by over Arrow batches)
against their per-record twin, in the chain core (no Spark): the same chain run once on
records and once on batches (the input a typed exchange gives the chain head), multisets of
(record, timestamp) compared, in BATCH and STREAMING, with out-of-order timestamps,
watermarks between batches, and state carried from run to run through snapshots in both
directions (per-record run -> vectorized run -> per-record run)."""

from __future__ import annotations

import random
from collections import Counter
from operator import itemgetter

import numpy as np
import pyarrow as pa
import pytest

from airflow_flinkchain import StreamPipeline
from airflow_flinkchain.api.aggregations import AggregationFunction
from airflow_flinkchain.functions import KeySelector
from airflow_flinkchain.graph.field_keys import field_key
from airflow_flinkchain.planner.vectorized import vectorized_aggregation
from airflow_flinkchain.runtime.core.batches import ColumnarInput
from airflow_flinkchain.runtime.core.elements import StreamRecord, Watermark
from airflow_flinkchain.runtime.core.grouped import key_codes, rolling
from airflow_flinkchain.runtime.core.memory import MemoryWriters
from airflow_flinkchain.runtime.core.operator_chain import run_subtask
from airflow_flinkchain.runtime.core.operators.aggregation import (VectorizedAggregationOperator,
                                                                  VectorizedWindowAggregationOperator)

KINDS = ("sum", "min", "max", "min_by", "max_by")


class ByK(KeySelector):
    def get_key(self, value):
        return value["k"]


def test_field_keys_are_recognized_and_other_selectors_are_not():
    assert field_key(itemgetter("k")) == "k"
    assert field_key(lambda r: r["k"]) == "k"
    assert field_key(ByK()) == "k" and field_key(ByK().get_key) == "k"
    suffix = "x"
    for other in (lambda r: r[0], lambda r: r["k"].lower(), lambda r: r["k" + suffix], itemgetter("a", "b"),
                  itemgetter(0), lambda r, s=None: r["k"], len, None):
        assert field_key(other) is None, other


def _plan(kind, mode, key_selector=lambda r: r["k"], field="v", backend="hashmap"):
    p = StreamPipeline(f"agg_{kind}", parallelism=1, runtime_mode=mode).set_state_backend(backend)
    keyed = p.from_collection([{"k": "a", "v": 1}]).key_by(key_selector)
    getattr(keyed, kind)(field).name("agg").collect("out")
    job = p.plan()
    chain = next(c for c in job.chains if c.name.startswith("agg"))
    return job, chain.id


def _elements(rng, n, keys, with_ts=True):
    """Records with out-of-order timestamps (ties included) and watermarks between them."""
    out, wm = [], 0
    for i in range(n):
        rec = {"k": rng.choice(keys), "v": rng.randint(-5, 5), "seq": i}
        out.append(StreamRecord(rec, rng.randint(0, 50)) if with_ts else rec)
        if with_ts and rng.random() < 0.15:
            wm += rng.randint(0, 10)
            out.append(Watermark(wm))
    return out


def _batches(elements, rng):
    """The same elements as a typed exchange head reads them: Arrow batches of random sizes,
    split where a watermark falls, with the `_ts` column."""
    out, pending = [], []

    def flush():
        while pending:
            size = rng.randint(1, 9)
            part, pending[:] = pending[:size], pending[size:]
            recs = [e.value if type(e) is StreamRecord else e for e in part]
            ts = [e.timestamp if type(e) is StreamRecord else None for e in part]
            batch = pa.RecordBatch.from_pylist(recs)
            if any(t is not None for t in ts):
                batch = batch.append_column("_ts", pa.array(ts, pa.int64()))
            out.append(batch)

    for e in elements:
        if type(e) is Watermark:
            flush()
            out.append(e)
        else:
            pending.append(e)
    flush()
    return out


def _run(job, chain_id, inputs, checkpoint=None):
    writers = MemoryWriters()
    extra = {} if checkpoint is None else {"checkpoint": checkpoint}
    run_subtask(job, chain_id, 0, "r", inputs, writers.record_writer_factory, writers.sink_writer_factory, **extra)
    return [r for w in writers.sink.values() for r in w.records]


def _multiset(records):
    return Counter((tuple(sorted(r.value.items())), r.timestamp) for r in records)


def _per_key(records):
    by_key: dict = {}
    for r in records:
        by_key.setdefault(r.value["k"], []).append((r.value, r.timestamp))
    return by_key


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("mode", ["batch", "streaming"])
def test_batches_equal_records(kind, mode):
    job, chain_id = _plan(kind, mode)
    for seed in range(6):
        rng = random.Random(seed)
        elements = _elements(rng, rng.randint(1, 120), ["a", "b", "c", "d"], with_ts=seed != 5)
        want = _run(job, chain_id, list(elements))
        got = _run(job, chain_id, ColumnarInput(_batches(elements, rng)))
        assert _multiset(got) == _multiset(want), (kind, mode, seed)
        if mode == "streaming":  # one rolling result per record, in record order per key
            assert len(got) == sum(type(e) is not Watermark for e in elements)
            assert _per_key(got) == _per_key(want)
        else:
            assert len(got) == len({(e.value if type(e) is StreamRecord else e)["k"]
                                    for e in elements if type(e) is not Watermark})


def test_the_vectorized_operator_is_the_one_built_and_takes_the_batch_path():
    job, chain_id = _plan("sum", "streaming")
    node = next(n for n in job.stream_graph.nodes if n.name == "agg")
    assert vectorized_aggregation(node) == "k"
    assert vectorized_aggregation(_plan("sum", "streaming", key_selector=lambda r: r["k"].upper())[0]
                                  .stream_graph.nodes[-2]) is None
    built = []
    original = VectorizedAggregationOperator._rolling

    def spy(self, batch):
        built.append(original(self, batch))
        return built[-1]

    VectorizedAggregationOperator._rolling = spy
    try:
        _run(job, chain_id, ColumnarInput(_batches(_elements(random.Random(1), 30, ["a", "b"]), random.Random(1))))
    finally:
        VectorizedAggregationOperator._rolling = original
    assert built and all(built)


def test_int_keys_large_values_nulls_and_floats_fall_back_or_equal():
    """Keys of int type; a null value and a sum past int64 go per record (same results)."""
    job, chain_id = _plan("sum", "streaming")
    big = 2**62
    rows = [{"k": 1, "v": big}, {"k": 1, "v": big}, {"k": 2, "v": 3}]
    want = _run(job, chain_id, [StreamRecord(r, i) for i, r in enumerate(rows)])
    got = _run(job, chain_id, ColumnarInput([pa.RecordBatch.from_pylist(rows).append_column(
        "_ts", pa.array([0, 1, 2], pa.int64()))]))
    assert _multiset(got) == _multiset(want) and want[1].value["v"] == 2**63
    job, chain_id = _plan("max", "batch")
    rows = [{"k": "a", "v": 1.5}, {"k": "a", "v": -2.0}, {"k": "b", "v": 0.25}]
    assert _multiset(_run(job, chain_id, ColumnarInput([pa.RecordBatch.from_pylist(rows)]))) == \
        _multiset(_run(job, chain_id, list(rows)))


class MemoryCheckpoint:
    """A stream run's snapshots in memory: what one run writes, the next restores."""

    def __init__(self, previous=None, drain=False):
        self.drain = drain
        self.previous = previous or {}
        self.written: dict = {}

    def restore(self, operator_key, subtask):
        snap = self.previous.get((operator_key, subtask))
        return ([snap], snap) if snap is not None else ([], None)

    def write(self, operator_key, subtask, state):
        self.written[(operator_key, subtask)] = state

    def summary(self):
        return {}


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("backend", ["hashmap", "rocksdb"])
def test_stream_runs_restore_each_others_snapshots(kind, backend):
    """Three stream runs and a drain, alternating per-record and vectorized input: the results
    equal one per-record run over all the records, state handed on through snapshots (heap
    and RocksDB backends)."""
    job, chain_id = _plan(kind, "streaming", backend=backend)
    rng = random.Random(7)
    elements = _elements(rng, 200, ["a", "b", "c"])
    want = _run(job, chain_id, list(elements))
    cuts = [0, 50, 110, 160, len(elements)]
    got, previous = [], None
    for run, (lo, hi) in enumerate(zip(cuts, cuts[1:])):
        part = elements[lo:hi]
        cp = MemoryCheckpoint(previous, drain=run == 3)
        got += _run(job, chain_id, ColumnarInput(_batches(part, rng)) if run % 2 else list(part), cp)
        previous = cp.written
    assert _multiset(got) == _multiset(want)
    assert _per_key(got) == _per_key(want)


def test_rolling_equals_the_per_record_fold_with_state_in_front():
    rng = random.Random(3)
    for kind in KINDS:
        fn = AggregationFunction(kind, "v")
        for trial in range(40):
            rows = [{"k": rng.choice("abc"), "v": rng.choice([rng.randint(-3, 3), 2**40]), "x": i}
                    for i in range(rng.randint(1, 40))]
            state = {k: {"k": k, "v": rng.randint(-3, 3), "x": -1} for k in "ab"} if trial % 2 else {}
            accs, want = dict(state), []
            for r in rows:
                acc = accs.get(r["k"])
                accs[r["k"]] = acc = r if acc is None else fn.reduce(acc, r)
                want.append(acc)
            batch = pa.RecordBatch.from_pylist(rows)
            codes, keys = key_codes(batch.column("k"))
            result = rolling(batch, codes, "v", kind, {c: state[k] for c, k in enumerate(keys) if k in state})
            assert result.out.to_pylist() == want, (kind, rows, state)
            finals = result.out.take(pa.array(result.last)).to_pylist()
            assert {keys[c]: f for c, f in zip(result.last_codes.tolist(), finals)} == \
                {k: accs[k] for k in set(r["k"] for r in rows)}
    floats = pa.RecordBatch.from_pylist([{"k": "a", "v": 0.1}, {"k": "a", "v": 0.2}])
    assert rolling(floats, np.zeros(2, np.int64), "v", "sum", {}) is None  # float sums: per record
    nan = pa.RecordBatch.from_pylist([{"k": "a", "v": float("nan")}])
    assert rolling(nan, np.zeros(1, np.int64), "v", "min", {}) is None


def test_plan_marks_the_operators_that_compute_over_batches():
    from airflow_flinkchain.planner.formats import format_text

    def pipeline(typed):
        p = StreamPipeline("marks", parallelism=2, runtime_mode="batch")
        s = p.from_collection([{"k": "a", "v": 1}], output_type={"k": "string", "v": "int64"} if typed else None)
        s.key_by(lambda r: r["k"]).sum("v").name("total").collect("out")
        s.map_batches(lambda b: b).name("batchy").collect("copy")
        return p.plan()

    typed, untyped = pipeline(True), pipeline(False)
    ops = {o["name"]: o["vectorized"] for c in typed.to_dict()["chains"] for o in c["operators"]}
    assert ops["total"] and ops["batchy"] and not ops["out"]
    assert "total -> out  [vectorized: total]" in format_text([typed])
    # untyped input: the exchange is pickled, the aggregation runs per record
    assert {o["name"]: o["vectorized"] for c in untyped.to_dict()["chains"] for o in c["operators"]}["total"] is False
    assert "[vectorized: total]" not in format_text([untyped])


def test_only_last_gives_each_keys_final_accumulator():
    rng = random.Random(5)
    for kind in KINDS:
        rows = [{"k": rng.choice([1, 2, 3]), "v": rng.randint(-4, 4), "x": i} for i in range(60)]
        batch = pa.RecordBatch.from_pylist(rows)
        codes, keys = key_codes(batch.column("k"))
        full, last = rolling(batch, codes, "v", kind, {}), rolling(batch, codes, "v", kind, {}, only_last=True)
        assert last.out.to_pylist() == full.out.take(pa.array(full.last)).to_pylist()
        assert last.last_codes.tolist() == full.last_codes.tolist()


def _window_plan(kind, mode, twin=False, offset=0):
    from airflow_flinkchain.window import TumblingEventTimeWindows

    p = StreamPipeline(f"win_{kind}", parallelism=1, runtime_mode=mode)
    windowed = p.from_collection([{"k": "a", "v": 1}]).key_by(lambda r: r["k"]).window(
        TumblingEventTimeWindows.of(10, offset))
    fn = AggregationFunction(kind, "v")
    result = windowed.reduce(lambda a, b: fn.reduce(a, b)) if twin else getattr(windowed, kind)("v")
    result.name("agg").collect("out")
    job = p.plan()
    return job, next(c for c in job.chains if c.name.startswith("agg")).id


def fold_results(monkeypatch) -> list:
    """What each fold of a vectorized window returns (True: folded over the batches), in order."""
    folds = []
    original = VectorizedWindowAggregationOperator._fold
    monkeypatch.setattr(VectorizedWindowAggregationOperator, "_fold",
                        lambda self, held: folds.append(original(self, held)) or folds[-1])
    return folds


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("mode", ["batch", "streaming"])
def test_window_aggregations_on_batches_equal_the_reduce_twin(kind, mode, monkeypatch):
    """Tumbling windows: BATCH folds the batches per key and window at the end of input;
    STREAMING folds each batch as it comes (test_streaming_windows.py has its cases)."""
    from airflow_flinkchain.planner.vectorized import vectorized_window

    job, chain_id = _window_plan(kind, mode, offset=3)
    twin, twin_chain = _window_plan(kind, mode, twin=True, offset=3)
    assert vectorized_window(next(n for n in job.stream_graph.nodes if n.name == "agg")) == "k"
    folds = fold_results(monkeypatch)
    for seed in range(5):
        rng = random.Random(seed)
        elements = _elements(rng, rng.randint(1, 150), ["a", "b", "c"])
        want = _run(twin, twin_chain, list(elements))
        assert _multiset(_run(job, chain_id, list(elements))) == _multiset(want)
        assert _multiset(_run(job, chain_id, ColumnarInput(_batches(elements, rng)))) == _multiset(want), seed
    assert folds == ([True] * 5 if mode == "batch" else [])  # BATCH: the vectorized fold, every time


def test_windowed_and_all_windowed_built_in_aggregations_per_record():
    from airflow_flinkchain.window import CountTumblingWindowAssigner

    p = StreamPipeline("win_builtins", parallelism=1, runtime_mode="batch")
    s = p.from_collection([("a", 3, "x"), ("a", 1, "y"), ("b", 5, "z"), ("a", 2, "w")])
    w = s.key_by(lambda r: r[0]).window(CountTumblingWindowAssigner.of(2))
    w.sum(1).collect("sum")
    w.min(1).collect("min")
    w.max_by(1).collect("max_by")
    s.window_all(CountTumblingWindowAssigner.of(2)).min_by(1).collect("all_min_by")
    out = p.execute_local()
    assert out.output("sum") == [("a", 4, "x")] and out.output("min") == [("a", 1, "x")]
    assert out.output("max_by") == [("a", 3, "x")]
    assert sorted(out.output("all_min_by")) == [("a", 1, "y"), ("a", 2, "w")]


@pytest.mark.parametrize("mode", ["batch", "streaming"])
def test_declarative_aggregates_on_batches_equal_records(mode, monkeypatch):
    from airflow_flinkchain.api.aggregations import Aggregates
    from airflow_flinkchain.window import TumblingEventTimeWindows

    agg = Aggregates.of(key=("k", "first"), total=("v", "sum"), n=("v", "count"), mean=("v", "avg"),
                        low=("v", "min"), high=("v", "max"), first_seq=("seq", "first"))
    p = StreamPipeline("win_aggregates", parallelism=1, runtime_mode=mode)
    w = p.from_collection([{"k": "a", "v": 1}]).key_by(lambda r: r["k"]).window(TumblingEventTimeWindows.of(10))
    w.aggregate(agg).name("agg").collect("out")
    job = p.plan()
    chain_id = next(c for c in job.chains if c.name.startswith("agg")).id
    folds = fold_results(monkeypatch)
    for seed in range(4):
        rng = random.Random(seed)
        elements = _elements(rng, rng.randint(1, 150), ["a", "b", "c"])
        want = _run(job, chain_id, list(elements))
        got = _run(job, chain_id, ColumnarInput(_batches(elements, rng)))
        assert _multiset(got) == _multiset(want), seed
        assert all(r.value["total"] == r.value["mean"] * r.value["n"] for r in want)
    assert folds == ([True] * 4 if mode == "batch" else [])
