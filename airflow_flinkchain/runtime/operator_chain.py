"""Flink's OperatorChain + StreamTask.invoke, per parallel subtask."""

from __future__ import annotations

from typing import Any, Iterable

from airflow_flinkchain.planner.jobgraph import JobGraph
from airflow_flinkchain.runtime.interfaces import RecordWriterFactory, SinkWriterFactory
from airflow_flinkchain.runtime.metrics import SubtaskMetrics


def run_subtask(
    job: JobGraph,
    chain_id: str,
    subtask_index: int,
    run_id: str,
    inputs: Iterable[Any],
    record_writer_factory: RecordWriterFactory,
    sink_writer_factory: SinkWriterFactory,
) -> SubtaskMetrics:
    """Run one parallel subtask of a chain over `inputs` and return its counters.

    `inputs`: the head's input elements in order: bare values (no
    timestamp), StreamRecord(value, ts), Watermark(ts). For a source head,
    the split's values; for an exchange input, the channel files merged
    through `WatermarkValve.merge`. End of input pushes MAX_WATERMARK (fires
    remaining timers, emits keyed reduce results) then closes head to tail.
    Raises ChainExecutionError naming operator, chain, subtask, phase, record.
    """
    raise NotImplementedError  # being implemented (interface committed first)
