"""JobGraph as text, JSON, Graphviz DOT or Mermaid (used by `flinkchain plan`).

>>> from airflow_flinkchain import StreamPipeline
>>> p = StreamPipeline("demo", parallelism=2)
>>> p.from_collection([1, 2]).name("rows").map(str).name("fmt").collect("out")  # doctest: +ELLIPSIS
<DataStreamSink 'out' ...>
>>> print(format_text([p.plan()]))
pipeline 'demo': 2 chains, 1 edge (chaining: flink; runtime mode: STREAMING)
  chains:
    rows  p=1  rows
    fmt   p=2  fmt -> out
  edges:
    rows -> fmt  REBALANCE  rows => fmt
"""

from __future__ import annotations

import json
from typing import Sequence

from airflow_flinkchain.planner.vectorized import per_record_reason, runs_vectorized, shows_combined
from airflow_flinkchain.graph.model import DEFAULT_SLOT_SHARING_GROUP
from airflow_flinkchain.planner.jobgraph import Chain, ChainEdge, JobGraph

FORMATS = ("text", "json", "dot", "mermaid")


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def edge_details(e: ChainEdge) -> str:
    """`input 2`, `side output 'late'`, `select 'big'`: what besides the partitioner the edge
    carries (`input N`: the edge feeds input N of a two-input operator)."""
    parts = [f"input {e.input_number}"] if e.input_number else []
    if e.output_tag is not None:
        parts.append(f"side output {e.output_tag!r}")
    if e.selected_names:
        parts.append("select " + ", ".join(repr(n) for n in e.selected_names))
    return "; ".join(parts)


def format_text(plans: Sequence[JobGraph]) -> str:
    blocks = []
    for plan in plans:
        lines = [
            f"pipeline {plan.pipeline!r}: {_plural(len(plan.chains), 'chain')}, "
            f"{_plural(len(plan.edges), 'edge')} (chaining: {plan.strategy}; "
            f"runtime mode: {plan.stream_graph.runtime_mode.upper()})",
            "  chains:",
        ]
        width = max((len(c.id) for c in plan.chains), default=0)
        for c in plan.chains:
            group = "" if c.slot_sharing_group == DEFAULT_SLOT_SHARING_GROUP else f"  [slot sharing group {c.slot_sharing_group!r}]"
            g = plan.stream_graph
            vectorized = [g.node(n).name for n in c.node_ids if runs_vectorized(g, g.node(n))]
            marks = f"  [vectorized: {', '.join(vectorized)}]" if vectorized else ""
            lines.append(f"    {c.id:<{width}}  p={c.parallelism}  {c.name}{group}{marks}")
            for n in c.node_ids:
                reason = per_record_reason(g, g.node(n))
                if reason is not None:
                    lines.append(f"    {'':<{width}}    per record: {g.node(n).name}: {reason}")
        if plan.edges:
            lines.append("  edges:")
            heads = [f"{e.source} -> {e.target}" for e in plan.edges]
            hw = max(len(h) for h in heads)
            pw = max(len(e.partitioner.value) for e in plan.edges)
            for head, e in zip(heads, plan.edges):
                extra = edge_details(e)
                if shows_combined(plan.stream_graph, e.stream_edge):
                    extra = "; ".join(filter(None, [extra, "combined per key before the exchange"]))
                line = f"    {head:<{hw}}  {e.partitioner.value:<{pw}}  {e.source_operator} => {e.target_operator}"
                lines.append(line + (f"  ({extra})" if extra else ""))
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)


def format_json(plans: Sequence[JobGraph]) -> str:
    return json.dumps({"pipelines": [p.to_dict() for p in plans]}, indent=2)


def _dot_quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def _chain_label(chain: Chain, line_break: str) -> str:
    return f"{chain.id} (p={chain.parallelism}){line_break}" + line_break.join(chain.operator_names)


def _edge_label(edge: ChainEdge, separator: str) -> str:
    details = edge_details(edge)
    return edge.partitioner.value + (f"{separator}{details}" if details else "")


def format_dot(plans: Sequence[JobGraph]) -> str:
    lines = ["digraph flinkchain {", "  rankdir=LR;", "  node [shape=box, fontname=Helvetica];"]
    for i, plan in enumerate(plans):
        lines.append(f"  subgraph cluster_{i} {{")
        lines.append(f"    label={_dot_quote('pipeline ' + plan.pipeline)};")
        for c in plan.chains:
            label = _chain_label(c, "\n")
            lines.append(f"    {_dot_quote(plan.pipeline + '/' + c.id)} [label={_dot_quote(label)}];")
        for e in plan.edges:
            source, target = _dot_quote(plan.pipeline + "/" + e.source), _dot_quote(plan.pipeline + "/" + e.target)
            label = _edge_label(e, "\n")
            lines.append(f"    {source} -> {target} [label={_dot_quote(label)}];")
        lines.append("  }")
    lines.append("}")
    return "\n".join(lines)


def _mermaid_text(text: str) -> str:
    return text.replace('"', "#quot;")


def format_mermaid(plans: Sequence[JobGraph]) -> str:
    lines = ["flowchart LR"]
    for i, plan in enumerate(plans):
        ids = {c.id: f"p{i}_c{j}" for j, c in enumerate(plan.chains)}
        lines.append(f'  subgraph pipeline_{i}["pipeline {_mermaid_text(plan.pipeline)}"]')
        for c in plan.chains:
            lines.append(f'    {ids[c.id]}["{_mermaid_text(_chain_label(c, "<br/>"))}"]')
        for e in plan.edges:
            lines.append(f'    {ids[e.source]} -->|"{_mermaid_text(_edge_label(e, " "))}"| {ids[e.target]}')
        lines.append("  end")
    return "\n".join(lines)


def render(plans: Sequence[JobGraph], fmt: str = "text") -> str:
    renderers = {"text": format_text, "json": format_json, "dot": format_dot, "mermaid": format_mermaid}
    if fmt not in renderers:
        raise ValueError(f"unknown format {fmt!r}: use one of {', '.join(FORMATS)}")
    return renderers[fmt](plans)
