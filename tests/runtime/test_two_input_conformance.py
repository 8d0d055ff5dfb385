"""The shared two-input cases (tests/data/flink-conformance/two_input_cases.json) as real Spark runs:
every case in every mode it compares, outputs as multisets of [value, timestamp].

One StreamPipeline per runtime mode holds every case as an independent sub-pipeline, so the
whole file costs two executions."""

from __future__ import annotations

import pytest

from airflow_flinkchain import StreamPipeline
from conformance_cases import TIME_MODES, as_multiset
from tests.two_input.cases import build_two_input_case, compared_modes, load_two_input_cases, sink_name

pytestmark = pytest.mark.spark

CASES = load_two_input_cases()
RUNS = [(mode, case) for mode in TIME_MODES for case in CASES if mode in compared_modes(case)]


@pytest.fixture(scope="module")
def results(spark, tmp_path_factory):
    """{mode: result of one execute() of every case compared in that mode}."""
    runs = {}
    for mode in TIME_MODES:
        p = StreamPipeline(f"two_input_{mode}", runtime_mode=mode)
        for case in CASES:
            if mode in compared_modes(case):
                build_two_input_case(case, mode, pipeline=p)
        runs[mode] = p.execute(spark=spark, run_id=f"two_input_{mode}",
                               exchange_root=str(tmp_path_factory.mktemp(f"exchange_{mode}")))
    return runs


def test_every_case_is_compared_in_some_mode():
    assert CASES, "no two-input cases vendored"
    for case in CASES:
        assert compared_modes(case), case["name"]
        assert set(case.get("not_compared", {})) <= set(TIME_MODES), case["name"]


@pytest.mark.parametrize("mode,case", RUNS, ids=[f"{m}-{c['name']}" for m, c in RUNS])
def test_two_input_case_on_spark(results, mode, case):
    expected = case[f"expected_outputs_{mode}"]
    assert expected, f"{case['name']} compares {mode} but has no expected outputs"
    for sink, rows in expected.items():
        got = results[mode].output(sink_name(case, sink))
        assert as_multiset(got) == as_multiset(rows), (case["name"], mode, sink)
