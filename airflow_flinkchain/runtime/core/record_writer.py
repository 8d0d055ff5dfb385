"""Flink's RecordWriter: picks the channel(s) of each record leaving a chain
on one edge and hands it to the edge's ChannelWriter."""

from __future__ import annotations

from typing import Any, Callable, Optional

from airflow_flinkchain.runtime.core.combiner import KeyedCombiner
from airflow_flinkchain.runtime.core.elements import TimestampCell
from airflow_flinkchain.runtime.core.interfaces import ChannelWriter
from airflow_flinkchain.runtime.core.partitioners import ChannelSelector


class RecordWriter:
    def __init__(self, edge_id: str, selector: ChannelSelector, num_channels: int, channel_sink: ChannelWriter):
        self.edge_id = edge_id
        self.selector = selector
        self.num_channels = num_channels
        self.channel_sink = channel_sink
        self.records_written = 0  # per channel choice; BROADCAST counts each copy
        # a writer with a one-call path for all its channels (STREAMING: a watermark per record)
        self._broadcast_watermark = getattr(channel_sink, "broadcast_watermark", None) or self._watermark_per_channel
        self.broadcast_watermark = self._broadcast_watermark
        self.combiner: Optional[KeyedCombiner] = None

    def set_combiner(self, combiner: KeyedCombiner) -> None:
        """Partial aggregates on this edge (core/combiner.py): whatever else the edge carries
        ends the combiner's segment first, so the edge keeps its order."""
        self.combiner = combiner

        def broadcast_watermark(timestamp: int) -> None:
            combiner.flush()
            self._broadcast_watermark(timestamp)

        self.broadcast_watermark = broadcast_watermark

    def emit(self, value: Any, timestamp: Optional[int] = None) -> None:
        """Slow path (tests, rare callers); the chain uses `emitter()`."""
        self.emitter(_FixedCell(timestamp))(value)

    def emitter(self, cell: TimestampCell) -> Callable[[Any], None]:
        """A specialised per-record writer reading the timestamp from `cell`."""
        write = self.channel_sink.write
        sel = self.selector
        combiner = self.combiner
        if combiner is not None:
            direct = write

            def write(ch: int, value: Any, ts: Optional[int]) -> None:
                combiner.flush()
                direct(ch, value, ts)
        if type(sel) is int:
            ch = sel
            return lambda value: write(ch, value, cell.value)
        if type(sel) is tuple:
            channels = sel

            def broadcast(value: Any) -> None:
                ts = cell.value
                for ch in channels:
                    write(ch, value, ts)

            return broadcast

        def partitioned(value: Any) -> None:
            write(sel(value), value, cell.value)

        return partitioned

    def _watermark_per_channel(self, timestamp: int) -> None:
        """broadcast_watermark(timestamp) of a writer without a one-call path."""
        write_watermark = self.channel_sink.write_watermark
        for ch in range(self.num_channels):
            write_watermark(ch, timestamp)

    def broadcast_watermark_status(self, idle: bool) -> None:
        if self.combiner is not None:
            self.combiner.flush()
        write_status = getattr(self.channel_sink, "write_watermark_status", None)
        if write_status is None:
            return  # a writer that keeps no statuses: its channels stay active
        for ch in range(self.num_channels):
            write_status(ch, idle)

    def close(self) -> None:
        if self.combiner is not None:
            self.combiner.flush()
        self.channel_sink.close()

    def abort(self) -> None:
        if self.combiner is not None:
            self.combiner.discard()
        abort = getattr(self.channel_sink, "abort", None)
        if abort is not None:
            abort()


class _FixedCell:
    __slots__ = ("value",)

    def __init__(self, value: Optional[int]):
        self.value = value
