"""File connectors at run time: Spark readers for sources, pyarrow writers for sinks."""

from __future__ import annotations

import json
from typing import Any, Optional

import pyarrow as pa

from airflow_flinkchain.runtime.exchange_fs import Location, part_name
from airflow_flinkchain.runtime.exchange_types import columns_to_arrays, parse_output_type, record_columns

SINK_BATCH_ROWS = 65536
#: A typed sink moves buffered records into per-field columns every this many records (and
#: at every fused chunk), while they are still in the CPU cache; the dicts are freed then.
COLUMNIZE_ROWS = 1024
EXTENSIONS = {"parquet": "parquet", "csv": "csv", "json": "json"}


def read_source_dataframe(spark, source, path: str, parallelism: int, where: str):
    """A DataFrame with exactly `parallelism` partitions over the source files."""
    from pyspark.sql.types import StructType

    loc = Location(path)
    if loc.is_local and not loc.exists():
        raise FileNotFoundError(f"{where}: source path {path!r} does not exist (rendered from {source.path!r}); "
                                f"create it, or fix the path / its template")
    reader = spark.read.format(source.format)
    options = dict(source.options)
    schema = parse_output_type(source.schema, where)
    if schema is not None:
        from pyspark.sql.pandas.types import from_arrow_schema

        reader = reader.schema(from_arrow_schema(schema))
    elif source.format == "csv":
        options.setdefault("inferSchema", True)
    for k, v in options.items():
        reader = reader.option(k, v)
    df = reader.load(loc.uri if not loc.is_local else loc.path)
    assert isinstance(df.schema, StructType)
    return df.repartition(parallelism)


class FileSinkWriter:
    """One subtask's file of a file sink, written into the attempt's staging dir."""

    def __init__(self, stage: Location, fmt: str, subtask: int, output_type: Any, label: str):
        self.location = stage.join(part_name(subtask, EXTENSIONS[fmt]))
        self.fmt = fmt
        self.label = label
        self.schema = parse_output_type(output_type, label)
        self.buffer: list = []
        typed_columns = self.schema is not None and fmt != "json"  # JSON lines are written as the dicts are
        self.columns = [[] for _ in self.schema.names] if typed_columns else None
        self.pending = 0  # records moved into self.columns, not yet written
        self.count = 0
        self._writer = None
        self._stream = None

    def write(self, value: Any, timestamp: Optional[int] = None) -> None:
        self.buffer.append(value)
        if len(self.buffer) >= (SINK_BATCH_ROWS if self.columns is None else COLUMNIZE_ROWS):
            self._flush_if_full()

    def fused_hooks(self) -> tuple:
        """(append, flush_if_full, buffer, limit) for generated chain code
        (runtime/operators/fused.py): it appends records straight to the buffer (files
        keep no timestamps) and calls flush_if_full() once per input chunk - or when
        len(buffer) >= limit - instead of paying a write() call per record."""
        limit = SINK_BATCH_ROWS if self.columns is None else COLUMNIZE_ROWS
        return self.buffer.append, self._flush_if_full, self.buffer, limit

    def _flush_if_full(self) -> None:
        if self.columns is not None:
            self._columnize()
            if self.pending >= SINK_BATCH_ROWS:
                self.flush()
        elif len(self.buffer) >= SINK_BATCH_ROWS:
            self.flush()

    def _columnize(self) -> None:
        if self.buffer:
            for column, values in zip(self.columns, record_columns(self.buffer, self.schema.names, self.label)):
                column.extend(values)
            self.pending += len(self.buffer)
            self.buffer.clear()  # the same list: fused code holds its append

    def _batch(self) -> pa.RecordBatch:
        bad = next((r for r in self.buffer if not isinstance(r, dict)), None)
        if bad is not None:
            raise TypeError(f"{self.label}: {self.fmt} sink records must be dicts (column -> value), got {bad!r}")
        batch = pa.RecordBatch.from_pylist(self.buffer)
        if self._writer is not None and batch.schema != self._writer_schema:
            try:
                batch = batch.select(self._writer_schema.names).cast(self._writer_schema)
            except Exception as exc:
                raise TypeError(f"{self.label}: records changed shape ({batch.schema} vs {self._writer_schema}); "
                                "declare output_type on the sink") from exc
        return batch

    def flush(self) -> None:
        if self.columns is not None:  # typed Parquet/CSV
            self._columnize()
            if self.pending:
                batch = pa.RecordBatch.from_arrays(columns_to_arrays(self.columns, self.schema, self.label),
                                                   schema=self.schema)
                self._arrow_writer(self.schema).write_batch(batch)
                self.count += self.pending
                self.pending = 0
                self.columns = [[] for _ in self.schema.names]
            return
        if not self.buffer:
            return
        if self.fmt == "json":
            self._out().write("".join(json.dumps(r, default=str) + "\n" for r in self.buffer).encode())
        else:
            batch = self._batch()
            self._arrow_writer(batch.schema).write_batch(batch)
        self.count += len(self.buffer)
        self.buffer.clear()  # the same list: fused code holds its append

    def _out(self):
        if self._stream is None:
            self._stream = self.location.open_output()
        return self._stream

    def _arrow_writer(self, schema: pa.Schema):
        if self._writer is None:
            self._writer_schema = schema
            if self.fmt == "parquet":
                import pyarrow.parquet as pq

                self._writer = pq.ParquetWriter(self._out(), schema)
            else:
                import pyarrow.csv as pcsv

                self._writer = pcsv.CSVWriter(self._out(), schema)
        return self._writer

    def close(self) -> None:
        self.flush()
        if self._writer is None and self.fmt != "json" and self.schema is not None:
            self._arrow_writer(self.schema)  # typed sink: an empty file still carries the schema
        if self._writer is not None:
            self._writer.close()
        if self._stream is not None:
            self._stream.close()

    def abort(self) -> None:
        for closable in (self._writer, self._stream):
            try:
                if closable is not None:
                    closable.close()
            except Exception:
                pass
