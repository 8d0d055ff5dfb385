"""Flink's event-time conformance cases (tests/data/flink-conformance/time_cases.json) and the own
ones (tests/eventtime/own_time_cases.py), interpreted with the public API and run as real Spark
runs in BATCH and STREAMING mode; outputs `(value, timestamp)` compared as multisets with Flink's.

All cases of one mode are independent sub-pipelines of one StreamPipeline, so the file costs two
Spark executions."""

from __future__ import annotations

import pytest

from airflow_flinkchain.runtime.spark.local import execute_pipeline
from conformance_cases import TIME_MODES, build_time_cases, load_time_cases, time_case_mismatches

CASES = load_time_cases()

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def runs(spark, tmp_path_factory):
    """{mode: (result, {case: {sink: collect name}})}, each mode run once, on first use."""
    done: dict = {}

    def run(mode: str):
        if mode not in done:
            pipeline, sinks = build_time_cases(CASES, mode, f"time_cases_{mode}")
            root = tmp_path_factory.mktemp(f"exchange_{mode}")
            done[mode] = (execute_pipeline(pipeline, spark=spark, exchange_root=str(root)), sinks)
        return done[mode]

    return run


def test_the_shared_cases_are_all_here():
    names = {c["name"] for c in CASES}
    assert {"tumbling_reduce_bounded", "tumbling_aggregate_avg", "session_merge", "lateness_side_output",
            "timers_bucket_count"} <= names


@pytest.mark.parametrize("mode", TIME_MODES)
@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_time_case_on_spark(runs, case, mode):
    result, sinks = runs(mode)
    assert time_case_mismatches(case, mode, sinks[case["name"]], result.output) == [], case["desc"]
