"""How a stream's records are distributed to the next operator's subtasks (Flink's
partitioners): `forward`, `rebalance`, `rescale`, `shuffle`, `broadcast`, `global_`,
`partition_custom`. `key_by` (HASH) lives on DataStream itself.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from airflow_flinkchain.api.validation import check_function
from airflow_flinkchain.function_types import KeySelectorLike, PartitionerLike
from airflow_flinkchain.graph.model import Partitioner
from airflow_flinkchain.graph.transformations import PartitionTransformation

if TYPE_CHECKING:  # pragma: no cover
    from airflow_flinkchain.api.connected import BroadcastStream
    from airflow_flinkchain.api.datastream import DataStream


class StreamPartitioning:
    """The partitioning methods of DataStream (a KeyedStream refuses them in `_partition`)."""

    def _partition(self, kind: Partitioner, **fields: Any) -> "DataStream":
        from airflow_flinkchain.api.datastream import DataStream

        t = self._pipeline._add_virtual(PartitionTransformation, (self._t,), partitioner=kind, **fields)
        return DataStream(self._pipeline, t)

    def forward(self) -> "DataStream":
        """Send each record to the downstream subtask of the same index (equal parallelism only);
        the edge chains.

        Examples:
            >>> from airflow_flinkchain import StreamPipeline
            >>> p = StreamPipeline("doc", parallelism=2)
            >>> _ = p.from_collection([1]).forward().map(str).collect("out")
        """
        return self._partition(Partitioner.FORWARD)

    def rebalance(self) -> "DataStream":
        """Round robin over the downstream subtasks.

        Examples:
            >>> from airflow_flinkchain import StreamPipeline
            >>> p = StreamPipeline("doc", parallelism=2)
            >>> _ = p.from_collection([1]).rebalance().map(str).collect("out")
        """
        return self._partition(Partitioner.REBALANCE)

    def rescale(self) -> "DataStream":
        """Round robin within the downstream range this subtask feeds under Flink's POINTWISE
        distribution (2 → 3: subtask 0 feeds {0, 1}, subtask 1 feeds {2}).

        Examples:
            >>> from airflow_flinkchain import StreamPipeline
            >>> p = StreamPipeline("doc", parallelism=2)
            >>> _ = p.from_collection([1]).rescale().map(str).collect("out")
        """
        return self._partition(Partitioner.RESCALE)

    def shuffle(self) -> "DataStream":
        """A random downstream subtask per record (seeded per subtask: the same in every attempt).

        Examples:
            >>> from airflow_flinkchain import StreamPipeline
            >>> p = StreamPipeline("doc", parallelism=2)
            >>> _ = p.from_collection([1]).shuffle().map(str).collect("out")
        """
        return self._partition(Partitioner.SHUFFLE)

    def broadcast(self, *broadcast_state_descriptors: Any) -> "DataStream | BroadcastStream":
        """Every record to every downstream subtask. With MapStateDescriptors, a
        `BroadcastStream` instead: connect another stream to it
        (`stream.connect(broadcast_stream).process(...)`) to read its records as
        broadcast state.

        Examples:
            >>> from airflow_flinkchain import StreamPipeline
            >>> p = StreamPipeline("doc", parallelism=2)
            >>> _ = p.from_collection([1]).broadcast().map(str).collect("out")
        """
        if broadcast_state_descriptors:
            from airflow_flinkchain.api.connected import broadcast_stream

            return broadcast_stream(self, broadcast_state_descriptors)
        return self._partition(Partitioner.BROADCAST)

    def global_(self) -> "DataStream":
        """Every record to downstream subtask 0 (Flink's `global`).

        Examples:
            >>> from airflow_flinkchain import StreamPipeline
            >>> p = StreamPipeline("doc", parallelism=2)
            >>> _ = p.from_collection([1]).global_().map(str).collect("out")
        """
        return self._partition(Partitioner.GLOBAL)

    def partition_custom(self, partitioner: PartitionerLike, key_selector: KeySelectorLike) -> "DataStream":
        """`partitioner(key, num_partitions) -> channel` (or a Partitioner instance) on
        the key `key_selector(record)`.

        Examples:
            >>> from airflow_flinkchain import StreamPipeline
            >>> p = StreamPipeline("doc", parallelism=2)
            >>> s = p.from_collection(range(4)).partition_custom(lambda k, n: k % n, lambda x: x)
            >>> _ = s.map(str).collect("out")
        """
        check_function(partitioner, "partition", "partition_custom")
        check_function(key_selector, "get_key", "partition_custom")
        part = partitioner.partition if hasattr(partitioner, "partition") else partitioner
        key = key_selector.get_key if hasattr(key_selector, "get_key") else key_selector
        return self._partition(Partitioner.CUSTOM, key_selector=key, custom_partitioner=part)
