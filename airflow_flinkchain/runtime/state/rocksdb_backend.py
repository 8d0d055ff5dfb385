"""RocksDB keyed state backend (Flink's RocksDBKeyedStateBackend) on `rocksdict`: the state of one
keyed operator subtask in an embedded RocksDB, so it may be larger than memory. Same interface,
semantics and snapshot format as HeapKeyedStateBackend (abstract_backend.py).

Layout of one entry's RocksDB key (Flink's, with a state id where Flink has a column family):

    key group (2 bytes, big-endian) | state id (2 bytes) | len + key | len + namespace [| suffix]

so a key group is one contiguous range (snapshots cut by key group are range scans), and one
key's state in one namespace is a contiguous range below it. Keys, namespaces and map keys are
serialized by key_serializer.py (equal keys give equal bytes; read its rule for key types).
Values are pickled (cloudpickle when plain pickle cannot). Value, reducing and aggregating
state is one entry; list state one entry per element (suffix: an 8-byte sequence number, so
`add` never rewrites the list); map state one entry per map key (suffix: the map key). Map
state iterates in the map keys' byte order (as Flink's RocksDB MapState), not insertion order.

Every access (de)serializes: a value read from state is a copy, so changing it in place changes
nothing until it is written back with `update` / `put` (as in Flink with RocksDB). The database
lives in a fresh directory per subtask, without write-ahead log (snapshots are the durable
copy), removed by `dispose()`.
"""

from __future__ import annotations

import os
import re
import shutil
import struct
import tempfile
import weakref
from typing import Any, Dict, Iterable, Iterator, List, Optional, Tuple

from rocksdict import BlockBasedIndexType, BlockBasedOptions, Cache, Options, Rdict, WriteBatch, WriteOptions

from airflow_flinkchain.runtime.state.abstract_backend import (
    AbstractKeyedStateBackend,
    Ttl,
    kind_of,
    restored_entry,
    snapshot_entry,
)
from airflow_flinkchain.runtime.state.key_serializer import deserialize_key, frame, serialize_key, unframe
from airflow_flinkchain.runtime.state.rocksdb_states import STATE_CLASSES, dumps, loads
from airflow_flinkchain.state import StateDescriptor

_U16 = struct.Struct(">H")
_UNSET = object()
_SEQ = struct.Struct(">Q")
_SINGLE = ("value", "reducing", "aggregating")
# (block cache, write buffer size) per PredefinedOptions name; two write buffers each
_MEMORY = {"DEFAULT": (64 << 20, 32 << 20), "FLASH_SSD_OPTIMIZED": (64 << 20, 32 << 20),
           "SPINNING_DISK_OPTIMIZED": (64 << 20, 32 << 20),
           "SPINNING_DISK_OPTIMIZED_HIGH_MEM": (256 << 20, 64 << 20)}


def successor(prefix: bytes) -> bytes:
    """The least byte string above every string starting with `prefix`."""
    b = bytearray(prefix)
    while b and b[-1] == 0xFF:
        b.pop()
    if not b:
        return b"\xff" * (len(prefix) + 1)
    b[-1] += 1
    return bytes(b)


class StateMeta:
    """One registered state: its name, kind, id in the key layout, and (once a descriptor
    arrived) the descriptor and TTL settings."""

    __slots__ = ("name", "kind", "sid", "sid_bytes", "descriptor", "ttl", "had_ttl")

    def __init__(self, name: str, kind: str, sid: int):
        self.name, self.kind, self.sid = name, kind, sid
        self.sid_bytes = _U16.pack(sid)
        self.descriptor: Optional[StateDescriptor] = None
        self.ttl: Optional[Ttl] = None
        self.had_ttl = False  # restored with TTL entries before the descriptor came


def _close(holder: list, directory: str) -> None:
    db = holder.pop() if holder else None
    if db is not None:
        try:
            db.close()
        except Exception:  # noqa: BLE001 - already closed or failed; the directory goes anyway
            pass
    shutil.rmtree(directory, ignore_errors=True)


