"""What both pipeline runners share - `execute()` on Spark (`runtime.spark.local`)
and `execute_local()` in process (`runtime.local`): the result, the order of
the chains, the run id, and the rendering of templated source/sink paths.

Templated paths are rendered with jinja2 and a small context - `run_id`, `ds`
(today, YYYY-MM-DD), `ds_nodash`, `ts` (now, ISO), `dag_id` - as the Airflow
task does with its own context.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass, field
from typing import Optional

from airflow_flinkchain.graph.model import OperatorKind
from airflow_flinkchain.io.sinks import CollectSink


class ChainRunError(RuntimeError):
    """A chain attempt failed; nothing it wrote was committed (`metrics`: the chain's
    metrics document, when the subtasks reported)."""

    def __init__(self, message: str, metrics: Optional[dict] = None):
        super().__init__(message)
        self.metrics = metrics


def run_id_for(pipeline: str, run_id: Optional[str]) -> str:
    """`run_id`, or a fresh `local__<utc time>` one; ids that are paths (`..`, `a/b`) are
    refused here, before anything runs or any file is touched."""
    from airflow_flinkchain.runtime.exchange.layout import ExchangeArea

    run_id = run_id or "local__" + datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%S%f")
    ExchangeArea.run_segments(pipeline, run_id)
    return run_id


@dataclass
class PipelineResult:
    """What `execute()` and `execute_local()` return: the records of each collect
    sink and each chain's metrics document (see `runtime.spark.entry`).

    >>> r = PipelineResult("p", "run-1", None, outputs={"out": [1, 2]})
    >>> r.output("out")
    [1, 2]
    """

    pipeline: str
    run_id: str
    exchange_root: Optional[str]
    outputs: dict = field(default_factory=dict)  # collect name -> records
    metrics: dict = field(default_factory=dict)  # chain id -> metrics document
    stream: Optional[dict] = None  # a stream run: its committed checkpoint (runtime.stream_run.stream_result)

    def output(self, name: str) -> list:
        """The records of `collect(name)`, in subtask order."""
        if name not in self.outputs:
            raise KeyError(f"pipeline {self.pipeline!r} has no collect({name!r}) sink; "
                           f"collect sinks: {sorted(self.outputs)}")
        return self.outputs[name]

    def operator_metrics(self, key: str) -> list[dict]:
        """Per-subtask counters of one operator (by key or name)."""
        return [m for doc in self.metrics.values() for m in doc["operators"] if key in (m["key"], m["name"])]


def topological_chains(job) -> list:
    """Chains in an order where every chain comes after the chains it reads from
    (ties in plan order)."""
    pending = list(job.chains)
    done: set[str] = set()
    ordered = []
    while pending:
        for chain in pending:
            if all(job.edge(e).source in done for e in chain.in_edges):
                break
        else:
            raise ValueError(f"pipeline {job.pipeline!r}: the chains form a cycle: {[c.id for c in pending]}")
        pending.remove(chain)
        done.add(chain.id)
        ordered.append(chain)
    return ordered


def template_context(run_id: str, dag_id: str, now: Optional[datetime.datetime] = None) -> dict:
    now = now or datetime.datetime.now(datetime.timezone.utc)
    return {"run_id": run_id, "dag_id": dag_id, "ds": now.strftime("%Y-%m-%d"),
            "ds_nodash": now.strftime("%Y%m%d"), "ts": now.isoformat()}


def render_overrides(job, context: dict) -> dict:
    """{node_key: {"path": rendered}} for every source/sink whose path is a template."""
    import jinja2

    env = jinja2.Environment(undefined=jinja2.StrictUndefined)
    overrides = {}
    for node in job.stream_graph.nodes:
        path = getattr(node.function, "path", None)
        if isinstance(path, str) and ("{{" in path or "{%" in path):
            try:
                overrides[node.key] = {"path": env.from_string(path).render(**context)}
            except jinja2.TemplateError as exc:
                raise ValueError(f"operator {node.name!r}: path template {path!r} cannot be rendered ({exc}); "
                                 f"available: {sorted(context)}") from None
    return overrides


def deliver_collected(job, result: PipelineResult) -> None:
    """Hand each collect sink that keeps its records (`testing.TestingSink`: a
    `records` list) the records of this run, replacing earlier ones. `job` must
    be the plan of the pipeline object itself (not a deserialized copy)."""
    for node in job.stream_graph.nodes:
        sink = node.function
        if node.kind is OperatorKind.SINK and isinstance(sink, CollectSink) and isinstance(
                getattr(sink, "records", None), list):
            sink.records[:] = result.outputs.get(sink.name, [])
