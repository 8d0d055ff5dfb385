"""Plan -> task specs: the pure step of rendering (no Airflow import).

Like astronomer-cosmos' intermediate representation: `pipeline_spec(job_graph,
settings)` turns a JobGraph into plain frozen data (task ids, display names,
dependencies, doc_md, Spark settings, templated paths). `render.py` only maps
that data onto Airflow operators, so everything here is testable without a
scheduler and without Airflow installed. Deterministic: same plan, same spec
(Airflow workers re-parse the DAG file and must find the same tasks).
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from typing import Any, Mapping, Optional

from airflow_flinkchain.airflow.spark_settings import SparkSettings
from airflow_flinkchain.planner.jobgraph import Chain, ChainEdge, JobGraph

SETUP_TASK_ID = "pipeline_setup"
TEARDOWN_TASK_ID = "pipeline_teardown"
COMMIT_TASK_ID = "stream_commit"
#: Pipeline settings this layer reads (besides the Spark ones in SparkSettings).
LIFECYCLE_KEYS = ("exchange_root", "keep_exchange", "exchange_root_shared", "storage_conn_id")
_TASK_ID = re.compile(r"^[A-Za-z0-9_.-]+$")
_TEMPLATE_MARKERS = ("{{", "{%")


@dataclass(frozen=True)
class EdgeSpec:
    id: str
    source_chain: str
    target_chain: str
    source_operator: str
    target_operator: str
    partitioner: str
    output_tag: Optional[str]
    selected_names: tuple[str, ...]
    input_number: int = 0  # 1 or 2: the input of a two-input target operator it feeds

    @classmethod
    def of(cls, e: ChainEdge) -> "EdgeSpec":
        return cls(e.id, e.source, e.target, e.source_operator, e.target_operator,
                   str(e.partitioner.value if hasattr(e.partitioner, "value") else e.partitioner),
                   e.output_tag, tuple(e.selected_names), e.input_number)


@dataclass(frozen=True)
class OperatorSpec:
    key: str
    name: str
    kind: str
    parallelism: int
    uid: Optional[str]
    describe: str


@dataclass(frozen=True)
class ChainTaskSpec:
    chain_id: str
    task_id: str
    display_name: str
    parallelism: int
    operators: tuple[OperatorSpec, ...]
    in_edges: tuple[EdgeSpec, ...]
    out_edges: tuple[EdgeSpec, ...]
    upstream_task_ids: tuple[str, ...]
    spark: SparkSettings
    #: {operator key: {field: Jinja template}}: source/sink fields rendered by Airflow
    #: at run time and handed to the runtime as --overrides JSON.
    templated_fields: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    doc_md: str = ""
    #: Airflow connections of the chain's sources/sinks (SQL `conn_id`): the task resolves
    #: them and hands their URLs to the runtime, which never imports Airflow.
    conn_ids: tuple[str, ...] = ()


@dataclass(frozen=True)
class PipelineSpec:
    pipeline: str
    group_id: str
    strategy: str
    chains: tuple[ChainTaskSpec, ...]
    exchange_root: Optional[str] = None
    exchange_root_shared: bool = False
    keep_exchange: bool = False
    #: the Airflow `aws` connection of the object store (storage_credentials.py); None: the AWS chain
    storage_conn_id: Optional[str] = None
    setup_task_id: str = SETUP_TASK_ID
    teardown_task_id: str = TEARDOWN_TASK_ID
    #: a stream-run pipeline's checkpoint_dir (docs/stream-runs.md): adds the commit task
    checkpoint_dir: Optional[str] = None
    commit_task_id: str = COMMIT_TASK_ID

    def chain(self, chain_id: str) -> ChainTaskSpec:
        for c in self.chains:
            if c.chain_id == chain_id:
                return c
        raise KeyError(f"no chain {chain_id!r} in pipeline {self.pipeline!r}")

    @property
    def chain_ids(self) -> tuple[str, ...]:
        return tuple(c.chain_id for c in self.chains)


def slug(text: str) -> str:
    """A valid Airflow id from a free-form name ('Orders pipeline' -> 'orders_pipeline')."""
    s = re.sub(r"[^A-Za-z0-9_.-]+", "_", text.strip()).strip("_").lower()
    return s or "pipeline"


def pipeline_spec(job_graph: JobGraph, settings: Mapping[str, Any], group_id: Optional[str] = None,
                  checkpoint_dir: Optional[str] = None) -> PipelineSpec:
    """The task specs of one pipeline. `settings` are the pipeline's settings
    (StreamPipeline(**settings), possibly overridden by to_airflow(**kw));
    `checkpoint_dir`: the pipeline's, when it runs as stream runs."""
    pipeline_spark = SparkSettings.from_settings(settings, owner=f"pipeline {job_graph.pipeline!r}")
    edges = {e.id: EdgeSpec.of(e) for e in job_graph.edges}
    chains = tuple(
        _chain_spec(job_graph, c, edges, pipeline_spark) for c in _topological(job_graph)
    )
    ids = [c.task_id for c in chains]
    clash = ({SETUP_TASK_ID, TEARDOWN_TASK_ID} | ({COMMIT_TASK_ID} if checkpoint_dir else set())) & set(ids)
    if clash or len(set(ids)) != len(ids):
        raise ValueError(
            f"pipeline {job_graph.pipeline!r}: chain task ids {sorted(ids)} are not unique or clash with "
            f"{sorted(clash)}; give the head operators distinct uid()s"
        )
    exchange_root = settings.get("exchange_root")
    return PipelineSpec(
        pipeline=job_graph.pipeline,
        group_id=group_id if group_id is not None else slug(job_graph.pipeline),
        strategy=job_graph.strategy,
        chains=chains,
        exchange_root=str(exchange_root) if exchange_root else None,
        exchange_root_shared=bool(settings.get("exchange_root_shared", False)),
        keep_exchange=bool(settings.get("keep_exchange", False)),
        storage_conn_id=settings.get("storage_conn_id") or None,
        checkpoint_dir=_stream_checkpoint_dir(job_graph.pipeline, checkpoint_dir),
    )