class RocksDBKeyedStateBackend(AbstractKeyedStateBackend):
    """Keyed state of one operator instance in RocksDB. `db_storage_paths`: local base
    directories (the subtask picks one by `subtask` index; default: the temp directory);
    `predefined_options`: a PredefinedOptions name setting the memory budget."""

    kind = "rocksdb"

    def __init__(self, *args: Any, db_storage_paths: Optional[List[str]] = None, subtask: int = 0,
                 operator_name: str = "keyed", predefined_options: str = "DEFAULT", **kwargs: Any):
        super().__init__(*args, **kwargs)
        base = db_storage_paths[subtask % len(db_storage_paths)] if db_storage_paths else tempfile.gettempdir()
        os.makedirs(base, exist_ok=True)
        label = re.sub(r"[^A-Za-z0-9_.-]+", "_", operator_name)[:40]
        self.directory = tempfile.mkdtemp(prefix=f"flinkchain-rocksdb-{label}-{subtask}-", dir=base)
        cache_size, buffer_size = _MEMORY.get(predefined_options, _MEMORY["DEFAULT"])
        options = Options(raw_mode=True)
        options.create_if_missing(True)
        table = BlockBasedOptions()
        table.set_block_cache(Cache(cache_size))
        table.set_bloom_filter(10, False)  # a first access of a key is a miss: skip the files
        # index and filters in the cache (bounded memory), cut into partitions: a whole filter of
        # a large file would not fit a cache shard and be re-read per lookup
        table.set_index_type(BlockBasedIndexType.two_level_index_search())
        table.set_partition_filters(True)
        table.set_metadata_block_size(4096)
        table.set_cache_index_and_filter_blocks(True)
        table.set_pin_top_level_index_and_filter(True)
        table.set_pin_l0_filter_and_index_blocks_in_cache(True)
        options.set_block_based_table_factory(table)
        options.set_write_buffer_size(buffer_size)
        options.set_max_write_buffer_number(2)
        self.db = Rdict(os.path.join(self.directory, "db"), options)
        write = WriteOptions()
        write.disable_wal = True
        self.db.set_write_options(write)
        self._holder = [self.db]
        self._finalizer = weakref.finalize(self, _close, self._holder, self.directory)
        self._meta: Dict[str, StateMeta] = {}
        self._by_sid: Dict[bytes, StateMeta] = {}
        self._seq = 0
        self._head_key: Any = _UNSET
        self._head_kg = -1
        self._kg_bytes = b""
        self._key_bytes = b""

    # ---- the key layout ----
    def key_head(self, sid_bytes: bytes) -> bytes:
        """key group | state id | framed current key, cached per current key object."""
        key, kg = self.current_key, self.current_key_group
        if key is not self._head_key or kg != self._head_kg:
            self._kg_bytes = _U16.pack(kg)
            self._key_bytes = frame(serialize_key(key))
            self._head_key, self._head_kg = key, kg
        return self._kg_bytes + sid_bytes + self._key_bytes

    def next_seq(self) -> bytes:
        self._seq += 1
        return _SEQ.pack(self._seq)

    def scan(self, prefix: bytes, end: Optional[bytes] = None) -> Iterator[Tuple[bytes, bytes]]:
        """(key, value) of every entry in [prefix, end or the prefix's successor)."""
        end = successor(prefix) if end is None else end
        for k, v in self.db.items(from_key=prefix):
            if k >= end:
                return
            yield k, v

    def scan_keys(self, prefix: bytes) -> Iterator[bytes]:
        end = successor(prefix)
        for k in self.db.keys(from_key=prefix):
            if k >= end:
                return
            yield k

    def delete_prefix(self, prefix: bytes) -> int:
        """Point-deletes every entry under `prefix` (range tombstones per key would slow reads)."""
        batch = WriteBatch(raw_mode=True)
        n = 0
        for k in self.scan_keys(prefix):
            batch.delete(k)
            n += 1
        if n:
            self.db.write(batch)
        return n

    def _register(self, name: str, kind: str) -> StateMeta:
        meta = self._meta.get(name)
        if meta is None:
            if len(self._meta) >= 0xFFFF:
                raise ValueError(f"state {name!r}: more than {0xFFFF} states in one operator")
            meta = self._meta[name] = StateMeta(name, kind, len(self._meta))
            self._by_sid[meta.sid_bytes] = meta
        elif meta.kind != kind:
            raise self.kind_mismatch(name, meta.kind, kind)
        return meta

    # ---- state access ----
    def create_state(self, descriptor: StateDescriptor, namespace: Any = None) -> Any:
        meta = self._register(descriptor.name, kind_of(descriptor))
        if meta.descriptor is None:
            meta.descriptor = descriptor
            meta.ttl = Ttl.of(descriptor, self.clock)
        state = STATE_CLASSES[meta.kind](self, meta)
        state.namespace = namespace
        return state

    def clear_all(self) -> None:
        """Drops every entry (see HeapKeyedStateBackend.clear_all)."""
        start = _U16.pack(self._first_key_group)
        end = _U16.pack(self._last_key_group + 1) if self._last_key_group < 0xFFFF else b"\xff\xff\xff"
        self.db.delete_range(start, end)
        self.changed.update(self.key_group_range)

    def merge_namespaces(self, descriptor: StateDescriptor, target: Any, sources: Iterable[Any]) -> None:
        """Merges the current key's state in `sources` into `target` and drops the sources."""
        state = self.get_partitioned_state(target, descriptor)
        if not hasattr(state, "merge_values"):
            raise TypeError(f"state {descriptor.name!r} ({type(state).__name__}) cannot merge namespaces")
        state.merge_from(target, list(sources))

    def keys(self, state_name: str, namespace: Any = None) -> List[Any]:
        """Keys with an entry of `state_name` in `namespace`."""
        meta = self._meta.get(state_name)
        if meta is None:
            return []
        wanted = frame(serialize_key(namespace))
        out: List[Any] = []
        last = None
        for kg in self.key_group_range:
            for db_key in self.scan_keys(_U16.pack(kg) + meta.sid_bytes):
                key_bytes, at = unframe(db_key, 4)
                ns_bytes, _ = unframe(db_key, at)
                if frame(ns_bytes) == wanted and key_bytes != last:
                    out.append(deserialize_key(key_bytes))
                    last = key_bytes
        return out

    # ---- snapshot / restore ----
    def snapshot(self, key_groups: Optional[Iterable[int]] = None) -> dict:
        """The portable snapshot (abstract_backend.py) of every key group, or of `key_groups`
        only: a range scan per group. For state larger than memory, cut it group by group."""
        groups = self._snapshot_groups(key_groups)
        now = self.clock()
        out: Dict[int, Dict[str, list]] = {}
        if groups is None:
            ranges = [(_U16.pack(self._first_key_group), _U16.pack(self._last_key_group + 1)
                       if self._last_key_group < 0xFFFF else b"\xff\xff\xff")]
        else:
            ranges = [(_U16.pack(kg), None) for kg in groups]
        for start, end in ranges:
            self._snapshot_range(start, end, now, out)
        states = {name: {"kind": m.kind, "ttl": m.ttl is not None or m.had_ttl} for name, m in self._meta.items()}
        return {"max_parallelism": self.max_parallelism, "states": states, "key_groups": out}

    def _snapshot_range(self, start: bytes, end: Optional[bytes], now: int, out: dict) -> None:
        current = None  # (slot bytes, meta, kg, key bytes, ns bytes, stored)

        def flush() -> None:
            _slot, meta, kg, key_bytes, ns_bytes, stored = current
            stored = snapshot_entry(meta.kind, meta.ttl, stored, now)
            if stored is not None:
                out.setdefault(kg, {}).setdefault(meta.name, []).append(
                    (deserialize_key(key_bytes), deserialize_key(ns_bytes), stored))

        for db_key, value in self.scan(start, end):
            meta = self._by_sid[db_key[2:4]]
            key_bytes, at = unframe(db_key, 4)
            ns_bytes, at = unframe(db_key, at)
            slot = db_key[:at]
            if meta.kind in _SINGLE:
                if current is not None:
                    flush()
                current = (slot, meta, _U16.unpack_from(db_key)[0], key_bytes, ns_bytes, loads(value))
                continue
            if current is None or current[0] != slot:
                if current is not None:
                    flush()
                current = (slot, meta, _U16.unpack_from(db_key)[0], key_bytes, ns_bytes,
                           [] if meta.kind == "list" else {})
            if meta.kind == "list":
                current[5].append(loads(value))
            else:
                map_key, entry = loads(value)
                current[5][map_key] = entry
        if current is not None:
            flush()

    def restore(self, snapshots: Iterable[dict]) -> None:
        """Loads the entries of this instance's key groups from the snapshots of any number of
        former instances (same max parallelism, any backend); one write batch per key group."""
        for snap in self.snapshots_of(snapshots):
            self.check_snapshot(snap)
            for name, meta in snap["states"].items():
                if self._register(name, meta["kind"]).ttl is None and meta["ttl"]:
                    self._meta[name].had_ttl = True
            for kg, by_name in snap["key_groups"].items():
                kg = int(kg)
                if kg not in self.key_group_range:
                    continue
                batch = WriteBatch(raw_mode=True)
                kg_bytes = _U16.pack(kg)
                for name, entries in by_name.items():
                    meta = self._meta[name]
                    had_ttl = snap["states"][name]["ttl"]
                    head = kg_bytes + meta.sid_bytes
                    for key, ns, stored in entries:
                        stored = restored_entry(meta.kind, stored, had_ttl)
                        slot = head + frame(serialize_key(key)) + frame(serialize_key(ns))
                        if meta.kind in _SINGLE:
                            batch.put(slot, dumps(stored))
                        elif meta.kind == "list":
                            for element in stored:
                                batch.put(slot + self.next_seq(), dumps(element))
                        else:
                            for map_key, entry in stored.items():
                                batch.put(slot + serialize_key(map_key), dumps((map_key, entry)))
                self.db.write(batch)

    def dispose(self) -> None:
        """Closes the database and removes its directory (idempotent)."""
        self._finalizer()
