import pytest

from airflow_flinkchain.common import Time, Types
from airflow_flinkchain.runtime.state.backend import HeapKeyedStateBackend
from airflow_flinkchain.runtime.state.key_groups import assign_to_key_group, compute_key_group_range_for_operator_index
from airflow_flinkchain.state import (
    AggregatingStateDescriptor,
    ListStateDescriptor,
    MapStateDescriptor,
    ReducingStateDescriptor,
    StateTtlConfig,
    ValueStateDescriptor,
)
from airflow_flinkchain.window_functions import AggregateFunction


class Avg(AggregateFunction):
    def create_accumulator(self):
        return [0, 0]

    def add(self, value, acc):
        return [acc[0] + value, acc[1] + 1]

    def get_result(self, acc):
        return acc[0] / acc[1]

    def merge(self, a, b):
        return [a[0] + b[0], a[1] + b[1]]


def test_value_state_is_per_key_and_namespace():
    b = HeapKeyedStateBackend()
    s = b.get_state(ValueStateDescriptor("v"))
    b.set_current_key("a")
    s.update(1)
    b.set_current_key("b")
    assert s.value() is None
    s.update(2)
    w = b.get_partitioned_state("w1", ValueStateDescriptor("v"))
    assert w.value() is None
    w.update(3)
    w.set_current_namespace(None)
    assert w.value() == 2
    b.set_current_key("a")
    assert s.value() == 1
    s.update(None)
    assert s.value() is None


def test_list_map_reducing_aggregating_state():
    b = HeapKeyedStateBackend()
    b.set_current_key(1)
    lst = b.get_list_state(ListStateDescriptor("l", Types.INT()))
    assert list(lst.get()) == []
    lst.add(1)
    lst.add_all([2, 3])
    assert list(lst) == [1, 2, 3]
    lst.update([9])
    assert list(lst.get()) == [9]
    with pytest.raises(ValueError):
        lst.add(None)

    m = b.get_map_state(MapStateDescriptor("m", Types.STRING(), Types.INT()))
    assert m.is_empty()
    m["x"] = 1
    m.put_all({"y": 2})
    assert "x" in m and m.get("y") == 2 and sorted(m.keys()) == ["x", "y"] and sorted(m.values()) == [1, 2]
    del m["x"]
    assert dict(m.items()) == {"y": 2} and list(m) == ["y"]

    r = b.get_reducing_state(ReducingStateDescriptor("r", lambda a, c: a + c, Types.INT()))
    assert r.get() is None
    r.add(2)
    r.add(5)
    assert r.get() == 7

    a = b.get_aggregating_state(AggregatingStateDescriptor("a", Avg(), Types.PICKLED_BYTE_ARRAY()))
    assert a.get() is None
    a.add(2)
    a.add(4)
    assert a.get() == 3.0


def test_a_state_name_has_one_kind():
    b = HeapKeyedStateBackend()
    b.get_state(ValueStateDescriptor("s"))
    with pytest.raises(ValueError, match="'s'"):
        b.get_list_state(ListStateDescriptor("s"))


def test_merge_namespaces():
    b = HeapKeyedStateBackend()
    b.set_current_key("k")
    red = ReducingStateDescriptor("r", lambda x, y: x + y)
    agg = AggregatingStateDescriptor("a", Avg())
    lst = ListStateDescriptor("l")
    for ns, v in (("w1", 1), ("w2", 2), ("w3", 6)):
        b.get_partitioned_state(ns, red).add(v)
        b.get_partitioned_state(ns, agg).add(v)
        b.get_partitioned_state(ns, lst).add(v)
    for d in (red, agg, lst):
        b.merge_namespaces(d, "w1", ["w2", "w3"])
    assert b.get_partitioned_state("w1", red).get() == 9
    assert b.get_partitioned_state("w1", agg).get() == 3.0
    assert sorted(b.get_partitioned_state("w1", lst).get()) == [1, 2, 6]
    assert b.get_partitioned_state("w2", red).get() is None
    with pytest.raises(TypeError):
        b.merge_namespaces(ValueStateDescriptor("v"), "w1", ["w2"])


def _ttl(update=StateTtlConfig.UpdateType.OnCreateAndWrite,
         visibility=StateTtlConfig.StateVisibility.NeverReturnExpired, full_snapshot=False):
    builder = StateTtlConfig.new_builder(Time.milliseconds(100)).set_update_type(update).set_state_visibility(visibility)
    if full_snapshot:
        builder.cleanup_full_snapshot()
    return builder.build()


def _backend_with(descriptor, ttl):
    now = [0]
    descriptor.enable_time_to_live(ttl)
    b = HeapKeyedStateBackend(clock=lambda: now[0])
    b.set_current_key("k")
    return b, b.get_partitioned_state(None, descriptor), now


