"""Both keyed state backends: one snapshot format (heap -> RocksDB -> heap gives equal state, also
rescaled), per-key-group snapshots and changed_key_groups, the key serialization rule, the
pipeline setting reaching the workers, and the RocksDB directory's life."""

from __future__ import annotations

import os
from collections import Counter

import pytest

from airflow_flinkchain import StreamPipeline
from airflow_flinkchain.common import Time
from airflow_flinkchain.functions import KeyedProcessFunction
from airflow_flinkchain.graph.errors import PlanningError
from airflow_flinkchain.runtime.state.backend import HeapKeyedStateBackend
from airflow_flinkchain.runtime.state.factory import create_keyed_state_backend
from airflow_flinkchain.runtime.state.key_groups import compute_key_group_range_for_operator_index
from airflow_flinkchain.runtime.state.key_serializer import deserialize_key, serialize_key
from airflow_flinkchain.runtime.state.rocksdb_backend import RocksDBKeyedStateBackend
from airflow_flinkchain.state import (
    AggregatingStateDescriptor,
    ListStateDescriptor,
    MapStateDescriptor,
    ReducingStateDescriptor,
    StateTtlConfig,
    ValueStateDescriptor,
)
from airflow_flinkchain.state_backend import EmbeddedRocksDBStateBackend, HashMapStateBackend
from airflow_flinkchain.window import TimeWindow
from airflow_flinkchain.window_functions import AggregateFunction

BACKENDS = ("hashmap", "rocksdb")


class Sum(AggregateFunction):
    def create_accumulator(self):
        return 0

    def add(self, value, acc):
        return acc + value

    def get_result(self, acc):
        return acc

    def merge(self, a, b):
        return a + b


def _ttl_value():
    d = ValueStateDescriptor("ttl_v")
    d.enable_time_to_live(StateTtlConfig.new_builder(Time.seconds(100)).build())
    return d


DESCRIPTORS = {
    "v": ValueStateDescriptor("v"), "l": ListStateDescriptor("l"), "m": MapStateDescriptor("m"),
    "r": ReducingStateDescriptor("r", lambda a, b: a + b), "a": AggregatingStateDescriptor("a", Sum()),
}


def _make(kind, clock=lambda: 1000, **kw):
    return create_keyed_state_backend(kind, max_parallelism=128, clock=clock, **kw)


def _fill(b, keys):
    for i, k in enumerate(keys):
        b.set_current_key(k)
        b.get_state(DESCRIPTORS["v"]).update({"k": k, "i": i})
        lst = b.get_list_state(DESCRIPTORS["l"])
        lst.add(i)
        lst.add(str(k))
        m = b.get_map_state(DESCRIPTORS["m"])
        m.put("x", i)
        m.put(("t", i), [i])
        b.get_reducing_state(DESCRIPTORS["r"]).add(i)
        b.get_aggregating_state(DESCRIPTORS["a"]).add(i)
        b.get_partitioned_state(TimeWindow(i, i + 10), DESCRIPTORS["l"]).add("in-window")
        b.get_state(_ttl_value()).update(i)


def _canonical(snapshot):
    """A snapshot as comparable data: entry order within a key group does not matter."""
    out = {}
    for kg, by_name in snapshot["key_groups"].items():
        for name, entries in by_name.items():
            for key, ns, stored in entries:
                value = sorted(stored.items(), key=repr) if isinstance(stored, dict) else stored
                out[(int(kg), name, key, ns)] = value
    return snapshot["max_parallelism"], snapshot["states"], out


KEYS = [f"user{i}" for i in range(60)] + [7, (1, "a"), None]


@pytest.mark.parametrize("first, second", [("hashmap", "rocksdb"), ("rocksdb", "hashmap"), ("rocksdb", "rocksdb")])
def test_snapshot_moves_between_backends_unchanged(first, second):
    a = _make(first)
    _fill(a, KEYS)
    snap = a.snapshot()
    b = _make(second)
    b.restore([snap])
    assert _canonical(b.snapshot()) == _canonical(snap)
    # and back: the state reads the same through the API
    c = _make(first)
    c.restore(b.snapshot())
    assert _canonical(c.snapshot()) == _canonical(snap)
    for k in (KEYS[3], 7, (1, "a")):
        c.set_current_key(k)
        assert c.get_state(DESCRIPTORS["v"]).value()["k"] == k
        assert list(c.get_list_state(DESCRIPTORS["l"]).get())[1] == str(k)
        assert c.get_map_state(DESCRIPTORS["m"]).get("x") == c.get_reducing_state(DESCRIPTORS["r"]).get()


