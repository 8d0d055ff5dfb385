"""Text line files: the source of `TextLineFileSource` (Flink's TextLineInputFormat) and the
sink of `RowFormatFileSink` (Flink's row-format FileSink with SimpleStringEncoder).

The source's splits are whole files, listed once on the driver: subtask k reads files
k, k + p, ... (p: the source's parallelism), each from its first line to its last, so the
records of a file keep their order (Flink does not split text files either). The subtasks
read the files themselves with pyarrow's filesystems, on Spark and in `execute_local()`.
"""

from __future__ import annotations

import io
from typing import Any, Iterator, Optional

from airflow_flinkchain.io.sinks import RowFormatFileSink
from airflow_flinkchain.io.sources import TextLineFileSource
from airflow_flinkchain.runtime.connectors.base import (ConnectorContext, SinkConnector, SourceReader, register_sink,
                                                       register_source)
from airflow_flinkchain.runtime.core.splits import SourceSplits
from airflow_flinkchain.runtime.exchange.layout import Location, replace


def text_files(path: str, where: str) -> list[str]:
    """The files of a text source: `path` itself, or the files below the directory `path`
    (recursively, sorted; hidden and underscore-prefixed names skipped)."""
    loc = Location(path)
    if not loc.exists():
        raise FileNotFoundError(f"{where}: source path {path!r} does not exist; create it, or fix the path")
    import pyarrow.fs as pafs

    if loc.fs.get_file_info(loc.path).type == pafs.FileType.File:
        return [loc.uri]
    return [loc.join(p[len(loc.path):].lstrip("/")).uri for p in loc.list_files()]


@register_source(TextLineFileSource)
class TextLineSourceReader(SourceReader):
    """Each subtask reads its files line by line (no Spark input)."""

    plain_values = True

    def __init__(self, descriptor: TextLineFileSource, ctx: ConnectorContext):
        self.files = text_files(ctx.path, ctx.label)
        self.parallelism = ctx.parallelism
        self.charset = descriptor.charset

    def read(self, subtask: int, batches: Iterator[Any]) -> SourceSplits:
        """The subtask's files, read as one stream (none: the subtask has no split)."""
        return SourceSplits([self._lines(uri) for uri in self.files[subtask::self.parallelism]], continuous=True)

    def _lines(self, uri: str) -> Iterator[str]:
        loc = Location(uri)
        with loc.fs.open_input_stream(loc.path) as raw:
            # universal newlines: \n, \r\n and \r end a line, as Java's BufferedReader.readLine
            with io.TextIOWrapper(raw, encoding=self.charset, newline=None) as lines:
                for line in lines:
                    yield line[:-1] if line.endswith("\n") else line


class TextLineSinkWriter:
    """One subtask's part file of a row-format file sink, in the attempt's staging dir."""

    def __init__(self, stage: Location, sink: RowFormatFileSink, subtask: int):
        self.location = stage.join(sink.part_file(subtask))
        self._line = sink.line
        self._charset = sink.charset
        self._stream: Optional[Any] = None
        self.count = 0

    def write(self, value: Any, timestamp: Optional[int] = None) -> None:
        if self._stream is None:
            self._stream = self.location.open_output()
        self._stream.write(f"{self._line(value)}\n".encode(self._charset))
        self.count += 1

    def close(self) -> None:
        if self._stream is None:  # a subtask without records still writes its (empty) part file
            self._stream = self.location.open_output()
        self._stream.close()

    def abort(self) -> None:
        if self._stream is not None:
            self._stream.close()


@register_sink(RowFormatFileSink)
class TextLineSinkConnector(SinkConnector):
    """The sink's directory replaced as a whole by each run (as every file sink's)."""

    kind = "file"

    def __init__(self, descriptor: RowFormatFileSink, ctx: ConnectorContext):
        self.sink = descriptor
        self.final = Location(ctx.path)
        self.location = ctx.attempt.file_sink_stage(self.final)

    def create_writer(self, subtask: int) -> TextLineSinkWriter:
        return TextLineSinkWriter(self.location, self.sink, subtask)

    def commit(self, run_id: str, records: int) -> dict:
        commit_directory(self.location, self.final)
        return {"kind": self.kind, "path": self.final.uri, "records": records}

    def discard(self) -> None:
        if self.location.exists():
            self.location.delete()


def commit_directory(stage: Location, final: Location) -> None:
    """The staged directory becomes the sink's directory (the earlier one goes to a trash sibling)."""
    replace(stage, final, final.sibling(f".{final.name}.flinkchain-trash"))
