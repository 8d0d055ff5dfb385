"""Window triggers, named as PyFlink's `pyflink.datastream.window` (and offered by
`airflow_flinkchain.window`) with Java Flink's semantics: when a window fires and purges.

>>> CountTrigger.of(3)
CountTrigger(3)
"""

from __future__ import annotations

from enum import Enum
from typing import TYPE_CHECKING, Any

from airflow_flinkchain.common import to_millis
from airflow_flinkchain.state import ReducingStateDescriptor

if TYPE_CHECKING:  # pragma: no cover
    from airflow_flinkchain.window import Window


class TriggerResult(Enum):
    CONTINUE = (False, False)
    FIRE_AND_PURGE = (True, True)
    FIRE = (True, False)
    PURGE = (False, True)

    def is_fire(self) -> bool:
        return self.value[0]

    def is_purge(self) -> bool:
        return self.value[1]


class Trigger:
    """Decides when a window fires (and purges). Timers and state through the context are scoped
    to the current key and window."""

    class TriggerContext:
        def get_current_processing_time(self) -> int:  # pragma: no cover - interface
            raise NotImplementedError

        def get_metric_group(self) -> Any:  # pragma: no cover - interface
            raise NotImplementedError

        def get_current_watermark(self) -> int:  # pragma: no cover - interface
            raise NotImplementedError

        def register_processing_time_timer(self, time: int) -> None:  # pragma: no cover - interface
            raise NotImplementedError

        def register_event_time_timer(self, time: int) -> None:  # pragma: no cover - interface
            raise NotImplementedError

        def delete_processing_time_timer(self, time: int) -> None:  # pragma: no cover - interface
            raise NotImplementedError

        def delete_event_time_timer(self, time: int) -> None:  # pragma: no cover - interface
            raise NotImplementedError

        def get_partitioned_state(self, state_descriptor) -> Any:  # pragma: no cover - interface
            raise NotImplementedError

    class OnMergeContext(TriggerContext):
        def merge_partitioned_state(self, state_descriptor) -> None:  # pragma: no cover - interface
            raise NotImplementedError

    def on_element(self, element: Any, timestamp: int, window: Window, ctx: "Trigger.TriggerContext") -> TriggerResult:
        raise NotImplementedError

    def on_processing_time(self, time: int, window: Window, ctx: "Trigger.TriggerContext") -> TriggerResult:
        raise NotImplementedError

    def on_event_time(self, time: int, window: Window, ctx: "Trigger.TriggerContext") -> TriggerResult:
        raise NotImplementedError

    def can_merge(self) -> bool:
        return False

    def on_merge(self, window: Window, ctx: "Trigger.OnMergeContext") -> None:
        raise RuntimeError(f"{type(self).__name__} does not support merging windows (can_merge() is False)")

    def clear(self, window: Window, ctx: "Trigger.TriggerContext") -> None:
        raise NotImplementedError


class _NoProcessingTimeTrigger(Trigger):
    """Triggers that never fire on processing time, and can merge windows."""

    def on_processing_time(self, time, window, ctx) -> TriggerResult:
        return TriggerResult.CONTINUE

    def can_merge(self) -> bool:
        return True


class EventTimeTrigger(_NoProcessingTimeTrigger):
    """Fires once the watermark passes the window's end; fires at once for an element added to a
    window the watermark already passed (a late firing within the allowed lateness)."""

    @staticmethod
    def create() -> "EventTimeTrigger":
        return EventTimeTrigger()

    def on_element(self, element, timestamp, window, ctx) -> TriggerResult:
        if window.max_timestamp() <= ctx.get_current_watermark():
            return TriggerResult.FIRE
        ctx.register_event_time_timer(window.max_timestamp())
        return TriggerResult.CONTINUE

    def on_event_time(self, time, window, ctx) -> TriggerResult:
        return TriggerResult.FIRE if time == window.max_timestamp() else TriggerResult.CONTINUE

    def on_merge(self, window, ctx) -> None:
        # only register a timer if the watermark is not yet past the end of the merged window;
        # otherwise it would fire immediately and the window would be emitted twice
        if window.max_timestamp() > ctx.get_current_watermark():
            ctx.register_event_time_timer(window.max_timestamp())

    def clear(self, window, ctx) -> None:
        ctx.delete_event_time_timer(window.max_timestamp())

    def __repr__(self) -> str:
        return "EventTimeTrigger()"


def _sum(a: int, b: int) -> int:
    return a + b


def _min(a: int, b: int) -> int:
    return a if a <= b else b


class CountTrigger(_NoProcessingTimeTrigger):
    """Fires when the window holds `window_size` elements (counted since the last firing)."""

    def __init__(self, window_size: int):
        if not isinstance(window_size, int) or window_size <= 0:
            raise ValueError(f"CountTrigger.of needs a positive int count, got {window_size!r}")
        self._count = window_size
        self._state = ReducingStateDescriptor("count", _sum)

    @staticmethod
    def of(window_size: int) -> "CountTrigger":
        return CountTrigger(window_size)

    def on_element(self, element, timestamp, window, ctx) -> TriggerResult:
        count = ctx.get_partitioned_state(self._state)
        count.add(1)
        if count.get() >= self._count:
            count.clear()
            return TriggerResult.FIRE
        return TriggerResult.CONTINUE

    def on_event_time(self, time, window, ctx) -> TriggerResult:
        return TriggerResult.CONTINUE

    def on_merge(self, window, ctx) -> None:
        ctx.merge_partitioned_state(self._state)

    def clear(self, window, ctx) -> None:
        ctx.get_partitioned_state(self._state).clear()

    def __repr__(self) -> str:
        return f"CountTrigger({self._count})"


