"""The `watermark` gauge of every operator (metrics_schema.GAUGES): the watermark it had reached
before the MAX watermark ended its input; None in BATCH mode and without an assigner."""

from __future__ import annotations

from airflow_flinkchain import StreamPipeline
from airflow_flinkchain.common import Duration, WatermarkStrategy
from airflow_flinkchain.window import TumblingEventTimeWindows

RECORDS = [("a", 1, 100), ("b", 2, 1500), ("a", 3, 2600), ("b", 4, 900)]


def _watermarks(mode: str, with_assigner: bool = True) -> dict:
    p = StreamPipeline("wm_metric", parallelism=2, runtime_mode=mode)
    s = p.from_collection(RECORDS).name("src")
    if with_assigner:
        strategy = WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_millis(100))
        s = s.assign_timestamps_and_watermarks(strategy.with_timestamp_assigner(lambda r, _ts: r[2])).name("wm")
        s = s.key_by(lambda r: r[0]).window(TumblingEventTimeWindows.of(Duration.of_millis(1000)))
    else:
        s = s.key_by(lambda r: r[0])
    s.reduce(lambda a, b: a).name("win").collect("out")
    result = p.execute_local()
    found: dict = {}
    for doc in result.metrics.values():
        for op in doc["operators"]:
            found.setdefault(op["name"], []).append(op["watermark"])
    return found


def test_streaming_operators_report_their_last_watermark_before_the_end():
    wm = _watermarks("streaming")
    assert wm["src"] == [None]  # before the assigner: no watermark
    # The two assigner subtasks got records round robin: 100, 2600 and 1500, 900.
    assert sorted(wm["wm"]) == [1399, 2499]
    # Each window subtask reads both assigner subtasks: the minimum.
    assert wm["win"] == [1399, 1399] and wm["out"] == [1399, 1399]


def test_no_watermark_in_batch_mode_or_without_an_assigner():
    for wm in (_watermarks("batch"), _watermarks("streaming", with_assigner=False)):
        assert {v for values in wm.values() for v in values} == {None}
