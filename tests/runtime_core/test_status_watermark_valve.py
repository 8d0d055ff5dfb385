"""WatermarkValve with watermark statuses, as Flink's StatusWatermarkValve."""

from __future__ import annotations

from airflow_flinkchain.runtime.core.elements import MAX_WATERMARK_TS, Watermark, WatermarkStatus
from airflow_flinkchain.runtime.core.valve import WatermarkValve


def test_an_idle_channel_does_not_hold_the_watermark_back():
    valve = WatermarkValve(2)
    assert valve.input_watermark(0, 10) is None  # channel 1 still at MIN
    assert valve.input_watermark_status(1, True) == Watermark(10)
    assert valve.input_watermark(0, 20) == Watermark(20)
    assert valve.input_watermark(1, 30) is None  # watermarks of an idle channel are ignored
    assert not valve.idle


def test_a_reactivated_channel_counts_again_once_it_catches_up():
    valve = WatermarkValve(2)
    valve.input_watermark_status(1, True)
    valve.input_watermark(0, 20)
    assert valve.input_watermark_status(1, False) is None
    assert valve.input_watermark(1, 15) is None  # behind: not aligned, the combined watermark stays
    assert valve.input_watermark(0, 40) == Watermark(40)
    assert valve.input_watermark(1, 25) is None  # still behind 40
    assert valve.input_watermark(1, 50) is None  # aligned now: it holds nothing back (40 < 50)
    assert valve.input_watermark(0, 60) == Watermark(50)  # min over both again


def test_all_idle_outputs_the_highest_watermark_and_idle():
    valve = WatermarkValve(3)
    valve.input_watermark(0, 5)
    valve.input_watermark(1, 9)
    assert valve.input_watermark_status(0, True) is None  # channel 2 at MIN holds it back
    assert valve.input_watermark_status(2, True) == Watermark(9)
    assert valve.input_watermark_status(1, True) is None and valve.idle
    valve.input_watermark_status(0, False)
    assert not valve.idle


def test_idle_channel_that_held_the_minimum_releases_it():
    valve = WatermarkValve(2)
    valve.input_watermark(0, 3)
    assert valve.input_watermark(1, 8) == Watermark(3)
    assert valve.input_watermark_status(0, True) == Watermark(8)


def test_finished_idle_channel_ends_active_with_max():
    valve = WatermarkValve(2)
    valve.input_watermark_status(1, True)
    valve.input_watermark(0, 4)
    assert valve.channel_finished(1) is None  # MAX on 1, but channel 0 is at 4: combined stays 4
    assert valve.channel_finished(0) == Watermark(MAX_WATERMARK_TS)


def test_merge_consumes_statuses_and_yields_combined_watermarks():
    pairs = [(1, WatermarkStatus.IDLE), (0, "a"), (0, Watermark(5)), (0, "b"), (0, Watermark(7)),
             (1, Watermark(MAX_WATERMARK_TS))]
    assert list(WatermarkValve(2).merge(pairs)) == ["a", Watermark(5), "b", Watermark(7)]
    # without the status, channel 1 holds the watermark back until its end
    assert list(WatermarkValve(2).merge(pairs[1:])) == ["a", "b", Watermark(7)]


def test_hand_over_moves_a_split_to_the_next_channel_without_moving_the_watermark():
    """Channel 0 read a file's first piece, channel 1 goes on with it: channel 1 takes channel
    0's watermark (its own behind it does not count), channel 0 no longer counts; a finished
    channel 2 at MAX does not pull the combined watermark up meanwhile."""
    valve = WatermarkValve(3)
    valve.input_watermark_status(1, True)  # not started yet: idle from the start
    assert valve.input_watermark(2, MAX_WATERMARK_TS) is None
    assert valve.input_watermark(0, 100) == Watermark(100)
    assert valve.input_watermark_status(1, False) is None  # channel 1 starts: active, behind
    valve.hand_over(0, 1)
    assert valve.current_watermark == 100
    assert valve.input_watermark(1, 50) is None  # behind the piece before it: nothing moves
    assert valve.input_watermark(0, 500) is None  # channel 0 is idle now
    assert valve.input_watermark(1, 120) == Watermark(120)


def test_without_the_hand_over_the_finished_channel_would_win():
    valve = WatermarkValve(3)
    valve.input_watermark_status(1, True)
    valve.input_watermark(2, MAX_WATERMARK_TS)
    valve.input_watermark(0, 100)
    valve.input_watermark_status(1, False)
    assert valve.input_watermark_status(0, True) == Watermark(MAX_WATERMARK_TS)
