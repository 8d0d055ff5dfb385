"""What every keyed state backend shares (Flink's AbstractKeyedStateBackend): the key context
(current key and its key group, checked against the instance's key-group range), the state
registry by name and kind, TTL settings, the portable snapshot format and change tracking
per key group.

Snapshot format (the same for every backend, plain data, so state written by one backend
restores into another, and into instances owning other key-group ranges):

    {"max_parallelism": int,
     "states": {name: {"kind": "value" | "list" | "map" | "reducing" | "aggregating", "ttl": bool}},
     "key_groups": {key_group: {name: [(key, namespace, stored)]}}}

`stored` is the value (value, reducing, aggregating), a list of elements (list) or a dict
(map); with TTL each value / element / map value is `(value, last_access_ms)`.

Incremental snapshots: `changed_key_groups()` names the key groups written since they were
last snapshotted; `snapshot(key_groups=...)` cuts only those groups (a requested group with no
entries is absent from "key_groups": it is empty). A snapshot marks the groups it covers
unchanged; a restore leaves every group unchanged (it holds what the snapshot holds).
"""

from __future__ import annotations

import time
from typing import Any, Callable, Dict, Iterable, List, Optional, Set

from airflow_flinkchain.runtime.state.key_groups import (
    KeyGroupRange,
    assign_to_key_group,
    compute_default_max_parallelism,
)
from airflow_flinkchain.state import (
    AggregatingStateDescriptor,
    ListStateDescriptor,
    MapStateDescriptor,
    ReducingStateDescriptor,
    StateDescriptor,
    StateTtlConfig,
    ValueStateDescriptor,
)

STATE_KINDS = ("value", "list", "map", "reducing", "aggregating")
_KIND_OF = {
    ValueStateDescriptor: "value",
    ListStateDescriptor: "list",
    MapStateDescriptor: "map",
    ReducingStateDescriptor: "reducing",
    AggregatingStateDescriptor: "aggregating",
}


def system_clock() -> int:
    return int(time.time() * 1000)


def _default_clock() -> int:
    return system_clock()  # looked up per call, so tests may replace `system_clock`


def kind_of(descriptor: StateDescriptor) -> str:
    kind = _KIND_OF.get(type(descriptor)) or getattr(descriptor, "kind", None)
    if kind not in STATE_KINDS:
        raise TypeError(f"unknown state descriptor {descriptor!r}")
    return kind



class AggregatingStateLogic:
    """AggregatingState over a backend's single-entry primitives (`_get_value`/`_set_value`
    of the accumulator): the same for the heap and the RocksDB backend."""

    __slots__ = ()

    def get(self) -> Any:
        acc = self._get_value()
        return None if acc is None else self._agg.get_result(acc)

    def get_accumulator(self) -> Any:
        return self._get_value()

    def add(self, value: Any) -> None:
        acc = self._get_value()
        if acc is None:
            acc = self._agg.create_accumulator()
        self._set_value(self._agg.add(value, acc))

    def add_accumulator(self, accumulator: Any) -> None:
        """Merge an accumulator of several values at once (a vectorized fold's), as adding them."""
        acc = self._get_value()
        self._set_value(accumulator if acc is None else self._agg.merge(acc, accumulator))

    def merge_values(self, a: Any, b: Any) -> Any:
        return self._agg.merge(a, b)


class MapStateViews:
    """MapState's read views over a backend's `_all_items()` (live (key, value) pairs), the
    same for the heap and the RocksDB backend."""

    __slots__ = ()

    def items(self) -> Iterable[Any]:
        return self._all_items()

    def keys(self) -> Iterable[Any]:
        return [k for k, _ in self._all_items()]

    def values(self) -> Iterable[Any]:
        return [v for _, v in self._all_items()]

    def is_empty(self) -> bool:
        return not self._all_items()

class Ttl:
    """The TTL settings of one state, resolved once."""

    __slots__ = ("ttl", "update_on_read", "return_expired", "clock", "in_full_snapshot")

    def __init__(self, config: StateTtlConfig, clock: Callable[[], int]):
        self.ttl = config.ttl_millis()
        self.update_on_read = config.get_update_type() is StateTtlConfig.UpdateType.OnReadAndWrite
        self.return_expired = (config.get_state_visibility()
                               is StateTtlConfig.StateVisibility.ReturnExpiredIfNotCleanedUp)
        self.in_full_snapshot = config.get_cleanup_strategies().in_full_snapshot()
        self.clock = clock

    def expired(self, last_access: int, now: int) -> bool:
        return last_access + self.ttl <= now

    @staticmethod
    def of(descriptor: StateDescriptor, clock: Callable[[], int]) -> Optional["Ttl"]:
        config = descriptor.get_ttl_config()
        return Ttl(config, clock) if config is not None and config.is_enabled() else None


def snapshot_entry(kind: str, ttl: Optional[Ttl], stored: Any, now: int) -> Any:
    """`stored` as it goes into a snapshot (a fresh list / dict), or None when every part of it
    expired and the state cleans up in full snapshots."""
    drop = ttl is not None and ttl.in_full_snapshot
    if kind == "list":
        stored = list(stored)
        if drop:
            stored = [e for e in stored if not ttl.expired(e[1], now)]
        return stored or None
    if kind == "map":
        stored = dict(stored)
        if drop:
            stored = {k: e for k, e in stored.items() if not ttl.expired(e[1], now)}
        return stored or None
    if drop and ttl.expired(stored[1], now):
        return None
    return stored


