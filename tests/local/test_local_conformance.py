"""Every shared Flink conformance case gives Flink's BATCH outputs under execute_local()."""

from __future__ import annotations

import pytest

from conformance_cases import CASES_PATH, build_case, load_cases

CASES = load_cases() or []


@pytest.mark.skipif(not CASES, reason=f"shared Flink conformance cases not found at {CASES_PATH}")
@pytest.mark.parametrize("case", CASES, ids=lambda c: c["name"])
def test_flink_conformance_outputs(case):
    pipeline, _ = build_case(case)
    res = pipeline.execute_local()
    assert set(res.outputs) == set(case["flink_outputs_batch"])
    for sink, expected in case["flink_outputs_batch"].items():
        assert sorted(res.output(sink)) == sorted(expected), sink
