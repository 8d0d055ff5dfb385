"""Windows, window assigners and triggers, named as PyFlink's `pyflink.datastream.window`
with Java Flink's semantics. Sizes accept `Time`, `Duration` or int milliseconds.

>>> [w for w in SlidingEventTimeWindows.of(Time.seconds(10), Time.seconds(5)).assign_windows(None, 12_000, None)]
[TimeWindow(start=10000, end=20000), TimeWindow(start=5000, end=15000)]
>>> TimeWindow.get_window_start_with_offset(1200, 0, 1000)
1000
"""

from __future__ import annotations

from operator import itemgetter
from typing import Any, Callable, Collection, Iterable, List

from airflow_flinkchain.common import LONG_MAX, LONG_MIN, Time, to_millis  # noqa: F401  (Time: PyFlink's window sizes)
from airflow_flinkchain.state import ValueStateDescriptor
from airflow_flinkchain.window_triggers import (ContinuousEventTimeTrigger, CountTrigger, EventTimeTrigger,  # noqa: F401
                                                NeverTrigger, PurgingTrigger, Trigger, TriggerResult)


# ---- windows -----------------------------------------------------------------------

class Window:
    """A finite bucket of elements; `max_timestamp()` is the largest timestamp it holds."""

    __slots__ = ()

    def max_timestamp(self) -> int:  # pragma: no cover - interface
        raise NotImplementedError


class TimeWindow(tuple, Window):
    """Event-time interval [start, end). A tuple underneath: windows are state namespaces and
    timer keys, hashed and compared per record."""

    __slots__ = ()

    def __new__(cls, start: int, end: int):
        return tuple.__new__(cls, (start, end))

    start = property(itemgetter(0))
    end = property(itemgetter(1))

    def max_timestamp(self) -> int:
        return self[1] - 1

    def intersects(self, other: "TimeWindow") -> bool:
        return self[0] <= other[1] and self[1] >= other[0]

    def cover(self, other: "TimeWindow") -> "TimeWindow":
        return TimeWindow(min(self[0], other[0]), max(self[1], other[1]))

    @staticmethod
    def get_window_start_with_offset(timestamp: int, offset: int, window_size: int) -> int:
        # Python's % already gives the non-negative remainder Java computes with a correction
        return timestamp - (timestamp - offset) % window_size

    @staticmethod
    def merge_windows(windows: Iterable["TimeWindow"], callback: "MergingWindowAssigner.MergeCallback") -> None:
        """Merges overlapping (or touching) windows; `callback.merge(to_be_merged, merge_result)`
        for every group of more than one window."""
        merged: List[list] = []  # [cover, [windows]]
        current = None
        for candidate in sorted(windows, key=lambda w: w.start):
            if current is None:
                current = [candidate, [candidate]]
            elif current[0].intersects(candidate):
                current[0] = current[0].cover(candidate)
                current[1].append(candidate)
            else:
                merged.append(current)
                current = [candidate, [candidate]]
        if current is not None:
            merged.append(current)
        for merge_result, group in merged:
            if len(group) > 1:
                callback.merge(group, merge_result)

    def __repr__(self) -> str:
        return f"TimeWindow(start={self[0]}, end={self[1]})"

    def __reduce__(self):
        return (TimeWindow, (self[0], self[1]))


class CountWindow(Window):
    """The `id`-th window of a count-window assigner."""

    __slots__ = ("id",)

    def __init__(self, id: int):
        self.id = id

    def max_timestamp(self) -> int:
        return LONG_MAX

    def __eq__(self, other: object) -> bool:
        return type(other) is CountWindow and other.id == self.id

    def __hash__(self) -> int:
        return hash(("CountWindow", self.id))

    def __lt__(self, other: "CountWindow") -> bool:
        return self.id < other.id

    def __repr__(self) -> str:
        return f"CountWindow(id={self.id})"

    def __reduce__(self):
        return (CountWindow, (self.id,))


class GlobalWindow(Window):
    """The single window of `GlobalWindows`."""

    __slots__ = ()

    @staticmethod
    def get() -> "GlobalWindow":
        return _GLOBAL_WINDOW

    def max_timestamp(self) -> int:
        return LONG_MAX

    def __eq__(self, other: object) -> bool:
        return type(other) is GlobalWindow

    def __hash__(self) -> int:
        return 0

    def __lt__(self, other: "GlobalWindow") -> bool:
        return False

    def __repr__(self) -> str:
        return "GlobalWindow"

    def __reduce__(self):
        return (GlobalWindow.get, ())


_GLOBAL_WINDOW = GlobalWindow()


# ---- assigners -------------------------------------------------------------------------

