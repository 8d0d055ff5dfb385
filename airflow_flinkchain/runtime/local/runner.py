"""`StreamPipeline.execute_local()`: a whole pipeline in this process, without Spark.

The chains run in topological order, each parallel subtask in turn, through
the same `stream_task.run_stream_task` and chain runtime (OperatorChain,
operators, outputs, partitioners, record writer, watermark valve) as a chain
task on Spark. Two things differ:
* the exchange between chains is in memory (`runtime.local.exchange`): per
  edge, upstream subtask and channel, the records and watermarks in order;
  downstream subtask k reads channel k of each input edge, merged as on Spark;
* a file source is read with pyarrow and split into contiguous row ranges,
  one per subtask (Spark repartitions the rows its own way; CSV types are
  inferred by pyarrow).

As on Spark, the plan is serialized once and every subtask runs its own
deserialized copy: user functions must pickle, each subtask has its own
instances, and the objects of the DAG file are never called. A failing chain
raises `ChainRunError` (its `.metrics` is the chain's metrics document) and
none of its outputs become visible. Pipeline hooks (`on_setup`/`on_dispose`)
are Airflow tasks: neither runner calls them.

Connectors: collection, SQL and file sources (Parquet, CSV, JSON lines);
collect and file sinks. A SQL sink is refused with an error naming it: run
such a pipeline with `execute()`.
"""

from __future__ import annotations

import time
import uuid
from typing import Any, Iterable, Optional

from airflow_flinkchain.runtime.core.arrow_records import batch_records
from airflow_flinkchain.graph.model import OperatorKind
from airflow_flinkchain.io.sinks import CollectSink, FileSink, PrintSink, RowFormatFileSink
from airflow_flinkchain.io.sources import CollectionSource, FileSource, SqlSource, TextLineFileSource, UnboundedSource
from airflow_flinkchain.runtime.connectors.base import ConnectorContext, source_reader
from airflow_flinkchain.runtime.connectors.collect import PrintingWriter, print_lines
from airflow_flinkchain.runtime.connectors.text_lines import TextLineSinkWriter, commit_directory
from airflow_flinkchain.runtime.connectors.file_rows import read_file_table
from airflow_flinkchain.runtime.connectors.file_splits import pieces_layout, subtask_pieces
from airflow_flinkchain.runtime.core.splits import SourceSplits
from airflow_flinkchain.runtime.core.batches import with_split_starts
from airflow_flinkchain.runtime.connectors.published import BatchRun, batch_writer_of, staged_writer
from airflow_flinkchain.runtime.connectors.unbounded import plan_stream_source
from airflow_flinkchain.runtime.core.elements import StreamRecord
from airflow_flinkchain.runtime.core.metrics import utc_now_iso
from airflow_flinkchain.runtime.core.serialize import dumps_plan, loads_plan
from airflow_flinkchain.runtime.exchange.layout import Location, replace
from airflow_flinkchain.runtime.local.exchange import LocalChannelWriter, MemoryExchange
from airflow_flinkchain.runtime.pipeline_run import (ChainRunError, PipelineResult, run_id_for, deliver_collected,
                                                     render_overrides, template_context, topological_chains)
from airflow_flinkchain.runtime.stream_run import ChainStreamStep, begin_stream_run, commit_stream_run, stream_result
from airflow_flinkchain.runtime.connectors.inferred_types import with_inferred_types
from airflow_flinkchain.runtime.stream_task import check_output_types, edge_record_type, run_stream_task


