"""The shared two-input conformance cases, run in process (execute_local) in every mode
they compare, against Flink's outputs (multisets of [value, timestamp])."""

from __future__ import annotations

import pytest

from conformance_cases import as_multiset

from .cases import build_two_input_case, compared_modes, load_two_input_cases

CASES = {c["name"]: c for c in load_two_input_cases()}
OWN = ["keyed_enrich", "broadcast_filter_p2"]  # interval_join: the join helper's operator


@pytest.mark.parametrize("mode", ["batch", "streaming"])
@pytest.mark.parametrize("name", OWN)
def test_shared_case_matches_flink(name, mode):
    case = CASES[name]
    if mode not in compared_modes(case):
        pytest.skip(f"{name}: {mode} is not compared ({case['not_compared'][mode]})")
    result = build_two_input_case(case, mode).execute_local()
    for sink, expected in case[f"expected_outputs_{mode}"].items():
        assert as_multiset(result.output(sink)) == as_multiset(expected), sink


def test_the_cases_are_vendored():
    assert set(OWN) <= set(CASES)
