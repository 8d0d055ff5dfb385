"""The reduce functions of KeyedStream.sum / min / max / min_by / max_by (PyFlink's
AccumulateReduceFunction, Java's SumAggregator / ComparableAggregator).

The field is a position (tuples, lists, namedtuples) or a name (dicts, namedtuples); a basic
value (number, str) is its own field 0. `sum`, `min`, `max` return the accumulator (the key's
first record) with only that field replaced; `min_by` / `max_by` return the whole record with
the smallest / largest field, the first one on ties. Records are never changed in place.

>>> AggregationFunction("sum", 1).reduce(("a", 1, "x"), ("a", 2, "y"))
('a', 3, 'x')
>>> AggregationFunction("min", "v").reduce({"k": "a", "v": 3, "t": 1}, {"k": "a", "v": 2, "t": 9})
{'k': 'a', 'v': 2, 't': 1}
>>> AggregationFunction("max_by", 1).reduce(("a", 5, "first"), ("a", 5, "second"))
('a', 5, 'first')
"""

from __future__ import annotations

from typing import Any, Union

from airflow_flinkchain.functions import ReduceFunction

KINDS = ("sum", "min", "max", "min_by", "max_by")


def check_position(position: Any, method: str) -> Union[int, str]:
    if isinstance(position, bool) or not isinstance(position, (int, str)):
        raise TypeError(f"KeyedStream.{method}() takes a field position (int) or a field name (str), "
                        f"got {position!r}")
    return position


class AggregationFunction(ReduceFunction):
    """Combines two records of one key on one field (`kind`: one of KINDS)."""

    #: dict records keyed by a field take the batch path (runtime/core/operators/aggregation.py)
    vectorizable = True

    def __init__(self, kind: str, position: Union[int, str]):
        if kind not in KINDS:
            raise ValueError(f"aggregation must be one of {KINDS}, got {kind!r}")
        self.kind = kind
        self.position = check_position(position, kind)

    def __repr__(self) -> str:
        return f"{self.kind}({self.position!r})"

    def _field(self, value: Any) -> Any:
        pos = self.position
        if isinstance(value, (dict, list)) or (isinstance(value, tuple) and isinstance(pos, int)):
            return value[pos]
        if isinstance(value, tuple) and hasattr(value, "_fields"):
            return getattr(value, pos)
        if pos == 0 and not isinstance(value, (tuple, list, dict)):
            return value
        raise TypeError(
            f"{self!r}: cannot select field {pos!r} of {type(value).__name__} {value!r}: use a position "
            "for tuples and lists, a name for dicts and namedtuples, 0 for a basic value")

    def _replaced(self, record: Any, field: Any) -> Any:
        pos = self.position
        if isinstance(record, dict):
            out = dict(record)
            out[pos] = field
            return out
        if isinstance(record, list):
            out = list(record)
            out[pos] = field
            return out
        if isinstance(record, tuple):
            if hasattr(record, "_fields"):
                name = pos if isinstance(pos, str) else record._fields[pos]
                return record._replace(**{name: field})
            return record[:pos] + (field,) + record[pos + 1:]
        return field  # a basic value is its own field

    def reduce(self, value1: Any, value2: Any) -> Any:
        kind = self.kind
        f1, f2 = self._field(value1), self._field(value2)
        if kind == "min_by":
            return value2 if f2 < f1 else value1
        if kind == "max_by":
            return value2 if f2 > f1 else value1
        if kind == "sum":
            return self._replaced(value1, f1 + f2)
        if kind == "min":
            return value1 if not f2 < f1 else self._replaced(value1, f2)
        return value1 if not f2 > f1 else self._replaced(value1, f2)
