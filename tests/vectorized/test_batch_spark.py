"""Batch operators on Spark: Parquet batches into a batch head, batches out of a batch tail
into a Parquet sink and a typed exchange edge, read back as batches by the next chain's batch
head; the outputs equal the per-record version of the same pipeline."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq

from airflow_flinkchain import StreamPipeline
from airflow_flinkchain.io import ParquetSink, ParquetSource
from airflow_flinkchain.runtime.spark.local import execute_pipeline

from .test_batch_operators import even, even_b, expand, expand_b

X = {"x": "int64"}


def shift_b(b):
    import pyarrow.compute as pc

    return pa.RecordBatch.from_arrays([pc.add(pc.multiply(b["x"], 3), 1)], names=["x"])


def build(tmp, batched: bool) -> StreamPipeline:
    out = tmp / ("batched" if batched else "per_record")
    p = StreamPipeline(f"vec_spark_{batched}", parallelism=2)
    src = p.from_source(ParquetSource(str(tmp / "in.parquet")), name="src")
    shifted = (src.map_batches(shift_b, output_type=X) if batched
               else src.map(lambda r: {"x": r["x"] * 3 + 1}, output_type=X)).name("shift")
    shifted.sink_to(ParquetSink(str(out / "shifted"), output_type=X), name="sink_shifted")
    kept = (shifted.filter_batches(even_b) if batched else shifted.filter(even)).name("keep").start_new_chain()
    expanded = (kept.map_batches(expand_b) if batched else kept.flat_map(expand)).name("expand")
    expanded.sink_to(ParquetSink(str(out / "expanded"), output_type=X), name="sink_expanded")
    return p


def test_parquet_in_parquet_out_batch_chains_equal_per_record(spark, tmp_path):
    pq.write_table(pa.table({"x": pa.array(range(5000), pa.int64())}), tmp_path / "in.parquet", row_group_size=700)
    batched, per_record = build(tmp_path, True), build(tmp_path, False)
    assert [c.name for c in batched.plan().chains] == ["src -> shift -> sink_shifted", "keep -> expand -> sink_expanded"]
    res = execute_pipeline(batched, spark=spark)
    execute_pipeline(per_record, spark=spark)
    for name in ("shifted", "expanded"):
        got = pq.read_table(tmp_path / "batched" / name)
        want = pq.read_table(tmp_path / "per_record" / name)
        assert got.schema == want.schema
        assert sorted(got["x"].to_pylist()) == sorted(want["x"].to_pylist()), name
    assert pq.read_table(tmp_path / "batched" / "expanded").num_rows == 5000
    ops = {o["name"]: o for doc in res.metrics.values() for o in doc["operators"] if o["subtask"] == 0}
    assert ops["keep"]["filtered"] > 0 and ops["src"]["records_in"] > 0