class WindowAssigner:
    """Assigns an element (with its timestamp) to zero or more windows."""

    class WindowAssignerContext:
        def get_current_processing_time(self) -> int:  # pragma: no cover - interface
            raise NotImplementedError

        def get_runtime_context(self) -> Any:  # pragma: no cover - interface
            raise NotImplementedError

    def assign_windows(self, element: Any, timestamp: int, context: "WindowAssigner.WindowAssignerContext") -> Collection[Window]:
        raise NotImplementedError

    def get_default_trigger(self, env: Any = None) -> Trigger:
        raise NotImplementedError

    def is_event_time(self) -> bool:
        raise NotImplementedError


class MergingWindowAssigner(WindowAssigner):
    class MergeCallback:
        def merge(self, to_be_merged: Iterable[Window], merge_result: Window) -> None:  # pragma: no cover
            raise NotImplementedError

    def merge_windows(self, windows: Iterable[Window], callback: "MergingWindowAssigner.MergeCallback") -> None:
        raise NotImplementedError


class _EventTimeWindows(WindowAssigner):
    """Assigners by the record's event timestamp, fired by an EventTimeTrigger by default."""

    def get_default_trigger(self, env: Any = None) -> Trigger:
        return EventTimeTrigger()

    def is_event_time(self) -> bool:
        return True


class _EventTimeSessions(_EventTimeWindows, MergingWindowAssigner):
    """Session assigners: each element opens its own window; overlapping ones merge."""

    def merge_windows(self, windows, callback) -> None:
        TimeWindow.merge_windows(windows, callback)


def _check_timestamp(timestamp: Any, assigner: str) -> None:
    if timestamp is None or timestamp == LONG_MIN:
        raise RuntimeError(
            f"{assigner}: a record has no event timestamp. Call "
            "assign_timestamps_and_watermarks(WatermarkStrategy...with_timestamp_assigner(...)) before the window."
        )


class TumblingEventTimeWindows(_EventTimeWindows):
    def __init__(self, size: int, offset: int = 0):
        if size <= 0 or abs(offset) >= size:
            raise ValueError(f"TumblingEventTimeWindows parameters must satisfy abs(offset) < size and size > 0, "
                             f"got size={size}, offset={offset}")
        self._size = size
        self._offset = offset
        self._last_window = None

    @staticmethod
    def of(size: Any, offset: Any = None) -> "TumblingEventTimeWindows":
        return TumblingEventTimeWindows(to_millis(size, "TumblingEventTimeWindows size"),
                                        0 if offset is None else to_millis(offset, "TumblingEventTimeWindows offset"))

    def assign_windows(self, element, timestamp, context) -> List[TimeWindow]:
        if timestamp is None or timestamp == LONG_MIN:
            _check_timestamp(timestamp, "TumblingEventTimeWindows")
        start = timestamp - (timestamp - self._offset) % self._size
        window = self._last_window
        if window is None or window[0] != start:  # consecutive records mostly share a window
            window = self._last_window = TimeWindow(start, start + self._size)
        return [window]

    def __repr__(self) -> str:
        return f"TumblingEventTimeWindows({self._size}, {self._offset})"


class SlidingEventTimeWindows(_EventTimeWindows):
    def __init__(self, size: int, slide: int, offset: int = 0):
        if size <= 0 or slide <= 0 or abs(offset) >= slide:
            raise ValueError("SlidingEventTimeWindows parameters must satisfy abs(offset) < slide and size > 0, "
                             f"slide > 0, got size={size}, slide={slide}, offset={offset}")
        self._size = size
        self._slide = slide
        self._offset = offset

    @staticmethod
    def of(size: Any, slide: Any, offset: Any = None) -> "SlidingEventTimeWindows":
        return SlidingEventTimeWindows(to_millis(size, "SlidingEventTimeWindows size"),
                                       to_millis(slide, "SlidingEventTimeWindows slide"),
                                       0 if offset is None else to_millis(offset, "SlidingEventTimeWindows offset"))

    def assign_windows(self, element, timestamp, context) -> List[TimeWindow]:
        _check_timestamp(timestamp, "SlidingEventTimeWindows")
        windows = []
        start = timestamp - (timestamp - self._offset) % self._slide
        while start > timestamp - self._size:
            windows.append(TimeWindow(start, start + self._size))
            start -= self._slide
        return windows

    def __repr__(self) -> str:
        return f"SlidingEventTimeWindows({self._size}, {self._slide}, {self._offset})"