def execute_local(pipeline, run_id: Optional[str] = None, context: Optional[dict] = None,
                  drain: bool = False) -> PipelineResult:
    """Run every chain of `pipeline` in this process; see the module docstring.
    `context` adds to / overrides the template context of file paths. A pipeline with a
    `checkpoint_dir` runs one stream run (`runtime.stream_run`); `drain` ends it with the
    MAX watermark."""
    job = pipeline.plan()
    run_id = run_id_for(job.pipeline, run_id)
    overrides = render_overrides(job, {**template_context(run_id, job.pipeline), **(context or {})})
    job = with_inferred_types(job, overrides)  # undeclared Parquet sources: their files' schema
    plan_bytes = dumps_plan(job)
    exchange = MemoryExchange()
    result = PipelineResult(job.pipeline, run_id, None)
    stream = None
    checkpoint_dir = getattr(pipeline, "checkpoint_dir", None)
    if checkpoint_dir is not None:
        stream = begin_stream_run(job, checkpoint_dir, run_id, drain=drain,
                                  allow_non_restored_state=pipeline.allow_non_restored_state)
    elif drain:
        raise ValueError(f"pipeline {job.pipeline!r}: drain=True needs a checkpoint_dir (a stream run)")
    for chain in topological_chains(job):
        result.metrics[chain.id] = LocalChainRun(job, chain.id, run_id, plan_bytes, exchange, overrides,
                                                 stream).run()
    result.outputs = dict(exchange.collected)
    if stream is not None:
        result.stream = stream_result(commit_stream_run(job, stream))
    deliver_collected(job, result)
    return result



class CollectWriter:
    """A collect sink's records of one subtask: one channel of the in-memory
    exchange, so they are pickled when written, as on Spark."""

    def __init__(self, name: str, subtask: int):
        self.channel = LocalChannelWriter(f"collect:{name}", subtask, 1)

    def write(self, value: Any, timestamp: Optional[int] = None) -> None:
        self.channel.write(0, value, timestamp)

    def close(self) -> None:
        self.channel.close()

    @property
    def count(self) -> int:
        return self.channel.records

    def values(self) -> list:
        return [el.value if type(el) is StreamRecord else el for el in self.channel.channel(0).elements()]


