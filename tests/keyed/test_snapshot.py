"""A keyed operator's state and timers survive snapshot / restore into another parallelism
(key groups), as Flink's snapshotState / initializeState."""

from __future__ import annotations

from airflow_flinkchain.graph.model import PartitionSpec, Partitioner
from airflow_flinkchain.runtime.core.elements import Watermark
from airflow_flinkchain.runtime.core.memory import MemoryWriters
from airflow_flinkchain.runtime.core.operator_chain import OperatorChain
from airflow_flinkchain.runtime.core.partitioners import channel_for_key

from tests.runtime_core.helpers import K, build_job, edge, node

from .test_timers import Sessions

KEYS = [f"k{i}" for i in range(12)]


def _keyed_chain(parallelism, subtask):
    hash_edge = PartitionSpec(Partitioner.HASH, key_selector=lambda r: r[0])
    job = build_job([node(0, K.SOURCE), node(1, K.KEYED_PROCESS, Sessions(), name="sessions",
                                             parallelism=parallelism, key_selector=lambda r: r[0]),
                     node(2, K.SINK, name="out", parallelism=parallelism)],
                    [edge(0, 1, hash_edge), edge(1, 2)], chains=[[0], [1, 2]], runtime_mode="streaming")
    writers = MemoryWriters()
    chain = OperatorChain(job, "c1", subtask, "run-1", writers.record_writer_factory, writers.sink_writer_factory)
    chain._setup()
    for op in reversed(chain.all_operators):
        op.open()
    return chain, chain.head, writers


def test_state_and_timers_move_to_the_subtask_owning_their_key_group():
    chain, op, _ = _keyed_chain(1, 0)
    process = op.handler(False)
    for i, key in enumerate(KEYS):
        for ts in (i, i + 1):
            chain.cell.value = ts
            process((key, ts))
    snapshot = op.snapshot_state()

    fired = {}
    for subtask in range(3):
        chain, op, writers = _keyed_chain(3, subtask)
        op.initialize_state([snapshot])
        op.process_watermark(Watermark(1000))
        fired[subtask] = writers.sink_values("out")
    assert sorted(v for vs in fired.values() for v in vs) == sorted((k, 2) for k in KEYS)
    for subtask, values in fired.items():
        assert all(channel_for_key(k, 128, 3) == subtask for k, _ in values)
    assert all(fired.values())  # the keys spread over the three subtasks