class PurgingTrigger(Trigger):
    """Turns every FIRE of the nested trigger into FIRE_AND_PURGE."""

    def __init__(self, nested_trigger: Trigger):
        if not isinstance(nested_trigger, Trigger):
            raise TypeError(f"PurgingTrigger.of needs a Trigger, got {nested_trigger!r}")
        self._nested = nested_trigger

    @staticmethod
    def of(nested_trigger: Trigger) -> "PurgingTrigger":
        return PurgingTrigger(nested_trigger)

    @staticmethod
    def _purging(result: TriggerResult) -> TriggerResult:
        return TriggerResult.FIRE_AND_PURGE if result.is_fire() else result

    def on_element(self, element, timestamp, window, ctx) -> TriggerResult:
        return self._purging(self._nested.on_element(element, timestamp, window, ctx))

    def on_processing_time(self, time, window, ctx) -> TriggerResult:
        return self._purging(self._nested.on_processing_time(time, window, ctx))

    def on_event_time(self, time, window, ctx) -> TriggerResult:
        return self._purging(self._nested.on_event_time(time, window, ctx))

    def can_merge(self) -> bool:
        return self._nested.can_merge()

    def on_merge(self, window, ctx) -> None:
        self._nested.on_merge(window, ctx)

    def clear(self, window, ctx) -> None:
        self._nested.clear(window, ctx)

    def __repr__(self) -> str:
        return f"PurgingTrigger({self._nested!r})"


def _java_rem(a: int, b: int) -> int:
    """Java's `%` (sign of the dividend)."""
    r = abs(a) % abs(b)
    return -r if a < 0 else r


class ContinuousEventTimeTrigger(_NoProcessingTimeTrigger):
    """Fires every `interval` of event time (aligned to multiples of it) and at the window's end."""

    def __init__(self, interval: int):
        if interval <= 0:
            raise ValueError(f"ContinuousEventTimeTrigger.of needs a positive interval, got {interval}")
        self._interval = interval
        self._state = ReducingStateDescriptor("fire-time", _min)

    @staticmethod
    def of(interval: Any) -> "ContinuousEventTimeTrigger":
        return ContinuousEventTimeTrigger(to_millis(interval, "ContinuousEventTimeTrigger.of(interval)"))

    def on_element(self, element, timestamp, window, ctx) -> TriggerResult:
        if window.max_timestamp() <= ctx.get_current_watermark():
            return TriggerResult.FIRE
        ctx.register_event_time_timer(window.max_timestamp())
        fire_timestamp = ctx.get_partitioned_state(self._state)
        if fire_timestamp.get() is None:
            self._register_next_fire_timestamp(timestamp - _java_rem(timestamp, self._interval), window, ctx,
                                               fire_timestamp)
        return TriggerResult.CONTINUE

    def on_event_time(self, time, window, ctx) -> TriggerResult:
        if time == window.max_timestamp():
            return TriggerResult.FIRE
        fire_timestamp = ctx.get_partitioned_state(self._state)
        if fire_timestamp.get() == time:
            fire_timestamp.clear()
            self._register_next_fire_timestamp(time, window, ctx, fire_timestamp)
            return TriggerResult.FIRE
        return TriggerResult.CONTINUE

    def on_merge(self, window, ctx) -> None:
        ctx.merge_partitioned_state(self._state)
        next_fire = ctx.get_partitioned_state(self._state).get()
        if next_fire is not None:
            ctx.register_event_time_timer(next_fire)

    def clear(self, window, ctx) -> None:
        fire_timestamp = ctx.get_partitioned_state(self._state)
        ts = fire_timestamp.get()
        if ts is not None:
            ctx.delete_event_time_timer(ts)
            fire_timestamp.clear()

    def _register_next_fire_timestamp(self, time, window, ctx, fire_timestamp) -> None:
        next_fire = min(time + self._interval, window.max_timestamp())
        fire_timestamp.add(next_fire)
        ctx.register_event_time_timer(next_fire)

    def __repr__(self) -> str:
        return f"ContinuousEventTimeTrigger({self._interval})"


class NeverTrigger(_NoProcessingTimeTrigger):
    """The default trigger of GlobalWindows: never fires."""

    def on_element(self, element, timestamp, window, ctx) -> TriggerResult:
        return TriggerResult.CONTINUE

    def on_event_time(self, time, window, ctx) -> TriggerResult:
        return TriggerResult.CONTINUE

    def on_merge(self, window, ctx) -> None:
        pass

    def clear(self, window, ctx) -> None:
        pass
