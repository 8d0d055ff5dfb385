"""What a user function sees after an undeclared Parquet source whose schema was read from its
files: the same dicts as without a schema, whatever the column types (the typed exchange edge
converts the rows to the columns they were read from and back)."""

from __future__ import annotations

import datetime
import decimal

import pyarrow as pa
import pyarrow.parquet as pq

from airflow_flinkchain import StreamPipeline
from airflow_flinkchain.io import ParquetSource
from airflow_flinkchain.runtime.connectors.inferred_types import with_inferred_types

COLUMNS = {
    "k": pa.array(["a", "b", None], pa.string()),
    "u64": pa.array([2 ** 63 + 5, None, 1], pa.uint64()),
    "i8": pa.array([1, None, -3], pa.int8()),
    "f32": pa.array([1.25, None, 2.0], pa.float32()),
    "dec": pa.array([decimal.Decimal("1.23"), None, decimal.Decimal("-4.00")], pa.decimal128(5, 2)),
    "ts": pa.array([datetime.datetime(2020, 1, 1, 1, 2, 3, 4000), None, datetime.datetime(1970, 1, 1)],
                   pa.timestamp("us", tz="UTC")),
    "day": pa.array([datetime.date(2020, 1, 1), None, datetime.date(1999, 12, 31)], pa.date32()),
    "lst": pa.array([[1, 2], None, []], pa.list_(pa.int64())),
    "st": pa.array([{"a": 1, "b": "x"}, None, {"a": None, "b": None}],
                   pa.struct([("a", pa.int64()), ("b", pa.string())])),
    "mp": pa.array([[("a", 1)], None, []], pa.map_(pa.string(), pa.int64())),
    "bin": pa.array([b"x", None, b""], pa.binary()),
    "flag": pa.array([True, None, False]),
    "note": pa.array(["x", "y", None], pa.string()),
}


def test_records_after_the_typed_edge_are_the_files_rows(tmp_path):
    src = tmp_path / "in"
    src.mkdir()
    first = pa.table(COLUMNS)
    pq.write_table(first, src / "a.parquet")
    second = first.set_column(first.schema.get_field_index("note"), "note", pa.nulls(3))  # a null-only column
    pq.write_table(second, src / "b.parquet")
    p = StreamPipeline("records", parallelism=2, runtime_mode="batch")
    p.from_source(ParquetSource(str(src)), name="src").key_by(lambda r: str(r["k"])) \
        .map(lambda r: r).name("seen").collect("out")
    g = with_inferred_types(p.plan()).stream_graph
    src_node = next(n for n in g.nodes if n.name == "src")
    assert g.inferred_types[src_node.id].field("note").type == pa.string()
    want = first.to_pylist() + second.to_pylist()
    got = p.execute_local().output("out")
    key = repr
    assert sorted(map(key, got)) == sorted(map(key, want))
    assert [list(r) for r in got] == [list(COLUMNS)] * 6  # the files' field order


def test_a_file_changed_since_the_run_started_fails_the_source_naming_it(tmp_path):
    """The run's plan recorded the files' schema when it started; a file read later with other
    fields fails the source with the fix, not the exchange with a type error."""
    import pytest

    from airflow_flinkchain.runtime.connectors.parquet_batches import ParquetBatchReader

    src = tmp_path / "in"
    src.mkdir()
    pq.write_table(pa.table({"k": ["a"], "v": [1]}), src / "a.parquet")
    read = with_inferred_types(_plan(src)).stream_graph.inferred_types
    (schema,) = read.values()
    pq.write_table(pa.table({"k": ["a"], "v": ["now a string"]}), src / "a.parquet")
    reader = ParquetBatchReader(ParquetSource(str(src)), str(src), [str(src / "a.parquet")], "source 'src'", 1,
                                schema)
    with pytest.raises(ValueError, match=r"source 'src': file .*a\.parquet has fields \(k string, v string\) but "
                                         r"the run started with files of \(k string, v int64\)"):
        list(reader.read(0, iter(())))


def _plan(src):
    p = StreamPipeline("changed", runtime_mode="batch")
    p.from_source(ParquetSource(str(src)), name="src").key_by(lambda r: r["k"]).sum("v").collect("out")
    return p.plan()