class LocalChainRun:
    """One run of one chain: its subtasks in turn, then the commit of its outputs."""

    def __init__(self, job, chain_id: str, run_id: str, plan_bytes: bytes, exchange: MemoryExchange,
                 overrides: dict, stream=None):
        self.job = job
        self.chain = job.chain(chain_id)
        self.run_id = run_id
        self.plan_bytes = plan_bytes
        self.exchange = exchange
        self.step = ChainStreamStep(stream, job, chain_id) if stream is not None else None
        self.overrides = self.step.sink_overrides(overrides) if self.step is not None else overrides
        self.source = None  # the head's reader in a stream run / of an UnboundedSource (None: read below)
        self.edge_writers: dict[str, list[LocalChannelWriter]] = {e: [] for e in self.chain.out_edges}
        self.sink_writers: dict[str, list] = {}  # sink node key -> writer per subtask, in subtask order
        self.stages: dict[str, Location] = {}  # file sink node key -> staging directory
        self.table: Any = None  # a file source's rows, as read (a pyarrow Table)
        self.file_rows: list = []  # rows of each of its files, in name order

    def path_of(self, node) -> str:
        return (self.overrides.get(node.key) or {}).get("path", node.function.path)

    def stage_of(self, node) -> Optional[str]:
        """Where a published sink of a stream run stages its records (None: not one)."""
        return (self.overrides.get(node.key) or {}).get("stage")

    def run(self) -> dict:
        job, chain = self.job, self.chain
        doc = {"pipeline": job.pipeline, "dag_id": job.pipeline, "run_id": self.run_id, "chain": chain.id,
               "attempt": "local", "spark_app_id": None, "state": "running", "error": None,
               "started_at": utc_now_iso(), "ended_at": None, "operators": [], "outputs": []}
        try:
            check_output_types(job, chain.id)
            self._check_connectors()
            reports = [run_stream_task(self._load_job, chain.id, k, self.run_id, LocalTaskIO(self))
                       for k in range(chain.parallelism)]
            for r in reports:
                doc["operators"].extend(r.get("operators", []))
            errors = [r for r in reports if r.get("error")]
            if errors:
                raise ChainRunError(errors[0]["error"])
            doc["outputs"] = self._commit(reports)
            if self.step is not None:
                doc["stream"] = self.step.commit(reports)
                doc["outputs"] = self.step.staged_outputs(doc["outputs"])
            doc["state"] = "success"
        except Exception as exc:
            doc["state"] = "failed"
            doc["error"] = str(exc) or type(exc).__name__
            if self.step is not None:
                self.step.discard()
            raise ChainRunError(doc["error"], doc) from exc
        finally:
            doc["ended_at"] = utc_now_iso()
            for stage in self.stages.values():  # committed stages were moved away
                if stage.exists():
                    stage.delete()
        return doc

    def _load_job(self):
        return loads_plan(self.plan_bytes)  # each subtask its own copy of the user functions

    def _check_connectors(self) -> None:
        g = self.job.stream_graph
        for nid in self.chain.node_ids:
            node = g.node(nid)
            if (node.kind is OperatorKind.SINK and not isinstance(node.function, (CollectSink, FileSink))
                    and self.stage_of(node) is None and batch_writer_of(node.function) is None):
                raise TypeError(f"sink {node.name!r}: execute_local() does not run {type(node.function).__name__}; "
                                "run this pipeline with execute() (Spark), or test it with a collect / "
                                "TestingSink in place of this sink")
        head = g.node(self.chain.head_id)
        if head.kind is not OperatorKind.SOURCE:
            return
        label = f"source {head.name!r}"
        path = self.path_of(head) if isinstance(head.function, FileSource) else None
        if self.step is not None:
            self.source = self.step.source_reader(head, path, label)
        elif isinstance(head.function, UnboundedSource):
            self.source, _ = plan_stream_source(head.function, None, None, self.chain.parallelism, label)
        if self.source is None and isinstance(head.function, TextLineFileSource):
            self.source = source_reader(head.function, ConnectorContext(head.name, head.key, label, path, None, None,
                                                                         self.chain.parallelism))
        elif self.source is None and isinstance(head.function, FileSource):
            self.table, self.file_rows = read_file_table(head.function, path, label)

    def file_split(self, subtask: int) -> tuple[list, tuple[bool, bool]]:
        """Subtask k's splits of the file source (`file_splits`): a pyarrow Table per piece of a
        file, and their `pieces_layout`."""
        starts = [sum(self.file_rows[:i]) for i in range(len(self.file_rows))]
        pieces = subtask_pieces(self.file_rows, subtask, self.chain.parallelism)
        return ([self.table.slice(starts[i] + lo, hi - lo) for i, lo, hi in pieces],
                pieces_layout(self.file_rows, pieces))

    def file_stage(self, node) -> Location:
        stage = self.stages.get(node.key)
        if stage is None:
            target = Location(self.path_of(node))
            stage = self.stages[node.key] = target.sibling(f".{target.name}.flinkchain-local-{uuid.uuid4().hex[:8]}")
        return stage

    def _commit(self, reports: list) -> list:
        counts: dict[str, int] = {}
        for r in reports:
            for name, n in r.get("written", {}).items():
                counts[name] = counts.get(name, 0) + n
        outputs = []
        for e, writers in self.edge_writers.items():
            self.exchange.commit_edge(e, writers)
            outputs.append({"edge": e, "path": None, "records": counts.get(e, 0)})
        g = self.job.stream_graph
        for key, writers in self.sink_writers.items():
            sink = g.node_by_key(key).function
            if self.stage_of(g.node_by_key(key)) is not None:  # moves with the chain's staging
                outputs.append({"sink": key, "kind": "staged", "path": self.stage_of(g.node_by_key(key)),
                                "records": counts.get(key, 0)})
            elif batch_writer_of(sink) is not None:  # a table sink of a batch run
                rows = [v for w in writers for v in w.values()]
                run = BatchRun(self.job.pipeline, self.run_id, f"sink {g.node_by_key(key).name!r}")
                outputs.append({"sink": key, **batch_writer_of(sink)(sink, rows, run)})
            elif isinstance(sink, CollectSink):
                self.exchange.collected[sink.name] = [v for w in writers for v in w.values()]
                if isinstance(sink, PrintSink):
                    print_lines(self.exchange.collected[sink.name])
                outputs.append({"sink": key, "kind": "collect", "path": None, "records": counts.get(key, 0)})
            elif isinstance(sink, RowFormatFileSink):
                final = Location(self.path_of(g.node_by_key(key)))
                commit_directory(self.stages[key], final)
                outputs.append({"sink": key, "kind": "file", "path": final.uri, "records": counts.get(key, 0)})
            else:
                final = Location(self.path_of(g.node_by_key(key)))
                if sink.format != "json" and sink.output_type is None:  # as the Spark file sink's commit
                    from airflow_flinkchain.runtime.connectors.schema_widening import unify_parts

                    unify_parts(self.stages[key], sink.format, f"sink {key!r}")
                replace(self.stages[key], final, final.sibling(f".{final.name}.flinkchain-trash"))
                outputs.append({"sink": key, "kind": "file", "path": final.uri, "records": counts.get(key, 0)})
        return outputs


