"""Watermark strategies and generators, named as PyFlink's `pyflink.common.watermark_strategy`.

>>> g = WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_millis(500)).create_watermark_generator()
>>> out = CollectingWatermarkOutput()
>>> g.on_event("r", 1700, out); g.on_periodic_emit(out)
>>> out.watermarks
[1199]
"""

from __future__ import annotations

import time
from typing import Any, Callable, Optional

from airflow_flinkchain.common.time import LONG_MIN, Duration, to_millis

# ---- watermarks -------------------------------------------------------------

class Watermark:
    """A watermark as a WatermarkGenerator emits it (Flink's api.common.eventtime.Watermark)."""

    __slots__ = ("timestamp",)

    def __init__(self, timestamp: int):
        self.timestamp = int(timestamp)

    def get_timestamp(self) -> int:
        return self.timestamp

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Watermark) and other.timestamp == self.timestamp

    def __hash__(self) -> int:
        return hash(("Watermark", self.timestamp))

    def __repr__(self) -> str:
        return f"Watermark({self.timestamp})"


class WatermarkOutput:
    """Where a WatermarkGenerator emits to."""

    def emit_watermark(self, watermark: Watermark) -> None:  # pragma: no cover - interface
        raise NotImplementedError

    def mark_idle(self) -> None:  # pragma: no cover - interface
        raise NotImplementedError

    def mark_active(self) -> None:  # pragma: no cover - interface
        raise NotImplementedError


class CollectingWatermarkOutput(WatermarkOutput):
    """Keeps the emitted watermark timestamps (non-decreasing, as Flink's WatermarkOutputMultiplexer
    only forwards advances) and the idle flag."""

    def __init__(self) -> None:
        self.watermarks: list[int] = []
        self.idle = False

    def emit_watermark(self, watermark: Watermark) -> None:
        self.idle = False
        ts = watermark.get_timestamp()
        if not self.watermarks or ts > self.watermarks[-1]:
            self.watermarks.append(ts)

    def mark_idle(self) -> None:
        self.idle = True

    def mark_active(self) -> None:
        self.idle = False


class WatermarkGenerator:
    """Generates watermarks from events (`on_event`) and periodically (`on_periodic_emit`)."""

    def on_event(self, event: Any, event_timestamp: int, output: WatermarkOutput) -> None:
        pass

    def on_periodic_emit(self, output: WatermarkOutput) -> None:
        pass


class BoundedOutOfOrdernessWatermarks(WatermarkGenerator):
    """Watermark = highest timestamp seen - out_of_orderness - 1 (Flink's rule: a record with the
    watermark's timestamp is already late)."""

    def __init__(self, max_out_of_orderness: Duration):
        self.out_of_orderness = to_millis(max_out_of_orderness, "max_out_of_orderness")
        if self.out_of_orderness < 0:
            raise ValueError("max_out_of_orderness must not be negative")
        # start so that the first watermark is Long.MIN_VALUE, as Flink
        self.max_timestamp = LONG_MIN + self.out_of_orderness + 1

    def on_event(self, event: Any, event_timestamp: int, output: WatermarkOutput) -> None:
        if event_timestamp > self.max_timestamp:
            self.max_timestamp = event_timestamp

    def on_periodic_emit(self, output: WatermarkOutput) -> None:
        output.emit_watermark(Watermark(self.max_timestamp - self.out_of_orderness - 1))


class AscendingTimestampsWatermarks(BoundedOutOfOrdernessWatermarks):
    def __init__(self) -> None:
        super().__init__(Duration(0))


class NoWatermarksGenerator(WatermarkGenerator):
    pass


class WatermarksWithIdleness(WatermarkGenerator):
    """Marks the output idle when no event arrived for `idle_timeout` of (injectable) clock time."""

    def __init__(self, watermarks: WatermarkGenerator, idle_timeout: Duration,
                 clock: Optional[Callable[[], int]] = None):
        self.watermarks = watermarks
        self.idle_timeout = to_millis(idle_timeout, "idle_timeout")
        if self.idle_timeout <= 0:
            raise ValueError("with_idleness needs a positive idle timeout")
        self.clock = clock or (lambda: int(time.time() * 1000))
        self._counter = 0
        self._last_counter = 0
        self._start_of_inactivity: Optional[int] = None
        self._idle = False

    def on_event(self, event: Any, event_timestamp: int, output: WatermarkOutput) -> None:
        self.watermarks.on_event(event, event_timestamp, output)
        self._counter += 1
        self._idle = False  # the next emitted watermark makes the output active again

    def on_periodic_emit(self, output: WatermarkOutput) -> None:
        if self._check_if_idle():
            if not self._idle:
                output.mark_idle()
                self._idle = True
        else:
            self.watermarks.on_periodic_emit(output)

    def _check_if_idle(self) -> bool:
        # Flink's IdlenessTimer: idle once no event arrived for longer than the timeout, counted
        # from the first periodic check that saw no activity
        if self._counter != self._last_counter:
            self._last_counter = self._counter
            self._start_of_inactivity = None
            return False
        now = self.clock()
        if self._start_of_inactivity is None:
            self._start_of_inactivity = now
            return False
        return now - self._start_of_inactivity > self.idle_timeout


