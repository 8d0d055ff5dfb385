import pytest

from airflow_flinkchain.common import LONG_MAX, Duration, Time
from airflow_flinkchain.runtime.state.backend import HeapKeyedStateBackend
from airflow_flinkchain.window import (
    CountSlidingWindowAssigner,
    CountTrigger,
    CountTumblingWindowAssigner,
    CountWindow,
    EventTimeSessionWindows,
    EventTimeTrigger,
    GlobalWindow,
    GlobalWindows,
    MergingWindowAssigner,
    PurgingTrigger,
    SlidingEventTimeWindows,
    TimeWindow,
    TriggerResult,
    TumblingEventTimeWindows,
)


def _java_window_start(timestamp, offset, size):
    rem = abs(timestamp - offset) % size
    rem = -rem if timestamp - offset < 0 else rem
    return timestamp - (rem + size) if rem < 0 else timestamp - rem


@pytest.mark.parametrize("ts", [-2500, -1000, -1, 0, 1, 999, 1000, 1234567])
@pytest.mark.parametrize("offset", [0, 100, -300])
def test_window_start_with_offset_matches_javas_formula(ts, offset):
    assert TimeWindow.get_window_start_with_offset(ts, offset, 1000) == _java_window_start(ts, offset, 1000)


def test_time_window():
    w = TimeWindow(0, 1000)
    assert w.max_timestamp() == 999
    assert w.intersects(TimeWindow(1000, 2000))  # touching windows intersect (sessions merge)
    assert not w.intersects(TimeWindow(1001, 2000))
    assert w.cover(TimeWindow(500, 1500)) == TimeWindow(0, 1500)
    assert {TimeWindow(0, 1): 1}[TimeWindow(0, 1)] == 1


def test_merge_windows_reports_each_group_of_more_than_one():
    merges = []

    class Cb(MergingWindowAssigner.MergeCallback):
        def merge(self, to_be_merged, merge_result):
            merges.append((sorted(to_be_merged), merge_result))

    TimeWindow.merge_windows([TimeWindow(5, 10), TimeWindow(0, 5), TimeWindow(20, 25), TimeWindow(30, 40),
                              TimeWindow(35, 36)], Cb())
    assert merges == [([TimeWindow(0, 5), TimeWindow(5, 10)], TimeWindow(0, 10)),
                      ([TimeWindow(30, 40), TimeWindow(35, 36)], TimeWindow(30, 40))]


def test_count_and_global_windows():
    assert CountWindow(3).max_timestamp() == LONG_MAX and CountWindow(3) == CountWindow(3)
    assert GlobalWindow.get() is GlobalWindow.get() and GlobalWindow.get().max_timestamp() == LONG_MAX
    assert GlobalWindows.create().assign_windows("x", None, None) == [GlobalWindow.get()]
    assert not GlobalWindows.create().is_event_time()


def test_tumbling_accepts_time_duration_and_int():
    for size, offset in ((Time.seconds(1), Time.milliseconds(200)), (Duration.of_seconds(1), Duration.of_millis(200)),
                         (1000, 200)):
        assert TumblingEventTimeWindows.of(size, offset).assign_windows(None, 1100, None) == [TimeWindow(200, 1200)]
    assert TumblingEventTimeWindows.of(Time.seconds(1)).assign_windows(None, -1, None) == [TimeWindow(-1000, 0)]


def test_assigner_parameter_checks():
    with pytest.raises(ValueError, match="abs\\(offset\\) < size"):
        TumblingEventTimeWindows.of(1000, 1000)
    with pytest.raises(ValueError):
        SlidingEventTimeWindows.of(1000, 0)
    with pytest.raises(ValueError):
        EventTimeSessionWindows.with_gap(0)
    with pytest.raises(TypeError, match="Time, a Duration or an int"):
        TumblingEventTimeWindows.of("1s")


def test_event_time_assigners_need_a_timestamp():
    with pytest.raises(RuntimeError, match="assign_timestamps_and_watermarks"):
        TumblingEventTimeWindows.of(1000).assign_windows("r", None, None)


def test_sliding_windows_cover_the_element():
    windows = SlidingEventTimeWindows.of(1000, 250).assign_windows(None, 1100, None)
    assert windows == [TimeWindow(1000, 2000), TimeWindow(750, 1750), TimeWindow(500, 1500), TimeWindow(250, 1250)]
    assert SlidingEventTimeWindows.of(1000, 500, 100).assign_windows(None, 1100, None) == [
        TimeWindow(1100, 2100), TimeWindow(600, 1600)]


def test_session_windows():
    a = EventTimeSessionWindows.with_gap(Time.milliseconds(500))
    assert a.assign_windows(None, 1000, None) == [TimeWindow(1000, 1500)]
    assert isinstance(a, MergingWindowAssigner) and isinstance(a.get_default_trigger(), EventTimeTrigger)


class _Ctx:
    def __init__(self):
        self.backend = HeapKeyedStateBackend()
        self.backend.set_current_key("k")

    def get_runtime_context(self):
        return self.backend


def test_count_tumbling_assigner_numbers_windows_per_key():
    ctx = _Ctx()
    a = CountTumblingWindowAssigner.of(2)
    assert [a.assign_windows(None, None, ctx)[0].id for _ in range(5)] == [0, 0, 1, 1, 2]
    assert isinstance(a.get_default_trigger(), CountTrigger)


def test_count_sliding_assigner():
    ctx = _Ctx()
    a = CountSlidingWindowAssigner.of(3, 2)
    got = [sorted(w.id for w in a.assign_windows(None, None, ctx)) for _ in range(5)]
    assert got == [[0], [0], [0, 1], [1], [1, 2]]


def test_trigger_result_flags_and_purging_wrapper():
    assert TriggerResult.FIRE.is_fire() and not TriggerResult.FIRE.is_purge()
    assert TriggerResult.FIRE_AND_PURGE.is_purge() and TriggerResult.PURGE.is_purge()
    assert not TriggerResult.CONTINUE.is_fire()
    assert PurgingTrigger.of(CountTrigger.of(2)).can_merge()
    with pytest.raises(TypeError):
        PurgingTrigger.of(3)
    with pytest.raises(ValueError):
        CountTrigger.of(0)
