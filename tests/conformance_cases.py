"""Build the Flink conformance cases (../shared/flink-conformance/cases.json) as pipelines.

Shared by the planner tests (chains and cross-chain edges) and the runtime
tests (sink outputs vs `flink_outputs_batch`). Every sink is `collect(NAME)`,
so `execute().output(NAME)` gives its records.

>>> case = {"options": {}, "steps": [["src", "src", {"range": [1, 4]}],
...         ["map", "m1", "src", {}], ["sink", "out", "m1", {}]]}
>>> pipeline, _ = build_case(case)
>>> chain_operator_names(pipeline.plan())
[['src', 'm1', 'out']]
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Optional

from airflow_flinkchain import OutputTag, StreamPipeline
from airflow_flinkchain.functions import ProcessFunction

REPO_ROOT = Path(__file__).resolve().parents[1]
CASES_PATH = REPO_ROOT.parent / "shared" / "flink-conformance" / "cases.json"


def load_cases(path: Path = CASES_PATH) -> Optional[list[dict]]:
    """The shared cases, or None when the file is absent (tests then skip)."""
    if not path.exists():
        return None
    return json.loads(path.read_text())


# The functions of each step kind (see the cases' README).
def times_three_plus_one(x: int) -> int:
    return x * 3 + 1


def is_even(x: int) -> bool:
    return x % 2 == 0


def with_plus_hundred(x: int) -> list[int]:
    return [x, x + 100]


def mod_three(x: int) -> int:
    return x % 3


def add(a: int, b: int) -> int:
    return a + b


class EvenMainOddSide(ProcessFunction):
    """Even records to the main output, odd ones to side output `tag`."""

    def __init__(self, tag: str):
        self.tag = OutputTag(tag)
        self.output_tags = [self.tag]

    def process_element(self, value, ctx):
        if value % 2 == 0:
            yield value
        else:
            ctx.output(self.tag, value)


def _configure(stream: Any, name: str, opts: dict) -> Any:
    stream = stream.name(name)
    if "p" in opts:
        stream = stream.set_parallelism(opts["p"])
    if opts.get("chain") == "new":
        stream = stream.start_new_chain()
    elif opts.get("chain") == "disable":
        stream = stream.disable_chaining()
    if "ssg" in opts:
        stream = stream.slot_sharing_group(opts["ssg"])
    return stream


def build_case(case: dict, pipeline_name: Optional[str] = None) -> tuple[StreamPipeline, dict[str, Any]]:
    """The case's pipeline and its stream variables (name → stream or sink)."""
    options = case.get("options", {})
    p = StreamPipeline(pipeline_name or case.get("name", "case"), parallelism=options.get("parallelism", 1))
    if options.get("disable_chaining"):
        p.disable_operator_chaining()
    env: dict[str, Any] = {}
    side_tags: dict[str, str] = {}
    for step in case["steps"]:
        kind = step[0]
        if kind == "src":
            name, opts = step[1], step[2]
            lo, hi = opts.get("range", [1, 21])
            env[name] = _configure(p.from_collection(list(range(lo, hi))), name, opts)
        elif kind in ("map", "filter", "flat_map", "key_reduce", "process_side", "sink"):
            name, upstream, opts = step[1], env[step[2]], step[3]
            if kind == "map":
                stream = upstream.map(times_three_plus_one)
            elif kind == "filter":
                stream = upstream.filter(is_even)
            elif kind == "flat_map":
                stream = upstream.flat_map(with_plus_hundred)
            elif kind == "key_reduce":
                stream = upstream.key_by(mod_three).reduce(add)
            elif kind == "process_side":
                side_tags[name] = opts["tag"]
                stream = upstream.process(EvenMainOddSide(opts["tag"]))
            else:
                stream = upstream.collect(name)
            env[name] = _configure(stream, name, opts)
        elif kind == "part":
            how, upstream = step[1], step[2]
            method = "global_" if how == "global" else how
            env[f"{upstream}.{how}"] = getattr(env[upstream], method)()
        elif kind == "side":
            var, proc = step[1], step[2]
            env[var] = env[proc].get_side_output(OutputTag(side_tags[proc]))
        elif kind == "union":
            var, inputs = step[1], [env[v] for v in step[2]]
            env[var] = inputs[0].union(*inputs[1:])
        else:
            raise ValueError(f"unknown conformance step {step!r}")
    return p, env


def chain_operator_names(job_graph: Any) -> list[list[str]]:
    return [list(c.operator_names) for c in job_graph.chains]


def cross_chain_edges(job_graph: Any) -> list[list[Any]]:
    """`[from_operator, to_operator, PARTITIONER, side_output_tag]` per chain edge."""
    return [[e.source_operator, e.target_operator, e.partitioner.value, e.output_tag] for e in job_graph.edges]
