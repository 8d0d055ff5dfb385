"""What the chain runtime needs from the outside world (implemented by the
Spark side for real runs, by `runtime.core.memory` for tests).

- `ChannelWriter`: one per chain out-edge and subtask; receives every record
  leaving the chain on that edge, already stamped with its channel (= the
  downstream subtask index) by the edge's partitioner, and the watermarks,
  which go to every channel. Whoever builds it knows the edge and the
  upstream subtask index (both are passed to the factory); the downstream
  side needs that subtask index too, because a downstream subtask's
  watermark is the minimum over its input channels = (edge, upstream
  subtask) pairs, see `WatermarkValve`.
- `SinkWriter`: one per sink operator and subtask.

Ownership: the chain calls `close()` on every ChannelWriter and SinkWriter
after a successful end of input (Flink's RecordWriterOutput flush / sink
finish). When the subtask fails, it calls `abort()` instead if the writer
has one (optional), during dispose; it never commits anything itself.
"""

from __future__ import annotations

from typing import Any, Callable, Optional, Protocol, runtime_checkable

from airflow_flinkchain.graph.model import StreamNode
from airflow_flinkchain.planner.jobgraph import ChainEdge


@runtime_checkable
class ChannelWriter(Protocol):
    def write(self, channel: int, value: Any, timestamp: Optional[int]) -> None:
        """One record for downstream subtask `channel` (timestamp None = no timestamp)."""

    def write_watermark(self, channel: int, timestamp: int) -> None:
        """A watermark for downstream subtask `channel`."""

    def close(self) -> None:
        """End of input on this edge for this subtask (success)."""


@runtime_checkable
class SinkWriter(Protocol):
    def write(self, value: Any, timestamp: Optional[int]) -> None:
        """One record reaching the sink."""

    def close(self) -> None:
        """End of input (success): flush."""


class SubtaskCheckpoint(Protocol):
    """A stream run's snapshots as one subtask sees them (`runtime.exchange.checkpoints`).
    `drain`: this run ends with the MAX watermark (Flink's stop --drain); otherwise the
    input ends without it and pending windows and timers wait for the next run."""

    drain: bool

    def restore(self, operator_key: str, subtask: int) -> tuple[list, Optional[dict]]:
        """(the snapshots of every former subtask of the operator, the one of this subtask
        index when the parallelism is unchanged, else None); ([], None) for a new operator."""

    def write(self, operator_key: str, subtask: int, state: dict) -> None:
        """Stage the snapshot of one operator of this subtask."""

    def summary(self) -> dict:
        """{operator key: {"stateful", "watermark", "bytes", ...}} of the snapshots written
        (reported to the driver with the subtask's counters)."""


#: record_writer_factory(chain_edge, subtask_index) -> ChannelWriter
RecordWriterFactory = Callable[[ChainEdge, int], ChannelWriter]
#: sink_writer_factory(sink_node, subtask_index) -> SinkWriter
SinkWriterFactory = Callable[[StreamNode, int], SinkWriter]