class LocalTaskIO:
    """`stream_task.StreamTaskIO` of one subtask run in process."""

    def __init__(self, run: LocalChainRun):
        self.run = run
        self.writers: dict[str, Any] = {}
        self.checkpoint = run.step.subtask_checkpoint() if run.step is not None else None

    def input_channels(self, subtask: int, edges=None) -> list:
        job = self.run.job
        return self.run.exchange.input_channels(self.run.chain.in_edges if edges is None else edges, subtask,
                                                lambda e: job.chain(job.edge(e).source).parallelism)

    def source_input(self, head, subtask: int) -> tuple[Iterable, bool]:
        if self.run.source is not None:
            return self.run.source.read(subtask, iter(())), self.run.source.plain_values
        source = head.function
        if isinstance(source, FileSource):  # a split holds bare dict rows only
            tables, layout = self.run.file_split(subtask)
            return SourceSplits([batch_records(t) for t in tables], source.monitor, *layout), True
        if subtask != 0:  # collection and SQL sources are not parallel
            return (), False
        if isinstance(source, CollectionSource):
            return source.items, False
        if isinstance(source, SqlSource):
            from airflow_flinkchain.runtime.connectors.sql import read_query, resolve_url

            url = resolve_url(source.url, source.conn_id, f"source {head.name!r}")
            return read_query(url, source.query, dict(source.params)), False
        raise TypeError(f"source {head.name!r}: {type(source).__name__} is not supported by execute_local(); "
                        "run this pipeline with execute() (Spark)")

    def source_batches(self, head, subtask: int) -> Optional[Iterable]:
        if self.run.source is not None:  # a stream run's reader: a monitored file source reads batches
            read_batches = getattr(self.run.source, "read_batches", None)
            return None if read_batches is None else read_batches(subtask, iter(()))
        if not isinstance(head.function, FileSource):
            return None
        tables, layout = self.run.file_split(subtask)
        return with_split_starts([t.to_batches() for t in tables], head.function.monitor, *layout)

    def record_writer(self, chain_edge, subtask: int) -> LocalChannelWriter:
        job = self.run.job
        output_type, label = edge_record_type(job, chain_edge.id)
        w = LocalChannelWriter(chain_edge.id, subtask, job.chain(chain_edge.target).parallelism, output_type, label)
        self.writers[chain_edge.id] = w
        self.run.edge_writers[chain_edge.id].append(w)
        return w

    def sink_writer(self, node, subtask: int):
        sink = node.function
        stage = self.run.stage_of(node)
        if stage is not None:
            w = staged_writer(Location(stage), node.key, subtask, f"sink {node.name!r}")
        elif batch_writer_of(sink) is not None:
            w = CollectWriter(f"table:{node.key}", subtask)
        elif isinstance(sink, PrintSink):
            w = PrintingWriter(CollectWriter(sink.name, subtask), sink, subtask, node.parallelism)
        elif isinstance(sink, CollectSink):
            w = CollectWriter(sink.name, subtask)
        elif isinstance(sink, RowFormatFileSink):
            w = TextLineSinkWriter(self.run.file_stage(node), sink, subtask)
        else:
            from airflow_flinkchain.runtime.connectors.file_writer import FileSinkWriter

            w = FileSinkWriter(self.run.file_stage(node), sink.format, subtask, sink.output_type,
                               f"sink {node.name!r}")
        self.writers[node.key] = w
        self.run.sink_writers.setdefault(node.key, []).append(w)
        return w

    def written(self) -> dict:
        return {name: w.records if isinstance(w, LocalChannelWriter) else w.count for name, w in self.writers.items()}
