"""Heap keyed state backend (Flink's HeapKeyedStateBackend): one state table per registered
state, split by key group into maps (key, namespace) -> value, so a snapshot can be cut per key
group and restored into an instance owning another key-group range (rescaling).

Namespaces scope state below the key: None for plain keyed state, the window for window state.
TTL follows Flink's TtlStateFactory: entries carry their last access time from an injectable
clock (ms), expire at last_access + ttl <= now, are refreshed on write (and on read with
OnReadAndWrite), and an expired entry read under ReturnExpiredIfNotCleanedUp is returned once
and dropped. List and map state expire per element / per entry.

The key context, the snapshot format and change tracking per key group are shared with the
RocksDB backend (abstract_backend.py).
"""

from __future__ import annotations

from typing import Any, Dict, Iterable, Iterator, List, Optional, Tuple

from airflow_flinkchain.runtime.state.abstract_backend import (
    AbstractKeyedStateBackend,
    AggregatingStateLogic,
    MapStateViews,
    Ttl,
    kind_of,
    restored_entry,
    snapshot_entry,
)
from airflow_flinkchain.state import (
    AggregatingState,
    ListState,
    MapState,
    ReducingState,
    StateDescriptor,
    ValueState,
)


class StateTable:
    """All entries of one state: key group -> {(key, namespace): stored value}."""

    __slots__ = ("name", "kind", "descriptor", "ttl", "groups", "had_ttl")

    def __init__(self, name: str, kind: str):
        self.name = name
        self.kind = kind
        self.descriptor: Optional[StateDescriptor] = None
        self.ttl: Optional[Ttl] = None
        self.groups: Dict[int, dict] = {}
        self.had_ttl = False  # restored with TTL entries before the descriptor came

    def entries(self) -> Iterator[Tuple[int, Any, Any, Any]]:
        for kg, m in self.groups.items():
            for (key, ns), stored in m.items():
                yield kg, key, ns, stored


class _HeapState:
    __slots__ = ("_backend", "_table", "namespace", "_ttl")
    kind = ""

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
        self._backend.changed.add(kg)
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
        if m is not None and m.pop(self._slot(), None) is not None:
            self._backend.changed.add(self._backend.current_key_group)

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
    kind = "value"

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
            kg = backend.current_key_group
            backend.changed.add(kg)
            m = groups.get(kg)
            if m is None:
                m = groups[kg] = {}
            m[(backend.current_key, self.namespace)] = value
        else:
            self._set_value(value)


class HeapReducingState(_HeapState, ReducingState):
    __slots__ = ("_reduce",)
    kind = "reducing"

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
            kg = backend.current_key_group
            backend.changed.add(kg)
            m = groups.get(kg)
            if m is None:
                m = groups[kg] = {}
            slot = (backend.current_key, self.namespace)
            current = m.get(slot)
            m[slot] = value if current is None else self._reduce(current, value)
            return
        current = self._get_value()
        self._set_value(value if current is None else self._reduce(current, value))

    def merge_values(self, a: Any, b: Any) -> Any:
        return self._reduce(a, b)


class HeapAggregatingState(_HeapState, AggregatingStateLogic, AggregatingState):
    __slots__ = ("_agg",)
    kind = "aggregating"

    def __init__(self, backend, table):
        super().__init__(backend, table)
        self._agg = table.descriptor.get_agg_function()


class HeapListState(_HeapState, ListState):
    """Stored as a Python list; with TTL a list of (element, last_access)."""

    __slots__ = ()
    kind = "list"

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


class HeapMapState(_HeapState, MapStateViews, MapState):
    """Stored as a dict; with TTL the dict's values are (value, last_access)."""

    __slots__ = ()
    kind = "map"

    def _changed(self) -> None:
        self._backend.changed.add(self._backend.current_key_group)

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
            self._changed()
            return ttl.return_expired, entry[0] if ttl.return_expired else None
        if ttl.update_on_read:
            d[k] = (entry[0], now)
            self._changed()
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
        self._changed()

    def put_all(self, dict_value: Dict[Any, Any]) -> None:
        for k, v in dict_value.items():
            self.put(k, v)

    def remove(self, key: Any) -> None:
        d = self._dict()
        if d is not None:
            d.pop(key, None)
            self._changed()
            if not d:
                self.clear()

    def contains(self, key: Any) -> bool:
        d = self._dict()
        if d is None:
            return False
        if self._ttl is None:
            return key in d
        return self._live(d, key, self._ttl.clock())[0]

    def _all_items(self) -> List[Tuple[Any, Any]]:
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


