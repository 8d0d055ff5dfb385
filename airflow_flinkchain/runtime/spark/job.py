"""One chain of a plan, run as one Spark job.

Spark is the parallel executor: subtask k of a chain is Spark partition k. The
job has exactly `chain.parallelism` partitions: `mapInArrow` over a DataFrame of
the source files when Spark reads them, else `mapPartitions` over one placeholder
element per subtask (the input comes from the exchange, a collection, SQL, or files
the subtasks read with pyarrow). In partition k (TaskContext.partitionId() =
subtask index) the function:
  1. builds the subtask's input: its source split (Arrow batches -> dict
     records), the collection (subtask 0; the items travel in the pickled plan,
     broadcast once), a SQL query (subtask 0), or channel k of each input edge
     read with pyarrow from the committed exchange datasets;
  2. runs the core's `run_subtask()` (OperatorChain lifecycle);
  3. writes each out-edge's records per channel, collect/file sinks and staged
     SQL rows with pyarrow straight into the attempt's directory;
  4. yields ONE small result: the subtask's metrics as JSON. A user error
     is caught and reported in that result (not raised through Spark), so the
     driver gets the core's message naming operator, chain, subtask and record,
     and deterministic user errors are not retried by Spark; infrastructure
     failures (lost executor) still fail the Spark task, which Spark retries and
     whose retry overwrites the same part files.
Sources and sinks are read and written by their connectors (`runtime.connectors`,
looked up by descriptor type). The driver collects the metrics and COMMITS
(see `exchange.layout`): SQL sinks in one
transaction per table, then every dataset renamed from the attempt onto its
final path, replacing earlier attempts. On any failure the attempt directory
is deleted: nothing of a failed attempt becomes visible. Data moves as Arrow
batches between Spark and Python, never as pickled Spark rows.

Templated paths (`{{ ds }}`) are rendered by the caller and passed as
`overrides = {node_key: {"path": rendered}}`.
"""

from __future__ import annotations

import functools
import json
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Optional

from airflow_flinkchain.graph.model import OperatorKind
from airflow_flinkchain.runtime.connectors import ConnectorContext, sink_connector, source_reader
from airflow_flinkchain.runtime.connectors.published import StagedSinkConnector
from airflow_flinkchain.runtime.core.metrics import utc_now_iso
from airflow_flinkchain.runtime.core.serialize import loads_plan
from airflow_flinkchain.runtime.core.timings import Marks
from airflow_flinkchain.runtime.exchange.layout import ExchangeArea, Location, replace
from airflow_flinkchain.runtime.spark.plan_file import ship_plan
from airflow_flinkchain.runtime.pipeline_run import ChainRunError  # noqa: F401  (raised here; also imported from here)
from airflow_flinkchain.runtime.spark.partition import SubtaskSpec, run_partition, run_placeholder_partition
from airflow_flinkchain.runtime.stream_run import ChainStreamStep, StreamRun
from airflow_flinkchain.runtime.stream_task import check_output_types

METRICS_SCHEMA = "metrics string"


@dataclass
class ChainRunResult:
    chain_id: str
    run_id: str
    attempt_id: str
    metrics: dict
    outputs: list = field(default_factory=list)



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
                      "output_type": g.edge_type(ce.stream_edge),
                      "label": f"operator {src.name!r} writing edge {e!r}"}
    def context(node, label: str) -> ConnectorContext:
        path = _path_of(node, overrides) if isinstance(getattr(node.function, "path", None), str) else None
        return ConnectorContext(node.name, node.key, label, path, area, attempt, node.parallelism,
                                g.inferred_types.get(node.id))

    def sink(node):
        stage = (overrides.get(node.key) or {}).get("stage")  # a published sink in a stream run
        if stage is not None:
            return StagedSinkConnector(Location(stage), node.key, f"sink {node.name!r}")
        return sink_connector(node.function, context(node, f"sink {node.name!r}"))

    sinks = {node.key: sink(node) for node in map(g.node, chain.node_ids) if node.kind is OperatorKind.SINK}
    head = g.node(chain.head_id)
    source = None
    if head.kind is OperatorKind.SOURCE:
        source = source_reader(head.function, context(head, f"source {head.name!r}"))
        source = source.for_parallelism(chain.parallelism)
    return SubtaskSpec(chain_id=chain_id, run_id=run_id, head_key=head.key, source=source,
                       inputs=inputs, outputs=outputs, sinks=sinks)


