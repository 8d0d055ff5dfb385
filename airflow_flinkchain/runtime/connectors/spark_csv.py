"""CSV and JSON lines files read with pyarrow the way Spark's readers read them.

The subtasks read file sources that Spark's JVM cannot reach (object stores) and those
of `execute_local()` and monitored sources with pyarrow; the rows and their types must
be the ones `spark.read.csv` / `spark.read.json` give for the same files:

- CSV: every column is a string unless `inferSchema` (this project's default without a
  `schema`, as `FileSourceReader`); then a column is int, bigint, double, boolean, date,
  timestamp or string by Spark's rules (`CSVInferSchema`): each value's narrowest type,
  widened int -> bigint -> double and date -> timestamp, any other mix is string. An empty
  field or one equal to `nullValue` is null; integers beyond a long are decimal(p, 0). `header` gives the names (the first file's),
  else `_c0`, `_c1`, ...; `sep` / `delimiter` the separator. Any other option is refused.
- JSON: integers are bigint, other numbers double, fields sorted by name (also in
  objects), types unified across lines and files (bigint + double -> double, any other
  mix -> string holding the value's JSON text). Strings stay strings (Spark infers no
  timestamps in JSON unless asked); a field that is null everywhere is a string.

Timestamps without a zone are read as UTC (Spark reads them in its session time zone:
`spark.sql.session.timeZone=UTC` gives the same instants).
"""

from __future__ import annotations

import csv
import datetime
import io
import json
from typing import Any, Optional

import pyarrow as pa
import pyarrow.compute as pc

#: The CSV options this reader implements (Spark's names); Spark's reader takes them too.
CSV_OPTIONS = ("header", "sep", "delimiter", "inferSchema", "nullValue")

_INT = r"^[+-]?[0-9]+$"
# Java's Double.parseDouble (Spark's tryParseDouble), without hexadecimal floats
_DOUBLE = r"^\s*[+-]?(NaN|Infinity|([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?[fFdD]?)\s*$"
_BOOL = r"^(?i:true|false)$"
_DATE = r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$"
_TIMESTAMP = r"^[0-9]{4}-[0-9]{2}-[0-9]{2}([T ][0-9]{2}:[0-9]{2}(:[0-9]{2}(\.[0-9]{1,9})?)?)?(Z|[+-][0-9]{2}:?[0-9]{2})?$"
_INT32 = (-(2 ** 31), 2 ** 31 - 1)
UTC_TS = pa.timestamp("us", tz="UTC")


def _flag(value: Any, name: str, where: str) -> bool:
    if isinstance(value, bool):
        return value
    if str(value).lower() in ("true", "false"):
        return str(value).lower() == "true"
    raise ValueError(f"{where}: CSV option {name}={value!r} must be true or false")


def csv_options(options: dict, schema: Optional[pa.Schema], where: str) -> dict:
    """Spark's CSV options as this reader's settings; an option it does not implement is an error."""
    unknown = sorted(set(options) - set(CSV_OPTIONS))
    if unknown:
        raise ValueError(f"{where}: CSV option(s) {unknown} are not supported where the subtasks read the files "
                         f"with pyarrow (object stores, execute_local(), monitored sources); supported: "
                         f"{list(CSV_OPTIONS)}. Drop them, or give the columns with schema=")
    sep = str(options.get("sep", options.get("delimiter", ",")))
    if len(sep) != 1:
        raise ValueError(f"{where}: CSV separator {sep!r} must be one character")
    return {"header": _flag(options.get("header", False), "header", where), "sep": sep,
            "infer": schema is None and _flag(options.get("inferSchema", True), "inferSchema", where),
            "null": str(options.get("nullValue", ""))}


def read_csv_files(blobs: list[bytes], options: dict, schema: Optional[pa.Schema], where: str) -> list[pa.Table]:
    """One table per file (bytes, in name order), all with one schema."""
    import pyarrow.csv as pacsv

    opts = csv_options(options, schema, where)
    if not blobs:
        return []
    if schema is not None:  # as Spark: a CSV schema names the columns by position
        names, types = schema.names, schema
    else:
        first = next((b for b in blobs if b.strip()), b"")
        line = first.decode("utf-8", "replace").split("\n", 1)[0].rstrip("\r")
        head = next(iter(csv.reader(io.StringIO(line), delimiter=opts["sep"])), [])
        names = head if opts["header"] else [f"_c{i}" for i in range(len(head))]
        types = {n: pa.string() for n in names}
    read = pacsv.ReadOptions(column_names=names, skip_rows=1 if opts["header"] else 0)
    convert = pacsv.ConvertOptions(column_types=types, strings_can_be_null=True, quoted_strings_can_be_null=True,
                                   null_values=sorted({"", opts["null"]}))
    parse = pacsv.ParseOptions(delimiter=opts["sep"])
    tables = []
    for blob in blobs:
        body = blob.split(b"\n", 1)[1] if opts["header"] and b"\n" in blob else b"" if opts["header"] else blob
        if not body.strip():  # an empty file, or a header alone: no rows (pyarrow refuses it)
            tables.append(pa.schema([(n, pa.string()) for n in names] if schema is None else schema).empty_table())
            continue
        try:
            tables.append(pacsv.read_csv(pa.BufferReader(blob), read_options=read, parse_options=parse,
                                         convert_options=convert))
        except pa.ArrowInvalid as exc:
            raise ValueError(f"{where}: CSV file not readable as {names} ({exc})") from exc
    if opts["infer"]:
        target = pa.schema([(n, infer_csv_type(pa.chunked_array([t.column(n) for t in tables], pa.string())))
                            for n in names])
        tables = [pa.table([cast_csv_column(t.column(n), target.field(n).type) for n in names], schema=target)
                  for t in tables]
    return tables