def test_rescaling_from_heap_to_three_rocksdb_instances_and_back():
    heap = _make("hashmap")
    _fill(heap, KEYS)
    snap = heap.snapshot()
    parts = []
    for index in range(3):
        r = compute_key_group_range_for_operator_index(128, 3, index)
        part = _make("rocksdb", key_group_range=r)
        part.restore([snap])
        assert all(int(kg) in r for kg in part.snapshot()["key_groups"])
        parts.append(part)
    assert sorted(map(repr, (k for p in parts for k in p.keys("v")))) == sorted(map(repr, KEYS))
    merged = _make("hashmap")
    merged.restore(p.snapshot() for p in parts)
    assert _canonical(merged.snapshot()) == _canonical(snap)


@pytest.mark.parametrize("kind", BACKENDS)
def test_changed_key_groups_and_per_key_group_snapshots(kind):
    b = _make(kind)
    assert b.changed_key_groups() == set()
    _fill(b, KEYS)
    written = {b.key_group_of(k) for k in KEYS}
    assert b.changed_key_groups() == written
    full = b.snapshot()
    assert b.changed_key_groups() == set()

    # reads change nothing
    for k in KEYS:
        b.set_current_key(k)
        b.get_state(DESCRIPTORS["v"]).value()
        list(b.get_list_state(DESCRIPTORS["l"]).get())
        b.get_map_state(DESCRIPTORS["m"]).items()
    assert b.changed_key_groups() == set()

    # one write: only its key group
    b.set_current_key("user5")
    b.get_state(DESCRIPTORS["v"]).update("new")
    kg = b.key_group_of("user5")
    assert b.changed_key_groups() == {kg}
    part = b.snapshot(key_groups=b.changed_key_groups())
    assert set(part["key_groups"]) == {kg} and b.changed_key_groups() == set()
    # the part replaces exactly that group of the full snapshot
    expected = {k: v for k, v in _canonical(full)[2].items() if k[0] != kg}
    expected.update(_canonical(part)[2])
    assert _canonical(b.snapshot())[2] == expected

    # clearing marks the group; an emptied group is absent from its snapshot
    other = next(k for k in KEYS if b.key_group_of(k) != kg and sum(b.key_group_of(x) == b.key_group_of(k)
                                                                     for x in KEYS) == 1)
    b.set_current_key(other)
    for name, d in DESCRIPTORS.items():
        b.get_partitioned_state(None, d).clear()
    b.get_partitioned_state(TimeWindow(KEYS.index(other), KEYS.index(other) + 10), DESCRIPTORS["l"]).clear()
    b.get_state(_ttl_value()).clear()
    assert b.changed_key_groups() == {b.key_group_of(other)}
    assert b.snapshot(key_groups=[b.key_group_of(other)])["key_groups"] == {}


@pytest.mark.parametrize("kind", BACKENDS)
def test_ttl_entries_keep_their_access_time_across_backends(kind):
    now = [0]
    d = ListStateDescriptor("l")
    d.enable_time_to_live(StateTtlConfig.new_builder(Time.milliseconds(100)).cleanup_full_snapshot().build())
    a = _make(kind, clock=lambda: now[0])
    a.set_current_key("k")
    s = a.get_list_state(d)
    s.add("old")
    now[0] = 60
    s.add("new")
    other = "rocksdb" if kind == "hashmap" else "hashmap"
    b = _make(other, clock=lambda: now[0])
    b.restore(a.snapshot())
    b.set_current_key("k")
    now[0] = 120
    assert list(b.get_list_state(d).get()) == ["new"]
    now[0] = 200
    assert a.snapshot()["key_groups"] == {}  # cleanup_full_snapshot: everything expired


