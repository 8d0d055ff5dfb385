"""Exchange datasets without Spark: format, watermarks, typed edges, commit, corruption."""

from __future__ import annotations

import re

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_flinkchain.runtime.core.elements import StreamRecord, Watermark
from airflow_flinkchain.runtime.exchange.dataset import (
    DatasetWriter,
    ExchangeError,
    merged_input,
    open_channel,
    read_records,
)
from airflow_flinkchain.path_names import path_segment as safe_segment
from airflow_flinkchain.runtime.exchange.layout import ExchangeArea, Location, replace
from airflow_flinkchain.runtime.exchange.schema import RecordTypeError, parse_output_type


def _write_edge(area, attempt_id, edge, per_subtask, channels=2, output_type=None):
    att = area.attempt("c1", attempt_id)
    for s, records in enumerate(per_subtask):
        w = DatasetWriter(att.edge(edge), edge, s, channels, output_type)
        for ch, value, ts in records:
            if value == "WM":
                w.broadcast_watermark(ts)
            else:
                w.write(ch, value, ts)
        w.close()
    replace(att.edge(edge), area.edge(edge), area.trash())
    att.discard()


def test_round_trip_channels_timestamps_and_watermarks(tmp_path):
    area = ExchangeArea(str(tmp_path), "dag", "manual__2024-01-01T00:00:00+00:00")
    _write_edge(area, "a1", "a__b", [
        [(0, "x0", None), (1, {"k": 1}, 5), ("-", "WM", 10), (1, (1, 2), 11)],
        [(1, "y", None), ("-", "WM", 7)],
    ])
    files = open_channel(area.edge("a__b"), "a__b", 1, expected_files=2)
    got = list(merged_input(files))
    # subtask 0's file first, then subtask 1's; the combined watermark is the
    # minimum over both input files, emitted when it advances
    assert got == [StreamRecord({"k": 1}, 5), StreamRecord((1, 2), 11), "y", Watermark(7)]
    assert list(merged_input(open_channel(area.edge("a__b"), "a__b", 0, 2))) == ["x0", Watermark(7)]
    # run ids with ':' / '+' become safe, collision-free path segments
    assert ":" not in area.run.uri and safe_segment("a:b") != safe_segment("a_b")


def test_commit_replaces_never_appends(tmp_path):
    area = ExchangeArea(str(tmp_path), "dag", "r1")
    _write_edge(area, "1", "e", [[(0, i, None) for i in range(3)]], channels=1)
    _write_edge(area, "2", "e", [[(0, i, None) for i in range(3)]], channels=1)
    assert list(merged_input(open_channel(area.edge("e"), "e", 0, 1))) == [0, 1, 2]
    assert not area.trash().exists() and not area.run.join("_attempts").exists()


def test_typed_edge_is_plain_parquet_and_validates(tmp_path):
    schema = {"id": "int64", "name": "string not null"}
    area = ExchangeArea(str(tmp_path), "dag", "r1")
    _write_edge(area, "1", "t", [[(0, {"id": 1, "name": "a"}, 3), (0, {"id": None, "name": "b"}, None)]],
                channels=1, output_type=schema)
    table = pq.read_table(area.edge("t").path)
    assert table.column("id").to_pylist() == [1, None]
    assert table.schema.field("name").type == pa.string()
    assert list(merged_input(open_channel(area.edge("t"), "t", 0, 1))) == [
        StreamRecord({"id": 1, "name": "a"}, 3), {"id": None, "name": "b"}]

    att = area.attempt("c1", "x")
    for bad, field in [({"id": 1.5, "name": "a"}, "'id'"), ({"id": "1", "name": "a"}, "'id'"),
                       ({"id": 1, "name": None}, "'name'"), ({"id": 1}, "missing field(s) ['name']"),
                       ({"id": 1, "name": "a", "x": 0}, "undeclared field(s) ['x']")]:
        w = DatasetWriter(att.edge("t"), "t", 0, 1, schema, label="operator 'parse' writing edge 't'")
        with pytest.raises(RecordTypeError, match=re.escape(field)) as err:
            w.write(0, bad)
            w.close()
        assert "operator 'parse'" in str(err.value)
    with pytest.raises(ValueError, match="unknown type"):
        parse_output_type({"a": "int65"})