class TimestampAssigner:
    """Extracts a record's event timestamp (milliseconds)."""

    def extract_timestamp(self, value: Any, record_timestamp: int) -> int:  # pragma: no cover
        raise NotImplementedError


class _CallableTimestampAssigner(TimestampAssigner):
    def __init__(self, fn: Callable[[Any, int], int]):
        self._fn = fn

    def extract_timestamp(self, value: Any, record_timestamp: int) -> int:
        return self._fn(value, record_timestamp)


class WatermarkStrategy:
    """How a stream gets its event timestamps and watermarks.

    `generator_supplier(context)` builds the WatermarkGenerator of one parallel instance."""

    def __init__(self, generator_supplier: Callable[[Any], WatermarkGenerator],
                 timestamp_assigner: Optional[TimestampAssigner] = None,
                 idle_timeout: Optional[Duration] = None,
                 kind: str = "generator", out_of_orderness: Optional[int] = None):
        self._supplier = generator_supplier
        self._timestamp_assigner = timestamp_assigner
        self._idle_timeout = idle_timeout
        self.kind = kind
        self.out_of_orderness = out_of_orderness

    @staticmethod
    def for_bounded_out_of_orderness(max_out_of_orderness: Duration) -> "WatermarkStrategy":
        millis = to_millis(max_out_of_orderness, "for_bounded_out_of_orderness")
        if millis < 0:
            raise ValueError("for_bounded_out_of_orderness needs a non-negative Duration")
        return WatermarkStrategy(lambda ctx: BoundedOutOfOrdernessWatermarks(Duration(millis)),
                                 kind="bounded", out_of_orderness=millis)

    @staticmethod
    def for_monotonous_timestamps() -> "WatermarkStrategy":
        return WatermarkStrategy(lambda ctx: AscendingTimestampsWatermarks(), kind="monotonous",
                                 out_of_orderness=0)

    @staticmethod
    def no_watermarks() -> "WatermarkStrategy":
        return WatermarkStrategy(lambda ctx: NoWatermarksGenerator(), kind="none")

    @staticmethod
    def for_generator(generator_supplier: Callable[[Any], WatermarkGenerator]) -> "WatermarkStrategy":
        """`generator_supplier(context)` returns a new WatermarkGenerator (Java's forGenerator)."""
        if not callable(generator_supplier):
            raise TypeError("for_generator needs a callable(context) returning a WatermarkGenerator")
        return WatermarkStrategy(generator_supplier)

    def with_timestamp_assigner(self, timestamp_assigner: TimestampAssigner) -> "WatermarkStrategy":
        if not isinstance(timestamp_assigner, TimestampAssigner):
            if not callable(timestamp_assigner):
                raise TypeError("with_timestamp_assigner needs a TimestampAssigner or a callable(value, record_timestamp)")
            timestamp_assigner = _CallableTimestampAssigner(timestamp_assigner)
        return WatermarkStrategy(self._supplier, timestamp_assigner, self._idle_timeout, self.kind,
                                 self.out_of_orderness)

    def with_idleness(self, idle_timeout: Duration) -> "WatermarkStrategy":
        if to_millis(idle_timeout, "with_idleness") <= 0:
            raise ValueError("with_idleness needs a positive Duration")
        return WatermarkStrategy(self._supplier, self._timestamp_assigner, idle_timeout, self.kind,
                                 self.out_of_orderness)

    # ---- what the runtime uses ----
    def get_timestamp_assigner(self) -> Optional[TimestampAssigner]:
        return self._timestamp_assigner

    def get_idle_timeout(self) -> Optional[Duration]:
        return self._idle_timeout

    def create_watermark_generator(self, context: Any = None,
                                   clock: Optional[Callable[[], int]] = None) -> WatermarkGenerator:
        generator = self._supplier(context)
        if not isinstance(generator, WatermarkGenerator):
            raise TypeError(f"the watermark generator supplier returned {generator!r}, not a WatermarkGenerator")
        if self._idle_timeout is not None:
            generator = WatermarksWithIdleness(generator, self._idle_timeout, clock)
        return generator
