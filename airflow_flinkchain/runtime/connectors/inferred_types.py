"""Record types read from the data: the schema an undeclared Parquet source's files carry.

When a run starts (the Airflow setup task, `execute()`, `execute_local()`; `flinkchain plan`
too, for the files that exist), every source that declares no `output_type` and whose
records are exactly its files' rows - a Parquet file or flat directory the subtasks read
themselves (`parquet_batches.direct_files`), not monitored - gets its files' schema
recorded in the plan (`StreamGraph.inferred_types`), and so do the timestamp assigners
fed only by such a source (they keep their input's records). Its exchange edges are then
typed, as if the schema were declared: the chains after it read Arrow batches
(docs/vectorized.md). Records are the same dicts either way: the typed edge converts the
rows to the very columns they were read from and back.

A source whose schema cannot be read gets a note instead (`StreamGraph.type_notes`), which
`flinkchain plan` and the Chains tab give as the reason an operator after it runs per
record. Parsing a DAG file reads nothing: this runs only when a run starts, or in the CLI.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Optional

from airflow_flinkchain.graph.model import OperatorKind
from airflow_flinkchain.io.sources import FileSource
from airflow_flinkchain.runtime.core.record_types import TS_COLUMN


def with_inferred_types(job: Any, overrides: Optional[dict] = None) -> Any:
    """`job` with the record types of its undeclared Parquet sources read from their files
    (`overrides`: {node key: {"path": rendered path}} of templated paths)."""
    g = job.stream_graph
    inferred: dict = {}
    notes: dict = {}
    for node in g.nodes:  # in id order: an operator's inputs come before it
        if node.output_type is not None or node.type_info is not None:
            continue
        if node.kind is OperatorKind.SOURCE:
            path = ((overrides or {}).get(node.key) or {}).get("path", getattr(node.function, "path", None))
            try:
                schema, note = source_schema(node.function, path)
            except Exception as exc:  # the records stay pickled, as without a schema
                schema, note = None, f"its files cannot be read ({type(exc).__name__}: {exc})"
            if schema is not None:
                inferred[node.id] = schema
            elif note is not None:
                notes[node.id] = note
        elif node.kind is OperatorKind.TIMESTAMPS_AND_WATERMARKS:
            types = [None if e.output_tag is not None else inferred.get(e.source_id) for e in g.in_edges(node.id)]
            if types and all(t is not None and t.equals(types[0]) for t in types):
                inferred[node.id] = types[0]
    graph = dataclasses.replace(g, inferred_types=inferred, type_notes=notes)
    return dataclasses.replace(job, stream_graph=graph)


def source_schema(descriptor: Any, path: Optional[str]) -> tuple:
    """(the pyarrow schema of the source's records, None) when its files give it, else (None,
    why not, or None for a source that is not a file source)."""
    if type(descriptor) is not FileSource:
        return None, None
    if descriptor.format != "parquet":
        return None, f"a {descriptor.format} source: its files carry no schema"
    if descriptor.monitor:
        return None, "a monitored source: files of later runs may have another schema"
    if descriptor.options:
        return None, "a source with reader options is read by Spark"
    if path is None or "{{" in path or "{%" in path:
        return None, "its path is a template, rendered when a run starts"
    from airflow_flinkchain.runtime.connectors.parquet_batches import direct_files
    from airflow_flinkchain.runtime.exchange.layout import Location

    try:
        if not Location(path).exists():
            return None, f"no files at {path} yet"
        files = direct_files(descriptor, path)
    except OSError as exc:
        return None, f"its files cannot be listed ({type(exc).__name__}: {exc})"
    if files is None:
        return None, "a glob or partitioned directory is read by Spark"
    if not files:
        return None, f"no files at {path} yet"
    return files_schema(Location(path).fs, files)


def files_schema(fs: Any, files: list) -> tuple:
    """(the one schema of every file's footer, None), or (None, why not)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    first = None
    for f in files:
        try:
            with fs.open_input_file(f) as handle:
                schema = pq.read_schema(handle)
        except (OSError, pa.ArrowException) as exc:
            return None, f"the footer of {f} cannot be read ({type(exc).__name__}: {exc})"
        schema = pa.schema([field.remove_metadata().with_nullable(True) for field in schema])  # files differ in that
        if first is None:
            first = (f, schema)
            continue
        merged = _merged(first[1], schema)
        if merged is None:
            return None, f"its files' schemas differ ({first[0]}: {_fields(first[1])}; {f}: {_fields(schema)})"
        first = (first[0], merged)
    schema = first[1]
    if TS_COLUMN in schema.names or len(set(schema.names)) != len(schema.names):
        return None, f"its files' fields {schema.names} repeat a name or use the reserved {TS_COLUMN!r}"
    return schema, None


def check_file_schema(read: Any, schema: Any, path: str, label: str) -> None:
    """A file read by a run must fit the schema the run's plan recorded when it started."""
    import pyarrow as pa

    schema = pa.schema([f.remove_metadata().with_nullable(True) for f in schema])
    merged = _merged(read, schema)
    if merged is None or not merged.equals(read):
        raise ValueError(f"{label}: file {path} has fields ({_fields(schema)}) but the run started with files of "
                         f"({_fields(read)}): the files changed during the run. Clear the pipeline's setup task "
                         "to read them again, or declare output_type on the source")


def _merged(a: Any, b: Any) -> Any:
    """The schema of two files' rows: the same fields in the same order, of the same types; a
    field of null type (a column of nulls only) takes the other file's type. None if they differ."""
    import pyarrow as pa

    if a.names != b.names:
        return None
    fields = []
    for fa, fb in zip(a, b):
        if fa.type.equals(fb.type) or pa.types.is_null(fb.type):
            fields.append(fa)
        elif pa.types.is_null(fa.type):
            fields.append(fb)
        else:
            return None
    return pa.schema(fields)


def _fields(schema: Any) -> str:
    return ", ".join(f"{f.name} {f.type}" for f in schema)
