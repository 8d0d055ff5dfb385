"""Batches through exchange files (no Spark): a batch tail writes a typed channel file as
batches, a batch head reads it as batches with the watermarks at the same positions as the
per-record reader; a pickled file takes a batch record by record."""

from __future__ import annotations

import pyarrow as pa
import pytest

from airflow_flinkchain.runtime.core.batches import SplitStart, batch_rows
from airflow_flinkchain.runtime.core.elements import StreamRecord, Watermark
from airflow_flinkchain.runtime.exchange.dataset import DatasetWriter, batch_elements, open_channel
from airflow_flinkchain.runtime.exchange.layout import Location
from airflow_flinkchain.runtime.exchange.schema import RecordTypeError


def _write(tmp_path, output_type):
    loc = Location(str(tmp_path / "edge"))
    w = DatasetWriter(loc, "e", 0, 1, output_type)
    w.write(0, {"x": 1}, 5)
    w.write_watermark(0, 4)
    w.write_batch(0, pa.RecordBatch.from_pydict({"x": [2, 3, 4], "_ts": pa.array([6, 7, 8], pa.int64())}))
    w.write_watermark(0, 7)  # after the batch
    w.write_batch(0, pa.RecordBatch.from_pydict({"x": pa.array([5, 6], pa.int32())}))  # cast, no timestamps
    w.close()
    return open_channel(loc, "e", 0, 1)


def _as_elements(items):
    out = []
    for el in items:
        if isinstance(el, pa.RecordBatch):
            rows, ts = batch_rows(el)
            out += [v if t is None else StreamRecord(v, t) for v, t in zip(rows, ts or [None] * len(rows))]
        else:
            out.append(el)
    return out


def test_typed_file_written_and_read_as_batches_keeps_rows_timestamps_and_watermarks(tmp_path):
    (f,) = _write(tmp_path, {"x": "int64"})
    expected = [StreamRecord({"x": 1}, 5), Watermark(4), StreamRecord({"x": 2}, 6), StreamRecord({"x": 3}, 7),
                StreamRecord({"x": 4}, 8), Watermark(7), {"x": 5}, {"x": 6}]
    assert list(f.elements()) == expected
    batched = list(batch_elements(f))
    assert _as_elements(batched) == expected
    assert sum(isinstance(b, pa.RecordBatch) for b in batched) >= 2  # split where the watermarks fall


def test_pickled_file_takes_a_batch_record_by_record(tmp_path):
    (f,) = _write(tmp_path, None)
    assert [el for el in f.elements()][2:5] == [StreamRecord({"x": 2}, 6), StreamRecord({"x": 3}, 7),
                                                 StreamRecord({"x": 4}, 8)]


def test_a_batch_that_does_not_fit_the_edge_type_names_the_field(tmp_path):
    w = DatasetWriter(Location(str(tmp_path / "edge")), "e", 0, 1, {"x": "int64"}, "operator 'op' writing edge 'e'")
    with pytest.raises(RecordTypeError, match="operator 'op'.*field 'x' expects int64"):
        w.write_batch(0, pa.RecordBatch.from_pydict({"x": ["a"]}))


def test_parquet_source_read_by_the_subtasks_splits_rows_contiguously(tmp_path):
    import pyarrow.parquet as pq

    from airflow_flinkchain.io import ParquetSource
    from airflow_flinkchain.runtime.connectors.parquet_batches import ParquetBatchReader, direct_files

    (tmp_path / "in").mkdir()
    for i in range(3):
        pq.write_table(pa.table({"x": pa.array(range(i * 1000, (i + 1) * 1000), pa.int64())}),
                       tmp_path / "in" / f"part-{i}.parquet", row_group_size=300)
    (tmp_path / "in" / "_SUCCESS").write_text("")
    source = ParquetSource(str(tmp_path / "in"), schema={"x": "int32"})
    files = direct_files(source, str(tmp_path / "in"))
    assert len(files) == 3
    reader = ParquetBatchReader(source, str(tmp_path / "in"), files, "source 'in'", 4)
    read = [list(reader.read_batches(k, iter(()))) for k in range(4)]
    shares = [[v for b in r if isinstance(b, pa.RecordBatch) for v in b.column(0).to_pylist()] for r in read]
    assert [len(s) for s in shares] == [750] * 4 and sum(shares, []) == list(range(3000))
    # a subtask reading pieces of two files: a SplitStart before each (its assigners' per-split watermarks)
    assert [(m.index, m.count) for m in read[1] if isinstance(m, SplitStart)] == [(0, 2), (1, 2)]
    assert not any(isinstance(m, SplitStart) for m in read[0])
    assert next(b for b in read[0] if isinstance(b, pa.RecordBatch)).schema.field("x").type == pa.int32()
    # first the subtask's layout: its pieces go on from the previous subtask / in the next one
    assert [(r[0].count, r[0].continues, r[0].continued) for r in read] == [
        (1, False, True), (2, True, True), (2, True, True), (1, True, False)]
    (tmp_path / "in" / "k=1").mkdir()  # partition directories: left to Spark
    assert direct_files(source, str(tmp_path / "in")) is None
    assert direct_files(ParquetSource(str(tmp_path / "in" / "*.parquet")), str(tmp_path / "in" / "*.parquet")) is None
