"""One chain of a plan, run as one Spark job.

Spark is the parallel executor: subtask k of a chain is Spark partition k. The
job builds a DataFrame with exactly `chain.parallelism` partitions (the source
files repartitioned, or `spark.range(p)` as a placeholder when the input comes
from the exchange, a collection or SQL) and runs `mapInArrow` with a function
that, in partition k (TaskContext.partitionId() = subtask index):
  1. builds the subtask's input: its source split (Arrow batches -> dict
     records), the collection (subtask 0; the items travel in the pickled plan,
     broadcast once), a SQL query (subtask 0), or channel k of each input edge
     read with pyarrow from the committed exchange datasets;
  2. runs the core's `run_subtask()` (OperatorChain lifecycle);
  3. writes each out-edge's records per channel, collect/file sinks and staged
     SQL rows with pyarrow straight into the attempt's directory;
  4. yields ONE small Arrow batch: the subtask's metrics as JSON. A user error
     is caught and reported in that batch (not raised through Spark), so the
     driver gets the core's message naming operator, chain, subtask and record,
     and deterministic user errors are not retried by Spark; infrastructure
     failures (lost executor) still fail the Spark task, which Spark retries and
     whose retry overwrites the same part files.
The driver collects the metrics and COMMITS (see `exchange_fs`): SQL sinks in one
transaction per table, then every dataset renamed from the attempt onto its
final path, replacing earlier attempts. On any failure the attempt directory
is deleted: nothing of a failed attempt becomes visible. Data moves as Arrow
batches between Spark and Python, never as pickled Spark rows.

Templated paths (`{{ ds }}`) are rendered by the caller and passed as
`overrides = {node_key: {"path": rendered}}`.
"""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Optional

from airflow_flinkchain.graph.model import OperatorKind
from airflow_flinkchain.io.sinks import CollectSink, FileSink, SqlSink
from airflow_flinkchain.io.sources import CollectionSource, FileSource, SqlSource
from airflow_flinkchain.runtime.exchange_fs import ExchangeArea, Location, replace
from airflow_flinkchain.runtime.serialize import dumps_plan
from airflow_flinkchain.runtime.exchange_subtask import SubtaskSpec, run_partition

METRICS_SCHEMA = "metrics string"


class ChainRunError(RuntimeError):
    """A chain attempt failed; nothing it wrote was committed."""

    def __init__(self, message: str, metrics: Optional[dict] = None):
        super().__init__(message)
        self.metrics = metrics


@dataclass
class ChainRunResult:
    chain_id: str
    run_id: str
    attempt_id: str
    metrics: dict
    outputs: list = field(default_factory=list)


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def _path_of(node, overrides: dict) -> str:
    path = (overrides.get(node.key) or {}).get("path", node.function.path)
    if "{{" in path or "{%" in path:
        raise ValueError(f"operator {node.name!r}: path {path!r} is an unrendered template; the caller must "
                         f"render it (overrides={{{node.key!r}: {{'path': ...}}}}) - execute() and the Airflow "
                         "task do this")
    return path


