"""Lengths of time, named as PyFlink's `pyflink.common.time` (`Duration`, `Time`).

>>> Duration.of_seconds(2).to_milliseconds()
2000
"""

from __future__ import annotations

from typing import Any

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
