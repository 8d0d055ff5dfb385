"""`collect(name)` sinks: records kept as a single-channel dataset under the run's
exchange area (`_collect/{name}/`), read back by `execute().output(name)`.
`print()` sinks keep their printed lines so, and the driver writes them to stdout
when the sink commits."""

from __future__ import annotations

from typing import Any, Optional

import sys

from airflow_flinkchain.io.sinks import CollectSink, PrintSink
from airflow_flinkchain.runtime.connectors.base import ConnectorContext, SinkConnector, register_sink
from airflow_flinkchain.runtime.exchange.dataset import DatasetWriter, read_records
from airflow_flinkchain.runtime.exchange.layout import replace


class DatasetSinkWriter:
    """A SinkWriter that writes a single-channel dataset (collect sinks, staged SQL rows)."""

    def __init__(self, writer: DatasetWriter):
        self.writer = writer
        self._add = writer.channel(0).add

    def write(self, value: Any, timestamp: Optional[int] = None) -> None:
        self._add(value, timestamp)

    def close(self) -> None:
        self.writer.close()

    def abort(self) -> None:
        self.writer.abort()

    @property
    def count(self) -> int:
        return self.writer.records


@register_sink(CollectSink)
class CollectSinkConnector(SinkConnector):
    kind = "collect"

    def __init__(self, descriptor: CollectSink, ctx: ConnectorContext):
        self.name = descriptor.name
        self.location = ctx.attempt.collect(descriptor.name)
        self.final = ctx.area.collect(descriptor.name)
        self.trash = ctx.area.trash()

    def create_writer(self, subtask: int) -> DatasetSinkWriter:
        return DatasetSinkWriter(DatasetWriter(self.location, f"collect:{self.name}", subtask, 1, channel_dirs=False))

    def commit(self, run_id: str, records: int) -> dict:
        replace(self.location, self.final, self.trash)
        return {"kind": self.kind, "path": self.final.uri, "records": records}


class PrintingWriter:
    """A subtask's print() lines (the record as Flink prints it, with its subtask prefix)."""

    def __init__(self, writer: Any, sink: PrintSink, subtask: int, parallelism: int):
        self.writer = writer
        self._line = sink.line
        self._subtask, self._parallelism = subtask, parallelism

    def write(self, value: Any, timestamp: Optional[int] = None) -> None:
        self.writer.write(self._line(value, self._subtask, self._parallelism), timestamp)

    def close(self) -> None:
        self.writer.close()

    def abort(self) -> None:
        getattr(self.writer, "abort", lambda: None)()

    @property
    def count(self) -> int:
        return self.writer.count

    def values(self) -> list:
        return self.writer.values()


def print_lines(lines: list) -> None:
    """The driver's stdout, as Flink's TaskManagers print (one line per record)."""
    out = sys.stdout
    for line in lines:
        out.write(f"{line}\n")
    out.flush()


@register_sink(PrintSink)
class PrintSinkConnector(CollectSinkConnector):
    kind = "print"

    def __init__(self, descriptor: PrintSink, ctx: ConnectorContext):
        super().__init__(descriptor, ctx)
        self.sink = descriptor
        self.parallelism = ctx.parallelism

    def create_writer(self, subtask: int) -> PrintingWriter:
        return PrintingWriter(super().create_writer(subtask), self.sink, subtask, self.parallelism)

    def commit(self, run_id: str, records: int) -> dict:
        done = super().commit(run_id, records)
        print_lines(read_records(self.final, f"collect:{self.name}"))
        return done
