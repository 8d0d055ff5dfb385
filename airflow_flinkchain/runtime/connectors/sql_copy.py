"""The rows of a SqlSink as columns, and PostgreSQL `COPY ... FROM STDIN` (text format) for them.

`RowColumns` turns dict records into per-field value lists with the set of value types of
each field, checked in C per field rather than per value (the common case: every record has
the first record's fields).

`copy_rows` writes the columns with COPY on the SQLAlchemy connection's own DBAPI connection
(psycopg2's `copy_expert` or psycopg 3's `cursor.copy`), inside the caller's transaction. It
only does so when COPY stores exactly what the INSERT path would: every value of a field of
a type with a text form below (exact types: no subclasses, no timezone-aware datetime), and
the column of the type the sink gives such values (an int into an integer or numeric column,
a float into a numeric or float one, ...), strings into any column (the column type's input
function reads them, as it reads an untyped literal). Otherwise it returns False and the
caller inserts with executemany.
"""

from __future__ import annotations

import datetime
import decimal
import io
from itertools import islice, repeat
from operator import itemgetter
from typing import Any, Optional

#: rows per COPY data chunk handed to the driver
COPY_CHUNK_ROWS = 50_000
_NONE = type(None)
_ONLY_DICT = frozenset({dict})
_SPECIAL = ("\\", "\t", "\n", "\r")
_ESCAPES = str.maketrans({"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r"})
_FLOAT_WORDS = {"inf": "Infinity", "-inf": "-Infinity", "nan": "NaN"}
_NUMBERS = frozenset({int, float, decimal.Decimal})
_NUMERIC = ("Numeric", "Float", "NumericCommon")  # numeric and float columns (SQLAlchemy 2.0 and 2.1)


class RowColumns:
    """Dict records as columns: `values[name]` (None where a record lacks the field) and
    `types[name]` (the set of the values' exact types). `RowColumns.of` returns None when the
    records are not all plain dicts with the first record's fields (the caller then checks
    them one by one)."""

    def __init__(self, names: list, values: dict, count: int):
        self.names, self.values, self.count = names, values, count
        self.types = {n: set(map(type, v)) for n, v in values.items()}

    @classmethod
    def of(cls, rows: list) -> Optional["RowColumns"]:
        names = list(rows[0]) if rows and type(rows[0]) is dict else []
        if not rows or not _ONLY_DICT.issuperset(map(type, rows)) or set(map(len, rows)) != {len(names)}:
            return None
        try:
            return cls(names, {n: list(map(itemgetter(n), rows)) for n in names}, len(rows))
        except KeyError:
            return None

    @classmethod
    def filled(cls, rows: list, names: list) -> "RowColumns":
        """Any dict records, a missing field None."""
        return cls(names, {n: [r.get(n) for r in rows] for n in names}, len(rows))


def _escaped(texts: list) -> list:
    joined = "".join(texts)
    if not any(c in joined for c in _SPECIAL):
        return texts
    return [t.translate(_ESCAPES) for t in texts]


def _float_texts(values: list) -> list:
    texts = list(map(repr, values))
    if not _FLOAT_WORDS.keys().isdisjoint(texts):
        texts = [_FLOAT_WORDS.get(t, t) for t in texts]
    return texts


def _datetime_texts(values: list) -> Optional[list]:
    if any(v.tzinfo is not None for v in values):
        return None  # the INSERT path converts an offset to the session's time zone: not COPY's
    return [v.isoformat(" ") for v in values]


#: exact value type -> (text forms of a list of such values, the column types that store them as
#: an INSERT does: SQLAlchemy type class names looked up along the column type's MRO)
_FORMS = {
    int: (lambda vs: list(map(int.__repr__, vs)), ("Integer", *_NUMERIC)),
    float: (_float_texts, _NUMERIC),
    decimal.Decimal: (lambda vs: list(map(str, vs)), _NUMERIC),
    bool: (lambda vs: ["t" if v else "f" for v in vs], ("Boolean",)),
    str: (_escaped, None),  # any column: its type's input function reads the text
    datetime.datetime: (_datetime_texts, ("DateTime",)),
    datetime.date: (lambda vs: [v.isoformat() for v in vs], ("Date",)),
    bytes: (lambda vs: ["\\\\x" + v.hex() for v in vs], ("LargeBinary", "_Binary")),
}


def _fits(column_type: Any, value_types: set) -> bool:
    """Whether a column of `column_type` stores values of `value_types` from their text as an
    INSERT stores them (one type, or numbers of several widened to one column)."""
    if len(value_types) > 1 and not value_types.issubset(_NUMBERS):
        return False
    kinds = {c.__name__ for c in type(column_type).__mro__}
    return all(_FORMS[t][1] is None or not kinds.isdisjoint(_FORMS[t][1]) for t in value_types)


def _column_texts(values: list, types: set) -> Optional[list]:
    present = types - {_NONE}
    if not present:
        return ["\\N"] * len(values)
    if _NONE in types:
        texts = _column_texts([v for v in values if v is not None], present)
        if texts is None:
            return None
        it = iter(texts)
        return ["\\N" if v is None else next(it) for v in values]
    if len(present) == 1:
        return _FORMS[next(iter(present))][0](values)
    return [_FORMS[type(v)][0]([v])[0] for v in values]  # ints with floats or Decimals


def copy_text(columns: RowColumns, table, constants: dict) -> Optional[list]:
    """The COPY text of each column of `table` written (the records' fields, then `constants`,
    one value for all rows), or None when COPY would not store what an INSERT does."""
    texts = []
    for name in columns.names:
        types = columns.types[name]
        if not (types - {_NONE}).issubset(_FORMS) or not _fits(table.c[name].type, types - {_NONE}):
            return None
        column = _column_texts(columns.values[name], types)
        if column is None:
            return None
        texts.append(column)
    for value in constants.values():  # the run's key columns: strings
        texts.append(repeat(_escaped([value])[0], columns.count))
    return texts


def copy_rows(conn, table, columns: RowColumns, constants: dict) -> bool:
    """COPY the records (and the `constants` columns) into `table` on `conn`'s DBAPI connection
    (PostgreSQL, inside the caller's transaction); False, writing nothing, when COPY does not
    apply (another database or driver, or values COPY would store differently)."""
    if conn.dialect.name != "postgresql" or conn.dialect.driver not in ("psycopg2", "psycopg"):
        return False
    texts = copy_text(columns, table, constants)
    if texts is None:
        return False
    quote = conn.dialect.identifier_preparer.quote
    names = ", ".join(quote(n) for n in [*columns.names, *constants])
    sql = f"COPY {conn.dialect.identifier_preparer.format_table(table)} ({names}) FROM STDIN"
    lines = map("\t".join, zip(*texts))
    dbapi = conn.connection.dbapi_connection
    with dbapi.cursor() as cursor:
        if conn.dialect.driver == "psycopg2":
            for _ in range(0, columns.count, COPY_CHUNK_ROWS):
                cursor.copy_expert(sql, io.StringIO(_chunk(lines)))
        else:
            with cursor.copy(sql) as copy:
                for _ in range(0, columns.count, COPY_CHUNK_ROWS):
                    copy.write(_chunk(lines))
    return True


def _chunk(lines) -> str:
    return "\n".join(islice(lines, COPY_CHUNK_ROWS)) + "\n"