def _stream_checkpoint_dir(pipeline: str, checkpoint_dir: Optional[str]) -> Optional[str]:
    """Every task of every run must find the same directory: no template, no relative path
    (the setup task and spark-submit may run in different directories and on other machines)."""
    if checkpoint_dir is None:
        return None
    if _is_template(checkpoint_dir):
        raise ValueError(f"pipeline {pipeline!r}: checkpoint_dir {checkpoint_dir!r} is a template; it must be the "
                         "same path in every run (each run restores the last one's snapshot from it)")
    if "://" not in checkpoint_dir and not checkpoint_dir.startswith("/"):
        raise ValueError(f"pipeline {pipeline!r}: checkpoint_dir {checkpoint_dir!r} is a relative path; the "
                         "Airflow tasks need an absolute path or a URI (file://, hdfs://, s3a://...)")
    return checkpoint_dir


def _topological(g: JobGraph) -> list[Chain]:
    """Chains in dependency order, ties kept in plan order (deterministic)."""
    pending = list(g.chains)
    done: set[str] = set()
    ordered: list[Chain] = []
    while pending:
        for c in pending:
            if all(g.edge(e).source in done for e in c.in_edges):
                ordered.append(c)
                done.add(c.id)
                pending.remove(c)
                break
        else:  # a cycle: the planner should have refused it; keep plan order
            ordered.extend(pending)
            break
    return ordered


