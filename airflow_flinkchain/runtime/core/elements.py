"""Stream elements: Flink's StreamRecord and Watermark.

Hot path: inside a chain, records travel as bare values. A record's event
timestamp (or None) sits in the chain's shared `TimestampCell` while the
record is being processed - the same trick as Flink's TimestampedCollector,
which stamps every output with the timestamp of the input being processed.
So no StreamRecord is allocated per record unless a timestamp exists at the
chain's input. `StreamRecord` is what callers may put in `inputs` of
`run_subtask` when a record has a timestamp; bare values mean "no timestamp".
"""

from __future__ import annotations

from typing import Any, Optional

#: Flink's Long.MIN_VALUE / Long.MAX_VALUE watermarks.
MIN_WATERMARK_TS = -(2**63)
MAX_WATERMARK_TS = 2**63 - 1


class StreamRecord:
    """A value with an optional event timestamp (milliseconds, int)."""

    __slots__ = ("value", "timestamp")

    def __init__(self, value: Any, timestamp: Optional[int] = None):
        self.value = value
        self.timestamp = timestamp

    def __eq__(self, other: object) -> bool:
        return (
            type(other) is StreamRecord
            and other.value == self.value
            and other.timestamp == self.timestamp
        )

    def __hash__(self) -> int:
        return hash((self.timestamp,))

    def __repr__(self) -> str:
        if self.timestamp is None:
            return f"StreamRecord({self.value!r})"
        return f"StreamRecord({self.value!r}, timestamp={self.timestamp})"

    def __reduce__(self):
        return (StreamRecord, (self.value, self.timestamp))


class Watermark:
    """Event time has reached `timestamp`: no record with a smaller timestamp follows."""

    __slots__ = ("timestamp",)

    def __init__(self, timestamp: int):
        self.timestamp = int(timestamp)

    def __eq__(self, other: object) -> bool:
        return type(other) is Watermark and other.timestamp == self.timestamp

    def __hash__(self) -> int:
        return hash(("Watermark", self.timestamp))

    def __repr__(self) -> str:
        if self.timestamp == MAX_WATERMARK_TS:
            return "Watermark(MAX)"
        return f"Watermark({self.timestamp})"

    def __reduce__(self):
        return (Watermark, (self.timestamp,))


#: End of input in a bounded run: fires every remaining event-time timer.
MAX_WATERMARK = Watermark(MAX_WATERMARK_TS)


class WatermarkStatus:
    """Flink's WatermarkStatus: an IDLE input channel does not hold the watermark back."""

    __slots__ = ("idle",)

    def __init__(self, idle: bool):
        self.idle = bool(idle)

    def __eq__(self, other: object) -> bool:
        return type(other) is WatermarkStatus and other.idle == self.idle

    def __hash__(self) -> int:
        return hash(("WatermarkStatus", self.idle))

    def __repr__(self) -> str:
        return "WatermarkStatus.IDLE" if self.idle else "WatermarkStatus.ACTIVE"

    def __reduce__(self):
        return (WatermarkStatus, (self.idle,))


WatermarkStatus.IDLE = WatermarkStatus(True)
WatermarkStatus.ACTIVE = WatermarkStatus(False)


class TimestampCell:
    """The timestamp of the record currently travelling through a chain.

    One per OperatorChain; set by the chain's input loop per record (and by an
    operator emitting with another timestamp, e.g. timers), read by
    RecordWriterOutput, sinks and `ctx.timestamp()`."""

    __slots__ = ("value",)

    def __init__(self) -> None:
        self.value: Optional[int] = None
