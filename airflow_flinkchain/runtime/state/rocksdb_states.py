"""The state objects of the RocksDB backend (rocksdb_backend.py has the key layout): value,
reducing and aggregating state as one entry per key and namespace, list state one entry per
element, map state one entry per map key. TTL as in the heap backend (backend.py)."""

from __future__ import annotations

import pickle
from typing import Any, Dict, Iterable, Iterator, List, Tuple

from airflow_flinkchain.runtime.state.abstract_backend import AggregatingStateLogic, MapStateViews
from airflow_flinkchain.runtime.state.key_serializer import frame, serialize_key
from airflow_flinkchain.state import AggregatingState, ListState, MapState, ReducingState, ValueState

loads = pickle.loads


def dumps(obj: Any) -> bytes:
    """The value serializer: pickle, cloudpickle for what plain pickle cannot (classes defined
    in a DAG file loaded by value)."""
    try:
        return pickle.dumps(obj, protocol=5)
    except (pickle.PicklingError, AttributeError, TypeError):
        import cloudpickle

        return cloudpickle.dumps(obj, protocol=5)


_UNSET = object()


class _RocksState:
    __slots__ = ("_backend", "_meta", "_db", "namespace", "_ttl", "_ns_obj", "_ns_bytes")
    kind = ""

    def __init__(self, backend: Any, meta: Any):
        self._backend = backend
        self._meta = meta
        self._db = backend.db
        self._ttl = meta.ttl
        self.namespace: Any = None
        self._ns_obj: Any = _UNSET
        self._ns_bytes = b""

    def set_current_namespace(self, namespace: Any) -> None:
        self.namespace = namespace

    def _prefix(self) -> bytes:
        ns = self.namespace
        if ns is not self._ns_obj:
            self._ns_bytes = frame(serialize_key(ns))
            self._ns_obj = ns
        return self._backend.key_head(self._meta.sid_bytes) + self._ns_bytes

    def _changed(self) -> None:
        self._backend.changed.add(self._backend.current_key_group)

    # single-entry kinds: stored = value, or (value, last_access) with TTL
    def _raw(self) -> Any:
        data = self._db.get(self._prefix())
        return None if data is None else loads(data)

    def _put(self, stored: Any) -> None:
        self._changed()
        self._db.put(self._prefix(), dumps(stored))

    def clear(self) -> None:
        self._changed()
        self._db.delete(self._prefix())

    def _get_value(self) -> Any:
        raw = self._raw()
        ttl = self._ttl
        if raw is None or ttl is None:
            return raw
        now = ttl.clock()
        if ttl.expired(raw[1], now):
            self.clear()
            return raw[0] if ttl.return_expired else None
        if ttl.update_on_read:
            self._put((raw[0], now))
        return raw[0]

    def _set_value(self, value: Any) -> None:
        self._put(value if self._ttl is None else (value, self._ttl.clock()))

    def merge_from(self, target: Any, sources: List[Any]) -> None:
        """merge_namespaces for single-entry kinds: sources reduced in order, then into the target."""
        ttl = self._ttl
        merged = None
        for source in sources:
            self.namespace = source
            raw = self._raw()
            if raw is None:
                continue
            self.clear()
            value = raw if ttl is None else raw[0]
            merged = value if merged is None else self.merge_values(merged, value)
        self.namespace = target
        if merged is None:
            return
        current = self._raw()
        if current is not None:
            merged = self.merge_values(current if ttl is None else current[0], merged)
        self._put(merged if ttl is None else (merged, ttl.clock()))


class RocksDBValueState(_RocksState, ValueState):
    __slots__ = ()
    kind = "value"

    def value(self) -> Any:
        return self._get_value()

    def update(self, value: Any) -> None:
        if value is None:
            self.clear()
        else:
            self._set_value(value)


class RocksDBReducingState(_RocksState, ReducingState):
    __slots__ = ("_reduce",)
    kind = "reducing"

    def __init__(self, backend, meta):
        super().__init__(backend, meta)
        self._reduce = meta.descriptor._reduce

    def get(self) -> Any:
        return self._get_value()

    def add(self, value: Any) -> None:
        if value is None:
            raise ValueError(f"state {self._meta.name!r}: cannot add None to a ReducingState")
        current = self._get_value()
        self._set_value(value if current is None else self._reduce(current, value))

    def merge_values(self, a: Any, b: Any) -> Any:
        return self._reduce(a, b)


class RocksDBAggregatingState(_RocksState, AggregatingStateLogic, AggregatingState):
    __slots__ = ("_agg",)
    kind = "aggregating"

    def __init__(self, backend, meta):
        super().__init__(backend, meta)
        self._agg = meta.descriptor.get_agg_function()