def test_ttl_on_create_and_write_expires_at_last_write_plus_ttl():
    b, s, now = _backend_with(ValueStateDescriptor("v"), _ttl())
    s.update(1)
    now[0] = 99
    assert s.value() == 1  # reading does not extend
    now[0] = 100
    assert s.value() is None


def test_ttl_on_read_and_write_extends_on_read():
    b, s, now = _backend_with(ValueStateDescriptor("v"), _ttl(StateTtlConfig.UpdateType.OnReadAndWrite))
    s.update(1)
    now[0] = 99
    assert s.value() == 1
    now[0] = 198
    assert s.value() == 1
    now[0] = 298
    assert s.value() is None


def test_ttl_return_expired_if_not_cleaned_up_returns_it_once():
    b, s, now = _backend_with(ValueStateDescriptor("v"),
                              _ttl(visibility=StateTtlConfig.StateVisibility.ReturnExpiredIfNotCleanedUp))
    s.update(1)
    now[0] = 500
    assert s.value() == 1
    assert s.value() is None


def test_ttl_of_list_elements_and_map_entries():
    b, lst, now = _backend_with(ListStateDescriptor("l"), _ttl())
    lst.add("old")
    now[0] = 60
    lst.add("new")
    now[0] = 120
    assert list(lst.get()) == ["new"]
    now[0] = 160
    assert list(lst.get()) == []

    b, m, now = _backend_with(MapStateDescriptor("m"), _ttl())
    m.put("a", 1)
    now[0] = 60
    m.put("b", 2)
    now[0] = 120
    assert dict(m.items()) == {"b": 2} and not m.contains("a") and m.get("a") is None


def test_ttl_of_reducing_state_restarts_from_empty_after_expiry():
    b, r, now = _backend_with(ReducingStateDescriptor("r", lambda x, y: x + y), _ttl())
    r.add(5)
    now[0] = 200
    r.add(1)
    assert r.get() == 1


def _fill(backend, keys):
    v = backend.get_state(ValueStateDescriptor("v"))
    lst = backend.get_list_state(ListStateDescriptor("l"))
    for k in keys:
        backend.set_current_key(k)
        v.update(f"v-{k}")
        lst.add(k)
        lst.add(k)
        backend.get_partitioned_state(("w", k), ValueStateDescriptor("v")).update("windowed")


def test_snapshot_is_cut_by_key_group_and_restores_into_rescaled_instances():
    keys = [f"key{i}" for i in range(40)]
    one = HeapKeyedStateBackend(max_parallelism=128)
    _fill(one, keys)
    snap = one.snapshot()
    assert set(snap["key_groups"]) == {assign_to_key_group(k, 128) for k in keys}

    parts = []
    for index in range(3):
        r = compute_key_group_range_for_operator_index(128, 3, index)
        b = HeapKeyedStateBackend(max_parallelism=128, key_group_range=r)
        b.restore([snap])
        parts.append(b)
    owners = {}
    for index, b in enumerate(parts):
        for k in b.keys("v"):
            owners.setdefault(k, []).append(index)
            b.set_current_key(k)
            assert b.get_state(ValueStateDescriptor("v")).value() == f"v-{k}"
            assert list(b.get_list_state(ListStateDescriptor("l")).get()) == [k, k]
            assert b.get_partitioned_state(("w", k), ValueStateDescriptor("v")).value() == "windowed"
    assert sorted(owners) == sorted(keys) and all(len(o) == 1 for o in owners.values())

    # and back to one instance from the three snapshots
    merged = HeapKeyedStateBackend(max_parallelism=128)
    merged.restore([b.snapshot() for b in parts])
    assert sorted(merged.keys("v")) == sorted(keys)


def test_a_key_outside_the_key_group_range_is_refused():
    r = compute_key_group_range_for_operator_index(128, 2, 0)
    b = HeapKeyedStateBackend(max_parallelism=128, key_group_range=r)
    foreign = next(k for k in range(1000) if assign_to_key_group(k, 128) not in r)
    with pytest.raises(RuntimeError, match="key group"):
        b.set_current_key(foreign)


def test_restore_needs_the_same_max_parallelism():
    with pytest.raises(ValueError, match="max parallelism"):
        HeapKeyedStateBackend(max_parallelism=256).restore(HeapKeyedStateBackend(max_parallelism=128).snapshot())


def test_full_snapshot_cleanup_leaves_expired_entries_out():
    b, s, now = _backend_with(ValueStateDescriptor("v"), _ttl(full_snapshot=True))
    s.update(1)
    b.set_current_key("later")
    now[0] = 50
    s.update(2)
    now[0] = 120
    entries = [e for by_name in b.snapshot()["key_groups"].values() for e in by_name.get("v", [])]
    assert [(k, v[0]) for k, _ns, v in entries] == [("later", 2)]
