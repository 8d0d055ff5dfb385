"""Vectorized aggregations over a Parquet source that declares no `output_type`: its files'
schema, read when the run starts, types its exchange edges, so the aggregation's chain reads
Arrow batches exactly as with a declared type; the results equal the per-record twin (a
`reduce`), with nulls and non-numeric fields in the records."""

from __future__ import annotations

from collections import Counter

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_flinkchain import StreamPipeline
from airflow_flinkchain.api.aggregations import AggregationFunction
from airflow_flinkchain.common import Duration, WatermarkStrategy
from airflow_flinkchain.io import ParquetSource
from airflow_flinkchain.planner.vectorized import per_record_reason, runs_vectorized
from airflow_flinkchain.runtime.connectors.inferred_types import with_inferred_types
from airflow_flinkchain.runtime.core.batches import ColumnarInput
from airflow_flinkchain.runtime.core.memory import MemoryWriters
from airflow_flinkchain.runtime.core.operator_chain import run_subtask
from airflow_flinkchain.runtime.core.operators.aggregation import (VectorizedAggregationOperator,
                                                                  VectorizedWindowAggregationOperator)
from airflow_flinkchain.runtime.exchange.dataset import open_channel
from airflow_flinkchain.runtime.exchange.layout import ExchangeArea
from airflow_flinkchain.runtime.spark.local import execute_pipeline
from airflow_flinkchain.runtime.stream_task import feeds_batch_operators, subtask_input
from airflow_flinkchain.window import TumblingEventTimeWindows
from tests.conformance_cases import WithTimestamp

pytestmark = pytest.mark.spark
SCHEMA = pa.schema([("k", pa.string()), ("v", pa.int32()), ("ts", pa.int64()), ("tag", pa.string()),
                    ("w", pa.float64()), ("name", pa.string())])


def write_slice(directory, name, seed, n):
    rows = [{"k": f"k{(i * 7 + seed) % 5}", "v": (i * 13 + seed) % 11 - 5, "ts": (i * 37 + seed * 5) % 200,
             "tag": None if i % 3 == 0 else f"t{i % 4}", "w": None if i % 4 == 1 else i / 4,
             "name": f"n{(i * 5 + seed) % 17:02d}"} for i in range(n)]
    directory.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows, schema=SCHEMA), directory / name, row_group_size=17)


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    path = tmp_path_factory.mktemp("undeclared") / "in"
    write_slice(path, "a.parquet", 1, 300)
    write_slice(path, "b.parquet", 2, 250)
    return path


def twin_reduce(kind, field):
    fn = AggregationFunction(kind, field)
    return lambda a, b: fn.reduce(a, b)


def build(name, path, kind, mode, vectorized, field="v", window=False):
    p = StreamPipeline(name, parallelism=2, runtime_mode=mode)
    s = p.from_source(ParquetSource(str(path)), name="src")
    if window or kind != "sum":
        s = s.assign_timestamps_and_watermarks(WatermarkStrategy.for_bounded_out_of_orderness(
            Duration.of_millis(20)).with_timestamp_assigner(lambda r, _ts: r["ts"])).name("wm")
    keyed = s.key_by(lambda r: r["k"])
    if window:
        keyed = keyed.window(TumblingEventTimeWindows.of(Duration.of_millis(30)))
    agg = getattr(keyed, kind)(field) if vectorized else keyed.reduce(twin_reduce(kind, field))
    agg.name("agg").process(WithTimestamp()).name("stamp").collect("out")
    return p


def as_multiset(values):
    return Counter((tuple(sorted(v.items())), ts) for v, ts in values)


CASES = [("batch", "sum", False), ("batch", "min_by", False), ("batch", "max", False),
         ("streaming", "sum", False), ("batch", "sum", True), ("streaming", "sum", True)]


@pytest.mark.parametrize("mode,kind,window", CASES)
def test_undeclared_source_equals_the_per_record_twin_on_the_vectorized_path(spark, data, tmp_path, mode, kind,
                                                                             window):
    p = build(f"u_{kind}_{window}", data, kind, mode, True, window=window)
    job = with_inferred_types(p.plan())
    g = job.stream_graph
    agg = next(n for n in g.nodes if n.name == "agg")
    assert runs_vectorized(g, agg) and per_record_reason(g, agg) is None
    assert [g.edge_type(e).equals(SCHEMA) for e in g.in_edges(agg.id)] == [True]
    assert feeds_batch_operators(job, job.chains[0].head_id)  # the source hands on its Arrow batches
    root = str(tmp_path / "exchange")
    got = execute_pipeline(p, spark=spark, exchange_root=root, run_id="r1").output("out")
    want = execute_pipeline(build(f"t_{kind}_{window}", data, kind, mode, False, window=window),
                            spark=spark).output("out")
    assert got and as_multiset(got) == as_multiset(want)
    assert_head_reads_batches(job, agg, ExchangeArea(root, job.pipeline, "r1"), mode)


def assert_head_reads_batches(job, agg, area, mode):
    """The aggregation's chain, given the exchange files the run committed, gets Arrow batches
    (stream_task.subtask_input, what each Spark partition calls) and folds them on the batch
    path; its results are the ones of the run."""
    chain = job.chain_of(agg.id)
    folds: list = []
    op_type = VectorizedWindowAggregationOperator if agg.kind.value == "window" else VectorizedAggregationOperator

    class TaskIO:
        def input_channels(self, subtask, edges=None):
            return [f for e in chain.in_edges
                    for f in open_channel(area.edge(e), e, subtask, job.chain(job.edge(e).source).parallelism)]

    for subtask in range(chain.parallelism):
        inputs, _ = subtask_input(job, chain.id, subtask, TaskIO())
        assert isinstance(inputs, ColumnarInput)
        if mode == "batch":
            original = op_type._fold
            op_type._fold = lambda self, held: folds.append(original(self, held)) or folds[-1]
            try:
                writers = MemoryWriters()
                run_subtask(job, chain.id, subtask, "check", inputs, writers.record_writer_factory,
                            writers.sink_writer_factory)
            finally:
                op_type._fold = original
    assert mode != "batch" or (folds and all(folds))


def test_a_non_numeric_field_runs_per_record_with_the_reason_and_the_same_results(spark, data):
    p = build("u_name", data, "max", "batch", True, field="name")
    job = with_inferred_types(p.plan())
    agg = next(n for n in job.stream_graph.nodes if n.name == "agg")
    assert not runs_vectorized(job.stream_graph, agg)
    assert per_record_reason(job.stream_graph, agg) == "field 'name' is string, not a number"
    got = execute_pipeline(p, spark=spark).output("out")
    want = execute_pipeline(build("t_name", data, "max", "batch", False, field="name"), spark=spark).output("out")
    assert len(got) == 5 and as_multiset(got) == as_multiset(want)


def test_execute_local_gives_the_same_records_as_the_per_record_twin(data):
    for kind, window in (("sum", False), ("min_by", False), ("sum", True)):
        got = build(f"l_{kind}", data, kind, "batch", True, window=window).execute_local().output("out")
        want = build(f"lt_{kind}", data, kind, "batch", False, window=window).execute_local().output("out")
        assert got and as_multiset(got) == as_multiset(want), kind