def test_missing_incomplete_corrupt_and_foreign_files(tmp_path):
    area = ExchangeArea(str(tmp_path), "dag", "r1")
    with pytest.raises(ExchangeError, match="not committed"):
        open_channel(area.edge("e"), "e", 0, 1)
    _write_edge(area, "1", "e", [[(0, 1, None)], [(0, 2, None)]], channels=1)
    with pytest.raises(ExchangeError, match="has 2 part files, expected 3"):
        open_channel(area.edge("e"), "e", 0, 3)
    part = area.edge("e").join("channel=0", "part-00001.parquet")
    # a foreign Parquet file (e.g. written by another tool) under the edge
    pq.write_table(pa.table({"x": [1]}), part.path)
    with pytest.raises(ExchangeError, match="part-00001.parquet was not written for this dataset"):
        open_channel(area.edge("e"), "e", 0, 2)
    # a truncated file
    data = open(area.edge("e").join("channel=0", "part-00000.parquet").path, "rb").read()
    with open(part.path, "wb") as f:
        f.write(data[: len(data) // 2])
    with pytest.raises(ExchangeError, match="exchange dataset 'e': file .*part-00001.parquet is not a readable"):
        open_channel(area.edge("e"), "e", 0, 2)


def test_collect_dataset_and_location_uri(tmp_path):
    loc = Location("file://" + str(tmp_path / "c"))
    w = DatasetWriter(loc, "collect:out", 0, 1, channel_dirs=False)
    for i in range(3):
        w.write(0, {"i": i})
    w.close()
    assert read_records(loc, "collect:out") == [{"i": 0}, {"i": 1}, {"i": 2}]


@pytest.mark.parametrize("pipeline_name, run_id", [
    ("p", "."), ("p", ".."), ("p", "a/../.."), ("p", "/tmp/abs"), ("..", "r1"), ("a/b", "r1"),
])
def test_names_that_are_paths_are_refused_before_anything_runs(tmp_path, pipeline_name, run_id):
    """execute() refuses them before Spark starts, with an error naming what is wrong; nothing is written."""
    from airflow_flinkchain import StreamPipeline
    from airflow_flinkchain.path_names import UnsafeNameError
    from airflow_flinkchain.runtime.spark.local import execute_pipeline

    (tmp_path / "ex" / "p" / "earlier_run").mkdir(parents=True)
    (tmp_path / "ex" / "p" / "earlier_run" / "data").write_text("kept")
    before = sorted(tmp_path.rglob("*"))
    p = StreamPipeline(pipeline_name)
    p.from_collection([1, 2]).map(lambda x: x).collect("out")
    with pytest.raises(UnsafeNameError, match="run id|DAG id"):
        execute_pipeline(p, spark=None, exchange_root=str(tmp_path / "ex"), run_id=run_id)
    assert sorted(tmp_path.rglob("*")) == before
    with pytest.raises(UnsafeNameError):
        ExchangeArea(str(tmp_path / "ex"), pipeline_name, run_id)


def test_watermarks_replay_at_their_positions_across_read_batches(tmp_path, monkeypatch):
    """A watermark per record (STREAMING) on a file read in several batches: each one comes
    back right after its record, also at batch boundaries and after the last record."""
    import airflow_flinkchain.runtime.exchange.dataset as dataset

    monkeypatch.setattr(dataset, "BATCH_ROWS", 4)
    area = ExchangeArea(str(tmp_path), "dag", "r1")
    records = [("-", "WM", 0)]
    for i in range(1, 11):
        records += [(0, i, i), ("-", "WM", i), ("-", "WM", 100 + i)] if i % 4 == 0 else [(0, i, i), ("-", "WM", i)]
    _write_edge(area, "a1", "e", [records], channels=1)
    (f,) = open_channel(area.edge("e"), "e", 0, 1)
    expected = [Watermark(0)]
    for i in range(1, 11):
        expected += [StreamRecord(i, i), Watermark(i)] + ([Watermark(100 + i)] if i % 4 == 0 else [])
    assert list(f.elements()) == expected
    # one channel: the valve passes on only advancing watermarks
    got = list(merged_input([f]))
    assert got[:6] == [Watermark(0), StreamRecord(1, 1), Watermark(1), StreamRecord(2, 2), Watermark(2),
                       StreamRecord(3, 3)]
    assert Watermark(5) not in got and Watermark(104) in got
