"""Time, watermark strategies, type information and the runtime mode, named as
PyFlink's `pyflink.common` (and `pyflink.datastream.RuntimeExecutionMode`).

>>> Duration.of_seconds(2).to_milliseconds()
2000
>>> g = WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_millis(500)).create_watermark_generator()
>>> out = CollectingWatermarkOutput()
>>> g.on_event("r", 1700, out); g.on_periodic_emit(out)
>>> out.watermarks
[1199]
"""

from __future__ import annotations

import time
from enum import Enum
from typing import Any, Callable, Optional

#: Flink's Long.MIN_VALUE / Long.MAX_VALUE.
LONG_MIN = -(2**63)
LONG_MAX = 2**63 - 1


# ---- time ------------------------------------------------------------------

class _Millis:
    """A length of time in whole milliseconds; equal to another of its own class with the same length."""

    __slots__ = ("_millis",)

    def to_milliseconds(self) -> int:
        return self._millis

    def __eq__(self, other: object) -> bool:
        return isinstance(other, type(self)) and other._millis == self._millis

    def __hash__(self) -> int:
        return hash((type(self).__name__, self._millis))


class Duration(_Millis):
    """A length of time (Java's java.time.Duration as PyFlink wraps it), millisecond precision."""

    __slots__ = ()

    def __init__(self, millis: int):
        self._millis = int(millis)

    @staticmethod
    def of_millis(millis: int) -> "Duration":
        return Duration(millis)

    @staticmethod
    def of_seconds(seconds: int) -> "Duration":
        return Duration(seconds * 1000)

    @staticmethod
    def of_minutes(minutes: int) -> "Duration":
        return Duration(minutes * 60_000)

    @staticmethod
    def of_hours(hours: int) -> "Duration":
        return Duration(hours * 3_600_000)

    @staticmethod
    def of_days(days: int) -> "Duration":
        return Duration(days * 86_400_000)

    @staticmethod
    def of_nanos(nanos: int) -> "Duration":
        return Duration(nanos // 1_000_000)

    def __repr__(self) -> str:
        return f"Duration.of_millis({self._millis})"


class Time(_Millis):
    """A time interval for windows and TTL (PyFlink's `Time`)."""

    __slots__ = ()

    def __init__(self, milliseconds: int):
        self._millis = int(milliseconds)

    @staticmethod
    def milliseconds(milliseconds: int) -> "Time":
        return Time(milliseconds)

    @staticmethod
    def seconds(seconds: int) -> "Time":
        return Time(seconds * 1000)

    @staticmethod
    def minutes(minutes: int) -> "Time":
        return Time(minutes * 60_000)

    @staticmethod
    def hours(hours: int) -> "Time":
        return Time(hours * 3_600_000)

    @staticmethod
    def days(days: int) -> "Time":
        return Time(days * 86_400_000)

    def __repr__(self) -> str:
        return f"Time.milliseconds({self._millis})"


def to_millis(value: Any, what: str) -> int:
    """Milliseconds of a `Time`, a `Duration` or an int (PyFlink accepts all three for sizes)."""
    if isinstance(value, (Time, Duration)):
        return value.to_milliseconds()
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    raise TypeError(f"{what} must be a Time, a Duration or an int of milliseconds, got {value!r}")


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


# ---- runtime mode -------------------------------------------------------------

class RuntimeExecutionMode(Enum):
    STREAMING = 0
    BATCH = 1
    AUTOMATIC = 2


# ---- type information -----------------------------------------------------------

class TypeInformation:
    """Type of a stream's records or a state's values."""

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and other.__dict__ == self.__dict__

    def __hash__(self) -> int:
        return hash((type(self).__name__, repr(self)))


class BasicTypeInfo(TypeInformation):
    def __init__(self, name: str, arrow: Optional[str]):
        self.name = name
        self.arrow = arrow  # pyarrow alias of the column, None when records stay pickled

    def __repr__(self) -> str:
        return f"Types.{self.name}()"


class RowTypeInfo(TypeInformation):
    def __init__(self, field_types: list, field_names: Optional[list] = None):
        self.field_types = list(field_types)
        self.named = field_names is not None
        self.field_names = list(field_names) if field_names is not None else [f"f{i}" for i in range(len(field_types))]
        if len(self.field_names) != len(self.field_types):
            raise ValueError(f"ROW_NAMED: {len(self.field_names)} names for {len(self.field_types)} types")

    def get_field_names(self) -> list:
        return list(self.field_names)

    def get_field_types(self) -> list:
        return list(self.field_types)

    def __repr__(self) -> str:
        return f"RowTypeInfo({self.field_names}, {self.field_types})"


class TupleTypeInfo(TypeInformation):
    def __init__(self, field_types: list):
        self.field_types = list(field_types)

    def get_field_types(self) -> list:
        return list(self.field_types)

    def __repr__(self) -> str:
        return f"TupleTypeInfo({self.field_types})"


class ListTypeInfo(TypeInformation):
    def __init__(self, element_type: TypeInformation, kind: str = "LIST"):
        self.element_type = element_type
        self.kind = kind

    def __repr__(self) -> str:
        return f"Types.{self.kind}({self.element_type!r})"


class MapTypeInfo(TypeInformation):
    def __init__(self, key_type: TypeInformation, value_type: TypeInformation):
        self.key_type = key_type
        self.value_type = value_type

    def __repr__(self) -> str:
        return f"Types.MAP({self.key_type!r}, {self.value_type!r})"


def _basic(name: str, arrow: Optional[str]) -> Callable[[], BasicTypeInfo]:
    info = BasicTypeInfo(name, arrow)
    return staticmethod(lambda: info)


class Types:
    """PyFlink's type information factory (`Types.INT()`, `Types.ROW_NAMED([...], [...])`, ...)."""

    STRING = _basic("STRING", "string")
    BYTE = _basic("BYTE", "int8")
    BOOLEAN = _basic("BOOLEAN", "bool")
    SHORT = _basic("SHORT", "int16")
    INT = _basic("INT", "int32")
    LONG = _basic("LONG", "int64")
    FLOAT = _basic("FLOAT", "float")
    DOUBLE = _basic("DOUBLE", "double")
    CHAR = _basic("CHAR", "string")
    BIG_INT = _basic("BIG_INT", None)
    BIG_DEC = _basic("BIG_DEC", None)
    INSTANT = _basic("INSTANT", "timestamp[ms]")
    SQL_DATE = _basic("SQL_DATE", "date32")
    SQL_TIME = _basic("SQL_TIME", "time64[us]")
    SQL_TIMESTAMP = _basic("SQL_TIMESTAMP", "timestamp[us]")
    LOCAL_DATE = _basic("LOCAL_DATE", "date32")
    LOCAL_TIME = _basic("LOCAL_TIME", "time64[us]")
    LOCAL_DATE_TIME = _basic("LOCAL_DATE_TIME", "timestamp[us]")
    PICKLED_BYTE_ARRAY = _basic("PICKLED_BYTE_ARRAY", None)
    VOID = _basic("VOID", None)

    @staticmethod
    def ROW(field_types: list) -> RowTypeInfo:
        return RowTypeInfo(field_types)

    @staticmethod
    def ROW_NAMED(field_names: list, field_types: list) -> RowTypeInfo:
        return RowTypeInfo(field_types, field_names)

    @staticmethod
    def TUPLE(field_types: list) -> TupleTypeInfo:
        return TupleTypeInfo(field_types)

    @staticmethod
    def LIST(element_type_info: TypeInformation) -> ListTypeInfo:
        return ListTypeInfo(element_type_info)

    @staticmethod
    def PRIMITIVE_ARRAY(element_type: TypeInformation) -> ListTypeInfo:
        return ListTypeInfo(element_type, "PRIMITIVE_ARRAY")

    @staticmethod
    def BASIC_ARRAY(element_type: TypeInformation) -> ListTypeInfo:
        return ListTypeInfo(element_type, "BASIC_ARRAY")

    @staticmethod
    def OBJECT_ARRAY(element_type: TypeInformation) -> ListTypeInfo:
        return ListTypeInfo(element_type, "OBJECT_ARRAY")

    @staticmethod
    def MAP(key_type_info: TypeInformation, value_type_info: TypeInformation) -> MapTypeInfo:
        return MapTypeInfo(key_type_info, value_type_info)


def to_output_type(type_info: Any, where: str = "stream") -> Any:
    """What `parse_output_type` accepts for a PyFlink type: a `ROW_NAMED` of basic types becomes
    the dict {field: pyarrow alias} (records are then dicts with these keys); every other type
    keeps records pickled (None). Anything that is not a TypeInformation passes unchanged."""
    if not isinstance(type_info, TypeInformation):
        return type_info
    if isinstance(type_info, RowTypeInfo) and type_info.named and type_info.field_types and all(
            isinstance(t, BasicTypeInfo) and t.arrow is not None for t in type_info.field_types):
        return {n: t.arrow for n, t in zip(type_info.field_names, type_info.field_types)}
    return None