_STATE_CLASS = {
    "value": HeapValueState,
    "list": HeapListState,
    "map": HeapMapState,
    "reducing": HeapReducingState,
    "aggregating": HeapAggregatingState,
}


class HeapKeyedStateBackend(AbstractKeyedStateBackend):
    """Keyed state of one operator instance as Python objects (Flink's HeapKeyedStateBackend).
    `set_current_key` before every access (see AbstractKeyedStateBackend)."""

    kind = "hashmap"

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self._tables: Dict[str, StateTable] = {}

    def clear_all(self) -> None:
        """Drops every entry of every state (BATCH execution: the backend holds one key at a
        time and forgets it when the key's input ends, as Flink's BatchExecutionKeyedStateBackend)."""
        for table in self._tables.values():
            self.changed.update(kg for kg, m in table.groups.items() if m)
            table.groups.clear()

    # ---- state access ----
    def _table(self, descriptor: StateDescriptor) -> StateTable:
        kind = kind_of(descriptor)
        table = self._tables.get(descriptor.name)
        if table is None:
            table = self._tables[descriptor.name] = StateTable(descriptor.name, kind)
        elif table.kind != kind:
            raise self.kind_mismatch(descriptor.name, table.kind, kind)
        if table.descriptor is None:
            table.descriptor = descriptor
            table.ttl = Ttl.of(descriptor, self.clock)
        return table

    def create_state(self, descriptor: StateDescriptor, namespace: Any = None) -> Any:
        table = self._table(descriptor)
        state = _STATE_CLASS[table.kind](self, table)
        state.namespace = namespace
        return state

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
        single = ttl is not None and state.kind != "list"  # stored as (value, last_access)
        merged = None
        for source in sources:
            raw = m.pop((key, source), None)
            if raw is None:
                continue
            value = raw[0] if single else raw
            merged = value if merged is None else state.merge_values(merged, value)
        if merged is None:
            return
        current = m.get((key, target))
        if current is not None:
            merged = state.merge_values(current[0] if single else current, merged)
        if single:
            merged = (merged, ttl.clock())
        state._write_map()[(key, target)] = merged

    def keys(self, state_name: str, namespace: Any = None) -> List[Any]:
        """Keys with an entry of `state_name` in `namespace`."""
        table = self._tables.get(state_name)
        if table is None:
            return []
        return [key for _kg, key, ns, _v in table.entries() if ns == namespace]

    # ---- snapshot / restore ----
    def snapshot(self, key_groups: Optional[Iterable[int]] = None) -> dict:
        """Plain-data copy of the entries of every key group, or of `key_groups` only (the
        format: abstract_backend.py). TTL entries keep their access time; with
        cleanup_full_snapshot() expired ones are left out."""
        groups = self._snapshot_groups(key_groups)
        now = self.clock()
        out: Dict[int, Dict[str, list]] = {}
        states = {}
        for name, table in self._tables.items():
            states[name] = {"kind": table.kind, "ttl": table.ttl is not None or table.had_ttl}
            kind, ttl = table.kind, table.ttl
            tg = table.groups
            for kg in (tg if groups is None else groups):
                m = tg.get(kg)
                if not m:
                    continue
                for (key, ns), stored in m.items():
                    stored = snapshot_entry(kind, ttl, stored, now)
                    if stored is not None:
                        out.setdefault(kg, {}).setdefault(name, []).append((key, ns, stored))
        return {"max_parallelism": self.max_parallelism, "states": states, "key_groups": out}

    def restore(self, snapshots: Iterable[dict]) -> None:
        """Loads the entries of this instance's key groups from the snapshots of any number of
        former instances (same max parallelism, any backend)."""
        for snap in self.snapshots_of(snapshots):
            self.check_snapshot(snap)
            for name, meta in snap["states"].items():
                table = self._tables.get(name)
                if table is None:
                    table = self._tables[name] = StateTable(name, meta["kind"])
                elif table.kind != meta["kind"]:
                    raise ValueError(f"state {name!r} is {table.kind} state here but {meta['kind']} in the snapshot")
                table.had_ttl = table.had_ttl or bool(meta["ttl"])
            for kg, by_name in snap["key_groups"].items():
                kg = int(kg)
                if kg not in self.key_group_range:
                    continue
                for name, entries in by_name.items():
                    table = self._tables[name]
                    m = table.groups.setdefault(kg, {})
                    had_ttl = snap["states"][name]["ttl"]
                    for key, ns, stored in entries:
                        m[(key, ns)] = restored_entry(table.kind, stored, had_ttl)
