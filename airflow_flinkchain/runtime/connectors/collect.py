"""`collect(name)` sinks: records kept as a single-channel dataset under the run's
exchange area (`_collect/{name}/`), read back by `execute().output(name)`."""

from __future__ import annotations

from typing import Any, Optional

from airflow_flinkchain.io.sinks import CollectSink
from airflow_flinkchain.runtime.connectors.base import ConnectorContext, SinkConnector, register_sink
from airflow_flinkchain.runtime.exchange.dataset import DatasetWriter
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
