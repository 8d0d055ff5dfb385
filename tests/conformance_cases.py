"""Build the Flink conformance cases (tests/data/flink-conformance/cases.json) as pipelines,
and the event-time cases (time_cases.json, own cases in tests/eventtime) with `build_time_case`.

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
from collections import Counter
from pathlib import Path
from typing import Any, Callable, Optional

from airflow_flinkchain import OutputTag, StreamPipeline
from airflow_flinkchain.common import Duration, WatermarkStrategy
from airflow_flinkchain.functions import KeyedProcessFunction, ProcessFunction
from airflow_flinkchain.state import ValueStateDescriptor
from airflow_flinkchain.window import (
    EventTimeSessionWindows,
    SlidingEventTimeWindows,
    TumblingEventTimeWindows,
)
from airflow_flinkchain.window_functions import (
    AggregateFunction,
    ProcessAllWindowFunction,
    ProcessWindowFunction,
)

REPO_ROOT = Path(__file__).resolve().parents[1]
CONFORMANCE_DIR = REPO_ROOT / "tests" / "data" / "flink-conformance"
CASES_PATH = CONFORMANCE_DIR / "cases.json"
TIME_CASES_PATH = CONFORMANCE_DIR / "time_cases.json"
TWO_INPUT_CASES_PATH = CONFORMANCE_DIR / "two_input_cases.json"


def load_cases(path: Path = CASES_PATH) -> list[dict]:
    """The vendored cases (a missing file is an error, never a silent skip)."""
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
    p = StreamPipeline(pipeline_name or case.get("name", "case"), parallelism=options.get("parallelism", 1),
                       runtime_mode="batch")  # the cases' outputs are Flink's BATCH outputs
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


# ---- event-time cases (tests/data/flink-conformance/time_cases.json) -----------------------

#: The time cases' two runtime modes: the key of each case's expected outputs.
TIME_MODES = ("batch", "streaming")


def expected_time_outputs(case: dict, mode: str) -> dict[str, list]:
    """{sink: [[value, timestamp], ...]} in `mode`: what Flink produced (shared cases) or what
    Flink's semantics give (own cases, `expected_outputs_<mode>`)."""
    key = f"flink_outputs_{mode}"
    return case[key] if key in case else case[f"expected_outputs_{mode}"]


def load_time_cases() -> list[dict]:
    """Flink's shared event-time cases, then the own ones (tests/eventtime/own_time_cases.py)."""
    from tests.eventtime.own_time_cases import OWN_TIME_CASES

    return load_cases(TIME_CASES_PATH) + OWN_TIME_CASES


def event_time_of(record: Any, _record_timestamp: Any = None) -> int:
    return record[2]


def times_ten(r: Any) -> tuple:
    return (r[0], r[1] * 10, r[2])


def first_field(r: Any) -> Any:
    return r[0]


def sum_values(a: Any, b: Any) -> tuple:
    return (a[0], a[1] + b[1], max(a[2], b[2]))


class Average(AggregateFunction):
    """Accumulator `(k, sum, n)` giving `(k, sum / n)`."""

    def create_accumulator(self):
        return (None, 0, 0)

    def add(self, value, accumulator):
        return (value[0], accumulator[1] + value[1], accumulator[2] + 1)

    def get_result(self, accumulator):
        return (accumulator[0], accumulator[1] / accumulator[2])

    def merge(self, acc_a, acc_b):
        return (acc_a[0] if acc_a[0] is not None else acc_b[0], acc_a[1] + acc_b[1], acc_a[2] + acc_b[2])


class CountPerWindow(ProcessWindowFunction):
    """`(k, window.start, window.end, n)`."""

    def process(self, key, context, elements):
        window = context.window()
        return [(key, window.start, window.end, len(list(elements)))]


class CountPerAllWindow(ProcessAllWindowFunction):
    """`(window.start, window.end, n)`."""

    def process(self, context, elements):
        window = context.window()
        return [(window.start, window.end, len(list(elements)))]