def infer_csv_type(column: pa.ChunkedArray) -> pa.DataType:
    """Spark's inferred type of a CSV column of strings (nulls skipped; all null: string)."""
    values = column.drop_null()
    if len(values) == 0:
        return pa.string()

    def every(pattern: str) -> bool:
        return pc.all(pc.match_substring_regex(values, pattern)).as_py()

    if every(_INT):
        try:
            ints = pc.cast(pc.replace_substring_regex(values, r"^\+", ""), pa.int64())
        except pa.ArrowInvalid:  # beyond a long: Spark's decimal wide enough for every value
            return _wide_integer_type(pc.unique(values).to_pylist())
        lo, hi = pc.min_max(ints).values()
        return pa.int32() if _INT32[0] <= lo.as_py() and hi.as_py() <= _INT32[1] else pa.int64()
    if every(_DOUBLE):
        return pa.float64()
    if every(_BOOL):
        return pa.bool_()
    if every(_TIMESTAMP):
        distinct = pc.unique(values).to_pylist()
        if all(_date(v) is not None for v in distinct):
            return pa.date32()
        if all(_timestamp(v) is not None for v in distinct):
            return UTC_TS
    return pa.string()


def _wide_integer_type(texts: list) -> pa.DataType:
    """Spark's type of integers some beyond a long: decimal(p, 0), p the widest (an int counts
    10 digits, a long 20); double beyond 38 digits."""
    def digits(text: str) -> int:
        v = int(text)
        if _INT32[0] <= v <= _INT32[1]:
            return 10
        return 20 if -(2 ** 63) <= v < 2 ** 63 else len(str(abs(v)))

    p = max(map(digits, texts))
    return pa.float64() if p > 38 else pa.decimal128(p, 0)


def cast_csv_column(column: pa.ChunkedArray, to: pa.DataType) -> pa.ChunkedArray:
    if to == pa.string():
        return column
    if pa.types.is_integer(to) or pa.types.is_decimal(to):
        return pc.cast(pc.replace_substring_regex(column, r"^\+", ""), to)
    if pa.types.is_floating(to):
        return pc.cast(pc.replace_substring_regex(pc.utf8_trim_whitespace(column), r"[fFdD]$", ""), to)
    if pa.types.is_boolean(to):
        return pc.equal(pc.utf8_lower(column), "true")
    if pa.types.is_date(to):
        return pc.cast(column, to)
    return pa.chunked_array([pa.array([None if v is None else _timestamp(v) for v in column.to_pylist()], to)], to)


def _date(text: str) -> Optional[datetime.date]:
    try:
        return datetime.date.fromisoformat(text) if len(text) == 10 else None
    except ValueError:
        return None


def _timestamp(text: str) -> Optional[datetime.datetime]:
    try:
        t = datetime.datetime.fromisoformat(text)
    except ValueError:
        return None
    return t.replace(tzinfo=datetime.timezone.utc) if t.tzinfo is None else t.astimezone(datetime.timezone.utc)


# ---- JSON lines ------------------------------------------------------------------------------

def read_json_files(blobs: list[bytes], options: dict, schema: Optional[pa.Schema], where: str) -> list[pa.Table]:
    """One table per file (bytes, in name order), all with one schema."""
    if options:
        raise ValueError(f"{where}: JSON option(s) {sorted(options)} are not supported where the subtasks read the "
                         "files with pyarrow (object stores, execute_local(), monitored sources); drop them")
    if schema is not None:
        return [_json_table(b, schema, where) for b in blobs]
    inferred = [_json_types(b, where) for b in blobs]
    target = pa.schema(_unify_struct([pa.struct(list(s)) for s in inferred]))
    return [_json_table(b, target, where) for b in blobs]


