"""In-memory ChannelWriter / SinkWriter and factories, for tests and local debugging."""

from __future__ import annotations

from collections import defaultdict
from typing import Any, Optional

from airflow_flinkchain.runtime.core.elements import StreamRecord, Watermark, WatermarkStatus


class MemoryChannelWriter:
    """Keeps, per channel, the elements in order: StreamRecord(value, ts) and Watermark(ts)."""

    def __init__(self, num_channels: Optional[int] = None):
        self.channels: dict[int, list] = defaultdict(list)
        self.closed = False
        self.aborted = False

    def write(self, channel: int, value: Any, timestamp: Optional[int]) -> None:
        self.channels[channel].append(StreamRecord(value, timestamp))

    def write_watermark(self, channel: int, timestamp: int) -> None:
        self.channels[channel].append(Watermark(timestamp))

    def write_watermark_status(self, channel: int, idle: bool) -> None:
        self.channels[channel].append(WatermarkStatus.IDLE if idle else WatermarkStatus.ACTIVE)

    def close(self) -> None:
        self.closed = True

    def abort(self) -> None:
        self.aborted = True

    def values(self, channel: Optional[int] = None) -> list:
        """Record values (no watermarks) of one channel, or of all channels by channel order."""
        chans = [channel] if channel is not None else sorted(self.channels)
        return [e.value for c in chans for e in self.channels[c] if type(e) is StreamRecord]


class MemorySinkWriter:
    def __init__(self) -> None:
        self.records: list[StreamRecord] = []
        self.closed = False
        self.aborted = False

    def write(self, value: Any, timestamp: Optional[int]) -> None:
        self.records.append(StreamRecord(value, timestamp))

    def close(self) -> None:
        self.closed = True

    def abort(self) -> None:
        self.aborted = True

    @property
    def values(self) -> list:
        return [r.value for r in self.records]


class MemoryWriters:
    """Factories for run_subtask that remember what they built.

    writers.channel[(edge_id, subtask)] -> MemoryChannelWriter
    writers.sink[(node_key, subtask)]   -> MemorySinkWriter"""

    def __init__(self) -> None:
        self.channel: dict[tuple[str, int], MemoryChannelWriter] = {}
        self.sink: dict[tuple[str, int], MemorySinkWriter] = {}

    def record_writer_factory(self, chain_edge, subtask_index: int) -> MemoryChannelWriter:
        w = MemoryChannelWriter()
        self.channel[(chain_edge.id, subtask_index)] = w
        return w

    def sink_writer_factory(self, node, subtask_index: int) -> MemorySinkWriter:
        w = MemorySinkWriter()
        self.sink[(node.key, subtask_index)] = w
        return w

    def sink_values(self, node_key: str) -> list:
        return [v for (k, _s), w in sorted(self.sink.items()) if k == node_key for v in w.values]

    def edge_values(self, edge_id: str, channel: Optional[int] = None) -> list:
        return [v for (e, _s), w in sorted(self.channel.items()) if e == edge_id for v in w.values(channel)]
