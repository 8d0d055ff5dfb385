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

from airflow_flinkchain.graph.model import OperatorKind
from airflow_flinkchain.io.sinks import CollectSink, FileSink
from airflow_flinkchain.io.sources import CollectionSource, FileSource, SqlSource
from airflow_flinkchain.runtime.core.elements import StreamRecord
from airflow_flinkchain.runtime.core.metrics import utc_now_iso
from airflow_flinkchain.runtime.core.serialize import dumps_plan, loads_plan
from airflow_flinkchain.runtime.exchange.layout import Location, replace
from airflow_flinkchain.runtime.exchange.schema import parse_output_type
from airflow_flinkchain.runtime.local.exchange import LocalChannelWriter, MemoryExchange
from airflow_flinkchain.runtime.pipeline_run import (ChainRunError, PipelineResult, run_id_for, deliver_collected,
                                                     render_overrides, template_context, topological_chains)
from airflow_flinkchain.runtime.stream_task import check_output_types, edge_record_type, run_stream_task


def execute_local(pipeline, run_id: Optional[str] = None, context: Optional[dict] = None) -> PipelineResult:
    """Run every chain of `pipeline` in this process; see the module docstring.
    `context` adds to / overrides the template context of file paths."""
    job = pipeline.plan()
    run_id = run_id_for(job.pipeline, run_id)
    overrides = render_overrides(job, {**template_context(run_id, job.pipeline), **(context or {})})
    plan_bytes = dumps_plan(job)
    exchange = MemoryExchange()
    result = PipelineResult(job.pipeline, run_id, None)
    for chain in topological_chains(job):
        result.metrics[chain.id] = LocalChainRun(job, chain.id, run_id, plan_bytes, exchange, overrides).run()
    result.outputs = dict(exchange.collected)
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
                 overrides: dict):
        self.job = job
        self.chain = job.chain(chain_id)
        self.run_id = run_id
        self.plan_bytes = plan_bytes
        self.exchange = exchange
        self.overrides = overrides
        self.edge_writers: dict[str, list[LocalChannelWriter]] = {e: [] for e in self.chain.out_edges}
        self.sink_writers: dict[str, list] = {}  # sink node key -> writer per subtask, in subtask order
        self.stages: dict[str, Location] = {}  # file sink node key -> staging directory
        self.rows: Optional[list] = None  # a file source's rows

    def path_of(self, node) -> str:
        return (self.overrides.get(node.key) or {}).get("path", node.function.path)

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
            doc["state"] = "success"
        except Exception as exc:
            doc["state"] = "failed"
            doc["error"] = str(exc) or type(exc).__name__
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
            if node.kind is OperatorKind.SINK and not isinstance(node.function, (CollectSink, FileSink)):
                raise TypeError(f"sink {node.name!r}: execute_local() does not run {type(node.function).__name__}; "
                                "run this pipeline with execute() (Spark), or test it with a collect / "
                                "TestingSink in place of this sink")
        head = g.node(self.chain.head_id)
        if head.kind is OperatorKind.SOURCE and isinstance(head.function, FileSource):
            self.rows = read_file_rows(head.function, self.path_of(head), f"source {head.name!r}")

    def file_split(self, subtask: int) -> list:
        n, p = len(self.rows), self.chain.parallelism
        return self.rows[subtask * n // p:(subtask + 1) * n // p]

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
            if isinstance(sink, CollectSink):
                self.exchange.collected[sink.name] = [v for w in writers for v in w.values()]
                outputs.append({"sink": key, "kind": "collect", "path": None, "records": counts.get(key, 0)})
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

    def input_channels(self, subtask: int, edges=None) -> list:
        job = self.run.job
        return self.run.exchange.input_channels(self.run.chain.in_edges if edges is None else edges, subtask,
                                                lambda e: job.chain(job.edge(e).source).parallelism)

    def source_input(self, head, subtask: int) -> tuple[Iterable, bool]:
        source = head.function
        if isinstance(source, FileSource):  # a split holds bare dict rows only
            return self.run.file_split(subtask), True
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

    def record_writer(self, chain_edge, subtask: int) -> LocalChannelWriter:
        job = self.run.job
        output_type, label = edge_record_type(job, chain_edge.id)
        w = LocalChannelWriter(chain_edge.id, subtask, job.chain(chain_edge.target).parallelism, output_type, label)
        self.writers[chain_edge.id] = w
        self.run.edge_writers[chain_edge.id].append(w)
        return w

    def sink_writer(self, node, subtask: int):
        sink = node.function
        if isinstance(sink, CollectSink):
            w = CollectWriter(sink.name, subtask)
        else:
            from airflow_flinkchain.runtime.connectors.file_writer import FileSinkWriter

            w = FileSinkWriter(self.run.file_stage(node), sink.format, subtask, sink.output_type,
                               f"sink {node.name!r}")
        self.writers[node.key] = w
        self.run.sink_writers.setdefault(node.key, []).append(w)
        return w

    def written(self) -> dict:
        return {name: w.records if isinstance(w, LocalChannelWriter) else w.count for name, w in self.writers.items()}


def read_file_rows(source: FileSource, path: str, where: str) -> list[dict]:
    """The rows of a file source as dicts, read with pyarrow (files or a directory;
    names starting with '.' or '_' are skipped, as Spark does)."""
    import pyarrow.csv as pacsv
    import pyarrow.dataset as pads

    loc = Location(path)
    if not loc.exists():
        raise FileNotFoundError(f"{where}: source path {path!r} does not exist (rendered from {source.path!r}); "
                                "create it, or fix the path / its template")
    schema = parse_output_type(source.schema, where)
    options = dict(source.options)
    header = True
    if source.format == "parquet":
        fmt = pads.ParquetFileFormat()
    elif source.format == "json":
        fmt = pads.JsonFileFormat()
    else:
        header = bool(options.pop("header", False))
        sep = options.pop("sep", options.pop("delimiter", ","))
        options.pop("inferSchema", None)
        if schema is not None:  # as Spark: a CSV schema names the columns by position
            read = pacsv.ReadOptions(column_names=schema.names, skip_rows=1 if header else 0)
            convert = pacsv.ConvertOptions(column_types=schema)
        else:
            read, convert = pacsv.ReadOptions(autogenerate_column_names=not header), None
        fmt = pads.CsvFileFormat(parse_options=pacsv.ParseOptions(delimiter=sep), read_options=read,
                                 convert_options=convert)
    if options:
        raise ValueError(f"{where}: option(s) {sorted(options)} of the {source.format} source are not supported "
                         "by execute_local(); run this pipeline with execute() (Spark)")
    table = pads.dataset(loc.path, format=fmt, filesystem=loc.fs).to_table()
    if source.format == "csv" and not header and schema is None:  # Spark's names for headerless CSV
        table = table.rename_columns([f"_c{i}" for i in range(table.num_columns)])
    elif schema is not None and source.format != "csv":
        table = table.select(schema.names).cast(schema)
    return table.to_pylist()
