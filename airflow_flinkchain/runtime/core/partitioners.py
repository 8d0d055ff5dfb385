"""Channel selection of Flink's StreamPartitioners, deterministic across
processes and retries (a retried subtask writes the same channels).

`make_channel_selector(...)` returns an int (every record goes to that
channel), a tuple of ints (every record to all of them: BROADCAST) or a
callable(value) -> int, so the RecordWriter can specialise its hot path.

HASH follows Flink's KeyGroupRangeAssignment (state/key_groups.py, the one
home of key -> key group -> channel) over `stable_hash(key)` (keys.py: equal
keys hash alike, in every process).
"""

from __future__ import annotations

import random
from typing import Any, Callable, Optional, Union

from airflow_flinkchain.functions import Partitioner as PartitionerFunction
from airflow_flinkchain.graph.field_keys import field_key
from airflow_flinkchain.graph.model import PartitionSpec, Partitioner
from airflow_flinkchain.runtime.core.errors import PartitionerError
from airflow_flinkchain.runtime.core.keys import callable_name, key_error, stable_hash
from airflow_flinkchain.runtime.state.key_groups import (  # noqa: F401  (murmur_hash: also imported from here)
    assign_key_to_parallel_operator,
    assign_to_key_group,
    murmur_hash,
)

ChannelSelector = Union[int, tuple, Callable[[Any], int]]


# The runtime's key hash is keys.stable_hash, not key_groups.stable_key_hash: see keys.py for why.
def key_group_for_key(key: Any, max_parallelism: int) -> int:
    return assign_to_key_group(key, max_parallelism, stable_hash)


def channel_for_key(key: Any, max_parallelism: int, parallelism: int) -> int:
    """Flink's KeyGroupRangeAssignment.assignKeyToParallelOperator."""
    return assign_key_to_parallel_operator(key, max_parallelism, parallelism, stable_hash)


def rescale_channels(subtask_index: int, upstream_parallelism: int, num_channels: int) -> range:
    """Channels one upstream subtask feeds under Flink's POINTWISE distribution
    (EdgeManagerBuildUtil.connectPointwise): N -> N one to one; more upstream
    subtasks than channels: channel t reads the upstream range
    [t * up // n, (t + 1) * up // n); fewer: upstream subtask i feeds
    [ceil(i * n / up), ceil((i + 1) * n / up))."""
    up, n = upstream_parallelism, num_channels
    if up == n:
        return range(subtask_index, subtask_index + 1)
    if up > n:
        target = next(t for t in range(n) if subtask_index < (t + 1) * up // n)
        return range(target, target + 1)
    return range((subtask_index * n + up - 1) // up, ((subtask_index + 1) * n + up - 1) // up)


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
                          num_channels: int, edge_id: str, operator: str, keyed_operator: str = "",
                          key_error_channel: Optional[int] = None) -> ChannelSelector:
    """`keyed_operator`: the operator the HASH edge feeds (its key selector's owner).
    A record its key selector fails on goes to `key_error_channel` when that
    operator recomputes the key and applies its on_error policy there; with
    None (its policy is "fail", or it is a sink) the selector raises
    KeySelectorError naming the key selector and that operator."""
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
        return _hash_selector(key_selector, spec.max_parallelism, n, keyed_operator or operator, key_error_channel)
    if kind is Partitioner.CUSTOM:
        return _custom_selector(spec, key_selector, n, edge_id, operator)
    raise ValueError(f"unknown partitioner {kind!r} on edge {edge_id!r}")


def _hash_selector(key_selector, max_parallelism: int, n: int, keyed_operator: str,
                   key_error_channel: Optional[int]) -> Callable[[Any], int]:
    cache: dict = {}  # key -> channel; bounded, skips unhashable keys
    get = cache.get
    selector_name = callable_name(key_selector) if key_selector is not None else ""

    def select(value: Any) -> int:
        try:
            key = key_selector(value) if key_selector is not None else value
        except Exception as exc:
            if key_error_channel is None:
                raise key_error(exc, selector_name, f"operator {keyed_operator!r}") from exc
            return key_error_channel
        try:
            ch = get(key)
        except TypeError:  # unhashable key
            return channel_for_key(key, max_parallelism, n)
        if ch is None:
            ch = channel_for_key(key, max_parallelism, n)
            if len(cache) < 65536:
                cache[key] = ch
        return ch

    # a field key lets a batch be partitioned per column (batches.record_writer_batch_emitter)
    select.key_field = field_key(key_selector)
    select.max_parallelism, select.num_channels = max_parallelism, n
    return select


def _custom_selector(spec: PartitionSpec, key_selector, n: int, edge_id: str, operator: str):
    if spec.custom_partitioner is None:
        raise PartitionerError(f"CUSTOM edge {edge_id!r} from operator {operator!r} has no partitioner")
    partition = _as_callable(spec.custom_partitioner, "partition", "custom partitioner", operator)
    selector_name = callable_name(key_selector) if key_selector is not None else ""

    def select(value: Any) -> int:
        try:
            key = key_selector(value) if key_selector is not None else value
        except Exception as exc:
            raise key_error(exc, selector_name, f"partition_custom() on the edge {edge_id!r} leaving operator"
                                                f" {operator!r}") from exc
        ch = partition(key, n)
        if type(ch) is not int or not 0 <= ch < n:
            raise PartitionerError(
                f"custom partitioner of the edge {edge_id!r} leaving operator {operator!r} returned"
                f" {ch!r} for key {key!r}; it must return an int in [0, {n})")
        return ch

    return select
