"""Channel selection of Flink's StreamPartitioners, deterministic across
processes and retries (a retried subtask writes the same channels).

`make_channel_selector(...)` returns an int (every record goes to that
channel), a tuple of ints (every record to all of them: BROADCAST) or a
callable(value) -> int, so the RecordWriter can specialise its hot path.

HASH follows Flink's KeyGroupRangeAssignment: key -> `stable_hash(key)` ->
key group = murmur(hash) % max_parallelism -> channel = key_group *
parallelism // max_parallelism. `stable_hash` never uses Python's hash() of
str/bytes (salted per process, PYTHONHASHSEED):
  - None -> 0; bool -> 1231/1237 (Java's Boolean.hashCode)
  - int in the Java long range -> Java's Long.hashCode (so small ints hash to
    themselves); larger ints -> crc32 of their decimal text
  - float -> as int when integral, else crc32 of its IEEE-754 bytes
  - str -> crc32 of UTF-8; bytes/bytearray -> crc32
  - tuple/list -> 31 * h + stable_hash(item), like Java's List.hashCode
  - anything else -> crc32 of its pickle (protocol 4), else of its repr.
"""

from __future__ import annotations

import pickle
import random
import struct
import zlib
from typing import Any, Callable, Union

from airflow_flinkchain.functions import Partitioner as PartitionerFunction
from airflow_flinkchain.graph.model import PartitionSpec, Partitioner
from airflow_flinkchain.runtime.errors import PartitionerError

_MASK = 0xFFFFFFFF
_LONG_MIN, _LONG_MAX = -(2**63), 2**63 - 1

ChannelSelector = Union[int, tuple, Callable[[Any], int]]


def _to_int32(h: int) -> int:
    h &= _MASK
    return h - 0x100000000 if h & 0x80000000 else h


def stable_hash(key: Any) -> int:
    """A 32-bit signed hash of `key` that is the same in every process."""
    t = type(key)
    if t is int:
        if _LONG_MIN <= key <= _LONG_MAX:
            u = key & 0xFFFFFFFFFFFFFFFF
            return _to_int32(u ^ (u >> 32))
        return _to_int32(zlib.crc32(str(key).encode()))
    if t is str:
        return _to_int32(zlib.crc32(key.encode("utf-8")))
    if key is None:
        return 0
    if t is bool:
        return 1231 if key else 1237
    if t is float:
        if key.is_integer() and _LONG_MIN <= key <= _LONG_MAX:
            return stable_hash(int(key))
        return _to_int32(zlib.crc32(struct.pack("<d", key)))
    if t is bytes or t is bytearray:
        return _to_int32(zlib.crc32(key))
    if t is tuple or t is list:
        h = 1
        for item in key:
            h = (31 * h + stable_hash(item)) & _MASK
        return _to_int32(h)
    try:
        data = pickle.dumps(key, protocol=4)
    except Exception:
        data = repr(key).encode("utf-8")
    return _to_int32(zlib.crc32(data))


def murmur_hash(code: int) -> int:
    """Flink's MathUtils.murmurHash(int): non-negative int."""
    code &= _MASK
    code = (code * 0xCC9E2D51) & _MASK
    code = ((code << 15) | (code >> 17)) & _MASK
    code = (code * 0x1B873593) & _MASK
    code = ((code << 13) | (code >> 19)) & _MASK
    code = (code * 5 + 0xE6546B64) & _MASK
    code ^= 4
    code ^= code >> 16
    code = (code * 0x85EBCA6B) & _MASK
    code ^= code >> 13
    code = (code * 0xC2B2AE35) & _MASK
    code ^= code >> 16
    signed = _to_int32(code)
    if signed >= 0:
        return signed
    return -signed if signed != -(2**31) else 0


def key_group_for_key(key: Any, max_parallelism: int) -> int:
    return murmur_hash(stable_hash(key)) % max_parallelism


def channel_for_key(key: Any, max_parallelism: int, parallelism: int) -> int:
    """Flink's KeyGroupRangeAssignment.assignKeyToParallelOperator."""
    return key_group_for_key(key, max_parallelism) * parallelism // max_parallelism