def test_key_serialization_rule():
    assert serialize_key(1) == serialize_key(1.0) == serialize_key(True)
    assert serialize_key(frozenset({"a", "b", "c"})) == serialize_key(frozenset(["c", "b", "a"]))
    for key in ["é", 12345678901234567890, -3, 1.5, b"\x00", None, (1, ("a", None)), TimeWindow(0, 10),
                frozenset({1, 2})]:
        back = deserialize_key(serialize_key(key))
        assert back == key and type(back) is type(key)
    assert deserialize_key(serialize_key([1, 2])) == (1, 2)
    # RocksDB finds state by these bytes: 1.0 reads what 1 wrote
    b = _make("rocksdb")
    b.set_current_key(1)
    b.get_state(DESCRIPTORS["v"]).update("one")
    b.set_current_key(1.0)
    assert b.get_state(DESCRIPTORS["v"]).value() == "one"


def test_rocksdb_values_are_copies_until_written_back():
    b = _make("rocksdb")
    b.set_current_key("k")
    s = b.get_state(DESCRIPTORS["v"])
    s.update([1])
    s.value().append(2)
    assert s.value() == [1]


class BackendProbe(KeyedProcessFunction):
    def open(self, runtime_context):
        self.backend = type(runtime_context.state_backend).__name__
        self.count = runtime_context.get_state(ValueStateDescriptor("count"))

    def process_element(self, value, ctx):
        n = (self.count.value() or 0) + 1
        self.count.update(n)
        yield (value, n, self.backend)


def _probe_pipeline(mode, backend):
    p = StreamPipeline("probe", parallelism=2, runtime_mode=mode).set_state_backend(backend)
    p.from_collection(["a", "b", "a", "c", "a"]).key_by(lambda v: v).process(BackendProbe()).collect("out")
    return p


def test_the_pipeline_setting_reaches_the_workers_and_the_directory_is_removed(tmp_path):
    rocks = EmbeddedRocksDBStateBackend(enable_incremental_checkpointing=True)
    rocks.set_db_storage_paths(str(tmp_path))
    p = _probe_pipeline("streaming", rocks)
    assert p.plan().stream_graph.state_backend == {
        "kind": "rocksdb", "db_storage_paths": [str(tmp_path)], "incremental": True, "predefined_options": "DEFAULT"}
    out = p.execute_local().output("out")
    assert Counter(out) == Counter([("a", 1, "RocksDBKeyedStateBackend"), ("a", 2, "RocksDBKeyedStateBackend"),
                                    ("a", 3, "RocksDBKeyedStateBackend"), ("b", 1, "RocksDBKeyedStateBackend"),
                                    ("c", 1, "RocksDBKeyedStateBackend")])
    assert os.listdir(tmp_path) == []  # each subtask's database is gone after dispose
    # BATCH holds one key at a time: the heap, whatever is configured (as Flink)
    assert {r[2] for r in _probe_pipeline("batch", rocks).execute_local().output("out")} == {"HeapKeyedStateBackend"}
    assert {r[2] for r in _probe_pipeline("streaming", HashMapStateBackend()).execute_local().output("out")} == {
        "HeapKeyedStateBackend"}


def test_bad_state_backend_settings_are_refused():
    with pytest.raises(PlanningError, match="set_state_backend.*EmbeddedRocksDBStateBackend"):
        StreamPipeline("bad").set_state_backend("memory")
    with pytest.raises(ValueError, match="not local"):
        EmbeddedRocksDBStateBackend().set_db_storage_paths("s3a://bucket/rocks")


def test_dispose_removes_the_database_directory(tmp_path):
    b = RocksDBKeyedStateBackend(max_parallelism=128, db_storage_paths=[str(tmp_path)], operator_name="op/1")
    assert os.path.isdir(b.directory) and os.path.dirname(b.directory) == str(tmp_path)
    b.dispose()
    b.dispose()
    assert not os.path.exists(b.directory)


def test_heap_is_the_default():
    assert isinstance(_make(None), HeapKeyedStateBackend)
    assert StreamPipeline("d").get_state_backend() == HashMapStateBackend()


def test_a_worker_without_rocksdict_gets_a_clear_error(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "rocksdict", None)  # what a missing package looks like to import
    monkeypatch.delitem(sys.modules, "airflow_flinkchain.runtime.state.rocksdb_backend")
    with pytest.raises(RuntimeError, match="'counts'.*needs the 'rocksdict' package"):
        create_keyed_state_backend("rocksdb", operator_name="counts")
