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
from airflow_flinkchain.window_functions import AggregateFunction

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


AGGREGATES = ("sum", "count", "min", "max", "avg", "first")
_EMPTY = None  # min / max / first before the first record


class Aggregates(AggregateFunction):
    """Built-in aggregations over several fields at once, for `WindowedStream.aggregate` /
    `AllWindowedStream.aggregate`: `Aggregates.of(name=(field, how), ...)` with `how` one of
    AGGREGATES; the result is a dict `{name: value}` in the order given. `sum`, `min`, `max`,
    `first` (the window's first record's field, in timestamp order) keep the field's type;
    `count` counts records; `avg` is `sum / count` (a float). Fields are names of dict records
    or positions of tuples. Keyed by a field, a BATCH tumbling window computes it over Arrow
    batches (docs/vectorized.md).

    >>> agg = Aggregates.of(total=("v", "sum"), n=("v", "count"), mean=("v", "avg"))
    >>> acc = agg.create_accumulator()
    >>> for r in ({"v": 1}, {"v": 4}):
    ...     acc = agg.add(r, acc)
    >>> agg.get_result(acc)
    {'total': 5, 'n': 2, 'mean': 2.5}
    """

    vectorizable = True

    def __init__(self, columns: dict):
        if not columns:
            raise ValueError("Aggregates.of() needs at least one name=(field, how)")
        for name, spec in columns.items():
            if not (isinstance(spec, tuple) and len(spec) == 2 and spec[1] in AGGREGATES):
                raise ValueError(f"Aggregates.of({name}=...): give (field, how) with how one of {AGGREGATES}, "
                                 f"got {spec!r}")
            check_position(spec[0], "aggregate")
        self.columns = dict(columns)

    @staticmethod
    def of(**columns: tuple) -> "Aggregates":
        return Aggregates(columns)

    def __repr__(self) -> str:
        return "Aggregates.of(" + ", ".join(f"{n}={s!r}" for n, s in self.columns.items()) + ")"

    def create_accumulator(self) -> list:
        return [[0, 0] if how == "avg" else 0 if how in ("sum", "count") else _EMPTY
                for _field, how in self.columns.values()]

    def add(self, value: Any, accumulator: list) -> list:
        out = []
        for (field, how), acc in zip(self.columns.values(), accumulator):
            if how == "count":
                out.append(acc + 1)
                continue
            v = value[field] if isinstance(value, (dict, list, tuple)) else value
            if how == "sum":
                out.append(acc + v)
            elif how == "avg":
                out.append([acc[0] + v, acc[1] + 1])
            elif how == "first":
                out.append(v if acc is _EMPTY else acc)
            elif acc is _EMPTY:
                out.append(v)
            else:
                out.append(v if (v < acc if how == "min" else v > acc) else acc)
        return out

    def get_result(self, accumulator: list) -> dict:
        return {name: (acc[0] / acc[1] if how == "avg" else acc)
                for (name, (_f, how)), acc in zip(self.columns.items(), accumulator)}

    def merge(self, acc_a: list, acc_b: list) -> list:
        out = []
        for (_f, how), a, b in zip(self.columns.values(), acc_a, acc_b):
            if how in ("sum", "count"):
                out.append(a + b)
            elif how == "avg":
                out.append([a[0] + b[0], a[1] + b[1]])
            elif a is _EMPTY or b is _EMPTY:
                out.append(b if a is _EMPTY else a)
            elif how == "first":
                out.append(a)
            else:
                out.append(b if (b < a if how == "min" else b > a) else a)
        return out
