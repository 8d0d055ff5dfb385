"""Build a two-input conformance case (tests/data/flink-conformance/two_input_cases.json,
format in its README, "Two-input cases") as a StreamPipeline with the public API, in a
given runtime mode. Every sink collects `(value, timestamp)` pairs; compare them with
`as_multiset(...)` (conformance_cases) of the expected lists.

    pipeline = build_two_input_case(case, "streaming")
    result = pipeline.execute_local()          # or execute() on Spark
    as_multiset(result.output("out")) == as_multiset(case["expected_outputs_streaming"]["out"])

`compared_modes(case)`: the modes whose outputs are a check (not in `not_compared`).
With `pipeline=`, the case is added to that pipeline as an independent sub-pipeline, its
operator and sink names prefixed `CASE__` (`sink_name(case, "out")`), so one execution runs
several cases.
"""

from __future__ import annotations

from typing import Any, Optional

from airflow_flinkchain import StreamPipeline
from airflow_flinkchain.functions import BroadcastProcessFunction, KeyedCoProcessFunction
from airflow_flinkchain.state import ListStateDescriptor, MapStateDescriptor, ValueStateDescriptor

from conformance_cases import (TIME_MODES, TWO_INPUT_CASES_PATH, WithTimestamp, first_field, load_cases,
                               watermark_strategy)

RULES = MapStateDescriptor("rules", None, None)


def load_two_input_cases() -> list[dict]:
    return load_cases(TWO_INPUT_CASES_PATH)


def compared_modes(case: dict) -> list[str]:
    return [m for m in TIME_MODES if m not in case.get("not_compared", {})]


class Enrich(KeyedCoProcessFunction):
    """The `co` step's "enrich": orders (input 1) with the customer version valid at order time."""

    def open(self, runtime_context):
        self.n = runtime_context.get_state(ValueStateDescriptor("n"))
        self.pending = runtime_context.get_list_state(ListStateDescriptor("pending"))
        self.versions = runtime_context.get_list_state(ListStateDescriptor("versions"))

    def process_element1(self, order, ctx):
        n = (self.n.value() or 0) + 1
        self.n.update(n)
        ts = ctx.timestamp()
        self.pending.add((order[1], ts, n))
        ctx.timer_service().register_event_time_timer(ts + 100)

    def process_element2(self, customer, ctx):
        self.versions.add((ctx.timestamp(), customer[1]))

    def on_timer(self, timestamp, ctx):
        pending = list(self.pending.get())
        due = sorted((p for p in pending if p[1] + 100 <= timestamp), key=lambda p: (p[1], p[2]))
        if not due:
            return
        versions = list(self.versions.get())
        for amount, ts, n in due:
            valid = [v for v in versions if v[0] <= ts]
            level = max(valid, key=lambda v: v[0])[1] if valid else -1
            yield (ctx.get_current_key(), n, amount, ts, level)
        self.pending.update([p for p in pending if p[1] + 100 > timestamp])


class RuleFilter(BroadcastProcessFunction):
    """The `bc` step's "filter": rules (broadcast) set bounds, events are checked against them."""

    def process_element(self, event, ctx):
        rules = ctx.get_broadcast_state(RULES)
        lo, hi = rules.get("min"), rules.get("max")
        inside = (lo is None or lo <= event[1]) and (hi is None or event[1] <= hi)
        yield ("E", event[0], event[1], 1 if inside else 0)

    def process_broadcast_element(self, rule, ctx):
        rules = ctx.get_broadcast_state(RULES)
        rules.put(rule[0], rule[1])
        yield ("R", rule[0], rule[1], len(list(rules.keys())))


def _parallelism(stream, opts):
    if opts and "p" in opts:
        stream.set_parallelism(opts["p"])
    return stream


def _interval_join(a, b, spec):
    from airflow_flinkchain.functions import ProcessJoinFunction

    class Pairs(ProcessJoinFunction):
        def process_element(self, left, right, ctx):
            yield (left[0], left[1], right[1], left[2], right[2])

    joined = a.key_by(first_field).interval_join(b.key_by(first_field)).between(spec["lower"], spec["upper"])
    return joined.process(Pairs())


def sink_name(case: dict, sink: str) -> str:
    """The collect name of the case's `sink` when it was built into a shared pipeline."""
    return f"{case['name']}__{sink}"


def build_two_input_case(case: dict, mode: str, pipeline: Optional[StreamPipeline] = None) -> StreamPipeline:
    """The case's pipeline in runtime `mode` ("batch" or "streaming"), or `pipeline` with the
    case added (names prefixed, see `sink_name`; the pipeline's own runtime mode applies)."""
    p = pipeline or StreamPipeline(case["name"], parallelism=case.get("options", {}).get("p", 1), runtime_mode=mode)
    prefix = sink_name(case, "") if pipeline is not None else ""
    streams: dict[str, Any] = {}
    for step in case["steps"]:
        kind = step[0]
        if kind == "src":
            streams[step[1]] = p.from_collection([tuple(r) for r in step[2]]).name(prefix + step[1])
        elif kind == "watermarks":
            s = streams[step[2]].assign_timestamps_and_watermarks(watermark_strategy(step[3]))
            streams[step[1]] = _parallelism(s.name(prefix + step[1]), step[4] if len(step) > 4 else None)
        elif kind == "co":
            first, second = (streams[v] for v in step[2])
            assert step[3]["fn"] == "enrich", step
            out = first.connect(second).key_by(first_field, first_field).process(Enrich())
            streams[step[1]] = _parallelism(out.name(prefix + step[1]), step[3])
        elif kind == "bc":
            events, rules = (streams[v] for v in step[2])
            assert step[3]["fn"] == "filter", step
            out = events.connect(rules.broadcast(RULES)).process(RuleFilter())
            streams[step[1]] = _parallelism(out.name(prefix + step[1]), step[3])
        elif kind == "interval_join":
            a, b = (streams[v] for v in step[2])
            streams[step[1]] = _parallelism(_interval_join(a, b, step[3]).name(prefix + step[1]), step[3])
        elif kind == "sink":
            stamped = _parallelism(streams[step[2]].process(WithTimestamp()).name(f"{prefix}{step[1]}_stamp"), step[3])
            _parallelism(stamped.collect(prefix + step[1]), step[3])
        else:
            raise ValueError(f"unknown two-input step {step}")
    return p