def _json_table(blob: bytes, schema: pa.Schema, where: str) -> pa.Table:
    import pyarrow.json as pajson

    if not blob.strip():
        return schema.empty_table()
    try:
        table = pajson.read_json(pa.BufferReader(blob), parse_options=pajson.ParseOptions(
            explicit_schema=schema, unexpected_field_behavior="ignore"))
        return table.select(schema.names).cast(schema)
    except pa.ArrowInvalid:  # a field holding values of several JSON types: Python's parser
        rows = [json.loads(line) for line in blob.decode("utf-8").splitlines() if line.strip()]
        return pa.Table.from_pylist([{f.name: _conform(r.get(f.name), f.type) for f in schema} for r in rows],
                                    schema=schema)


def _json_types(blob: bytes, where: str) -> pa.Schema:
    """Spark's inferred schema of one file (sorted fields; a field null everywhere is null-typed here)."""
    import pyarrow.json as pajson

    if not blob.strip():
        return pa.schema([])
    try:
        inferred = pajson.read_json(pa.BufferReader(blob)).schema
        return pa.schema([pa.field(f.name, _spark_json_type(f.type)) for f in sorted(inferred, key=lambda f: f.name)])
    except pa.ArrowInvalid:
        try:
            rows = [json.loads(line) for line in blob.decode("utf-8").splitlines() if line.strip()]
        except ValueError as exc:
            raise ValueError(f"{where}: a JSON lines file has a line that is not JSON ({exc})") from exc
        if not all(isinstance(r, dict) for r in rows):
            raise ValueError(f"{where}: a JSON lines file has a line that is not a JSON object")
        return pa.schema(list(_unify_struct([_value_type(r) for r in rows])))


def _spark_json_type(t: pa.DataType) -> pa.DataType:
    """pyarrow's JSON type as Spark's: timestamps were strings, object fields sorted."""
    if pa.types.is_timestamp(t):
        return pa.string()
    if pa.types.is_struct(t):
        return pa.struct(sorted((pa.field(f.name, _spark_json_type(f.type)) for f in t), key=lambda f: f.name))
    if pa.types.is_list(t):
        return _list(_spark_json_type(t.value_type))
    return t


def _list(item: pa.DataType) -> pa.DataType:
    return pa.list_(pa.field("element", item))  # Spark's Arrow name of a list's item


def _value_type(v: Any) -> pa.DataType:
    if v is None:
        return pa.null()
    if isinstance(v, bool):
        return pa.bool_()
    if isinstance(v, int):
        return pa.int64() if -(2 ** 63) <= v < 2 ** 63 else pa.float64()
    if isinstance(v, float):
        return pa.float64()
    if isinstance(v, str):
        return pa.string()
    if isinstance(v, list):
        return _list(_unify([_value_type(x) for x in v]) if v else pa.null())
    return _unify_struct([pa.struct(sorted((pa.field(k, _value_type(x)) for k, x in v.items()),
                                           key=lambda f: f.name))])


def _unify(types: list) -> pa.DataType:
    out = pa.null()
    for t in types:
        out = _unify2(out, t)
    return out


def _unify2(a: pa.DataType, b: pa.DataType) -> pa.DataType:
    """Spark's JSON `compatibleType`."""
    if a == b:
        return a
    if pa.types.is_null(a):
        return b
    if pa.types.is_null(b):
        return a
    numeric = (pa.int64(), pa.float64())
    if a in numeric and b in numeric:
        return pa.float64()
    if pa.types.is_struct(a) and pa.types.is_struct(b):
        return _unify_struct([a, b])
    if pa.types.is_list(a) and pa.types.is_list(b):
        return _list(_unify2(a.value_type, b.value_type))
    return pa.string()


def _unify_struct(structs: list) -> pa.StructType:
    fields: dict = {}
    for s in structs:
        for f in s:
            fields[f.name] = _unify2(fields.get(f.name, pa.null()), f.type)
    return pa.struct([pa.field(k, _final(fields[k])) for k in sorted(fields)])


def _final(t: pa.DataType) -> pa.DataType:
    """A type still null after every file is a string (Spark's)."""
    if pa.types.is_null(t):
        return pa.string()
    if pa.types.is_list(t):
        return _list(_final(t.value_type))
    if pa.types.is_struct(t):
        return pa.struct([pa.field(f.name, _final(f.type)) for f in t])
    return t


def _conform(v: Any, t: pa.DataType) -> Any:
    """A parsed JSON value as a value of Spark's unified type `t`."""
    if v is None:
        return None
    if pa.types.is_string(t):
        return v if isinstance(v, str) else json.dumps(v)  # Spark keeps the value's JSON text
    if pa.types.is_floating(t):
        return float(v)
    if pa.types.is_struct(t):
        return {f.name: _conform(v.get(f.name), f.type) for f in t}
    if pa.types.is_list(t):
        return [_conform(x, t.value_type) for x in v]
    return v
