"""PostgreSQL column values from their text output, by type OID: the one decoding shared by
`PostgresCdcSource`'s snapshot rows and its streamed changes (pgoutput carries each value as
the type's text output, and the snapshot reads the same text). Both sessions run with
`SESSION_OPTIONS`, so that a value prints one way whatever the server's defaults.

The mapping (docs/connectors-postgres-cdc.md, "Column values"): bool, int, float,
decimal.Decimal, bytes, datetime.date / time / datetime, datetime.timedelta, parsed JSON,
lists for arrays (element by element), str for everything else. A value Python cannot hold
(`infinity` dates and timestamps, BC dates, `24:00:00`) stays the text PostgreSQL prints.
Types outside the built-in table (domains, enums, arrays of them) are looked up in `pg_type`
once per decoder."""

from __future__ import annotations

import datetime
import decimal
import json
import re
from typing import Any, Callable, Iterable, Optional

#: libpq `options` of every connection that reads values (ISO dates, ISO 8601 intervals,
#: UTC offsets, round-trip floats, hex bytea)
SESSION_OPTIONS = ("-c DateStyle=ISO,YMD -c IntervalStyle=iso_8601 -c TimeZone=UTC -c extra_float_digits=3 "
                   "-c bytea_output=hex")

#: the catalog rows a decoder needs for a type outside the built-in table
TYPE_QUERY = ("select t.oid, t.typtype, t.typbasetype, t.typelem, coalesce(e.typdelim, ',') from pg_type t "
              "left join pg_type e on e.oid = t.typelem where t.oid = any(%s)")

Convert = Callable[[str], Any]


def _text(v: str) -> str:
    return v


def _or_text(fn: Convert) -> Convert:
    """`fn`, keeping the text of a value Python cannot represent."""
    def convert(v: str) -> Any:
        try:
            return fn(v)
        except ValueError:
            return v
    return convert


_INTERVAL = re.compile(r"P(?:(-?\d+)Y)?(?:(-?\d+)M)?(?:(-?\d+)D)?(?:T(?:(-?\d+)H)?(?:(-?\d+)M)?(?:(-?[\d.]+)S)?)?$")


def interval(v: str) -> datetime.timedelta:
    """An ISO 8601 interval as a timedelta; a month counts 30 days and a year 365 (as psycopg)."""
    m = _INTERVAL.match(v)
    if m is None:
        raise ValueError(f"not an ISO 8601 interval: {v!r}")
    y, mo, d, h, mi = (int(g or 0) for g in m.groups()[:5])
    s = decimal.Decimal(m.group(6) or 0)
    return datetime.timedelta(days=365 * y + 30 * mo + d, hours=h, minutes=mi,
                              microseconds=int(s * 1_000_000))


def _bytea(v: str) -> bytes:
    return bytes.fromhex(v[2:])  # "\x0a1b" (bytea_output=hex)


#: scalar type OID -> converter (text-like types and uuid need none: str)
SCALARS: dict[int, Convert] = {
    16: lambda v: v == "t", 17: _bytea, 20: int, 21: int, 23: int, 26: int, 700: float, 701: float,
    1700: decimal.Decimal, 114: json.loads, 3802: json.loads,
    1082: _or_text(datetime.date.fromisoformat), 1083: _or_text(datetime.time.fromisoformat),
    1266: _or_text(datetime.time.fromisoformat), 1114: _or_text(datetime.datetime.fromisoformat),
    1184: _or_text(datetime.datetime.fromisoformat), 1186: interval,
}
#: built-in array type OID -> element type OID
ARRAYS = {1000: 16, 1001: 17, 1005: 21, 1007: 23, 1016: 20, 1028: 26, 1021: 700, 1022: 701, 1231: 1700,
          1009: 25, 1015: 1043, 1014: 1042, 1002: 18, 1003: 19, 1182: 1082, 1183: 1083, 1270: 1266,
          1115: 1114, 1185: 1184, 1187: 1186, 2951: 2950, 199: 114, 3807: 3802}
#: built-in types that are plain text (no lookup needed)
TEXTS = {18, 19, 25, 1042, 1043, 2950}


def parse_array(text: str, element: Convert, delim: str = ",") -> Any:
    """An array's text output ('{1,NULL,3}', '{{"a b",c}}', '[0:1]={1,2}') as nested lists."""
    if text.startswith("["):  # explicit bounds: the elements follow '='
        text = text[text.index("=") + 1:]
    if not text.startswith("{"):
        return text

    def items(i: int) -> tuple[list, int]:  # text[i] == "{"
        out: list = []
        i += 1
        if text[i] == "}":
            return out, i + 1
        while True:
            c = text[i]
            if c == "{":
                value, i = items(i)
                out.append(value)
            elif c == '"':
                j, buf = i + 1, []
                while text[j] != '"':
                    if text[j] == "\\":
                        j += 1
                    buf.append(text[j])
                    j += 1
                out.append(element("".join(buf)))
                i = j + 1
            else:
                j = i
                while text[j] != delim and text[j] != "}":
                    j += 1
                raw = text[i:j]
                out.append(None if raw == "NULL" else element(raw))
                i = j
            if text[i] == "}":
                return out, i + 1
            i += 1  # the delimiter

    return items(0)[0]


def _array(element: Convert, delim: str) -> Convert:
    return lambda v: parse_array(v, element, delim)


class PgValues:
    """Converters by type OID; `lookup(oids)` runs `TYPE_QUERY` for the types it does not know."""

    def __init__(self, lookup: Callable[[list], Iterable[tuple]]):
        self.lookup = lookup
        self.known: dict[int, Convert] = {}
        self.catalog: dict[int, tuple] = {}  # oid -> (typtype, typbasetype, typelem, element delimiter)

    def converters(self, oids: Iterable[int]) -> list[Convert]:
        oids = list(oids)
        self._load(oids)
        return [self.converter(o) for o in oids]

    def decode(self, oid: int, text: Optional[str]) -> Any:
        return None if text is None else self.converter(oid)(text)

    def converter(self, oid: int) -> Convert:
        fn = self.known.get(oid)
        if fn is None:
            fn = self.known[oid] = self._build(oid)
        return fn

    def _build(self, oid: int) -> Convert:
        if oid in SCALARS:
            return SCALARS[oid]
        if oid in ARRAYS:
            return _array(self.converter(ARRAYS[oid]), ",")
        typtype, base, elem, delim = self.catalog.get(oid, ("b", 0, 0, ","))
        if typtype == "d" and base:
            return self.converter(base)
        if elem and oid not in TEXTS and typtype == "b":
            return _array(self.converter(elem), delim)
        return _text  # text types, uuid, enums, ranges, composites, ...

    def _load(self, oids: list) -> None:
        """Catalog rows of the unknown types, and of the base and element types they name."""
        wanted = {o for o in oids if self._unknown(o)}
        while wanted:
            for oid, typtype, base, elem, delim in self.lookup(sorted(wanted)):
                self.catalog[int(oid)] = (typtype, int(base), int(elem), delim)
            missing = wanted - set(self.catalog)
            for o in missing:  # gone from the catalog: text
                self.catalog[o] = ("b", 0, 0, ",")
            wanted = {r for o in wanted for r in self.catalog[o][1:3] if r and self._unknown(r)}

    def _unknown(self, oid: int) -> bool:
        return oid not in SCALARS and oid not in ARRAYS and oid not in TEXTS and oid not in self.catalog