class BucketTimers(KeyedProcessFunction):
    """ValueState `count` += 1 per record and an event-time timer at the end of the record's
    `size`-ms bucket; `on_timer` emits `(key, timer_ts, count)`."""

    def __init__(self, size: int):
        self.size = size

    def open(self, runtime_context):
        self.count = runtime_context.get_state(ValueStateDescriptor("count", None))

    def process_element(self, value, ctx):
        self.count.update((self.count.value() or 0) + 1)
        ts = ctx.timestamp()
        ctx.timer_service().register_event_time_timer(ts // self.size * self.size + self.size - 1)
        return None

    def on_timer(self, timestamp, ctx):
        return [(ctx.get_current_key(), timestamp, self.count.value())]


class DebounceTimers(KeyedProcessFunction):
    """ValueState `count` += 1 per record; one pending timer per key at `ts + gap` of the
    latest record: the previous one is deleted (`delete_event_time_timer`). `on_timer` emits
    `(key, timer_ts, count)` and resets the count."""

    def __init__(self, gap: int):
        self.gap = gap

    def open(self, runtime_context):
        self.count = runtime_context.get_state(ValueStateDescriptor("count", None))
        self.pending = runtime_context.get_state(ValueStateDescriptor("timer", None))

    def process_element(self, value, ctx):
        self.count.update((self.count.value() or 0) + 1)
        previous = self.pending.value()
        if previous is not None:
            ctx.timer_service().delete_event_time_timer(previous)
        timer = ctx.timestamp() + self.gap
        ctx.timer_service().register_event_time_timer(timer)
        self.pending.update(timer)
        return None

    def on_timer(self, timestamp, ctx):
        count = self.count.value()
        self.count.clear()
        self.pending.clear()
        return [(ctx.get_current_key(), timestamp, count)]


class WithTimestamp(ProcessFunction):
    """`(value, ctx.timestamp())`: what a time case's sink collects."""

    def process_element(self, value, ctx):
        return [(value, ctx.timestamp())]


def watermark_strategy(spec: dict) -> WatermarkStrategy:
    if spec.get("monotonous"):
        base = WatermarkStrategy.for_monotonous_timestamps()
    else:
        base = WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_millis(spec["bounded"]))
    return base.with_timestamp_assigner(event_time_of)


def window_assigner(spec: list) -> Any:
    kind, *args = spec
    millis = [Duration.of_millis(a) for a in args]
    if kind == "tumbling":
        return TumblingEventTimeWindows.of(*millis)
    if kind == "sliding":
        return SlidingEventTimeWindows.of(*millis)
    if kind == "session":
        return EventTimeSessionWindows.with_gap(millis[0])
    raise ValueError(f"unknown window assigner {spec!r}")


def _timers_function(spec: dict) -> KeyedProcessFunction:
    if spec["kind"] == "bucket":
        return BucketTimers(spec["size"])
    if spec["kind"] == "debounce":
        return DebounceTimers(spec["gap"])
    raise ValueError(f"unknown timers kind {spec!r}")


def _window(upstream: Any, spec: dict) -> Any:
    assigner = window_assigner(spec["assigner"])
    windowed = upstream.window_all(assigner) if spec.get("all") else upstream.key_by(first_field).window(assigner)
    if "lateness" in spec:
        windowed = windowed.allowed_lateness(spec["lateness"])
    if "late_tag" in spec:
        windowed = windowed.side_output_late_data(OutputTag(spec["late_tag"]))
    fn = spec["fn"]
    if fn == "sum":
        return windowed.reduce(sum_values)
    if fn == "avg":
        return windowed.aggregate(Average())
    if fn == "count":
        return windowed.process(CountPerAllWindow() if spec.get("all") else CountPerWindow())
    raise ValueError(f"unknown window function {fn!r}")


def time_sink_name(case: dict, sink: str, shared: bool) -> str:
    """The collect() name of a case's sink: prefixed by the case when pipelines are shared."""
    return f"{case['name']}__{sink}" if shared else sink


