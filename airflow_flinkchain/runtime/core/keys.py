"""Keys of keyed streams: one stable hash and one grouping form that agree
with Python equality, so records whose keys are equal (`1`, `1.0`, `True`,
`numpy.int64(1)`, `Decimal(1)`) reach one subtask and one group there.

`stable_hash(key)` is the same in every process (never Python's salted
hash() of str/bytes):
  - int, bool, numpy integers, integral float/Decimal/Fraction -> Java's
    Long.hashCode of the int in the long range (small ints hash to
    themselves), else crc32 of its decimal text
  - other finite numbers -> crc32 of their exact ratio "n/d" (so 1.5 and
    Decimal("1.5") agree); infinities and NaN -> fixed tokens
  - str (and subclasses: numpy.str_, StrEnum) -> crc32 of UTF-8;
    bytes/bytearray -> crc32; None -> 0
  - tuple (namedtuples too) and list -> 31 * h + stable_hash(item), like
    Java's List.hashCode; frozenset/set -> sum of the items' hashes
  - datetime -> crc32 of its ISO text (aware ones in UTC); date, time,
    timedelta -> crc32 of their ISO / (days, s, us) text
  - anything else -> crc32 of its pickle (protocol 4), else of its repr:
    equal objects of other types hash alike only if they pickle alike.

Why not state/key_groups.stable_key_hash (Java's hashCode per type: Integer for
ints in the int range, Double.hashCode for fractional floats): Python numbers
have no width, and keys equal in Python (1.5, Decimal("1.5"), Fraction(3, 2);
numpy scalars) must reach one subtask, so every int hashes as a Java long and
every real by its exact value. Changing either hash would move keys to other
channels and key groups; both go through key_groups.assign_to_key_group.

`grouping_key(key)` is what keyed operators group by (dict keys): the key
itself, lists turned into tuples (Flink groups lists by content; Python
lists are unhashable); other unhashable keys are refused.
"""

from __future__ import annotations

import datetime as _dt
import decimal
import numbers
import pickle
import zlib
from typing import Any, Callable

from airflow_flinkchain.runtime.core.errors import KeySelectorError
from airflow_flinkchain.runtime.state.key_groups import list_hash, to_int32

_MASK = 0xFFFFFFFF
_LONG_MIN, _LONG_MAX = -(2**63), 2**63 - 1


def _crc(text: str) -> int:
    return to_int32(zlib.crc32(text.encode("utf-8")))


def _hash_int(key: int) -> int:
    if _LONG_MIN <= key <= _LONG_MAX:
        u = key & 0xFFFFFFFFFFFFFFFF
        return to_int32(u ^ (u >> 32))
    return _crc(str(key))


def _hash_real(key: Any) -> int:
    """float, Decimal, Fraction, numpy floats: by exact value."""
    try:
        n, d = key.as_integer_ratio()
    except (OverflowError, ValueError):  # inf, nan
        if key != key:
            return _crc("nan")
        return _crc("inf" if key > 0 else "-inf")
    return _hash_int(n) if d == 1 else _crc(f"{n}/{d}")


def stable_hash(key: Any) -> int:
    """A 32-bit signed hash of `key`, the same in every process; equal keys hash alike."""
    t = type(key)
    if t is int:
        return _hash_int(key)
    if t is str:
        return to_int32(zlib.crc32(key.encode("utf-8")))
    if key is None:
        return 0
    if t is tuple or t is list:
        return list_hash(key, stable_hash)
    if t is float:
        return _hash_int(int(key)) if key.is_integer() else _hash_real(key)
    return _hash_other(key)


def _hash_other(key: Any) -> int:
    if isinstance(key, numbers.Integral):  # bool, IntEnum, numpy integers
        return _hash_int(int(key))
    if isinstance(key, str):
        return to_int32(zlib.crc32(str.__str__(key).encode("utf-8")))
    if isinstance(key, (bytes, bytearray)):
        return to_int32(zlib.crc32(key))
    if isinstance(key, (tuple, list)):
        return stable_hash(list(key))
    if isinstance(key, (numbers.Real, decimal.Decimal)) and hasattr(key, "as_integer_ratio"):
        return _hash_real(key)  # float subclasses, numpy floats, Fraction, Decimal
    if type(key).__module__ == "numpy" and hasattr(key, "item") and getattr(key, "ndim", None) == 0:
        value = key.item()  # other numpy scalars (numpy.bool_) -> the equal Python value
        if type(value) is not type(key):
            return stable_hash(value)
    if isinstance(key, (frozenset, set)):
        return to_int32(sum(stable_hash(item) for item in key))
    if isinstance(key, _dt.datetime):
        offset = key.utcoffset()
        if offset is not None:
            return _crc("datetime:" + (key.replace(tzinfo=None, fold=0) - offset).isoformat() + "Z")
        return _crc("datetime:" + key.replace(fold=0).isoformat())
    if isinstance(key, _dt.date):
        return _crc("date:" + key.isoformat())
    if isinstance(key, _dt.timedelta):
        return _crc(f"timedelta:{key.days}:{key.seconds}:{key.microseconds}")
    if isinstance(key, _dt.time) and key.utcoffset() is None:
        return _crc("time:" + key.replace(fold=0).isoformat())
    try:
        data = pickle.dumps(key, protocol=4)
    except Exception:
        data = repr(key).encode("utf-8")
    return to_int32(zlib.crc32(data))


def grouping_key(key: Any) -> Any:
    """The hashable form keyed operators group by; raises TypeError for unhashable keys."""
    try:
        hash(key)
        return key
    except TypeError:
        if isinstance(key, (list, tuple)):
            return tuple(grouping_key(item) for item in key)
        raise


def callable_name(fn: Any) -> str:
    """How messages name a user callable: `MyKeySelector.get_key`, `<lambda>`, `by_user`."""
    return getattr(fn, "__qualname__", None) or getattr(type(fn), "__qualname__", None) or repr(fn)


def key_getter(selector: Callable[[Any], Any], operator: str) -> Callable[[Any], Any]:
    """value -> grouping key; a failing selector or an unhashable key raises
    KeySelectorError naming the key selector and the operator."""
    name, owner = callable_name(selector), f"operator {operator!r}"

    def get_key(value: Any) -> Any:
        try:
            key = selector(value)
        except Exception as exc:
            raise key_error(exc, name, owner) from exc
        try:
            hash(key)
        except TypeError:
            try:
                return grouping_key(key)
            except TypeError as exc:
                raise KeySelectorError(
                    f"key selector {name} of {owner} returned an unhashable key ({exc}): return a str, number,"
                    " tuple or another hashable value") from exc
        return key

    return get_key


def key_error(exc: BaseException, selector: str, owner: str) -> KeySelectorError:
    """`owner`: who uses the key selector, e.g. "operator 'sum'"."""
    return KeySelectorError(f"key selector {selector} of {owner} failed: {type(exc).__name__}: {exc}")
