"""What partition k of a chain job runs: subtask k of the chain, through
`stream_task.run_stream_task` with the exchange datasets as its IO; it yields the
subtask's report as JSON (in one Arrow batch under `mapInArrow`, whose partitions
carry a source's Spark-read input; as one string under `mapPartitions`, for subtasks
that read their input by themselves: no Arrow stream to set up)."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator, Optional, Sequence

import pyarrow as pa

from airflow_flinkchain.runtime.core.serialize import loads_plan
from airflow_flinkchain.runtime.core.timings import Marks, process_start_time
from airflow_flinkchain.runtime.exchange.dataset import DatasetWriter, open_channel
from airflow_flinkchain.runtime.stream_task import run_stream_task

REPORT_SCHEMA = pa.schema([("metrics", pa.string())])
_PLANS: dict[int, tuple[bytes, Any]] = {}


@dataclass
class SubtaskSpec:
    """What every subtask of one chain attempt needs besides the plan."""

    chain_id: str
    run_id: str
    head_key: str
    source: Optional[Any]  # the head's SourceReader (runtime.connectors), or None (exchange input)
    inputs: list = field(default_factory=list)  # [(edge id, committed Location, upstream parallelism)]
    outputs: dict = field(default_factory=dict)  # edge id -> {location, channels, output_type, label}
    sinks: dict = field(default_factory=dict)  # sink node key -> its SinkConnector
    runner: Any = None  # run_subtask stand-in (None: the core's); a seam for runtime tests
    checkpoint: Any = None  # a stream run's SubtaskCheckpoint (runtime.exchange.checkpoints), or None


class SparkTaskIO:
    """Exchange datasets: input from the committed datasets, output into the attempt
    directory; a source reads the Arrow batches Spark hands the partition (its
    SourceReader's input_dataframe), or reads by itself."""

    def __init__(self, spec: SubtaskSpec, batches: Iterator[pa.RecordBatch]):
        self.spec = spec
        self.batches = batches
        self.writers: dict[str, Any] = {}
        self.checkpoint = spec.checkpoint

    def input_channels(self, subtask: int, edges: Optional[Sequence[str]] = None) -> list:
        files = []
        for edge_id, location, upstream_parallelism in self.spec.inputs:
            if edges is not None and edge_id not in edges:
                continue
            files.extend(open_channel(location, edge_id, subtask, upstream_parallelism))
        return files

    def source_input(self, head, subtask: int) -> tuple[Iterable, bool]:
        reader = self.spec.source
        return reader.read(subtask, self.batches), reader.plain_values

    def source_batches(self, head, subtask: int) -> Optional[Iterable]:
        read_batches = getattr(self.spec.source, "read_batches", None)
        return None if read_batches is None else read_batches(subtask, self.batches)

    def record_writer(self, chain_edge, subtask: int) -> DatasetWriter:
        o = self.spec.outputs[chain_edge.id]
        w = DatasetWriter(o["location"], chain_edge.id, subtask, o["channels"], o["output_type"], o["label"])
        self.writers[chain_edge.id] = w
        return w

    def sink_writer(self, node, subtask: int):
        w = self.writers[node.key] = self.spec.sinks[node.key].create_writer(subtask)
        return w

    def written(self) -> dict:
        return {name: w.records if isinstance(w, DatasetWriter) else w.count for name, w in self.writers.items()}


def _plan(data: bytes) -> Any:
    cached = _PLANS.get(id(data))
    if cached is None or cached[0] is not data:
        _PLANS.clear()  # one plan per worker at a time: python workers are reused across jobs
        cached = _PLANS[id(data)] = (data, loads_plan(data))
    return cached[1]


def run_partition(plan_broadcast, spec: SubtaskSpec, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """`mapInArrow`'s function: the partition's Arrow batches are the source's input."""
    yield pa.RecordBatch.from_pylist([{"metrics": subtask_report(plan_broadcast, spec, batches)}],
                                     schema=REPORT_SCHEMA)


def run_placeholder_partition(plan_broadcast, spec: SubtaskSpec, placeholder: Iterator[Any]) -> Iterator[str]:
    """`mapPartitions`'s function, for a chain whose subtasks read their input by themselves."""
    yield subtask_report(plan_broadcast, spec, iter(()))
    for _ in placeholder:
        pass


def subtask_report(plan_broadcast, spec: SubtaskSpec, batches: Iterator[pa.RecordBatch]) -> str:
    """Subtask k (the Spark partition) of the chain; its report as JSON."""
    from pyspark import TaskContext

    marks = Marks(worker_daemon_started=process_start_time(os.getppid()), worker_started=process_start_time())
    marks.mark("partition_started")
    k = TaskContext.get().partitionId()

    def load_plan():
        job = _plan(plan_broadcast.value)
        marks.mark("plan_loaded")
        return job

    report = run_stream_task(load_plan, spec.chain_id, k, spec.run_id, SparkTaskIO(spec, batches), spec.runner)
    for _ in batches:  # drain the placeholder input
        pass
    marks.mark("subtask_done")
    report["timings"] = marks.to_dict()
    return json.dumps(report, default=str)
