"""`Row` and `RowKind`, named as PyFlink's `pyflink.common.types`.

A Row is a record with positional and (optionally) named fields: `row[0]`, `row["name"]`,
`row.name`. Defined in this package so that Spark's Python workers unpickle it.

>>> r = Row(id=1, name="a")
>>> r, r.id, r[1], r["name"], r.as_dict()
(Row(id=1, name='a'), 1, 'a', 'a', {'id': 1, 'name': 'a'})
>>> Person = Row("name", "age")
>>> Person("Alice", 11)
Row(name='Alice', age=11)
>>> Row(1, "a")
<Row(1, 'a')>
"""

from __future__ import annotations

from enum import Enum
from typing import Any, Optional


class RowKind(Enum):
    INSERT = 0
    UPDATE_BEFORE = 1
    UPDATE_AFTER = 2
    DELETE = 3

    def __str__(self) -> str:
        return ("+I", "-U", "+U", "-D")[self.value]


def _create_row(fields: Optional[list], values: Any, row_kind: Optional[RowKind] = None) -> "Row":
    row = Row(*values)
    if fields is not None:
        row.set_field_names(list(fields))
    if row_kind is not None:
        row.set_row_kind(row_kind)
    return row


class Row:
    """PyFlink's Row: `Row(a=1, b=2)` (named, in the given order), `Row(1, 2)` (positional),
    `Row("a", "b")(1, 2)` (a Row class, then a row). Equal to another Row with the same kind and
    the same values (named rows: the same names with the same values, in any order);
    hashes as the tuple of its values."""

    __slots__ = ("_fields", "_values", "_row_kind")

    def __init__(self, *args: Any, **kwargs: Any):
        if args and kwargs:
            raise ValueError("Can not use both args and kwargs to create Row")
        if kwargs:
            object.__setattr__(self, "_fields", list(kwargs))
            object.__setattr__(self, "_values", list(kwargs.values()))
        else:
            object.__setattr__(self, "_fields", None)
            object.__setattr__(self, "_values", list(args))
        object.__setattr__(self, "_row_kind", RowKind.INSERT)

    # ---- fields ----
    def has_field_names(self) -> bool:
        return self._fields is not None

    def get_field_names(self) -> Optional[list]:
        return None if self._fields is None else list(self._fields)

    def set_field_names(self, field_names: list) -> None:
        object.__setattr__(self, "_fields", list(field_names))

    def get_fields_by_names(self, names: list) -> list:
        if self._fields is None or names == self._fields:
            return list(self._values)
        missing = [n for n in names if n not in self._fields]
        if missing:
            raise KeyError(f"Field names {missing} not exist in {self._fields}.")
        return [self._values[self._fields.index(n)] for n in names]

    def as_dict(self, recursive: bool = False) -> dict:
        if self._fields is None:
            raise TypeError("Cannot convert a Row without field names into a dict")

        def conv(obj: Any) -> Any:
            if isinstance(obj, Row):
                return obj.as_dict(True)
            if isinstance(obj, list):
                return [conv(o) for o in obj]
            if isinstance(obj, dict):
                return {k: conv(v) for k, v in obj.items()}
            return obj

        return dict(zip(self._fields, (conv(v) for v in self._values) if recursive else self._values))

    # ---- kind ----
    def get_row_kind(self) -> RowKind:
        return self._row_kind

    def set_row_kind(self, row_kind: RowKind) -> None:
        object.__setattr__(self, "_row_kind", row_kind)

    @staticmethod
    def of_kind(row_kind: RowKind, *args: Any, **kwargs: Any) -> "Row":
        row = Row(*args, **kwargs)
        row.set_row_kind(row_kind)
        return row

    # ---- access ----
    def _index(self, name: str) -> int:
        if self._fields is None or name not in self._fields:
            raise KeyError(name)
        return self._fields.index(name)

    def __getitem__(self, item: Any) -> Any:
        if isinstance(item, (int, slice)):
            return self._values[item]
        return self._values[self._index(item)]

    def __setitem__(self, key: Any, value: Any) -> None:
        if isinstance(key, (int, slice)):
            self._values[key] = value
        else:
            self._values[self._index(key)] = value

    def __getattr__(self, item: str) -> Any:
        if item.startswith("_"):
            raise AttributeError(item)
        try:
            return self._values[self._index(item)]
        except KeyError:
            raise AttributeError(f"Row has no field {item!r} (fields: {self._fields})") from None

    def __setattr__(self, key: str, value: Any) -> None:
        raise AttributeError(f"Row fields are set with row[{key!r}] = value")

    def __call__(self, *args: Any) -> "Row":
        """A Row class (`Row("name", "age")`) makes rows with its values as field names."""
        if len(args) > len(self):
            raise ValueError(f"Can not create Row with fields {self}, expected {len(self)} values but got {args}")
        return _create_row(self._values, args, self._row_kind)

    def __contains__(self, item: Any) -> bool:
        return item in (self._fields if self._fields is not None else self._values)

    def __iter__(self):
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Row) or self._row_kind != other._row_kind:
            return False
        if (self._fields is None) != (other._fields is None):
            return False
        if self._fields is None:
            return self._values == other._values
        if sorted(self._fields) != sorted(other._fields):
            return False
        return all(v == other._values[other._fields.index(n)] for n, v in zip(self._fields, self._values))

    def __hash__(self) -> int:
        return hash(tuple(self._values))

    def __reduce__(self):
        return _create_row, (self._fields, tuple(self._values), self._row_kind)

    def __repr__(self) -> str:
        if self._fields is not None:
            return "Row(%s)" % ", ".join(f"{k}={v!r}" for k, v in zip(self._fields, self._values))
        return "<Row(%s)>" % ", ".join(repr(v) for v in self._values)