class EventTimeSessionWindows(_EventTimeSessions):
    """Sessions: each element opens [ts, ts + gap); windows that overlap or touch merge."""

    def __init__(self, session_gap: int):
        if session_gap <= 0:
            raise ValueError(f"EventTimeSessionWindows parameters must satisfy 0 < size, got {session_gap}")
        self._session_gap = session_gap

    @staticmethod
    def with_gap(size: Any) -> "EventTimeSessionWindows":
        return EventTimeSessionWindows(to_millis(size, "EventTimeSessionWindows gap"))

    @staticmethod
    def with_dynamic_gap(extractor: Callable[[Any], int]) -> "DynamicEventTimeSessionWindows":
        return DynamicEventTimeSessionWindows(extractor)

    def assign_windows(self, element, timestamp, context) -> List[TimeWindow]:
        _check_timestamp(timestamp, "EventTimeSessionWindows")
        return [TimeWindow(timestamp, timestamp + self._session_gap)]

    def __repr__(self) -> str:
        return f"EventTimeSessionWindows({self._session_gap})"


class SessionWindowTimeGapExtractor:
    """The session gap (ms) of each element, for `EventTimeSessionWindows.with_dynamic_gap`."""

    def extract(self, element: Any) -> int:  # pragma: no cover - interface
        raise NotImplementedError


class DynamicEventTimeSessionWindows(_EventTimeSessions):
    """Sessions whose gap `extractor(element)` (ms) is chosen per element."""

    def __init__(self, session_window_time_gap_extractor: Any):
        extract = getattr(session_window_time_gap_extractor, "extract", session_window_time_gap_extractor)
        if not callable(extract):
            raise TypeError("DynamicEventTimeSessionWindows needs a SessionWindowTimeGapExtractor or a callable")
        self._extract = extract

    @staticmethod
    def with_dynamic_gap(extractor: Any) -> "DynamicEventTimeSessionWindows":
        return DynamicEventTimeSessionWindows(extractor)

    def assign_windows(self, element, timestamp, context) -> List[TimeWindow]:
        _check_timestamp(timestamp, "DynamicEventTimeSessionWindows")
        gap = self._extract(element)
        if gap <= 0:
            raise ValueError(f"DynamicEventTimeSessionWindows: the gap extractor returned {gap} for {element!r}; "
                             "it must be positive")
        return [TimeWindow(timestamp, timestamp + gap)]


class GlobalWindows(WindowAssigner):
    """Everything into one window; fires only by a custom trigger (default: never)."""

    @staticmethod
    def create() -> "GlobalWindows":
        return GlobalWindows()

    def assign_windows(self, element, timestamp, context) -> List[GlobalWindow]:
        return [_GLOBAL_WINDOW]

    def get_default_trigger(self, env: Any = None) -> Trigger:
        return NeverTrigger()

    def is_event_time(self) -> bool:
        return False

    def __repr__(self) -> str:
        return "GlobalWindows()"


class _CountWindows(WindowAssigner):
    """Count-window assigners: a key's records numbered in arrival order, fired by a CountTrigger."""

    _window_size: int
    _counter: ValueStateDescriptor

    def _next_count(self, context) -> int:
        """The number of this key's records before this one."""
        count_state = context.get_runtime_context().get_state(self._counter)
        current = count_state.value() or 0
        count_state.update(current + 1)
        return current

    def get_default_trigger(self, env: Any = None) -> Trigger:
        return CountTrigger(self._window_size)

    def is_event_time(self) -> bool:
        return False


class CountTumblingWindowAssigner(_CountWindows):
    """Every `window_size` elements of a key form a CountWindow (PyFlink's `count_window(size)`)."""

    _counter = ValueStateDescriptor("tumble-count-assigner")

    def __init__(self, window_size: int):
        if window_size <= 0:
            raise ValueError(f"count window size must be positive, got {window_size}")
        self._window_size = window_size

    @staticmethod
    def of(window_size: int) -> "CountTumblingWindowAssigner":
        return CountTumblingWindowAssigner(window_size)

    def assign_windows(self, element, timestamp, context) -> List[CountWindow]:
        current = self._next_count(context)
        return [CountWindow(current // self._window_size)]


class CountSlidingWindowAssigner(_CountWindows):
    """Windows of `window_size` elements starting every `window_slide` elements of a key."""

    _counter = ValueStateDescriptor("slide-count-assigner")

    def __init__(self, window_size: int, window_slide: int):
        if window_size <= 0 or window_slide <= 0:
            raise ValueError(f"count window size and slide must be positive, got {window_size}, {window_slide}")
        self._window_size = window_size
        self._window_slide = window_slide

    @staticmethod
    def of(window_size: int, window_slide: int) -> "CountSlidingWindowAssigner":
        return CountSlidingWindowAssigner(window_size, window_slide)

    def assign_windows(self, element, timestamp, context) -> List[CountWindow]:
        current = self._next_count(context)
        last_id = current // self._window_slide
        last_start = last_id * self._window_slide
        last_end = last_start + self._window_size - 1
        windows = []
        while last_id >= 0 and last_start <= current <= last_end:
            windows.append(CountWindow(last_id))
            last_id -= 1
            last_start -= self._window_slide
            last_end -= self._window_slide
        return windows
