"""Operator times of stream runs after a restore, as the Chains tab reads them from the run
store: the second and later runs start each chain's input with the restored watermark, and
their operators are timed as in the first run (the sample is the first record, not that
watermark)."""

from __future__ import annotations

from airflow_flinkchain import StreamPipeline
from airflow_flinkchain.common import Duration, WatermarkStrategy
from airflow_flinkchain.store import RunStore
from tests.conformance_cases import first_field, sum_values, window_assigner
from tests.streamruns.partitioned_log import PartitionedLog, append

RUNS = ("r1", "r2", "r3")


def event_time_of(record, _timestamp):
    return record[2]


def pipeline(log: str, ckpt: str) -> StreamPipeline:
    strategy = WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_millis(500)).with_timestamp_assigner(
        event_time_of)
    p = StreamPipeline("times", runtime_mode="streaming", checkpoint_dir=ckpt)
    s = p.from_source(PartitionedLog(directory=log), name="log").uid("log")
    s = s.assign_timestamps_and_watermarks(strategy).uid("wm").name("wm")
    s.key_by(first_field).window(window_assigner(["tumbling", 1000])).reduce(sum_values).uid("win").name("win") \
        .collect("out")
    return p


def test_operators_that_restored_state_are_timed_in_the_third_run(tmp_path, store_url):
    store = RunStore(store_url)
    log, ckpt = str(tmp_path / "log"), str(tmp_path / "ckpt")
    for k, run_id in enumerate(RUNS):
        append(log, "p0", [("ab"[i % 2], i, 10_000 * k + 300 * i) for i in range(20)])
        result = pipeline(log, ckpt).execute_local(run_id=run_id)
        store.start_run("times", run_id, plan=None, started_at=f"2025-01-0{k + 1}T10:00:00Z")
        for doc in result.metrics.values():
            store.record_attempt(doc, try_number=1)
    chains = store.get_run_metrics("times", RUNS[-1])["chains"]
    operators = {o["key"]: o for c in chains for o in c["operators"]}
    window = operators["win"]
    assert window["records_in"] == 20 and window["time_ms"] > 0, window  # restored its windows, then timed
    assert operators["wm"]["time_ms"] > 0, operators["wm"]
    [win_chain] = [c for c in chains if any(o["key"] == "win" for o in c["operators"])]
    assert win_chain["slowest"] == "win"