def _chain_spec(g: JobGraph, c: Chain, edges: Mapping[str, EdgeSpec], pipeline_spark: SparkSettings) -> ChainTaskSpec:
    sg = g.stream_graph
    nodes = [sg.node(n) for n in c.node_ids]
    per_operator = [
        (n.name, SparkSettings.from_settings(n.settings or {}, owner=f"operator {n.name!r} (chain {c.id!r})", strict=True))
        for n in nodes
    ]
    spark = pipeline_spark.overlay(SparkSettings.combine_chain(per_operator, chain=c.id)).with_parallelism(c.parallelism)
    operators = tuple(
        OperatorSpec(n.key, n.name, str(getattr(n.kind, "value", n.kind)), n.parallelism, n.uid, _describe(n.function))
        for n in nodes
    )
    templated = {n.key: t for n in nodes if (t := templated_fields_of(n.function))}
    in_edges = tuple(edges[e] for e in c.in_edges)
    out_edges = tuple(edges[e] for e in c.out_edges)
    upstream = tuple(dict.fromkeys(_task_id(e.source_chain) for e in in_edges))
    spec = ChainTaskSpec(
        chain_id=c.id,
        task_id=_task_id(c.id),
        display_name=c.name,
        parallelism=c.parallelism,
        operators=operators,
        in_edges=in_edges,
        out_edges=out_edges,
        upstream_task_ids=upstream,
        spark=spark,
        templated_fields=templated,
        conn_ids=tuple(sorted({c for n in nodes if isinstance(c := getattr(n.function, "conn_id", None), str)})),
    )
    return dataclasses.replace(spec, doc_md=chain_doc_md(g.pipeline, g.strategy, spec))


def _task_id(chain_id: str) -> str:
    return chain_id if _TASK_ID.match(chain_id) else slug(chain_id)


def _describe(function: Any) -> str:
    describe = getattr(function, "describe", None)
    if callable(describe):
        try:
            return str(describe())
        except Exception:  # a description must never break parsing
            pass
    if function is None:
        return ""
    return getattr(function, "__qualname__", None) or type(function).__name__


def templated_fields_of(descriptor: Any) -> dict[str, Any]:
    """String fields (or lists of strings) of a source/sink descriptor that hold Jinja
    ('{{ run_id }}', '{{ ds }}'...). Only dataclass descriptors are inspected."""
    if descriptor is None or not dataclasses.is_dataclass(descriptor) or isinstance(descriptor, type):
        return {}
    out: dict[str, Any] = {}
    for f in dataclasses.fields(descriptor):
        value = getattr(descriptor, f.name, None)
        if _is_template(value):
            out[f.name] = value
        elif isinstance(value, (list, tuple)) and value and all(isinstance(v, str) for v in value) \
                and any(_is_template(v) for v in value):
            out[f.name] = list(value)
    return out


def _is_template(value: Any) -> bool:
    return isinstance(value, str) and any(m in value for m in _TEMPLATE_MARKERS)


# ---- doc_md -------------------------------------------------------------------

def chain_doc_md(pipeline: str, strategy: str, c: ChainTaskSpec) -> str:
    lines = [
        f"### Chain `{c.chain_id}`: {c.display_name}",
        "",
        f"Pipeline `{pipeline}` (chaining: {strategy}), parallelism **{c.parallelism}**: "
        f"one spark-submit runs {len(c.operators)} chained operator(s), "
        "records pass between them by method call, without serialization.",
        "",
        "| # | operator | kind | parallelism | uid | function |",
        "|---|---|---|---|---|---|",
    ]
    for i, op in enumerate(c.operators, 1):
        lines.append(f"| {i} | {_md(op.name)} | {op.kind} | {op.parallelism} | {_md(op.uid or '')} | {_md(op.describe)} |")
    for title, edges in (("Input edges", c.in_edges), ("Output edges", c.out_edges)):
        lines += ["", f"**{title}**" + ("" if edges else ": none"), ""]
        if edges:
            lines += ["| edge | from | to | partitioner | side output | selected |", "|---|---|---|---|---|---|"]
            for e in edges:
                lines.append(
                    f"| `{e.id}` | {_md(e.source_operator)} (chain `{e.source_chain}`) "
                    f"| {_md(e.target_operator)}{f' input {e.input_number}' if e.input_number else ''} "
                    f"(chain `{e.target_chain}`) | {e.partitioner} "
                    f"| {_md(e.output_tag or '')} | {_md(', '.join(e.selected_names))} |"
                )
    lines += ["", "**Spark**: " + ", ".join(c.spark.describe())]
    if c.templated_fields:
        lines += ["", "**Templated fields** (rendered per run): " + ", ".join(
            f"`{k}.{f}`" for k, fs in sorted(c.templated_fields.items()) for f in sorted(fs))]
    return "\n".join(lines)


def _md(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")
