"""Heap keyed state backend (Flink's HeapKeyedStateBackend): one state table per registered
state, split by key group into maps (key, namespace) -> value, so a snapshot can be cut per key
group and restored into an instance owning another key-group range (rescaling).

Namespaces scope state below the key: None for plain keyed state, the window for window state.
TTL follows Flink's TtlStateFactory: entries carry their last access time from an injectable
clock (ms), expire at last_access + ttl <= now, are refreshed on write (and on read with
OnReadAndWrite), and an expired entry read under ReturnExpiredIfNotCleanedUp is returned once
and dropped. List and map state expire per element / per entry.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Tuple

from airflow_flinkchain.runtime.state.key_groups import (
    KeyGroupRange,
    assign_to_key_group,
    compute_default_max_parallelism,
)
from airflow_flinkchain.state import (
    AggregatingState,
    AggregatingStateDescriptor,
    ListState,
    ListStateDescriptor,
    MapState,
    MapStateDescriptor,
    ReducingState,
    ReducingStateDescriptor,
    StateDescriptor,
    StateTtlConfig,
    ValueState,
    ValueStateDescriptor,
)

_KIND_OF = {
    ValueStateDescriptor: "value",
    ListStateDescriptor: "list",
    MapStateDescriptor: "map",
    ReducingStateDescriptor: "reducing",
    AggregatingStateDescriptor: "aggregating",
}


def _system_clock() -> int:
    return int(time.time() * 1000)


class _Ttl:
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


class StateTable:
    """All entries of one state: key group -> {(key, namespace): stored value}."""

    __slots__ = ("name", "kind", "descriptor", "ttl", "groups")

    def __init__(self, name: str, kind: str):
        self.name = name
        self.kind = kind
        self.descriptor: Optional[StateDescriptor] = None
        self.ttl: Optional[_Ttl] = None
        self.groups: Dict[int, dict] = {}

    def entries(self) -> Iterator[Tuple[int, Any, Any, Any]]:
        for kg, m in self.groups.items():
            for (key, ns), stored in m.items():
                yield kg, key, ns, stored


class _HeapState:
    __slots__ = ("_backend", "_table", "namespace", "_ttl")

    def __init__(self, backend: "HeapKeyedStateBackend", table: StateTable):
        self._backend = backend
        self._table = table
        self.namespace: Any = None
        self._ttl = table.ttl

    def set_current_namespace(self, namespace: Any) -> None:
        self.namespace = namespace

    def _read_map(self) -> Optional[dict]:
        return self._table.groups.get(self._backend.current_key_group)

    def _write_map(self) -> dict:
        groups = self._table.groups
        kg = self._backend.current_key_group
        m = groups.get(kg)
        if m is None:
            m = groups[kg] = {}
        return m

    def _slot(self) -> Tuple[Any, Any]:
        return (self._backend.current_key, self.namespace)

    def _raw(self) -> Any:
        m = self._table.groups.get(self._backend.current_key_group)
        return None if m is None else m.get((self._backend.current_key, self.namespace))

    def _put(self, stored: Any) -> None:
        self._write_map()[(self._backend.current_key, self.namespace)] = stored

    def clear(self) -> None:
        m = self._read_map()
        if m is not None:
            m.pop(self._slot(), None)

    # single-value TTL (value, reducing, aggregating): stored = (value, last_access)
    def _get_ttl_value(self) -> Any:
        raw = self._raw()
        if raw is None:
            return None
        ttl = self._ttl
        now = ttl.clock()
        if ttl.expired(raw[1], now):
            self.clear()
            return raw[0] if ttl.return_expired else None
        if ttl.update_on_read:
            self._put((raw[0], now))
        return raw[0]

    def _get_value(self) -> Any:
        if self._ttl is None:
            return self._raw()
        return self._get_ttl_value()

    def _set_value(self, value: Any) -> None:
        self._put(value if self._ttl is None else (value, self._ttl.clock()))


class HeapValueState(_HeapState, ValueState):
    __slots__ = ()

    def value(self) -> Any:
        if self._ttl is None:  # the per-record path, inlined
            backend = self._backend
            m = self._table.groups.get(backend.current_key_group)
            return None if m is None else m.get((backend.current_key, self.namespace))
        return self._get_ttl_value()

    def update(self, value: Any) -> None:
        if value is None:
            self.clear()
        elif self._ttl is None:  # the per-record path, inlined on purpose (as add() of reducing state)
            backend = self._backend
            groups = self._table.groups
            m = groups.get(backend.current_key_group)
            if m is None:
                m = groups[backend.current_key_group] = {}
            m[(backend.current_key, self.namespace)] = value
        else:
            self._set_value(value)


class HeapReducingState(_HeapState, ReducingState):
    __slots__ = ("_reduce",)

    def __init__(self, backend, table):
        super().__init__(backend, table)
        self._reduce = table.descriptor._reduce

    def get(self) -> Any:
        return self._get_value()

    def add(self, value: Any) -> None:
        if value is None:
            raise ValueError(f"state {self._table.name!r}: cannot add None to a ReducingState")
        if self._ttl is None:  # the per-record path, inlined on purpose (no _set_value call)
            backend = self._backend
            groups = self._table.groups
            m = groups.get(backend.current_key_group)
            if m is None:
                m = groups[backend.current_key_group] = {}
            slot = (backend.current_key, self.namespace)
            current = m.get(slot)
            m[slot] = value if current is None else self._reduce(current, value)
            return
        current = self._get_value()
        self._set_value(value if current is None else self._reduce(current, value))

    def merge_values(self, a: Any, b: Any) -> Any:
        return self._reduce(a, b)


class HeapAggregatingState(_HeapState, AggregatingState):
    __slots__ = ("_agg",)

    def __init__(self, backend, table):
        super().__init__(backend, table)
        self._agg = table.descriptor.get_agg_function()

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

    def merge_values(self, a: Any, b: Any) -> Any:
        return self._agg.merge(a, b)


class HeapListState(_HeapState, ListState):
    """Stored as a Python list; with TTL a list of (element, last_access)."""

    __slots__ = ()

    def get(self) -> List[Any]:
        raw = self._raw()
        if raw is None:
            return []
        if self._ttl is None:
            return raw
        ttl = self._ttl
        now = ttl.clock()
        live = [e for e in raw if not ttl.expired(e[1], now)]
        result = [e[0] for e in (raw if ttl.return_expired else live)]
        if len(live) != len(raw) or ttl.update_on_read:
            if live:
                self._put([(e[0], now) for e in live] if ttl.update_on_read else live)
            else:
                self.clear()
        return result

    def add(self, value: Any) -> None:
        if value is None:
            raise ValueError(f"state {self._table.name!r}: cannot add None to a ListState")
        m = self._write_map()
        slot = (self._backend.current_key, self.namespace)
        elements = m.get(slot)
        if elements is None:
            elements = m[slot] = []
        elements.append(value if self._ttl is None else (value, self._ttl.clock()))

    def add_all(self, values: List[Any]) -> None:
        for v in values:
            self.add(v)

    def update(self, values: List[Any]) -> None:
        self.clear()
        if values:
            self.add_all(values)

    def merge_values(self, a: list, b: list) -> list:
        a.extend(b)
        return a

    def __iter__(self) -> Iterator[Any]:
        return iter(self.get())


class HeapMapState(_HeapState, MapState):
    """Stored as a dict; with TTL the dict's values are (value, last_access)."""

    __slots__ = ()

    def _dict(self, create: bool = False) -> Optional[dict]:
        raw = self._raw()
        if raw is None and create:
            raw = {}
            self._put(raw)
        return raw

    def _live(self, d: dict, k: Any, now: int) -> Tuple[bool, Any]:
        """(present, value) of one TTL entry, applying expiry and read-refresh."""
        entry = d.get(k)
        if entry is None:
            return False, None
        ttl = self._ttl
        if ttl.expired(entry[1], now):
            del d[k]
            return ttl.return_expired, entry[0] if ttl.return_expired else None
        if ttl.update_on_read:
            d[k] = (entry[0], now)
        return True, entry[0]

    def get(self, key: Any) -> Any:
        d = self._dict()
        if d is None:
            return None
        if self._ttl is None:
            return d.get(key)
        return self._live(d, key, self._ttl.clock())[1]

    def put(self, key: Any, value: Any) -> None:
        self._dict(create=True)[key] = value if self._ttl is None else (value, self._ttl.clock())

    def put_all(self, dict_value: Dict[Any, Any]) -> None:
        for k, v in dict_value.items():
            self.put(k, v)

    def remove(self, key: Any) -> None:
        d = self._dict()
        if d is not None:
            d.pop(key, None)
            if not d:
                self.clear()

    def contains(self, key: Any) -> bool:
        d = self._dict()
        if d is None:
            return False
        if self._ttl is None:
            return key in d
        return self._live(d, key, self._ttl.clock())[0]

    def _snapshot_items(self) -> List[Tuple[Any, Any]]:
        d = self._dict()
        if d is None:
            return []
        if self._ttl is None:
            return list(d.items())
        now = self._ttl.clock()
        items = []
        for k in list(d):
            present, v = self._live(d, k, now)
            if present:
                items.append((k, v))
        if not d:
            self.clear()
        return items

    def items(self) -> Iterable[Tuple[Any, Any]]:
        return self._snapshot_items()

    def keys(self) -> Iterable[Any]:
        return [k for k, _ in self._snapshot_items()]

    def values(self) -> Iterable[Any]:
        return [v for _, v in self._snapshot_items()]

    def is_empty(self) -> bool:
        return not self._snapshot_items()


