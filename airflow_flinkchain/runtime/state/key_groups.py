"""Key groups (Flink's KeyGroupRangeAssignment): keyed state and timers are partitioned into
`max_parallelism` key groups; each parallel instance owns a contiguous range of them, so state
can be redistributed when the parallelism changes.

A key's group comes from a stable 32-bit hash of the key (same in every process and run;
Python's `hash()` of str is salted per process), spread by Flink's murmur finalizer.
`stable_key_hash` here is Java's hashCode per type; the chain runtime routes records and keys
its state with runtime/core/keys.stable_hash instead (it makes keys equal in Python hash
alike across numeric types, see there), passed to the same `assign_to_key_group`.

>>> compute_default_max_parallelism(4)
128
>>> compute_key_group_range_for_operator_index(128, 3, 1)
KeyGroupRange(43, 85)
"""

from __future__ import annotations

import pickle
import struct
import zlib
from typing import Any, Callable, Optional

DEFAULT_LOWER_BOUND_MAX_PARALLELISM = 1 << 7
UPPER_BOUND_MAX_PARALLELISM = 1 << 15

_MASK = 0xFFFFFFFF
_INT_MIN = -(2**31)
_INT_MAX = 2**31 - 1
_LONG_MIN = -(2**63)
_LONG_MAX = 2**63 - 1


class KeyGroupRange:
    """Inclusive range [start_key_group, end_key_group]; empty when end < start."""

    __slots__ = ("start_key_group", "end_key_group")

    def __init__(self, start_key_group: int, end_key_group: int):
        self.start_key_group = start_key_group
        self.end_key_group = end_key_group

    def contains(self, key_group: int) -> bool:
        return self.start_key_group <= key_group <= self.end_key_group

    def __contains__(self, key_group: int) -> bool:
        return self.contains(key_group)

    def __iter__(self):
        return iter(range(self.start_key_group, self.end_key_group + 1))

    def __len__(self) -> int:
        return max(0, self.end_key_group - self.start_key_group + 1)

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, KeyGroupRange) and other.start_key_group == self.start_key_group
                and other.end_key_group == self.end_key_group)

    def __hash__(self) -> int:
        return hash((self.start_key_group, self.end_key_group))

    def __repr__(self) -> str:
        return f"KeyGroupRange({self.start_key_group}, {self.end_key_group})"


def to_int32(x: int) -> int:
    x &= _MASK
    return x - (1 << 32) if x & 0x80000000 else x


def _rotl32(x: int, n: int) -> int:
    x &= _MASK
    return ((x << n) | (x >> (32 - n))) & _MASK


def murmur_hash(code: int) -> int:
    """Flink's MathUtils.murmurHash(int): a non-negative int."""
    code = (code * 0xCC9E2D51) & _MASK
    code = _rotl32(code, 15)
    code = (code * 0x1B873593) & _MASK
    code = _rotl32(code, 13)
    code = (code * 5 + 0xE6546B64) & _MASK
    code ^= 4
    # bitMix (fmix32)
    code ^= code >> 16
    code = (code * 0x85EBCA6B) & _MASK
    code ^= code >> 13
    code = (code * 0xC2B2AE35) & _MASK
    code ^= code >> 16
    code = to_int32(code)
    if code >= 0:
        return code
    if code != _INT_MIN:
        return -code
    return 0