def build_spec(job, chain_id: str, run_id: str, area: ExchangeArea, attempt_id: str, overrides: dict) -> SubtaskSpec:
    """Everything a subtask needs besides the plan (picklable, small)."""
    g = job.stream_graph
    chain = job.chain(chain_id)
    attempt = area.attempt(chain_id, attempt_id)
    inputs = [(e, area.edge(e), job.chain(job.edge(e).source).parallelism) for e in chain.in_edges]
    outputs = {}
    for e in chain.out_edges:
        ce = job.edge(e)
        src = g.node(ce.stream_edge.source_id)
        outputs[e] = {"location": attempt.edge(e), "channels": job.chain(ce.target).parallelism,
                      "output_type": src.output_type if ce.output_tag is None else ce.stream_edge.output_type,
                      "label": f"operator {src.name!r} writing edge {e!r}"}
    sinks = {}
    for nid in chain.node_ids:
        node = g.node(nid)
        if node.kind is not OperatorKind.SINK:
            continue
        d = node.function
        if isinstance(d, CollectSink):
            sinks[node.key] = {"kind": "collect", "name": d.name, "location": attempt.collect(d.name),
                               "final": area.collect(d.name)}
        elif isinstance(d, FileSink):
            target = Location(_path_of(node, overrides))
            sinks[node.key] = {"kind": "file", "format": d.format, "output_type": d.output_type,
                               "location": attempt.file_sink_stage(target), "final": target,
                               "label": f"sink {node.name!r}"}
        elif isinstance(d, SqlSink):
            sinks[node.key] = {"kind": "sql", "location": attempt.stage(node.key), "label": f"sink {node.name!r}"}
        else:
            raise TypeError(f"sink {node.name!r}: unsupported sink descriptor {d!r}")
    head = g.node(chain.head_id)
    source = None
    if head.kind is OperatorKind.SOURCE:
        d = head.function
        if isinstance(d, CollectionSource):
            source = {"kind": "collection"}
        elif isinstance(d, FileSource):
            source = {"kind": "file"}
        elif isinstance(d, SqlSource):
            from airflow_flinkchain.io.sql import resolve_url

            source = {"kind": "sql", "url": resolve_url(d.url, d.conn_id, f"source {head.name!r}"),
                      "query": d.query, "params": dict(d.params)}
        else:
            raise TypeError(f"source {head.name!r}: unsupported source descriptor {d!r}")
    return SubtaskSpec(chain_id=chain_id, run_id=run_id, head_key=head.key, source=source,
                       inputs=inputs, outputs=outputs, sinks=sinks)


def _input_dataframe(spark, job, chain, overrides: dict):
    head = job.stream_graph.node(chain.head_id)
    if head.kind is OperatorKind.SOURCE and isinstance(head.function, FileSource):
        from airflow_flinkchain.io.files import read_source_dataframe

        return read_source_dataframe(spark, head.function, _path_of(head, overrides), chain.parallelism,
                                     f"source {head.name!r}")
    return spark.range(0, chain.parallelism, 1, numPartitions=chain.parallelism)


def run_chain(spark, job, chain_id: str, run_id: str, exchange_root: str, dag_id: Optional[str] = None,
              attempt_id: Optional[str] = None, overrides: Optional[dict] = None,
              plan_bytes: Optional[bytes] = None) -> ChainRunResult:
    """Run one attempt of one chain and commit its outputs; raises ChainRunError
    (after writing the failed metrics document) when it fails."""
    dag_id = dag_id or job.pipeline
    attempt_id = attempt_id or f"{time.strftime('%Y%m%dT%H%M%S')}-{uuid.uuid4().hex[:8]}"
    overrides = overrides or {}
    area = ExchangeArea(exchange_root, dag_id, run_id)
    chain = job.chain(chain_id)
    doc = {"pipeline": job.pipeline, "dag_id": dag_id, "run_id": run_id, "chain": chain_id,
           "attempt": attempt_id, "spark_app_id": spark.sparkContext.applicationId, "state": "running",
           "error": None, "started_at": _now(), "ended_at": None, "operators": [], "outputs": []}
    attempt = area.attempt(chain_id, attempt_id)
    spec = None
    try:
        _check_output_types(job, chain)
        attempt.clear_stale()
        spec = build_spec(job, chain_id, run_id, area, attempt_id, overrides)
        plan = spark.sparkContext.broadcast(plan_bytes if plan_bytes is not None else dumps_plan(job))
        df = _input_dataframe(spark, job, chain, overrides)

        def per_partition(batches):
            return run_partition(plan, spec, batches)

        rows = df.mapInArrow(per_partition, METRICS_SCHEMA).collect()
        reports = sorted((json.loads(r["metrics"]) for r in rows), key=lambda r: r["subtask"])
        for r in reports:
            doc["operators"].extend(r.get("operators", []))
        errors = [r for r in reports if r.get("error")]
        if errors:
            raise ChainRunError(errors[0]["error"])
        if len(reports) != chain.parallelism:
            raise ChainRunError(f"chain {chain_id!r}: {len(reports)} of {chain.parallelism} subtasks reported")
        doc["outputs"] = _commit(job, spec, area, run_id, reports)
        doc["state"] = "success"
    except Exception as exc:
        doc["state"] = "failed"
        doc["error"] = _error_text(exc)
        raise ChainRunError(doc["error"], doc) from exc
    finally:
        doc["ended_at"] = _now()
        try:
            attempt.discard()
            # File sinks stage next to their target (same filesystem, rename commit): a failed
            # attempt's staged files must not stay behind either.
            for sink in (spec.sinks.values() if spec is not None else ()):
                if sink["kind"] == "file" and sink["location"].exists():
                    sink["location"].delete()
        finally:
            area.metrics(chain_id).write_text(json.dumps(doc, indent=1, default=str))
    return ChainRunResult(chain_id, run_id, attempt_id, doc, doc["outputs"])


