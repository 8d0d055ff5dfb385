"""The C helpers between Arrow batches and dict records give pyarrow's and the Python loops' answers."""

from __future__ import annotations

import datetime
import decimal

import pyarrow as pa
import pytest

from airflow_flinkchain.runtime.core import arrow_records
from airflow_flinkchain.runtime.core.arrow_records import batch_records
from airflow_flinkchain.runtime.exchange import schema
from airflow_flinkchain.runtime.exchange.schema import RecordTypeError, record_columns, records_to_batch

needs_c = pytest.mark.skipif(arrow_records.dict_columns is None,
                             reason="the C accelerator runtime/core/_flatcheck is not built (no compiler at install time)")


def _batches():
    ts = datetime.datetime(2024, 1, 1, 12)
    t = pa.table({
        "i": pa.array([1, None, 3], pa.int64()), "s": ["x", None, "z"], "f": [1.5, 2.0, None],
        "l": [[1], [], None], "t": pa.array([ts, None, ts]), "d": pa.array([decimal.Decimal("1.5")] * 3),
        "st": [{"a": 1}, None, {"a": 3}], "m": pa.array([[("k", 1)], [], None], pa.map_(pa.string(), pa.int64())),
    })
    dup = pa.RecordBatch.from_arrays([pa.array([1, 2]), pa.array(["a", "b"]), pa.array([5, 6])], names=["a", "b", "a"])
    return [t, t.to_batches()[0], t.slice(1, 1), t.slice(3), t.select([]), dup,
            pa.table({"x": pa.chunked_array([[1, 2], [3]])})]


@needs_c
@pytest.mark.parametrize("i", range(len(_batches())))
def test_batch_records_equal_to_pylist(i):
    batch = _batches()[i]
    got, want = batch_records(batch), batch.to_pylist()
    assert got == want
    assert [list(r) for r in got] == [list(r) for r in want]  # key order too


def test_batch_records_without_the_c_helper(monkeypatch):
    monkeypatch.setattr(arrow_records, "_records", None)
    t = _batches()[0]
    assert batch_records(t) == t.to_pylist()


class _Key(str):
    def __hash__(self):
        return hash(str(self))


@needs_c
@pytest.mark.parametrize("records", [
    [{"a": 1, "b": "x"}, {"b": "y", "a": 2}],
    [],
    [{"a": 1}],  # a key missing
    [{"a": 1, "b": 2, "c": 3}],  # a key more
    [{"a": 1, "c": 2}],  # same size, another key
    [{"a": 1, "b": 2}, [1, 2]],  # not a dict
    [type("D", (dict,), {})(a=1, b=2)],  # a dict subclass
    [{_Key("a"): 1, "b": 2}],  # an equal key of another type
])
def test_record_columns_c_pass_equals_the_python_path(records, monkeypatch):
    def python_path():
        monkeypatch.setattr(schema, "dict_columns", None)
        try:
            return record_columns(records, ["a", "b"], "sink 'out'")
        finally:
            monkeypatch.undo()

    try:
        want = python_path()
    except RecordTypeError as exc:
        with pytest.raises(RecordTypeError) as got:
            record_columns(records, ["a", "b"], "sink 'out'")
        assert str(got.value) == str(exc)
    else:
        assert record_columns(records, ["a", "b"], "sink 'out'") == want


def test_not_null_integer_field_refuses_none():
    out = pa.schema([pa.field("x", pa.int64(), nullable=False)])
    with pytest.raises(RecordTypeError, match="not null"):
        records_to_batch([{"x": 1}, {"x": None}], None, out, "sink 'out'")