def restored_entry(kind: str, stored: Any, had_ttl: bool) -> Any:
    """A snapshot's `stored` as the backend keeps it (JSON-like round trips turn tuples into lists)."""
    if kind == "list":
        return [tuple(e) if had_ttl and isinstance(e, list) else e for e in stored]
    if kind == "map":
        return {k: tuple(e) if had_ttl and isinstance(e, list) else e for k, e in dict(stored).items()}
    if had_ttl and isinstance(stored, list):
        return tuple(stored)
    return stored


class AbstractKeyedStateBackend:
    """Keyed state of one operator instance. `set_current_key` before every access (the keyed
    operator does it per record and per timer; its per-record path may set `current_key` and
    `current_key_group` directly after checking the group against `_first_key_group` /
    `_last_key_group` through the `_key_groups` cache)."""

    _KEY_GROUP_CACHE_LIMIT = 1 << 16
    kind = ""

    def __init__(self, max_parallelism: Optional[int] = None, key_group_range: Optional[KeyGroupRange] = None,
                 clock: Optional[Callable[[], int]] = None,
                 key_group_of: Optional[Callable[[Any, int], int]] = None):
        """`key_group_of(key, max_parallelism)`: the key-group assignment of the partitioner that
        routes records here (default: Flink's over `stable_key_hash`)."""
        self.max_parallelism = max_parallelism or compute_default_max_parallelism(1)
        self._assign = key_group_of or assign_to_key_group
        self.key_group_range = key_group_range or KeyGroupRange(0, self.max_parallelism - 1)
        self._first_key_group = self.key_group_range.start_key_group
        self._last_key_group = self.key_group_range.end_key_group
        self.clock = clock or _default_clock
        self.current_key: Any = None
        self.current_key_group: int = 0
        self._states: Dict[str, Any] = {}
        self._key_groups: Dict[Any, int] = {}
        self.changed: Set[int] = set()

    # ---- key context ----
    def key_group_of(self, key: Any) -> int:
        kg = self._key_groups.get(key)
        if kg is None:
            if len(self._key_groups) >= self._KEY_GROUP_CACHE_LIMIT:
                self._key_groups.clear()
            kg = self._key_groups[key] = self._assign(key, self.max_parallelism)
        return kg

    def set_current_key(self, key: Any) -> None:
        kg = self._key_groups.get(key)
        if kg is None:
            kg = self.key_group_of(key)
        if not self._first_key_group <= kg <= self._last_key_group:
            raise RuntimeError(
                f"key {key!r} belongs to key group {kg}, outside this instance's {self.key_group_range}: "
                "records were not partitioned by the same key selector and max parallelism"
            )
        self.current_key = key
        self.current_key_group = kg

    def get_current_key(self) -> Any:
        return self.current_key

    # ---- state access ----
    def create_state(self, descriptor: StateDescriptor, namespace: Any = None) -> Any:  # pragma: no cover
        """A new state object of the descriptor's state, bound to `namespace` (the caller may
        rebind it with `set_current_namespace`)."""
        raise NotImplementedError

    def get_partitioned_state(self, namespace: Any, descriptor: StateDescriptor) -> Any:
        """The state of `descriptor` for the current key in `namespace`. Objects for namespace
        None (plain keyed state, what `open()` takes) are cached per name; others are new, so
        holding one never changes what another reads."""
        if namespace is not None:
            return self.create_state(descriptor, namespace)
        state = self._states.get(descriptor.name)
        if state is None:
            state = self._states[descriptor.name] = self.create_state(descriptor)
        elif state.kind != kind_of(descriptor):
            self.create_state(descriptor)  # raises the kind mismatch
        return state

    def get_state(self, descriptor: ValueStateDescriptor) -> Any:
        return self.get_partitioned_state(None, descriptor)

    def get_list_state(self, descriptor: ListStateDescriptor) -> Any:
        return self.get_partitioned_state(None, descriptor)

    def get_map_state(self, descriptor: MapStateDescriptor) -> Any:
        return self.get_partitioned_state(None, descriptor)

    def get_reducing_state(self, descriptor: ReducingStateDescriptor) -> Any:
        return self.get_partitioned_state(None, descriptor)

    def get_aggregating_state(self, descriptor: AggregatingStateDescriptor) -> Any:
        return self.get_partitioned_state(None, descriptor)

    @staticmethod
    def kind_mismatch(name: str, registered: str, kind: str) -> ValueError:
        return ValueError(f"state {name!r} is already registered as {registered} state; a {kind} state needs "
                          "another name")

    # ---- snapshots ----
    def changed_key_groups(self) -> Set[int]:
        """Key groups of this instance written since they were last snapshotted."""
        return set(self.changed)

    def _snapshot_groups(self, key_groups: Optional[Iterable[int]]) -> Optional[List[int]]:
        """The sorted requested groups within range (None: all), marking them unchanged."""
        if key_groups is None:
            self.changed.clear()
            return None
        groups = sorted({int(kg) for kg in key_groups if int(kg) in self.key_group_range})
        self.changed.difference_update(groups)
        return groups

    def check_snapshot(self, snap: dict) -> None:
        if snap["max_parallelism"] != self.max_parallelism:
            raise ValueError(f"state snapshot has max parallelism {snap['max_parallelism']}, this operator "
                             f"{self.max_parallelism}: keyed state can only be restored with the same max parallelism")

    @staticmethod
    def snapshots_of(snapshots: Any) -> Iterable[dict]:
        """One snapshot or an iterable of them, read lazily (a restore may stream key groups)."""
        return [snapshots] if isinstance(snapshots, dict) else snapshots

    def dispose(self) -> None:
        """Releases what the backend holds outside the Python heap (nothing here)."""
