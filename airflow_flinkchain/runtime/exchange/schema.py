"""Declared record types (`output_type=`) for exchange edges and file sinks.

What `output_type` accepts:
  * a `pyarrow.Schema`;
  * a dict `{field name: type}` where a type is a pyarrow `DataType` or a string
    pyarrow knows as an alias (`"int64"`, `"string"`, `"double"`, `"bool"`,
    `"timestamp[us]"`, `"date32"`, `"binary"`, ...), optionally suffixed with
    `" not null"`; fields are nullable by default.
Records of a typed stream must be dicts with exactly these keys. A record that
does not fit (missing/extra key, wrong type, overflow, float into an integer
column, None into a non-null field) raises `RecordTypeError` naming the field
and the operator: nothing is ever silently nulled, truncated or dropped.

A typed exchange file holds the declared columns plus `_ts` (int64, nullable:
the record's event timestamp), so plain Spark/Arrow readers can use it.
"""

from __future__ import annotations

from operator import itemgetter
from typing import Any, Optional

import pyarrow as pa

from airflow_flinkchain.runtime.core.arrow_records import batch_records, dict_columns
from airflow_flinkchain.runtime.core.record_types import TS_COLUMN, RecordTypeError, parse_output_type  # noqa: F401

_ONLY_DICT = frozenset({dict})


def with_ts(schema: pa.Schema) -> pa.Schema:
    return schema.append(pa.field(TS_COLUMN, pa.int64()))


def _column(values: list, field: pa.Field) -> pa.Array:
    """Strict conversion of one column: integers never accept floats that would be
    truncated nor strings/bools; everything else uses Arrow's checked conversion."""
    typ = field.type
    if pa.types.is_integer(typ):
        try:
            inferred = pa.array(values)
        except (OverflowError, pa.ArrowInvalid):
            if not pa.types.is_uint64(typ) or any(v is not None and type(v) is not int for v in values):
                raise
            inferred = pa.array(values, type=typ)  # beyond int64: only a uint64 column holds them
        if not (pa.types.is_integer(inferred.type) or pa.types.is_null(inferred.type) or pa.types.is_floating(inferred.type)):
            raise pa.ArrowTypeError(f"expected integers, got {inferred.type}")
        arr = inferred.cast(typ, safe=True)
    else:
        arr = pa.array(values, type=typ)
    if not field.nullable and arr.null_count:
        raise pa.ArrowInvalid("None in a field declared not null")
    return arr


def records_to_batch(records: list, ts: Optional[list], schema: pa.Schema, label: str) -> pa.RecordBatch:
    """Arrow batch (declared columns + `_ts`) of dict records, or RecordTypeError.
    `ts`: the records' event timestamps, or None when none has one."""
    arrays = columns_to_arrays(record_columns(records, schema.names, label), schema, label)
    arrays.append(pa.nulls(len(records), pa.int64()) if ts is None else pa.array(ts, type=pa.int64()))
    return pa.RecordBatch.from_arrays(arrays, schema=with_ts(schema))


def record_columns(records: list, names: list, label: str) -> list:
    """Per declared field, the list of the records' values; RecordTypeError names a record
    that is not a dict with exactly the declared keys."""
    if dict_columns is not None and type(records) is list:  # the C pass: shape check and columns at once
        columns = dict_columns(records, tuple(names))
        if columns is not None:
            return columns
    # shape check per batch in C: every record a plain dict with as many keys as declared, and
    # (itemgetter below) every declared key present - together: exactly the declared keys. The
    # per-record loop only runs to find and name the offending record.
    if records and not (_ONLY_DICT.issuperset(map(type, records)) and set(map(len, records)) == {len(names)}):
        _find_bad_shape(records, names, label)
    try:
        return [list(map(itemgetter(n), records)) for n in names]
    except KeyError:
        _find_bad_shape(records, names, label)
        raise


def columns_to_arrays(columns: list, schema: pa.Schema, label: str) -> list:
    """Arrow arrays of `record_columns` output; RecordTypeError names the field and the record."""
    try:
        return [_column(v, f) for v, f in zip(columns, schema)]
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError, OverflowError):
        _diagnose([dict(zip(schema.names, row)) for row in zip(*columns)], schema, label)
        raise


def _find_bad_shape(records: list, names: list, label: str) -> None:
    keyset = set(names)
    for rec in records:
        if type(rec) is not dict or rec.keys() != keyset:
            _raise_shape(rec, names, label)


def _raise_shape(rec: Any, names: list, label: str) -> None:
    if not isinstance(rec, dict):
        raise RecordTypeError(
            f"{label}: output_type declares fields {names} but a record is a {type(rec).__name__}, "
            f"not a dict: {_short(rec)}. Return dicts from the operator or drop output_type."
        )
    missing = [n for n in names if n not in rec]
    extra = [k for k in rec if k not in set(names)]
    what = []
    if missing:
        what.append(f"missing field(s) {missing}")
    if extra:
        what.append(f"undeclared field(s) {extra}")
    raise RecordTypeError(f"{label}: record {_short(rec)} does not fit output_type: {', '.join(what)}. "
                          "Add the fields to output_type or change the operator.")


def _diagnose(records: list, schema: pa.Schema, label: str) -> None:
    for rec in records:
        for field in schema:
            value = rec[field.name]
            try:
                _column([value], field)
            except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError, OverflowError) as exc:
                raise RecordTypeError(
                    f"{label}: field {field.name!r} expects {field.type}"
                    f"{'' if field.nullable else ' not null'} but got {_short(value)} "
                    f"({type(value).__name__}) in record {_short(rec)}: {exc}. "
                    "Fix the operator or declare a wider type in output_type."
                ) from None


def batch_to_records(batch: pa.RecordBatch) -> tuple[list, list]:
    """(records as dicts without `_ts`, timestamps)."""
    ts = batch.column(TS_COLUMN).to_pylist() if TS_COLUMN in batch.schema.names else [None] * batch.num_rows
    data = batch.drop_columns([TS_COLUMN]) if TS_COLUMN in batch.schema.names else batch
    return batch_records(data), ts


def _short(value: Any, limit: int = 200) -> str:
    try:
        text = repr(value)
    except Exception:  # a broken __repr__ must not hide the real error
        text = f"<{type(value).__name__}>"
    return text if len(text) <= limit else text[:limit] + "...)"
