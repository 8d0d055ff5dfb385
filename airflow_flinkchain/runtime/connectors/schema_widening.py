"""The schema of an untyped Parquet/CSV sink: the whole output's, not the first record's.

The columns are the union of the fields of every record (a record without a
field gets null) and a field's type is widened over all records (int and float
give float; null gives way to any type). Each subtask widens over its own
records while it writes (`SchemaSpill`); at commit the part files of all
subtasks are brought to one schema (`unify_parts`). A field whose types cannot
be reconciled (int in some records, string in others) fails the sink with an
error naming it: no field is ever dropped.
"""

from __future__ import annotations

import uuid
from typing import Any, Iterator, Optional

import pyarrow as pa

from airflow_flinkchain.runtime.exchange.layout import Location


def file_writer(fmt: str, sink: Any, schema: pa.Schema):
    """A pyarrow Parquet or CSV writer of `schema` onto the output stream `sink`."""
    if fmt == "parquet":
        import pyarrow.parquet as pq

        return pq.ParquetWriter(sink, schema)
    import pyarrow.csv as pcsv

    return pcsv.CSVWriter(sink, schema)


def records_batch(records: list, fmt: str, label: str) -> pa.RecordBatch:
    """The records as one batch: every field of any record is a column (missing: null)."""
    bad = next((r for r in records if not isinstance(r, dict)), None)
    if bad is not None:
        raise TypeError(f"{label}: {fmt} sink records must be dicts (column -> value), got {bad!r}")
    first = records[0].keys()
    if all(r.keys() == first for r in records):
        names = list(first)
    else:
        names = list(dict.fromkeys(k for r in records for k in r))
    arrays = []
    for name in names:
        values = [r.get(name) for r in records]
        try:
            arrays.append(pa.array(values))
        except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError) as exc:
            raise TypeError(f"{label}: field {name!r} has values of types that do not fit one column "
                            f"({_value_types(values)}; {exc}); make the records agree or declare "
                            f"output_type on the sink") from None
    return pa.RecordBatch.from_arrays(arrays, names=names)


def _value_types(values: list) -> str:
    return ", ".join(sorted({type(v).__name__ for v in values if v is not None}))


def unify(schemas: list, label: str) -> pa.Schema:
    """One schema for all: fields in order of first appearance, types widened."""
    try:
        return pa.unify_schemas(schemas, promote_options="permissive")
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError):
        types: dict[str, set] = {}
        for schema in schemas:
            for f in schema:
                types.setdefault(f.name, set()).add(str(f.type))
        for name, seen in types.items():
            try:
                pa.unify_schemas([pa.schema([s.field(name)]) for s in schemas if name in s.names],
                                 promote_options="permissive")
            except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError):
                raise TypeError(f"{label}: field {name!r} has types {sorted(seen)} in different records, which "
                                "cannot be widened to one column type; make the records agree or declare "
                                "output_type on the sink") from None
        raise


def conform(batch: pa.RecordBatch, schema: pa.Schema) -> pa.RecordBatch:
    """`batch` with `schema`'s columns: missing ones null, others cast (widened)."""
    if batch.schema == schema:
        return batch
    names = batch.schema.names
    return pa.RecordBatch.from_arrays(
        [batch.column(f.name).cast(f.type) if f.name in names else pa.nulls(batch.num_rows, f.type) for f in schema],
        schema=schema)


class SchemaSpill:
    """One subtask's untyped batches, kept in Arrow IPC files next to its part file (one
    file per run of batches with the same schema) until close, when they are written
    with the schema widened over all of them."""

    def __init__(self, part: Location, label: str):
        self.part = part
        self.label = label
        self.segments: list = []  # [schema, location, writer, stream]

    def add(self, batch: pa.RecordBatch) -> None:
        if not self.segments or self.segments[-1][0] != batch.schema:
            self._close_last()
            loc = self.part.sibling(f".{self.part.name}.{uuid.uuid4().hex[:8]}.spill")
            stream = loc.open_output()
            self.segments.append([batch.schema, loc, pa.ipc.new_stream(stream, batch.schema), stream])
        self.segments[-1][2].write_batch(batch)

    def _close_last(self) -> None:
        if self.segments and self.segments[-1][2] is not None:
            self.segments[-1][2].close()
            self.segments[-1][3].close()
            self.segments[-1][2] = self.segments[-1][3] = None

    def schema(self) -> Optional[pa.Schema]:
        self._close_last()
        return unify([s[0] for s in self.segments], self.label) if self.segments else None

    def batches(self, schema: pa.Schema) -> Iterator[pa.RecordBatch]:
        for _, loc, _, _ in self.segments:
            with loc.fs.open_input_stream(loc.path) as f:
                for batch in pa.ipc.open_stream(f):
                    yield conform(batch, schema)

    def discard(self) -> None:
        for segment in self.segments:
            for closable in segment[2:]:
                try:
                    if closable is not None:
                        closable.close()
                except Exception:
                    pass
            if segment[1].exists():
                segment[1].delete()
        self.segments = []


def unify_parts(stage: Location, fmt: str, label: str) -> None:
    """Give every part file of an untyped sink the schema of the whole output (the driver,
    at commit; a part is rewritten only when its columns differ). CSV holds no types: its
    parts need the same columns only, and a rewritten part keeps its text as it was."""
    if not stage.exists():
        return
    paths = stage.list_files(recursive=False)
    schemas = {p: _part_schema(stage, p, fmt) for p in paths}
    schemas = {p: s for p, s in schemas.items() if s is not None}
    if len({str(s) for s in schemas.values()}) < 2:
        return
    if fmt == "parquet":
        target = unify(list(schemas.values()), label)
    else:
        names = list(dict.fromkeys(n for s in schemas.values() for n in s.names))
        target = pa.schema([(n, pa.string()) for n in names])
    for path, schema in schemas.items():
        if schema != target:
            table = _read_part(stage, path, fmt, schema)
            with stage.fs.open_output_stream(path) as out:
                writer = file_writer(fmt, out, target)
                for batch in table.to_batches():
                    writer.write_batch(conform(batch, target))
                writer.close()


def _part_schema(stage: Location, path: str, fmt: str) -> Optional[pa.Schema]:
    """Parquet: the file's schema. CSV: its header's columns, as strings (None: empty file)."""
    with stage.fs.open_input_file(path) as f:
        if fmt == "parquet":
            import pyarrow.parquet as pq

            return pq.read_schema(f)
        if f.size() == 0:
            return None
        header = f.read(min(f.size(), 1 << 20)).split(b"\n", 1)[0]
    import pyarrow.csv as pcsv

    names = pcsv.read_csv(pa.py_buffer(header + b"\n")).schema.names
    return pa.schema([(n, pa.string()) for n in names])


def _read_part(stage: Location, path: str, fmt: str, schema: pa.Schema) -> pa.Table:
    with stage.fs.open_input_file(path) as f:
        if fmt == "parquet":
            import pyarrow.parquet as pq

            return pq.read_table(f)
        import pyarrow.csv as pcsv

        return pcsv.read_csv(f, convert_options=pcsv.ConvertOptions(
            column_types={n: pa.string() for n in schema.names}, strings_can_be_null=False))
