"""Declared record types (`output_type=`): parsing into a pyarrow schema.

Here, in the chain core, because batch operators validate their output against
it; the exchange and file connectors use it too (`exchange.schema` holds the
record <-> column conversions and documents what `output_type` accepts).
"""

from __future__ import annotations

from typing import Any, Optional

import pyarrow as pa

from airflow_flinkchain.batch_functions import TIMESTAMP_COLUMN

TS_COLUMN = TIMESTAMP_COLUMN  # event timestamps in typed files and batches


def timestamps(batch: pa.RecordBatch) -> Optional[pa.Array]:
    """The batch's timestamp column, or None when no row has a timestamp."""
    if TS_COLUMN not in batch.schema.names:
        return None
    ts = batch.column(TS_COLUMN)
    return None if ts.null_count == len(ts) else ts


def without_timestamps(batch: pa.RecordBatch) -> pa.RecordBatch:
    return batch.drop_columns([TS_COLUMN]) if TS_COLUMN in batch.schema.names else batch


class RecordTypeError(ValueError):
    """A record does not fit the declared output_type of an operator."""


def parse_output_type(output_type: Any, where: str = "stream") -> Optional[pa.Schema]:
    """None (pickled records) or the pyarrow schema `output_type` declares."""
    if output_type is None:
        return None
    if isinstance(output_type, pa.Schema):
        schema = output_type
    elif isinstance(output_type, dict):
        fields = []
        for name, typ in output_type.items():
            fields.append(_field(name, typ, where))
        schema = pa.schema(fields)
    else:
        raise TypeError(
            f"output_type of {where} must be a pyarrow.Schema or a dict of field name -> type "
            f"(e.g. {{'id': 'int64', 'name': 'string'}}), got {type(output_type).__name__}"
        )
    if TS_COLUMN in schema.names:
        raise ValueError(f"output_type of {where}: field name {TS_COLUMN!r} is reserved for event timestamps; rename it")
    if len(set(schema.names)) != len(schema.names):
        raise ValueError(f"output_type of {where} has duplicate field names: {schema.names}")
    return schema


def _field(name: str, typ: Any, where: str) -> pa.Field:
    if isinstance(typ, pa.DataType):
        return pa.field(name, typ)
    if not isinstance(typ, str):
        raise TypeError(f"output_type of {where}: type of field {name!r} must be a pyarrow type or a string, got {typ!r}")
    text = typ.strip()
    nullable = True
    if text.lower().endswith(" not null"):
        nullable, text = False, text[: -len(" not null")].strip()
    aliases = {"str": "string", "int": "int64", "float": "double", "boolean": "bool", "bytes": "binary"}
    try:
        return pa.field(name, pa.type_for_alias(aliases.get(text, text)), nullable=nullable)
    except ValueError:
        raise ValueError(
            f"output_type of {where}: field {name!r} has unknown type {typ!r}; use a pyarrow type alias "
            "such as 'int64', 'double', 'string', 'bool', 'timestamp[us]', 'date32', 'binary'"
        ) from None


