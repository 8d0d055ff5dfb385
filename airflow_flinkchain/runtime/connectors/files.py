"""File connectors at run time: readers keeping the files' order for sources (Spark's, or
the subtasks' own for Parquet: `parquet_batches`), pyarrow writers for sinks.

A file sink writes one part file per subtask into a hidden staging sibling of
its directory and commits by rename. Without `output_type` its schema is the
whole output's (`schema_widening`); JSON lines are standard JSON (`json_lines`).
"""

from __future__ import annotations

from itertools import chain
from typing import Any, Iterator

import pyarrow as pa

from airflow_flinkchain.runtime.core.arrow_records import batch_records
from airflow_flinkchain.io.sinks import FileSink
from airflow_flinkchain.io.sources import FileSource
from airflow_flinkchain.runtime.connectors.base import (ConnectorContext, SinkConnector, SourceReader, register_sink,
                                                       register_source)
from airflow_flinkchain.runtime.connectors.file_writer import FileSinkWriter
from airflow_flinkchain.runtime.connectors.schema_widening import unify_parts
from airflow_flinkchain.runtime.core.batches import with_split_starts
from airflow_flinkchain.runtime.core.splits import SourceSplits
from airflow_flinkchain.runtime.exchange.layout import Location, replace
from airflow_flinkchain.runtime.exchange.schema import parse_output_type

#: where each row comes from (file, position): Spark's reader, range-partitioned on them, keeps the files' order
_FILE, _ROW = "__flinkchain_file", "__flinkchain_row"


@register_source(FileSource)
class FileSourceReader(SourceReader):
    """Spark's reader over the files; each row a dict. Range-partitioned by (file, position in the
    file) to the chain's parallelism and sorted within each partition: a subtask reads
    contiguous pieces of the files in name order, each piece in file order, as its splits
    (`core.splits`). A round-robin repartition would lose the order within a file, and make
    records late that are in order in their file. A file read by several subtasks is one split
    read piece after piece (`core.splits.SplitLayout`): the first and last position of each file
    tell a subtask whether its pieces go on from the previous subtask or in the next."""

    plain_values = True

    def __init__(self, descriptor: FileSource, ctx: ConnectorContext):
        self.descriptor = descriptor
        self.path = ctx.path
        self.label = ctx.label
        self.read_schema = ctx.read_schema
        self.file_bounds: dict = {}  # file -> (first, last) position, from input_dataframe

    def input_dataframe(self, spark: Any, parallelism: int) -> Any:
        from pyspark.sql import functions as F

        source, path = self.descriptor, self.path
        loc = Location(path)
        if loc.is_local and not loc.exists():
            raise FileNotFoundError(f"{self.label}: source path {path!r} does not exist (rendered from "
                                    f"{source.path!r}); create it, or fix the path / its template")
        reader = spark.read.format(source.format)
        options = dict(source.options)
        schema = parse_output_type(source.schema, self.label)
        if schema is not None:
            from pyspark.sql.pandas.types import from_arrow_schema

            reader = reader.schema(from_arrow_schema(schema))
        elif source.format == "csv":
            options.setdefault("inferSchema", True)
        for k, v in options.items():
            reader = reader.option(k, v)
        df = reader.load(loc.uri if not loc.is_local else loc.path)
        # the position is taken in the scan: increasing within a file (its chunks are scanned in order)
        df = df.withColumn(_FILE, F.input_file_name()).withColumn(_ROW, F.monotonically_increasing_id())
        # each file's first and last position: which subtasks read a piece of a file after another's
        self.file_bounds = {r[0]: (r[1], r[2]) for r in
                            df.groupBy(_FILE).agg(F.min(_ROW), F.max(_ROW)).collect()}
        return df.repartitionByRange(parallelism, _FILE, _ROW).sortWithinPartitions(_FILE, _ROW)

    def read(self, subtask: int, batches: Iterator[pa.RecordBatch]) -> SourceSplits:
        """The subtask's pieces of files as splits (its partition is read first, to count them)."""
        pieces, layout = self._pieces(batches)
        return SourceSplits([chain.from_iterable(map(batch_records, part)) for part in pieces],
                            self.descriptor.monitor, *layout)

    def read_batches(self, subtask: int, batches: Iterator[pa.RecordBatch]) -> Iterator[Any]:
        """The same rows as Arrow batches, for a batch operator at the head of the chain."""
        pieces, layout = self._pieces(batches)
        return with_split_starts(pieces, self.descriptor.monitor, *layout)

    def _pieces(self, batches: Iterator[pa.RecordBatch]) -> tuple[list, tuple[bool, bool]]:
        """([Arrow batches of each piece of a file], whether the first piece goes on from the
        previous subtask's and the last in the next subtask's: `core.splits.SplitLayout`)."""
        import pyarrow.compute as pc

        pieces: list = []  # [[file, Arrow batches, first position, last position]]
        for batch in batches:
            runs = pc.run_end_encode(batch.column(_FILE))
            data, rows = batch.drop_columns([_FILE, _ROW]), batch.column(_ROW)
            start = 0
            for end, file in zip(runs.run_ends.to_pylist(), runs.values.to_pylist()):
                if not pieces or pieces[-1][0] != file:
                    pieces.append([file, [], rows[start].as_py(), None])
                pieces[-1][1].append(data.slice(start, end - start))
                pieces[-1][3] = rows[end - 1].as_py()
                start = end
        if not pieces:
            return [], (False, False)
        (file0, _, first, _), (file1, _, _, last) = pieces[0], pieces[-1]
        layout = (first > self.file_bounds.get(file0, (first, None))[0],
                  last < self.file_bounds.get(file1, (None, last))[1])
        return [part for _, part, _, _ in pieces], layout

    def for_parallelism(self, parallelism: int) -> SourceReader:
        """Parquet files the subtasks read themselves (`parquet_batches`), any file source on an
        object store too (`file_tables`: no S3 filesystem in Spark's JVM), else this reader."""
        from airflow_flinkchain.runtime.connectors.parquet_batches import ParquetBatchReader, direct_files

        files = direct_files(self.descriptor, self.path)
        if files is None:
            if self.path is not None and Location(self.path).is_object_store:
                from airflow_flinkchain.runtime.connectors.file_tables import ArrowFileReader

                return ArrowFileReader(self.descriptor, self.path, self.label, parallelism)
            return self
        return ParquetBatchReader(self.descriptor, self.path, files, self.label, parallelism, self.read_schema)


@register_sink(FileSink)
class FileSinkConnector(SinkConnector):
    """One directory replaced as a whole by each run; one part file per subtask, staged
    in a hidden sibling of the target (same filesystem: the commit is a rename)."""

    kind = "file"

    def __init__(self, descriptor: FileSink, ctx: ConnectorContext):
        self.format = descriptor.format
        self.output_type = descriptor.output_type
        self.label = ctx.label
        self.final = Location(ctx.path)
        self.location = ctx.attempt.file_sink_stage(self.final)

    def create_writer(self, subtask: int) -> "FileSinkWriter":
        return FileSinkWriter(self.location, self.format, subtask, self.output_type, self.label)

    def commit(self, run_id: str, records: int) -> dict:
        if self.format != "json" and self.output_type is None:
            unify_parts(self.location, self.format, self.label)
        replace(self.location, self.final, self.final.sibling(f".{self.final.name}.flinkchain-trash"))
        return {"kind": self.kind, "path": self.final.uri, "records": records}

    def discard(self) -> None:
        if self.location.exists():
            self.location.delete()
