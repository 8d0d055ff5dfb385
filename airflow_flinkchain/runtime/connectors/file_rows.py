"""A file source's rows read with pyarrow, without Spark (execute_local(), and the
files of a monitored file source in stream runs)."""

from __future__ import annotations

from airflow_flinkchain.io.sources import FileSource
from airflow_flinkchain.runtime.exchange.layout import Location
from airflow_flinkchain.runtime.exchange.schema import parse_output_type


def read_file_table(source: FileSource, path: str, where: str) -> tuple:
    """(the rows of a file source as a pyarrow Table, the rows of each of its files in name order),
    read with pyarrow (files or a directory; names starting with '.' or '_' are skipped, as Spark does)."""
    import pyarrow as pa
    import pyarrow.csv as pacsv
    import pyarrow.dataset as pads

    loc = Location(path)
    if not loc.exists():
        raise FileNotFoundError(f"{where}: source path {path!r} does not exist (rendered from {source.path!r}); "
                                "create it, or fix the path / its template")
    schema = parse_output_type(source.schema, where)
    options = dict(source.options)
    header = True
    if source.format == "parquet":
        fmt = pads.ParquetFileFormat()
    elif source.format == "json":
        fmt = pads.JsonFileFormat()
    else:
        header = bool(options.pop("header", False))
        sep = options.pop("sep", options.pop("delimiter", ","))
        options.pop("inferSchema", None)
        if schema is not None:  # as Spark: a CSV schema names the columns by position
            read = pacsv.ReadOptions(column_names=schema.names, skip_rows=1 if header else 0)
            convert = pacsv.ConvertOptions(column_types=schema)
        else:
            read, convert = pacsv.ReadOptions(autogenerate_column_names=not header), None
        fmt = pads.CsvFileFormat(parse_options=pacsv.ParseOptions(delimiter=sep), read_options=read,
                                 convert_options=convert)
    if options:
        fix = ("drop them (a monitored source, or one on an object store, is read with pyarrow on every runner)"
               if source.monitor or loc.is_object_store else "run this pipeline with execute() (Spark)")
        raise ValueError(f"{where}: option(s) {sorted(options)} of the {source.format} source are not supported "
                         f"by execute_local(), monitored file sources nor sources on object stores; {fix}")
    dataset = pads.dataset(loc.path, format=fmt, filesystem=loc.fs)
    # file by file, in name order: the files' boundaries are the source's splits (file_splits)
    fragments = sorted(dataset.get_fragments(), key=lambda f: f.path)
    parts = [f.to_table(schema=dataset.schema) for f in fragments]
    table = pa.concat_tables(parts) if parts else dataset.schema.empty_table()
    if source.format == "csv" and not header and schema is None:  # Spark's names for headerless CSV
        table = table.rename_columns([f"_c{i}" for i in range(table.num_columns)])
    elif schema is not None and source.format != "csv":
        table = table.select(schema.names).cast(schema)
    return table, [t.num_rows for t in parts]
