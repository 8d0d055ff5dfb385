"""The in-process exchange: what a Parquet exchange dataset is on Spark, in memory.

One `LocalChannelWriter` per chain out-edge and upstream subtask keeps, per
channel, the elements in the order they were written: records and
watermarks. Records cross the exchange as they do on Spark: a pickled edge
stores each record pickled at once (a later mutation of the object cannot
change what was sent; a record that cannot be pickled fails here as it would
on Spark); an edge with a declared `output_type` converts its records to the
declared Arrow columns and back when the writer closes, so a record that does
not fit fails with the same message, and downstream gets the same dicts.

Downstream subtask k reads `MemoryInputChannel`s: channel k of each input
edge, one per upstream subtask, in that order (see
`stream_task.StreamTaskIO.input_channels`).
"""

from __future__ import annotations

import pickle
from itertools import takewhile
from typing import Any, Iterator, Optional

from airflow_flinkchain.runtime.core.elements import StreamRecord, Watermark, WatermarkStatus
from airflow_flinkchain.runtime.core.memory import MemoryChannelWriter
from airflow_flinkchain.runtime.exchange.dataset import _Dumps
from airflow_flinkchain.runtime.exchange.handoff import ACTIVE, IDLE, NO_MARKS, ChannelMarks
from airflow_flinkchain.runtime.exchange.schema import batch_to_records, parse_output_type, records_to_batch


class LocalChannelWriter(MemoryChannelWriter):
    """All channels of one edge written by one upstream subtask."""

    def __init__(self, edge_id: str, subtask: int, num_channels: int, output_type: Any = None, label: str = ""):
        super().__init__(num_channels)
        self.edge_id = edge_id
        self.subtask = subtask
        self.num_channels = num_channels
        self.label = label or edge_id
        self.schema = parse_output_type(output_type, self.label)
        self.dumps = _Dumps()
        self.records = 0

    def write(self, channel: int, value: Any, timestamp: Optional[int]) -> None:
        if self.schema is None:
            value = self.dumps(value)
        elif isinstance(value, dict):
            value = dict(value)
        self.channels[channel].append(StreamRecord(value, timestamp))
        self.records += 1

    def broadcast_watermark(self, timestamp: int) -> None:
        """One watermark object for every channel (watermarks are never mutated)."""
        channels, wm = self.channels, Watermark(timestamp)
        for ch in range(self.num_channels):
            channels[ch].append(wm)

    def close(self) -> None:
        if self.schema is not None:
            for elements in self.channels.values():
                self._convert(elements)
        super().close()

    def _convert(self, elements: list) -> None:
        """Typed edge: the records through the declared Arrow columns, in place."""
        positions = [i for i, el in enumerate(elements) if type(el) is StreamRecord]
        if not positions:
            return
        values = [elements[i].value for i in positions]
        ts = [elements[i].timestamp for i in positions]
        batch = records_to_batch(values, None if all(t is None for t in ts) else ts, self.schema, self.label)
        records, _ = batch_to_records(batch)
        for i, value, t in zip(positions, records, ts):
            elements[i] = StreamRecord(value, t)

    def channel(self, k: int) -> "MemoryInputChannel":
        return MemoryInputChannel(self.channels.get(k, []), pickled=self.schema is None, dataset=self.edge_id)


class MemoryInputChannel:
    """One input channel of a downstream subtask, read as an exchange file is read:
    bare values for records without a timestamp, StreamRecord(value, ts), Watermark(ts)."""

    def __init__(self, elements: list, pickled: bool, dataset: str = ""):
        self._elements = elements
        self.pickled = pickled
        self.dataset = dataset
        self.watermarks = any(type(el) is Watermark or type(el) is WatermarkStatus for el in elements)
        self.marks = _channel_marks(elements) if self.watermarks else NO_MARKS
        self.initially_idle = self.marks.initially_idle

    def elements(self) -> Iterator:
        loads = pickle.loads if self.pickled else None
        for el in self._elements:
            if type(el) is StreamRecord:
                value = loads(el.value) if loads is not None else el.value
                yield value if el.timestamp is None else StreamRecord(value, el.timestamp)
            else:
                yield el


def _channel_marks(elements: list) -> ChannelMarks:
    """The `ChannelMarks` of a channel's elements: its marks before its first record and after its last."""
    def marks(els: Iterator) -> list:
        return [(IDLE if el.idle else ACTIVE) if type(el) is WatermarkStatus else el.timestamp
                for el in takewhile(lambda el: type(el) is not StreamRecord, els)]

    return ChannelMarks(marks(iter(elements)), marks(reversed(elements))[::-1])


class MemoryExchange:
    """The committed outputs of the chains run so far: edges and collect sinks."""

    def __init__(self) -> None:
        self.edges: dict[str, list[LocalChannelWriter]] = {}  # edge id -> writer per upstream subtask
        self.collected: dict[str, list] = {}  # collect name -> values, in subtask order

    def commit_edge(self, edge_id: str, writers: list[LocalChannelWriter]) -> None:
        self.edges[edge_id] = sorted(writers, key=lambda w: w.subtask)

    def input_channels(self, edge_ids, channel: int, upstream_parallelism) -> list[MemoryInputChannel]:
        """Channel `channel` of each edge, per upstream subtask (`upstream_parallelism(edge_id)`)."""
        out = []
        for edge_id in edge_ids:
            writers = self.edges.get(edge_id)
            if writers is None or len(writers) != upstream_parallelism(edge_id):
                raise RuntimeError(f"exchange edge {edge_id!r} is not complete: its upstream chain has not run")
            out.extend(w.channel(channel) for w in writers)
        return out