def build_time_case(case: dict, mode: str, pipeline: Optional[StreamPipeline] = None) -> tuple[StreamPipeline, dict]:
    """Add the time case's steps to `pipeline` (a new one in `mode` when None; several cases
    may share one pipeline, as independent sub-pipelines with prefixed names). Returns the
    pipeline and {case sink name: collect() name}; each sink collects `(value, timestamp)`."""
    shared = pipeline is not None
    if shared and pipeline.runtime_mode != mode:
        raise ValueError(f"pipeline {pipeline.name!r} runs in {pipeline.runtime_mode} mode, not {mode}")
    p = pipeline or StreamPipeline(case["name"], parallelism=case.get("options", {}).get("parallelism", 1),
                                   runtime_mode=mode)
    prefix = f"{case['name']}." if shared else ""
    env: dict[str, Any] = {}
    late_tags: dict[str, str] = {}
    sinks: dict[str, str] = {}

    def configure(stream: Any, name: str, opts: dict) -> Any:
        stream = stream.name(prefix + name)
        return stream.set_parallelism(opts["p"]) if "p" in opts else stream

    for step in case["steps"]:
        kind = step[0]
        if kind == "src":
            env[step[1]] = p.from_collection([tuple(r) for r in step[2]]).name(prefix + step[1])
        elif kind == "watermarks":
            env[step[1]] = configure(env[step[2]].assign_timestamps_and_watermarks(watermark_strategy(step[3])),
                                     step[1], {})
        elif kind == "map":
            env[step[1]] = configure(env[step[2]].map(times_ten), step[1], step[3])
        elif kind == "rebalance":
            env[step[1]] = env[step[2]].rebalance()
        elif kind == "union":
            inputs = [env[v] for v in step[2]]
            env[step[1]] = inputs[0].union(*inputs[1:])
        elif kind == "window":
            if "late_tag" in step[3]:
                late_tags[step[1]] = step[3]["late_tag"]
            env[step[1]] = configure(_window(env[step[2]], step[3]), step[1], step[3])
        elif kind == "timers":
            keyed = env[step[2]].key_by(first_field)
            env[step[1]] = configure(keyed.process(_timers_function(step[3])), step[1], step[3])
        elif kind == "late":
            env[step[1]] = env[step[2]].get_side_output(OutputTag(late_tags[step[2]]))
        elif kind == "sink":
            name, opts = time_sink_name(case, step[1], shared), step[3]
            stamped = env[step[2]].process(WithTimestamp()).name(f"{prefix}{step[1]}.stamp")
            if "p" in opts:
                stamped = stamped.set_parallelism(opts["p"])
            stamped.collect(name)
            sinks[step[1]] = name
        else:
            raise ValueError(f"unknown time-case step {step!r}")
    return p, sinks


def build_time_cases(cases: list[dict], mode: str, name: str) -> tuple[StreamPipeline, dict[str, dict[str, str]]]:
    """All `cases` in one pipeline in `mode` (one Spark run for many cases): the pipeline and,
    per case, {sink: collect() name}."""
    p = StreamPipeline(name, runtime_mode=mode)
    return p, {case["name"]: build_time_case(case, mode, p)[1] for case in cases}


def as_multiset(rows: Any) -> Counter:
    """Outputs `[value, timestamp]` as a multiset (tuples and lists alike)."""
    def plain(x: Any) -> Any:
        return tuple(plain(e) for e in x) if isinstance(x, (list, tuple)) else x

    return Counter(plain(r) for r in rows)


def time_case_mismatches(case: dict, mode: str, sinks: dict[str, str], output: Callable[[str], list]) -> list[str]:
    """One line per sink whose records differ from the case's expected outputs in `mode`."""
    problems = []
    for sink, expected in expected_time_outputs(case, mode).items():
        got, want = as_multiset(output(sinks[sink])), as_multiset(expected)
        if got != want:
            problems.append(f"{case['name']} [{mode}] sink {sink!r}: missing {sorted((want - got).elements(), key=repr)}"
                            f", unexpected {sorted((got - want).elements(), key=repr)}")
    return problems
