"""Every event-time case (Flink's shared ones and tests/eventtime/own_time_cases.py) built with
the public API (`conformance_cases.build_time_case`) and run with `execute_local()` in BATCH and
STREAMING mode: outputs `(value, timestamp)` equal the expected ones as multisets. The same cases
run on Spark in tests/runtime/test_time_conformance.py."""

from __future__ import annotations

import pytest

from conformance_cases import (TIME_CASES_PATH, TIME_MODES, build_time_case, load_cases, load_time_cases,
                               time_case_mismatches)

CASES = load_time_cases()


def test_every_step_kind_of_the_shared_cases_is_interpreted():
    shared = load_cases(TIME_CASES_PATH)
    kinds = {s[0] for c in shared for s in c["steps"]}
    assert kinds <= {"src", "watermarks", "map", "rebalance", "union", "window", "timers", "late", "sink"}
    assert {"tumbling_reduce_bounded", "session_merge", "lateness_side_output", "timers_bucket_count"} <= {
        c["name"] for c in shared}


def test_the_own_cases_cover_what_the_issue_lists():
    steps = {(s[0], s[3].get("assigner", [None])[0] if s[0] == "window" else None)
             for c in CASES for s in c["steps"] if len(s) > 3 and isinstance(s[3], dict)}
    kinds = {s[0] for c in CASES for s in c["steps"]}
    assert {("window", "sliding"), ("window", "session")} <= steps
    assert {"union", "rebalance", "late"} <= kinds
    assert any(s[0] == "window" and s[3].get("all") for c in CASES for s in c["steps"])
    assert any(s[0] == "timers" and s[3]["kind"] == "debounce" for c in CASES for s in c["steps"])


@pytest.mark.parametrize("mode", TIME_MODES)
@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_time_case_on_the_local_runner(case, mode):
    pipeline, sinks = build_time_case(case, mode)
    result = pipeline.execute_local()
    assert time_case_mismatches(case, mode, sinks, result.output) == [], case["desc"]
