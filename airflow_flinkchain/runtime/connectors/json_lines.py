"""JSON lines: standard JSON (RFC 8259), one value per line.

Values JSON has no type for are encoded as: datetime / date / time -> ISO 8601
string, Decimal -> string (exact), bytes -> base64 string, set / frozenset ->
sorted list (in iteration order when not sortable), tuple -> list, numpy
scalars -> their Python value. NaN and infinity have no JSON form: they are
refused, as is any other type, with an error naming the sink and the field.
"""

from __future__ import annotations

import base64
import datetime
import decimal
import json
import math
from typing import Any


def json_lines(records: list, label: str) -> str:
    try:
        return "".join(json.dumps(r, default=_json_default, allow_nan=False) + "\n" for r in records)
    except (TypeError, ValueError):
        for r in records:
            try:
                json.dumps(r, default=_json_default, allow_nan=False)
            except (TypeError, ValueError):
                field, value = _bad_json_value(r, "")
                raise TypeError(f"{label}: field {field or '(the record)'!r} holds {value!r} "
                                f"({type(value).__name__}), which has no JSON encoding (see "
                                "airflow_flinkchain.runtime.connectors.json_lines); convert it in an operator "
                                "before the sink") from None
        raise


def _json_default(value: Any) -> Any:
    if isinstance(value, (datetime.datetime, datetime.date, datetime.time)):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        if not value.is_finite():
            raise ValueError("non-finite Decimal")
        return str(value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, (set, frozenset)):
        try:
            return sorted(value)
        except TypeError:
            return list(value)
    item = getattr(value, "item", None)  # numpy scalars
    if callable(item) and type(value).__module__ == "numpy":
        return item()
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


def _bad_json_value(value: Any, path: str) -> tuple:
    """(dotted field path, value) of the first value json.dumps refuses."""
    if isinstance(value, dict):
        for k, v in value.items():
            found = _bad_json_value(v, f"{path}.{k}" if path else str(k))
            if found[0] is not None:
                return found
        return None, None
    if isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            found = _bad_json_value(v, f"{path}[{i}]")
            if found[0] is not None:
                return found
        return None, None
    if isinstance(value, float) and not math.isfinite(value):
        return path, value
    try:
        json.dumps(value, default=_json_default, allow_nan=False)
    except (TypeError, ValueError):
        return path, value
    return None, None