def rescale_channels(subtask_index: int, upstream_parallelism: int, num_channels: int) -> range:
    """Channels one upstream subtask feeds under Flink's POINTWISE distribution."""
    if upstream_parallelism >= num_channels:
        target = subtask_index * num_channels // upstream_parallelism
        return range(target, target + 1)
    start = subtask_index * num_channels // upstream_parallelism
    end = (subtask_index + 1) * num_channels // upstream_parallelism
    return range(start, end)


def _round_robin(channels: range, start: int) -> Callable[[Any], int]:
    order = tuple(channels)
    n = len(order)
    position = start % n

    def select(_value: Any) -> int:
        nonlocal position
        position += 1
        if position >= n:
            position = 0
        return order[position]

    return select


def _as_callable(fn: Any, method: str, what: str, operator: str) -> Callable:
    if isinstance(fn, PartitionerFunction) or (not callable(fn) and hasattr(fn, method)):
        return getattr(fn, method)
    if not callable(fn):
        raise TypeError(f"{what} of the edge leaving operator {operator!r} is not callable: {fn!r}")
    return fn


def make_channel_selector(spec: PartitionSpec, *, subtask_index: int, upstream_parallelism: int,
                          num_channels: int, edge_id: str, operator: str) -> ChannelSelector:
    kind = spec.kind
    n = num_channels
    if n == 1 and kind is not Partitioner.CUSTOM:
        return 0
    if kind is Partitioner.FORWARD:
        if upstream_parallelism != n:
            raise PartitionerError(
                f"FORWARD edge {edge_id!r} from operator {operator!r} needs the same parallelism on both"
                f" sides ({upstream_parallelism} -> {n}); use rebalance() or rescale()")
        return subtask_index
    if kind is Partitioner.GLOBAL:
        return 0
    if kind is Partitioner.BROADCAST:
        return tuple(range(n))
    if kind is Partitioner.REBALANCE:
        # Flink starts at a random channel; we start at the subtask index (deterministic).
        return _round_robin(range(n), subtask_index - 1)
    if kind is Partitioner.RESCALE:
        channels = rescale_channels(subtask_index, upstream_parallelism, n)
        return channels[0] if len(channels) == 1 else _round_robin(channels, -1)
    if kind is Partitioner.SHUFFLE:
        rnd = random.Random(f"{edge_id}:{subtask_index}")  # str seeds are stable across processes
        rand = rnd.random
        return lambda _value: int(rand() * n)
    key_selector = spec.key_selector
    if key_selector is not None:
        key_selector = _as_callable(key_selector, "get_key", "key selector", operator)
    if kind is Partitioner.HASH:
        return _hash_selector(key_selector, spec.max_parallelism, n)
    if kind is Partitioner.CUSTOM:
        return _custom_selector(spec, key_selector, n, edge_id, operator)
    raise ValueError(f"unknown partitioner {kind!r} on edge {edge_id!r}")


def _hash_selector(key_selector, max_parallelism: int, n: int) -> Callable[[Any], int]:
    cache: dict = {}  # key -> channel; bounded, skips unhashable keys
    get = cache.get

    def select(value: Any) -> int:
        key = key_selector(value) if key_selector is not None else value
        try:
            ch = get(key)
        except TypeError:  # unhashable key
            return channel_for_key(key, max_parallelism, n)
        if ch is None:
            ch = channel_for_key(key, max_parallelism, n)
            if len(cache) < 65536:
                cache[key] = ch
        return ch

    return select


def _custom_selector(spec: PartitionSpec, key_selector, n: int, edge_id: str, operator: str):
    if spec.custom_partitioner is None:
        raise PartitionerError(f"CUSTOM edge {edge_id!r} from operator {operator!r} has no partitioner")
    partition = _as_callable(spec.custom_partitioner, "partition", "custom partitioner", operator)

    def select(value: Any) -> int:
        key = key_selector(value) if key_selector is not None else value
        ch = partition(key, n)
        if type(ch) is not int or not 0 <= ch < n:
            raise PartitionerError(
                f"custom partitioner of the edge {edge_id!r} leaving operator {operator!r} returned"
                f" {ch!r} for key {key!r}; it must return an int in [0, {n})")
        return ch

    return select
