"""The executor side of a chain job: one Spark partition = one parallel subtask.

`run_partition` is what `mapInArrow` runs in partition k: it builds the
subtask's input (source split, or channel k of each input edge), hands the
core's `run_subtask` writer factories that write straight into the attempt
directory, and yields one Arrow batch holding the subtask's report as JSON:
{"subtask", "operators": [per-operator counters], "written": {edge id or sink
key: records}, "error": message or absent}. See `spark_job` for the protocol.
"""

from __future__ import annotations

import json
from itertools import chain
from dataclasses import dataclass, field
from typing import Any, Iterator, Optional

import pyarrow as pa

from airflow_flinkchain.runtime.exchange import DatasetWriter, merged_input, open_channel
from airflow_flinkchain.runtime.serialize import loads_plan

REPORT_SCHEMA = pa.schema([("metrics", pa.string())])
_PLANS: dict[int, tuple[bytes, Any]] = {}


@dataclass
class SubtaskSpec:
    """What every subtask of one chain attempt needs besides the plan."""

    chain_id: str
    run_id: str
    head_key: str
    source: Optional[dict]  # {"kind": "collection"|"file"|"sql", ...} or None (exchange input)
    inputs: list = field(default_factory=list)  # [(edge id, committed Location, upstream parallelism)]
    outputs: dict = field(default_factory=dict)  # edge id -> {location, channels, output_type, label}
    sinks: dict = field(default_factory=dict)  # sink node key -> {kind, location, ...}
    runner: Any = None  # run_subtask stand-in (None: the core's); a seam for runtime tests


class DatasetSink:
    """A SinkWriter that writes a single-channel dataset (collect, staged SQL rows)."""

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


def _plan(data: bytes) -> Any:
    cached = _PLANS.get(id(data))
    if cached is None or cached[0] is not data:
        _PLANS.clear()  # one plan per worker at a time: python workers are reused across jobs
        cached = _PLANS[id(data)] = (data, loads_plan(data))
    return cached[1]


def subtask_inputs(job, spec: SubtaskSpec, k: int, batches: Iterator[pa.RecordBatch]):
    src = spec.source
    if src is None:
        files = []
        for edge_id, location, upstream_parallelism in spec.inputs:
            files.extend(open_channel(location, edge_id, k, upstream_parallelism))
        return merged_input(files)
    if src["kind"] == "collection":
        return job.stream_graph.node_by_key(spec.head_key).function.items if k == 0 else ()
    if src["kind"] == "file":  # bare dict rows, one to_pylist per Arrow batch
        return chain.from_iterable(map(pa.RecordBatch.to_pylist, batches))
    if src["kind"] == "sql":
        from airflow_flinkchain.io.sql import read_query

        return read_query(src["url"], src["query"], src["params"]) if k == 0 else ()
    raise ValueError(f"unknown source kind {src['kind']!r}")


def writer_factories(spec: SubtaskSpec, written: dict):
    def record_writer(chain_edge, subtask: int) -> DatasetWriter:
        o = spec.outputs[chain_edge.id]
        w = DatasetWriter(o["location"], chain_edge.id, subtask, o["channels"], o["output_type"], o["label"])
        written[chain_edge.id] = w
        return w

    def sink_writer(node, subtask: int):
        s = spec.sinks[node.key]
        if s["kind"] == "collect":
            w = DatasetSink(DatasetWriter(s["location"], f"collect:{s['name']}", subtask, 1, channel_dirs=False))
        elif s["kind"] == "sql":
            w = DatasetSink(DatasetWriter(s["location"], f"stage:{node.key}", subtask, 1, channel_dirs=False,
                                          label=s["label"]))
        else:
            from airflow_flinkchain.io.files import FileSinkWriter

            w = FileSinkWriter(s["location"], s["format"], subtask, s["output_type"], s["label"])
        written[node.key] = w
        return w

    return record_writer, sink_writer


def run_partition(plan_broadcast, spec: SubtaskSpec, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    from pyspark import TaskContext

    k = TaskContext.get().partitionId()
    report: dict[str, Any] = {"subtask": k}
    written: dict[str, Any] = {}
    try:
        job = _plan(plan_broadcast.value)
        inputs = subtask_inputs(job, spec, k, batches)
        record_writer, sink_writer = writer_factories(spec, written)
        if spec.runner is None:
            from airflow_flinkchain.runtime.operator_chain import run_subtask
        else:
            run_subtask = spec.runner
        if spec.source is not None and spec.source["kind"] == "file":
            # a file split holds bare values only: skip the per-element StreamRecord/Watermark dispatch
            metrics = run_subtask(job, spec.chain_id, k, spec.run_id, inputs, record_writer, sink_writer,
                                  plain_values=True)
        else:
            metrics = run_subtask(job, spec.chain_id, k, spec.run_id, inputs, record_writer, sink_writer)
        report["operators"] = metrics.to_dict()
        report["written"] = {name: _count(w) for name, w in written.items()}
    except Exception as exc:  # reported to the driver, which fails the attempt with this message
        text = str(exc)
        if type(exc).__name__ != "ChainExecutionError":
            text = f"chain {spec.chain_id!r}, subtask {k}: {type(exc).__name__}: {text}"
        report["error"] = text
    for _ in batches:  # drain the placeholder input
        pass
    yield pa.RecordBatch.from_pylist([{"metrics": json.dumps(report, default=str)}], schema=REPORT_SCHEMA)


def _count(writer: Any) -> int:
    if isinstance(writer, DatasetWriter):
        return writer.records
    return writer.count