class RocksDBListState(_RocksState, ListState):
    """One entry per element under the key's prefix, ordered by a sequence number; with TTL
    each element is (element, last_access)."""

    __slots__ = ()
    kind = "list"

    def _entries(self) -> List[Tuple[bytes, Any]]:
        return [(k, loads(v)) for k, v in self._backend.scan(self._prefix())]

    def get(self) -> List[Any]:
        entries = self._entries()
        ttl = self._ttl
        if ttl is None:
            return [e for _k, e in entries]
        now = ttl.clock()
        live = [(k, e) for k, e in entries if not ttl.expired(e[1], now)]
        result = [e[0] for _k, e in (entries if ttl.return_expired else live)]
        if len(live) != len(entries) or ttl.update_on_read:
            self._changed()
            for k, e in entries:
                if ttl.expired(e[1], now):
                    self._db.delete(k)
                elif ttl.update_on_read:
                    self._db.put(k, dumps((e[0], now)))
        return result

    def add(self, value: Any) -> None:
        if value is None:
            raise ValueError(f"state {self._meta.name!r}: cannot add None to a ListState")
        self._changed()
        self._db.put(self._prefix() + self._backend.next_seq(),
                     dumps(value if self._ttl is None else (value, self._ttl.clock())))

    def add_all(self, values: List[Any]) -> None:
        for v in values:
            self.add(v)

    def update(self, values: List[Any]) -> None:
        self.clear()
        if values:
            self.add_all(values)

    def clear(self) -> None:
        self._changed()
        self._backend.delete_prefix(self._prefix())

    def merge_values(self, a: list, b: list) -> list:
        a.extend(b)
        return a

    def merge_from(self, target: Any, sources: List[Any]) -> None:
        """Moves the sources' elements (their access times kept) after the target's."""
        moved = []
        for source in sources:
            self.namespace = source
            prefix = self._prefix()
            moved.extend(v for _k, v in self._backend.scan(prefix))
            self._backend.delete_prefix(prefix)
        self.namespace = target
        if moved:
            self._changed()
            prefix = self._prefix()
            for data in moved:
                self._db.put(prefix + self._backend.next_seq(), data)

    def __iter__(self) -> Iterator[Any]:
        return iter(self.get())


class RocksDBMapState(_RocksState, MapStateViews, MapState):
    """One entry per map key: the map key's bytes after the key's prefix, the value
    (map key, value) pickled; with TTL the value is (value, last_access)."""

    __slots__ = ()
    kind = "map"

    def _live(self, db_key: bytes, map_key: Any, entry: Any, now: int) -> Tuple[bool, Any]:
        ttl = self._ttl
        if ttl.expired(entry[1], now):
            self._changed()
            self._db.delete(db_key)
            return ttl.return_expired, entry[0] if ttl.return_expired else None
        if ttl.update_on_read:
            self._changed()
            self._db.put(db_key, dumps((map_key, (entry[0], now))))
        return True, entry[0]

    def _lookup(self, key: Any) -> Tuple[bool, Any]:
        db_key = self._prefix() + serialize_key(key)
        data = self._db.get(db_key)
        if data is None:
            return False, None
        map_key, entry = loads(data)
        if self._ttl is None:
            return True, entry
        return self._live(db_key, map_key, entry, self._ttl.clock())

    def get(self, key: Any) -> Any:
        return self._lookup(key)[1]

    def contains(self, key: Any) -> bool:
        return self._lookup(key)[0]

    def put(self, key: Any, value: Any) -> None:
        self._changed()
        self._db.put(self._prefix() + serialize_key(key),
                     dumps((key, value if self._ttl is None else (value, self._ttl.clock()))))

    def put_all(self, dict_value: Dict[Any, Any]) -> None:
        for k, v in dict_value.items():
            self.put(k, v)

    def remove(self, key: Any) -> None:
        self._changed()
        self._db.delete(self._prefix() + serialize_key(key))

    def clear(self) -> None:
        self._changed()
        self._backend.delete_prefix(self._prefix())

    def _all_items(self) -> List[Tuple[Any, Any]]:
        entries = [(k, loads(v)) for k, v in self._backend.scan(self._prefix())]
        if self._ttl is None:
            return [pair for _k, pair in entries]
        now = self._ttl.clock()
        items = []
        for db_key, (map_key, entry) in entries:
            present, value = self._live(db_key, map_key, entry, now)
            if present:
                items.append((map_key, value))
        return items


STATE_CLASSES = {
    "value": RocksDBValueState,
    "list": RocksDBListState,
    "map": RocksDBMapState,
    "reducing": RocksDBReducingState,
    "aggregating": RocksDBAggregatingState,
}
