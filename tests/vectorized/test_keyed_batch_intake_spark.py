"""BATCH keyed operators keyed by a field read their typed exchange input as Arrow batches and
hold them whole until the end of input (runtime/core/operators/key_batches.py). On Spark (typed
exchange files) against execute_local (records one by one into the per-record buffer): the same
records, timestamps, dead letters and counters, for a window with a user reduce, a keyed user
reduce and a KeyedProcessFunction whose output shows each key's record order; over a declared
and an undeclared Parquet source, with rows without timestamp, and with a key column of a type
the batches are not grouped by (a float: per record)."""

from __future__ import annotations

from collections import Counter

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_flinkchain import StreamPipeline
from airflow_flinkchain.common import Duration, WatermarkStrategy
from airflow_flinkchain.functions import KeyedProcessFunction
from airflow_flinkchain.io import ParquetSource
from airflow_flinkchain.planner.vectorized import buffers_batches
from airflow_flinkchain.runtime.spark.local import execute_pipeline
from airflow_flinkchain.state import ValueStateDescriptor
from airflow_flinkchain.window import TumblingEventTimeWindows
from tests.conformance_cases import WithTimestamp

pytestmark = pytest.mark.spark


def write_input(directory, key_type):
    """Two files; `ts` null on every 23rd row, repeated timestamps, keys in no order."""
    directory.mkdir(parents=True, exist_ok=True)
    for part, (lo, hi) in enumerate(((0, 700), (700, 1300))):
        rows = [{"k": (i * 7) % 13 if key_type == "int" else float((i * 7) % 13), "v": (i * 31) % 17,
                 "ts": None if i % 23 == 0 else (i * 37) % 900} for i in range(lo, hi)]
        schema = pa.schema([("k", pa.int64() if key_type == "int" else pa.float64()), ("v", pa.int64()),
                            ("ts", pa.int64())])
        pq.write_table(pa.Table.from_pylist(rows, schema=schema), directory / f"part-{part}.parquet",
                       row_group_size=97)


def event_time(r, _ts):
    return r["ts"]


def add(a, b):
    if b["v"] == 16:
        raise ValueError("16 is not added")
    return {"k": a["k"], "v": a["v"] + b["v"], "ts": max(a["ts"] or 0, b["ts"] or 0)}


class Sequence(KeyedProcessFunction):
    """Each key's values in the order they arrive, emitted by an event-time timer at the end."""

    def open(self, runtime_context):
        self.seen = runtime_context.get_state(ValueStateDescriptor("seen"))

    def process_element(self, value, ctx):
        self.seen.update((self.seen.value() or ()) + ((value["v"], ctx.timestamp()),))
        ctx.timer_service().register_event_time_timer(10_000)

    def on_timer(self, ts, ctx):
        yield (ctx.get_current_key(), self.seen.value())


def build(name, path, kind, declared):
    row = {"k": "int64", "v": "int64", "ts": "int64"} if declared else None
    p = StreamPipeline(name, parallelism=2, runtime_mode="batch")
    s = p.from_source(ParquetSource(str(path)), name="src", output_type=row)
    strategy = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(event_time)
    keyed = s.assign_timestamps_and_watermarks(strategy).name("wm").key_by(lambda r: r["k"])
    if kind == "window":
        out = keyed.window(TumblingEventTimeWindows.of(Duration.of_millis(100))).reduce(add)
    elif kind == "reduce":
        out = keyed.reduce(add)
    else:
        out = keyed.process(Sequence())
    out = out.name("op").on_error("dead_letter")
    out.process(WithTimestamp()).name("stamp").collect("out")
    out.dead_letters().process(WithTimestamp()).name("dead_stamp").collect("dead")
    return p


def counted(res):
    return [sum(m[k] for m in res.operator_metrics("op")) for k in ("records_in", "records_out", "dead_lettered")]


def frozen(value):
    if isinstance(value, dict):
        return tuple(sorted((k, frozen(v)) for k, v in value.items()))
    if isinstance(value, (list, tuple)):
        return tuple(frozen(v) for v in value)
    return value


@pytest.mark.parametrize("key_type", ["int", "float"])
def test_batch_keyed_operators_read_batches_as_they_read_records(spark, tmp_path, key_type):
    data = tmp_path / "in"
    write_input(data, key_type)
    for kind in ("window", "reduce", "process"):
        for declared in ((True, False) if key_type == "int" else (True,)):
            p = build(f"intake_{kind}", data, kind, declared)
            job = p.plan()
            if declared:
                g = job.stream_graph
                op = next(n for n in g.nodes if n.name == "op")
                assert buffers_batches(g, op) == "k"
                assert all(g.edge_type(e) is not None for e in g.in_edges(op.id))
            on_spark = execute_pipeline(p, spark=spark)
            local = build(f"intake_{kind}", data, kind, declared).execute_local()
            for sink in ("out", "dead"):
                assert Counter(map(frozen, on_spark.output(sink))) == Counter(map(frozen, local.output(sink))), \
                    (kind, declared, sink)
            assert counted(on_spark) == counted(local), (kind, declared)
            assert counted(on_spark)[0] == 1300
            assert bool(on_spark.output("dead")) == (kind != "process")  # add() fails on some records
