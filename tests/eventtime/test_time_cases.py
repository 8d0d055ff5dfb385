"""The window and timer cases of Flink's event-time conformance data (src -> watermarks ->
window|timers -> sink, parallelism 1), run on the WindowOperator / timer service harness in
STREAMING and BATCH mode and compared with Flink 2.3's outputs as multisets."""

from __future__ import annotations

from collections import Counter

import pytest

from airflow_flinkchain.functions import OutputTag
from airflow_flinkchain.runtime.core.operators.window import (
    WindowOperator,
    aggregate_window,
    process_window,
    reduce_window,
)

from conformance_cases import (
    TIME_CASES_PATH,
    TIME_MODES,
    Average,
    BucketTimers,
    CountPerAllWindow,
    CountPerWindow,
    as_multiset,
    first_field,
    load_cases,
    sum_values,
    times_ten,
    watermark_strategy,
    window_assigner,
)
from tests.eventtime.harness import CollectingOutput, KeyedProcessHarness, run_batch_mode, run_streaming

SUPPORTED = {"src", "watermarks", "map", "window", "timers", "late", "sink"}


def _cases():
    return [c for c in load_cases(TIME_CASES_PATH)
            if all(s[0] in SUPPORTED for s in c["steps"]) and c.get("options", {}).get("p", 1) == 1
            and not any(isinstance(s[-1], dict) and s[-1].get("p", 1) != 1 for s in c["steps"])]


def _window_fn(spec):
    fn = spec["fn"]
    if fn == "sum":
        return reduce_window(sum_values)
    if fn == "avg":
        return aggregate_window(Average())
    if fn == "count":
        return process_window(CountPerAllWindow() if spec.get("all") else CountPerWindow())
    raise AssertionError(fn)


def run_case(case, mode):
    """{sink name: Counter of (value, timestamp)}."""
    streams = {}  # var -> ("records", list) | ("op", operator, output) | ("side", output, tag)
    strategies = {}
    sinks = {}
    for step in case["steps"]:
        kind = step[0]
        if kind == "src":
            streams[step[1]] = [list(r) for r in step[2]]
        elif kind == "watermarks":
            streams[step[1]] = streams[step[2]]
            strategies[step[1]] = watermark_strategy(step[3])
        elif kind == "map":
            streams[step[1]] = [times_ten(r) for r in streams[step[2]]]
            strategies[step[1]] = strategies[step[2]]
        elif kind in ("window", "timers"):
            spec = step[3]
            out = CollectingOutput()
            if kind == "window":
                descriptor, fn = _window_fn(spec)
                op = WindowOperator(window_assigner(spec["assigner"]), descriptor, fn, out,
                                    key_selector=None if spec.get("all") else first_field,
                                    allowed_lateness=spec.get("lateness", 0),
                                    late_data_output_tag=OutputTag(spec["late_tag"]) if spec.get("late_tag") else None,
                                    name=step[1])
            else:
                assert spec["kind"] == "bucket"
                op = KeyedProcessHarness(BucketTimers(spec["size"]), first_field, out)
            (run_streaming if mode == "streaming" else run_batch_mode)(op, streams[step[2]], strategies[step[2]])
            streams[step[1]] = ("out", out, spec.get("late_tag"))
        elif kind == "late":
            _, out, tag = streams[step[2]]
            streams[step[1]] = ("late", out, tag)
        elif kind == "sink":
            what, out, tag = streams[step[2]]
            rows = out.records if what == "out" else out.side.get(tag, [])
            sinks[step[1]] = as_multiset(rows)
    return sinks


CASES = _cases()


def test_the_window_and_timer_cases_are_found():
    names = {c["name"] for c in CASES}
    assert {"tumbling_reduce_bounded", "session_merge", "lateness_side_output", "timers_bucket_count"} <= names


@pytest.mark.parametrize("mode", TIME_MODES)
@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_flink_time_case(case, mode):
    got = run_case(case, mode)
    for sink, rows in case[f"flink_outputs_{mode}"].items():
        assert got.get(sink, Counter()) == as_multiset(rows), f"{case['name']} {mode} sink {sink}: {case['desc']}"