def _check_output_types(job, chain) -> None:
    """Start of the run: every output_type of the chain's operators (and of its file/SQL
    sinks) must parse, whether or not a record ever crosses an exchange or reaches a file."""
    from airflow_flinkchain.runtime.exchange_types import parse_output_type

    g = job.stream_graph
    for nid in chain.node_ids:
        node = g.node(nid)
        declared = [(node.output_type, f"operator {node.name!r}")]
        if node.kind is OperatorKind.SINK:
            declared.append((getattr(node.function, "output_type", None), f"sink {node.name!r}"))
        for output_type, label in declared:
            if output_type is not None:
                parse_output_type(output_type, label)
    for e in chain.out_edges:  # typed side outputs (OutputTag(..., output_type=...)) leaving the chain
        ce = job.edge(e)
        if ce.output_tag is not None and ce.stream_edge.output_type is not None:
            parse_output_type(ce.stream_edge.output_type, f"side output {ce.output_tag!r} of edge {e!r}")


def _error_text(exc: BaseException) -> str:
    text = str(exc)
    marker = "ChainExecutionError: "  # a Spark-wrapped Python traceback: keep the core's message
    if marker in text:
        text = text.rsplit(marker, 1)[1].strip().splitlines()[0]
    return text or type(exc).__name__


def _commit(job, spec: SubtaskSpec, area: ExchangeArea, run_id: str, reports: list) -> list:
    counts: dict[str, int] = {}
    for r in reports:
        for name, n in r.get("written", {}).items():
            counts[name] = counts.get(name, 0) + n
    outputs = []
    g = job.stream_graph
    for key, sink in spec.sinks.items():  # SQL first: the one commit that can fail for outside reasons
        if sink["kind"] == "sql":
            from airflow_flinkchain.io.sql import commit_table, resolve_url
            from airflow_flinkchain.runtime.elements import StreamRecord, Watermark
            from airflow_flinkchain.runtime.exchange import open_channel
            from airflow_flinkchain.runtime.exchange_types import parse_output_type

            node = g.node_by_key(key)
            d = node.function
            rows = []
            for f in open_channel(sink["location"], f"stage:{key}", None) if sink["location"].exists() else []:
                # staged elements: bare values, StreamRecords (timestamped), Watermarks (skipped)
                rows.extend(el.value if type(el) is StreamRecord else el
                            for el in f.elements() if type(el) is not Watermark)
            url = resolve_url(d.url, d.conn_id, sink["label"])
            schema = parse_output_type(d.output_type, sink["label"])
            if schema is not None and rows:  # a declared type is checked, never left to the database
                from airflow_flinkchain.runtime.exchange_types import records_to_batch

                records_to_batch(rows, None, schema, sink["label"])
            n = commit_table(url, d.table, d.run_id_column, run_id, rows, schema, sink["label"],
                             dag_id_column=getattr(d, "dag_id_column", None), dag_id=area.dag_id)
            outputs.append({"sink": key, "kind": "sql", "path": d.table, "records": n})
    for e in spec.outputs:
        replace(spec.outputs[e]["location"], area.edge(e), area.trash())
        outputs.append({"edge": e, "path": area.edge(e).uri, "records": counts.get(e, 0)})
    for key, sink in spec.sinks.items():
        if sink["kind"] in ("collect", "file"):
            final = sink["final"]
            trash = area.trash() if sink["kind"] == "collect" else final.sibling(f".{final.name}.flinkchain-trash")
            replace(sink["location"], final, trash)
            outputs.append({"sink": key, "kind": sink["kind"], "path": final.uri, "records": counts.get(key, 0)})
    return outputs