def run_chain(spark, job, chain_id: str, run_id: str, exchange_root: str, dag_id: Optional[str] = None,
              attempt_id: Optional[str] = None, overrides: Optional[dict] = None,
              plan_bytes: Optional[bytes] = None, stream_run: Optional[StreamRun] = None,
              marks: Optional[Marks] = None, plan_broadcast: Any = None) -> ChainRunResult:
    """Run one attempt of one chain and commit its outputs; raises ChainRunError
    (after writing the failed metrics document) when it fails. `stream_run` (from
    `begin_stream_run` / `StreamRun.open`): the chain restores from the run's base
    checkpoint and stages its snapshot and file sinks for `commit_stream_run`. `marks`: the
    caller's timings (`core.timings`), continued here and written as the document's `timings`.
    `plan_broadcast`: `plan_bytes` broadcast once by a caller running several chains (execute())."""
    marks = marks or Marks()
    marks.mark("chain_started")
    dag_id = dag_id or job.pipeline
    attempt_id = attempt_id or f"{time.strftime('%Y%m%dT%H%M%S')}-{uuid.uuid4().hex[:8]}"
    overrides = overrides or {}
    step = ChainStreamStep(stream_run, job, chain_id, attempt_id) if stream_run is not None else None
    if step is not None:
        overrides = step.sink_overrides(overrides)
    area = ExchangeArea(exchange_root, dag_id, run_id)
    chain = job.chain(chain_id)
    doc = {"pipeline": job.pipeline, "dag_id": dag_id, "run_id": run_id, "chain": chain_id,
           "attempt": attempt_id, "spark_app_id": spark.sparkContext.applicationId, "state": "running",
           "error": None, "started_at": utc_now_iso(), "ended_at": None, "operators": [], "outputs": []}
    attempt = area.attempt(chain_id, attempt_id)
    spec = None
    try:
        check_output_types(job, chain.id)
        attempt.clear_stale()
        if plan_bytes is None:  # shipped for this attempt only: its collections go with the attempt dir
            plan_bytes = ship_plan(job, attempt.dir.join("_collections"))
            job = loads_plan(plan_bytes)  # its collections are references to their data files now
        spec = build_spec(job, chain_id, run_id, area, attempt_id, overrides)
        if step is not None:
            _stream_source(job, chain, spec, step, overrides)
            spec.checkpoint = step.subtask_checkpoint()
        marks.mark("job_prepared")
        plan = plan_broadcast or spark.sparkContext.broadcast(plan_bytes)
        df = spec.source.input_dataframe(spark, chain.parallelism) if spec.source is not None else None
        if df is None:  # the subtasks read by themselves: one placeholder partition each
            def per_placeholder(placeholder):
                return run_placeholder_partition(plan, spec, placeholder)

            texts = spark.sparkContext.parallelize(range(chain.parallelism), chain.parallelism) \
                .mapPartitions(per_placeholder).collect()
        else:
            def per_partition(batches):
                return run_partition(plan, spec, batches)

            texts = [r["metrics"] for r in df.mapInArrow(per_partition, _metrics_schema()).collect()]
        marks.mark("job_done")
        reports = sorted((json.loads(t) for t in texts), key=lambda r: r["subtask"])
        doc["timings"] = {"subtasks": [r.pop("timings", {}) for r in reports]}
        for r in reports:
            doc["operators"].extend(r.get("operators", []))
        errors = [r for r in reports if r.get("error")]
        if errors:
            raise ChainRunError(errors[0]["error"])
        if len(reports) != chain.parallelism:
            raise ChainRunError(f"chain {chain_id!r}: {len(reports)} of {chain.parallelism} subtasks reported")
        doc["outputs"] = _commit(job, spec, area, run_id, reports)
        if step is not None:
            doc["stream"] = step.commit(reports)
            doc["outputs"] = step.staged_outputs(doc["outputs"])
        doc["state"] = "success"
        marks.mark("chain_committed")
    except Exception as exc:
        doc["state"] = "failed"
        doc["error"] = _error_text(exc)
        if step is not None:
            step.discard()
        raise ChainRunError(doc["error"], doc) from exc
    finally:
        doc["ended_at"] = utc_now_iso()
        doc["timings"] = {"driver": marks.to_dict(), **(doc.get("timings") or {})}
        try:
            attempt.discard()
            # File sinks stage next to their target (same filesystem, rename commit): a failed
            # attempt's staged files must not stay behind either.
            for sink in (spec.sinks.values() if spec is not None else ()):
                sink.discard()
        finally:
            area.metrics(chain_id).write_text(json.dumps(doc, indent=1, default=str))
    return ChainRunResult(chain_id, run_id, attempt_id, doc, doc["outputs"])


@functools.lru_cache(maxsize=1)
def _metrics_schema():
    """METRICS_SCHEMA as a StructType: a DDL string is parsed by the JVM at every mapInArrow."""
    from pyspark.sql.types import StringType, StructField, StructType

    return StructType([StructField("metrics", StringType())])


def _stream_source(job, chain, spec: SubtaskSpec, step: ChainStreamStep, overrides: dict) -> None:
    """A stream run's source reads what arrived since the last run (or nothing, for a
    bounded source after the first run)."""
    head = job.stream_graph.node(chain.head_id)
    if head.kind is not OperatorKind.SOURCE:
        return
    path = _path_of(head, overrides) if isinstance(getattr(head.function, "path", None), str) else None
    reader = step.source_reader(head, path, f"source {head.name!r}")
    if reader is not None:
        spec.source = reader


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
    # the commits that can fail for outside reasons (a database) first: nothing else is visible yet
    sinks = sorted(spec.sinks.items(), key=lambda item: not item[1].commits_first)
    outputs = [{"sink": key, **sink.commit(run_id, counts.get(key, 0))} for key, sink in sinks if sink.commits_first]
    for e in spec.outputs:
        replace(spec.outputs[e]["location"], area.edge(e), area.trash())
        outputs.append({"edge": e, "path": area.edge(e).uri, "records": counts.get(e, 0)})
    outputs += [{"sink": key, **sink.commit(run_id, counts.get(key, 0))} for key, sink in sinks
                if not sink.commits_first]
    return outputs