_STATE_CLASS = {
    "value": HeapValueState,
    "list": HeapListState,
    "map": HeapMapState,
    "reducing": HeapReducingState,
    "aggregating": HeapAggregatingState,
}


class HeapKeyedStateBackend:
    """Keyed state of one operator instance. `set_current_key` before every access (the keyed
    operator does it per record and per timer)."""

    _KEY_GROUP_CACHE_LIMIT = 1 << 16

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
        self.clock = clock or _system_clock
        self.current_key: Any = None
        self.current_key_group: int = 0
        self._tables: Dict[str, StateTable] = {}
        self._states: Dict[str, _HeapState] = {}
        self._key_groups: Dict[Any, int] = {}

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

    def clear_all(self) -> None:
        """Drops every entry of every state (BATCH execution: the backend holds one key at a
        time and forgets it when the key's input ends, as Flink's BatchExecutionKeyedStateBackend)."""
        for table in self._tables.values():
            table.groups.clear()

    # ---- state access ----
    def _table(self, descriptor: StateDescriptor) -> StateTable:
        kind = _KIND_OF.get(type(descriptor)) or descriptor.kind
        if kind not in _STATE_CLASS:
            raise TypeError(f"unknown state descriptor {descriptor!r}")
        table = self._tables.get(descriptor.name)
        if table is None:
            table = self._tables[descriptor.name] = StateTable(descriptor.name, kind)
        elif table.kind != kind:
            raise ValueError(f"state {descriptor.name!r} is already registered as {table.kind} state; "
                             f"a {kind} state needs another name")
        if table.descriptor is None:
            table.descriptor = descriptor
            ttl = descriptor.get_ttl_config()
            table.ttl = _Ttl(ttl, self.clock) if ttl is not None and ttl.is_enabled() else None
        return table

    def create_state(self, descriptor: StateDescriptor, namespace: Any = None) -> Any:
        """A new state object of the descriptor's table, bound to `namespace` (the caller may
        rebind it with `set_current_namespace`)."""
        table = self._table(descriptor)
        state = _STATE_CLASS[table.kind](self, table)
        state.namespace = namespace
        return state

    def get_partitioned_state(self, namespace: Any, descriptor: StateDescriptor) -> Any:
        """The state of `descriptor` for the current key in `namespace`. Objects for namespace
        None (plain keyed state, what `open()` takes) are cached per name; others are new, so
        holding one never changes what another reads."""
        if namespace is not None:
            return self.create_state(descriptor, namespace)
        state = self._states.get(descriptor.name)
        if state is None:
            state = self._states[descriptor.name] = self.create_state(descriptor)
        elif type(state) is not _STATE_CLASS[_KIND_OF.get(type(descriptor)) or descriptor.kind]:
            self._table(descriptor)  # raises the kind mismatch
        return state

    def get_state(self, descriptor: ValueStateDescriptor) -> HeapValueState:
        return self.get_partitioned_state(None, descriptor)

    def get_list_state(self, descriptor: ListStateDescriptor) -> HeapListState:
        return self.get_partitioned_state(None, descriptor)

    def get_map_state(self, descriptor: MapStateDescriptor) -> HeapMapState:
        return self.get_partitioned_state(None, descriptor)

    def get_reducing_state(self, descriptor: ReducingStateDescriptor) -> HeapReducingState:
        return self.get_partitioned_state(None, descriptor)

    def get_aggregating_state(self, descriptor: AggregatingStateDescriptor) -> HeapAggregatingState:
        return self.get_partitioned_state(None, descriptor)

    def merge_namespaces(self, descriptor: StateDescriptor, target: Any, sources: Iterable[Any]) -> None:
        """Merges the current key's state in `sources` into `target` and drops the sources
        (Flink's InternalMergingState.mergeNamespaces)."""
        state = self.get_partitioned_state(target, descriptor)
        if not hasattr(state, "merge_values"):
            raise TypeError(f"state {descriptor.name!r} ({type(state).__name__}) cannot merge namespaces")
        m = state._read_map()
        if m is None:
            return
        key = self.current_key
        ttl = state._ttl
        merged = None
        for source in sources:
            raw = m.pop((key, source), None)
            if raw is None:
                continue
            value = raw if ttl is None or state._table.kind == "list" else raw[0]
            merged = value if merged is None else state.merge_values(merged, value)
        if merged is None:
            return
        current = m.get((key, target))
        if current is not None:
            current = current if ttl is None or state._table.kind == "list" else current[0]
            merged = state.merge_values(current, merged)
        if ttl is not None and state._table.kind != "list":
            merged = (merged, ttl.clock())
        state._write_map()[(key, target)] = merged

    def keys(self, state_name: str, namespace: Any = None) -> List[Any]:
        """Keys with an entry of `state_name` in `namespace`."""
        table = self._tables.get(state_name)
        if table is None:
            return []
        return [key for _kg, key, ns, _v in table.entries() if ns == namespace]

    # ---- snapshot / restore ----
    def snapshot(self) -> dict:
        """Plain-data copy of every entry, by key group: {"max_parallelism", "states": {name: kind},
        "key_groups": {kg: {name: [(key, namespace, stored)]}}}. TTL entries keep their access time;
        with cleanup_full_snapshot() expired ones are left out."""
        now = self.clock()
        key_groups: Dict[int, Dict[str, list]] = {}
        states = {}
        for name, table in self._tables.items():
            states[name] = {"kind": table.kind, "ttl": table.ttl is not None}
            drop = table.ttl is not None and table.ttl.in_full_snapshot
            for kg, key, ns, stored in table.entries():
                if table.kind == "list":
                    stored = list(stored)
                    if drop:
                        stored = [e for e in stored if not table.ttl.expired(e[1], now)]
                        if not stored:
                            continue
                elif table.kind == "map":
                    stored = dict(stored)
                    if drop:
                        stored = {k: e for k, e in stored.items() if not table.ttl.expired(e[1], now)}
                        if not stored:
                            continue
                elif drop and table.ttl.expired(stored[1], now):
                    continue
                key_groups.setdefault(kg, {}).setdefault(name, []).append((key, ns, stored))
        return {"max_parallelism": self.max_parallelism, "states": states, "key_groups": key_groups}

    def restore(self, snapshots: Iterable[dict]) -> None:
        """Loads the entries of this instance's key groups from the snapshots of any number of
        former instances (same max parallelism)."""
        if isinstance(snapshots, dict):
            snapshots = [snapshots]
        for snap in snapshots:
            if snap["max_parallelism"] != self.max_parallelism:
                raise ValueError(f"state snapshot has max parallelism {snap['max_parallelism']}, this operator "
                                 f"{self.max_parallelism}: keyed state can only be restored with the same max parallelism")
            for name, meta in snap["states"].items():
                table = self._tables.get(name)
                if table is None:
                    table = self._tables[name] = StateTable(name, meta["kind"])
                elif table.kind != meta["kind"]:
                    raise ValueError(f"state {name!r} is {table.kind} state here but {meta['kind']} in the snapshot")
            for kg, by_name in snap["key_groups"].items():
                kg = int(kg)
                if kg not in self.key_group_range:
                    continue
                for name, entries in by_name.items():
                    m = self._tables[name].groups.setdefault(kg, {})
                    kind = self._tables[name].kind
                    for key, ns, stored in entries:
                        if kind == "list":
                            stored = list(stored)
                        elif kind == "map":
                            stored = dict(stored)
                        elif isinstance(stored, list) and snap["states"][name]["ttl"]:
                            stored = tuple(stored)
                        m[(key, ns)] = stored
