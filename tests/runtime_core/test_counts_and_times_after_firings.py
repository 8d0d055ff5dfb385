"""Operator counters and times where records do not arrive one by one through the chain's
head: a timestamp assigner stamping whole batches of a columnar source and feeding two keyed
edges, and operators after window firings, timers and BATCH results at the end of input."""

from __future__ import annotations

import os
import sys

from tests.keyed.util import pipeline

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "dags"))
from flinkchain_stream_runs import click_slices, drop_slice, stream_runs_pipeline  # noqa: E402


def by_name(result) -> dict:
    return {m["name"]: m for doc in result.metrics.values() for m in doc["operators"]}


def test_a_timestamp_assigner_feeding_two_edges_counts_each_record_once_and_is_timed(tmp_path):
    drop_slice(str(tmp_path / "in"), 0, click_slices()[0])  # 60 clicks
    result = stream_runs_pipeline(str(tmp_path / "in"), str(tmp_path / "out"), None).execute_local()
    ops = by_name(result)
    assert (ops["timestamps"]["records_in"], ops["timestamps"]["records_out"]) == (60, 60), ops["timestamps"]
    assert ops["page_views"]["records_in"] == 60 and ops["sessions"]["records_in"] == 60
    # every operator that got records has a time: the assigner, the window, the timers' operator
    # and the sinks after them (fed by firings on watermarks and at the end of input)
    for name in ("timestamps", "page_views", "page_views_json", "sessions", "sessions_json"):
        assert ops[name]["records_in"] > 0 and ops[name]["time_ms"] > 0, ops[name]


def test_operators_after_a_batch_reduce_are_timed():
    p, src = pipeline("batch", [((i % 10, i), i) for i in range(300)])
    (src.key_by(lambda r: r[0]).reduce(lambda a, b: (a[0], a[1] + b[1])).name("red")
     .map(lambda r: r).name("after").collect("out"))
    ops = by_name(p.execute_local())
    assert (ops["red"]["records_out"], ops["after"]["records_in"]) == (10, 10)
    assert ops["red"]["time_ms"] > 0 and ops["after"]["time_ms"] > 0, ops
