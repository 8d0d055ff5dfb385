"""The TimestampsAndWatermarksOperator in a chain: what leaves the chain on its out-edge,
records with their timestamps and watermarks in order, per runtime mode and interval."""

from __future__ import annotations

import pytest

from airflow_flinkchain import Duration, StreamPipeline, TimestampAssigner, WatermarkStrategy
from airflow_flinkchain.runtime.core.elements import MAX_WATERMARK, StreamRecord, Watermark, WatermarkStatus
from airflow_flinkchain.runtime.core.errors import ChainExecutionError
from airflow_flinkchain.runtime.core.memory import MemoryWriters
from airflow_flinkchain.runtime.core.operator_chain import run_subtask

RECORDS = [("a", 100), ("b", 300), ("c", 200), ("d", 400)]


class Second(TimestampAssigner):
    def extract_timestamp(self, value, record_timestamp):
        return value[1]


def _out(mode, strategy, inputs=RECORDS, rebalance_first=False, interval=None):
    p = StreamPipeline("t", runtime_mode=mode)
    if interval is not None:
        p.get_config().set_auto_watermark_interval(interval)
    s = p.from_collection([]).name("src")
    if rebalance_first:
        s = s.rebalance()
    s.assign_timestamps_and_watermarks(strategy).name("wm").rebalance().map(lambda r: r).collect("out")
    job = p.plan()
    chain = next(c for c in job.chains if "wm" in c.operator_names)
    writers = MemoryWriters()
    run_subtask(job, chain.id, 0, "r", inputs, writers.record_writer_factory, writers.sink_writer_factory)
    (writer,) = [w for (e, _s), w in writers.channel.items() if e.startswith("wm__")]
    return writer.channels[0]


BOUNDED = WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_millis(50)).with_timestamp_assigner(Second())


def test_streaming_emits_a_watermark_after_every_record_that_advances_it():
    assert _out("streaming", BOUNDED) == [
        StreamRecord(("a", 100), 100), Watermark(49), StreamRecord(("b", 300), 300), Watermark(249),
        StreamRecord(("c", 200), 200), StreamRecord(("d", 400), 400), Watermark(349), MAX_WATERMARK]


def test_batch_mode_and_interval_zero_emit_only_the_final_watermark():
    expected = [StreamRecord(r, r[1]) for r in RECORDS] + [MAX_WATERMARK]
    assert _out("batch", BOUNDED) == expected
    assert _out("streaming", BOUNDED, interval=0) == expected


def test_upstream_watermarks_are_swallowed_but_the_final_one():
    inputs = [StreamRecord(("a", 100), 7), Watermark(5000), ("b", 300), MAX_WATERMARK]
    assert _out("streaming", BOUNDED, inputs, rebalance_first=True) == [
        StreamRecord(("a", 100), 100), Watermark(49), StreamRecord(("b", 300), 300), Watermark(249), MAX_WATERMARK]


def test_without_an_assigner_records_keep_their_timestamp():
    strategy = WatermarkStrategy.for_monotonous_timestamps()
    inputs = [StreamRecord("x", 10), StreamRecord("y", 20)]
    assert _out("streaming", strategy, inputs, rebalance_first=True) == [
        StreamRecord("x", 10), Watermark(9), StreamRecord("y", 20), Watermark(19), MAX_WATERMARK]


def test_a_subtask_without_records_is_idle_with_idleness_only():
    idle = BOUNDED.with_idleness(Duration.of_seconds(1))
    assert _out("streaming", idle, []) == [WatermarkStatus.IDLE, WatermarkStatus.ACTIVE, MAX_WATERMARK]
    assert _out("streaming", BOUNDED, []) == [MAX_WATERMARK]
    assert _out("streaming", idle, RECORDS[:1]) == [StreamRecord(("a", 100), 100), Watermark(49), MAX_WATERMARK]


def test_a_failing_timestamp_assigner_names_the_operator():
    strategy = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(lambda r, ts: r["ts"])
    with pytest.raises(ChainExecutionError, match="'wm'"):
        _out("streaming", strategy)
