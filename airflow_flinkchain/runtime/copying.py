"""Record copies when object reuse is off (Flink's CopyingChainingOutput).

Immutable values need no copy: the check `type(v) in IMMUTABLE_TYPES` is one
set lookup, and tuples/frozensets are copied only when they hold something
mutable."""

from __future__ import annotations

import copy
import decimal
import datetime
from typing import Any

IMMUTABLE_TYPES = frozenset({
    int, float, str, bytes, bool, type(None), complex,
    decimal.Decimal, datetime.date, datetime.datetime, datetime.time, datetime.timedelta,
})


def _is_deeply_immutable(value: Any) -> bool:
    t = type(value)
    if t in IMMUTABLE_TYPES:
        return True
    if t is tuple or t is frozenset:
        return all(_is_deeply_immutable(item) for item in value)
    return False


def copy_record(value: Any) -> Any:
    """A deep copy of `value`, or `value` itself when nothing in it can change."""
    if _is_deeply_immutable(value):
        return value
    return copy.deepcopy(value)