def stable_key_hash(key: Any) -> int:
    """A 32-bit hash of `key` that is the same in every Python process. Keys that compare equal
    hash equal (1 == 1.0 == True), as keyed state looks keys up by equality.

    int: Java's Integer/Long.hashCode; float: Double.hashCode (integral floats as the int);
    str/bytes: CRC-32 of the UTF-8 bytes; tuple/list: 31*h + element (Java's Arrays.hashCode);
    None: 0; anything else: CRC-32 of its pickle."""
    t = type(key)
    if t is str:
        return to_int32(zlib.crc32(key.encode("utf-8", "surrogatepass")))
    if t is int or t is bool:
        return _int_hash(int(key))
    if t is tuple or t is list:
        return list_hash(key, stable_key_hash)
    if t is float:
        if key.is_integer():
            return _int_hash(int(key))
        bits = struct.unpack(">q", struct.pack(">d", key))[0]
        return to_int32(bits ^ ((bits & 0xFFFFFFFFFFFFFFFF) >> 32))
    if t is bytes or t is bytearray:
        return to_int32(zlib.crc32(key))
    if key is None:
        return 0
    if isinstance(key, str):
        return stable_key_hash(str(key))
    if isinstance(key, int):
        return _int_hash(int(key))
    if isinstance(key, tuple):
        return stable_key_hash(tuple(key))
    return to_int32(zlib.crc32(pickle.dumps(key, protocol=4)))


def list_hash(items, element_hash: Callable[[Any], int]) -> int:
    """Java's List.hashCode: 31 * h + hash(element), over `element_hash`."""
    h = 1
    for element in items:
        h = (31 * h + element_hash(element)) & _MASK
    return to_int32(h)


def _int_hash(v: int) -> int:
    if _INT_MIN <= v <= _INT_MAX:
        return v
    if _LONG_MIN <= v <= _LONG_MAX:
        u = v & 0xFFFFFFFFFFFFFFFF
        return to_int32(u ^ (u >> 32))
    return to_int32(zlib.crc32(str(v).encode()))


def check_parallelism_preconditions(parallelism: int) -> None:
    if not 0 < parallelism <= UPPER_BOUND_MAX_PARALLELISM:
        raise ValueError(f"operator parallelism must be in (0, {UPPER_BOUND_MAX_PARALLELISM}], got {parallelism}")


def _round_up_to_power_of_two(x: int) -> int:
    return 1 if x <= 1 else 1 << (x - 1).bit_length()


def compute_default_max_parallelism(operator_parallelism: int) -> int:
    """1.5 x parallelism rounded up to a power of two, within [128, 32768]."""
    check_parallelism_preconditions(operator_parallelism)
    return min(max(_round_up_to_power_of_two(operator_parallelism + operator_parallelism // 2),
                   DEFAULT_LOWER_BOUND_MAX_PARALLELISM), UPPER_BOUND_MAX_PARALLELISM)


def compute_key_group_for_key_hash(key_hash: int, max_parallelism: int) -> int:
    return murmur_hash(key_hash) % max_parallelism


def assign_to_key_group(key: Any, max_parallelism: int, key_hash: Optional[Callable[[Any], int]] = None) -> int:
    """The one key -> key group assignment. `key_hash`: the chain runtime passes keys.stable_hash
    (Python equality across numeric types); the default is Java's per-type `stable_key_hash`."""
    return compute_key_group_for_key_hash((key_hash or stable_key_hash)(key), max_parallelism)


def compute_key_group_range_for_operator_index(max_parallelism: int, parallelism: int,
                                               operator_index: int) -> KeyGroupRange:
    if not 0 < parallelism <= max_parallelism:
        raise ValueError(f"parallelism {parallelism} must be in (0, max parallelism {max_parallelism}]")
    if not 0 <= operator_index < parallelism:
        raise ValueError(f"operator index {operator_index} out of [0, {parallelism})")
    start = (operator_index * max_parallelism + parallelism - 1) // parallelism
    end = ((operator_index + 1) * max_parallelism - 1) // parallelism
    return KeyGroupRange(start, end)


def compute_operator_index_for_key_group(max_parallelism: int, parallelism: int, key_group_id: int) -> int:
    return key_group_id * parallelism // max_parallelism


def assign_key_to_parallel_operator(key: Any, max_parallelism: int, parallelism: int,
                                    key_hash: Optional[Callable[[Any], int]] = None) -> int:
    return compute_operator_index_for_key_group(max_parallelism, parallelism,
                                                assign_to_key_group(key, max_parallelism, key_hash))
