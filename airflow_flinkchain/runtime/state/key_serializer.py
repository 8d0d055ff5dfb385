"""Keys, namespaces and map keys as bytes for the RocksDB backend, where state is found by byte
equality: equal keys must serialize to equal bytes, in every process.

The rule (`serialize_key`):
  - None, str (subclasses as str), bytes, finite non-integral float: themselves;
  - int, bool, numpy integers, and integral floats / Decimals / Fractions: the int
    (so 1, 1.0 and True are one key, as in the heap backend; they come back as the int 1);
  - tuples and lists: element by element (a list comes back as a tuple);
  - frozenset: its elements' bytes, sorted (iteration order varies between processes);
  - TimeWindow, GlobalWindow (window namespaces): start and end / a tag;
  - anything else: its pickle (protocol 4). Such keys match only when they pickle alike:
    namedtuples, dataclasses and enums do; keys holding sets or dicts, or objects equal across
    types (a namedtuple and the tuple it equals, Decimal("1.5") and 1.5) do not. Key by one of
    the types above when in doubt.
"""

from __future__ import annotations

import decimal
import fractions
import numbers
import pickle
import struct
from typing import Any, Tuple

from airflow_flinkchain.window import GlobalWindow, TimeWindow

_LEN = struct.Struct(">I")
_WINDOW = struct.Struct(">qq")
_DOUBLE = struct.Struct(">d")


def serialize_key(key: Any) -> bytes:
    t = type(key)
    if t is str:
        return b"s" + key.encode("utf-8", "surrogatepass")
    if t is int:
        return b"i" + str(key).encode()
    if key is None:
        return b"N"
    if t is TimeWindow:
        return b"w" + _WINDOW.pack(key[0], key[1])
    if t is tuple or t is list:
        return b"t" + b"".join(frame(serialize_key(item)) for item in key)
    if t is float:
        if key.is_integer():
            return b"i" + str(int(key)).encode()
        return b"f" + _DOUBLE.pack(key)
    if t is bytes:
        return b"b" + key
    return _serialize_other(key)


def _serialize_other(key: Any) -> bytes:
    if isinstance(key, numbers.Integral):
        return b"i" + str(int(key)).encode()
    if isinstance(key, (float, decimal.Decimal, fractions.Fraction)) and key == key and abs(key) != float("inf") \
            and int(key) == key:
        return b"i" + str(int(key)).encode()
    if isinstance(key, float):
        return b"f" + _DOUBLE.pack(key)
    if isinstance(key, str):
        return b"s" + str.__str__(key).encode("utf-8", "surrogatepass")
    if type(key) is GlobalWindow:
        return b"g"
    if type(key) is frozenset:
        return b"z" + b"".join(frame(e) for e in sorted(serialize_key(item) for item in key))
    try:
        return b"p" + pickle.dumps(key, protocol=4)
    except (pickle.PicklingError, AttributeError, TypeError):
        import cloudpickle

        return b"p" + cloudpickle.dumps(key, protocol=4)


def _split(data: bytes, start: int = 0) -> list:
    parts, i, n = [], start, len(data)
    while i < n:
        (length,) = _LEN.unpack_from(data, i)
        parts.append(data[i + 4:i + 4 + length])
        i += 4 + length
    return parts


def deserialize_key(data: bytes) -> Any:
    tag = data[:1]
    if tag == b"s":
        return data[1:].decode("utf-8", "surrogatepass")
    if tag == b"i":
        return int(data[1:])
    if tag == b"N":
        return None
    if tag == b"w":
        return TimeWindow(*_WINDOW.unpack_from(data, 1))
    if tag == b"t":
        return tuple(deserialize_key(part) for part in _split(data, 1))
    if tag == b"f":
        return _DOUBLE.unpack_from(data, 1)[0]
    if tag == b"b":
        return bytes(data[1:])
    if tag == b"g":
        return GlobalWindow.get()
    if tag == b"z":
        return frozenset(deserialize_key(part) for part in _split(data, 1))
    if tag == b"p":
        return pickle.loads(data[1:])
    raise ValueError(f"not a serialized key: {data[:16]!r}")


def frame(data: bytes) -> bytes:
    """`data` with its length first, so that several can be concatenated and split again."""
    return _LEN.pack(len(data)) + data


def unframe(data: bytes, start: int) -> Tuple[bytes, int]:
    """(the framed bytes at `start`, the offset after them)."""
    (length,) = _LEN.unpack_from(data, start)
    end = start + 4 + length
    return data[start + 4:end], end
