"""A file source's rows read with pyarrow, without Spark (execute_local(), monitored file sources,
sources on object stores); CSV and JSON lines as Spark's readers read them (spark_csv)."""

from __future__ import annotations

from airflow_flinkchain.io.sources import FileSource
from airflow_flinkchain.runtime.exchange.layout import Location
from airflow_flinkchain.runtime.exchange.schema import parse_output_type


def read_file_table(source: FileSource, path: str, where: str) -> tuple:
    """(the rows of a file source as a pyarrow Table, the rows of each of its files in name order),
    read with pyarrow (files or a directory; names starting with '.' or '_' are skipped, as Spark does)."""
    import pyarrow as pa
    import pyarrow.dataset as pads

    loc = Location(path)
    if not loc.exists():
        raise FileNotFoundError(f"{where}: source path {path!r} does not exist (rendered from {source.path!r}); "
                                "create it, or fix the path / its template")
    schema = parse_output_type(source.schema, where)
    if source.format in ("csv", "json"):
        from airflow_flinkchain.runtime.connectors import spark_csv

        read = spark_csv.read_csv_files if source.format == "csv" else spark_csv.read_json_files
        parts = read([_read_bytes(loc, p) for p in data_files(loc)], dict(source.options), schema, where)
        if not parts:
            return pa.table({}), []
        return pa.concat_tables(parts), [t.num_rows for t in parts]
    if source.options:
        fix = ("drop them (a monitored source, or one on an object store, is read with pyarrow on every runner)"
               if source.monitor or loc.is_object_store else "run this pipeline with execute() (Spark)")
        raise ValueError(f"{where}: option(s) {sorted(source.options)} of the {source.format} source are not "
                         f"supported by execute_local(), monitored file sources nor sources on object stores; {fix}")
    dataset = pads.dataset(loc.path, format=pads.ParquetFileFormat(), filesystem=loc.fs)
    # file by file, in name order: the files' boundaries are the source's splits (file_splits)
    fragments = sorted(dataset.get_fragments(), key=lambda f: f.path)
    parts = [f.to_table(schema=dataset.schema) for f in fragments]
    table = pa.concat_tables(parts) if parts else dataset.schema.empty_table()
    if schema is not None:
        table = table.select(schema.names).cast(schema)
    return table, [t.num_rows for t in parts]


def data_files(loc: Location) -> list[str]:
    """The file itself, or the data files below a directory (`Location.list_files`: name order,
    Spark's rule for '.' and '_' names, a published dataset's manifest on object stores)."""
    import pyarrow.fs as pafs

    if loc.fs.get_file_info(loc.path).type == pafs.FileType.File:
        return [loc.path]
    return loc.list_files()


def _read_bytes(loc: Location, path: str) -> bytes:
    with loc.fs.open_input_stream(path) as f:
        return f.read()
