import os
import subprocess
import sys

import pytest

from airflow_flinkchain.graph.model import PartitionSpec, Partitioner
from airflow_flinkchain.runtime.core.errors import KeySelectorError, PartitionerError
from airflow_flinkchain.runtime.core.partitioners import (channel_for_key, make_channel_selector, murmur_hash,
                                                     rescale_channels, stable_hash)

P = Partitioner


def selector(kind, subtask=0, up=2, n=4, **spec):
    return make_channel_selector(PartitionSpec(kind, **spec), subtask_index=subtask, upstream_parallelism=up,
                                 num_channels=n, edge_id="a__b", operator="op")


def test_forward_global_broadcast():
    assert selector(P.FORWARD, subtask=1, up=4) == 1
    with pytest.raises(PartitionerError, match="FORWARD.*'op'"):
        selector(P.FORWARD, up=2, n=4)
    assert selector(P.GLOBAL) == 0
    assert selector(P.BROADCAST) == (0, 1, 2, 3)


def test_rebalance_round_robin_from_subtask_index():
    sel = selector(P.REBALANCE, subtask=1)
    assert [sel(None) for _ in range(6)] == [1, 2, 3, 0, 1, 2]
    again = selector(P.REBALANCE, subtask=1)
    assert [again(None) for _ in range(6)] == [1, 2, 3, 0, 1, 2]  # deterministic across retries


def test_rescale_pointwise_groups():
    """Flink's connectPointwise ranges (EdgeManagerBuildUtil)."""
    assert [list(rescale_channels(i, 2, 4)) for i in range(2)] == [[0, 1], [2, 3]]
    assert [list(rescale_channels(i, 4, 2)) for i in range(4)] == [[0], [0], [1], [1]]
    assert [list(rescale_channels(i, 3, 3)) for i in range(3)] == [[0], [1], [2]]
    assert [list(rescale_channels(i, 2, 3)) for i in range(2)] == [[0, 1], [2]]
    assert [list(rescale_channels(i, 3, 2)) for i in range(3)] == [[0], [1], [1]]
    assert [list(rescale_channels(i, 3, 5)) for i in range(3)] == [[0, 1], [2, 3], [4]]
    assert [list(rescale_channels(i, 5, 3)) for i in range(5)] == [[0], [1], [1], [2], [2]]
    assert list(rescale_channels(0, 1, 3)) == [0, 1, 2]
    assert [list(rescale_channels(i, 3, 1)) for i in range(3)] == [[0], [0], [0]]
    # every channel is fed by exactly the upstream subtasks Flink connects to it
    for up in range(1, 8):
        for n in range(1, 8):
            fed = sorted(ch for i in range(up) for ch in rescale_channels(i, up, n))
            assert set(fed) == set(range(n)) and (up < n or len(fed) == up)
    sel = selector(P.RESCALE, subtask=0, up=2, n=3)
    assert [sel(None) for _ in range(4)] == [0, 1, 0, 1]  # round robin inside its range, first channel first
    assert selector(P.RESCALE, subtask=1, up=2, n=3) == 2
    sel = selector(P.RESCALE, subtask=1, up=2, n=4)
    assert [sel(None) for _ in range(4)] == [2, 3, 2, 3]
    assert selector(P.RESCALE, subtask=3, up=4, n=2) == 1


def test_shuffle_is_seeded_per_edge_and_subtask():
    a, b = selector(P.SHUFFLE, subtask=0), selector(P.SHUFFLE, subtask=0)
    seq = [a(None) for _ in range(50)]
    assert seq == [b(None) for _ in range(50)]
    assert set(seq) == {0, 1, 2, 3}
    c = selector(P.SHUFFLE, subtask=1)
    assert [c(None) for _ in range(50)] != seq


def test_hash_is_flink_key_group_assignment():
    sel = selector(P.HASH, key_selector=lambda v: v[0], max_parallelism=128)
    for key in ["a", "b", 7, (1, "x"), None, 2.5]:
        group = murmur_hash(stable_hash(key)) % 128
        assert sel((key, 0)) == group * 4 // 128 == channel_for_key(key, 128, 4)
    assert stable_hash(5) == 5 and stable_hash(-1) == 0  # Java Long.hashCode
    assert all(0 <= murmur_hash(x) for x in range(-1000, 1000))
    assert sel(([1, 2], 0)) == channel_for_key([1, 2], 128, 4)  # unhashable keys work too


def test_hash_of_strings_is_the_same_in_another_process():
    keys = ["alpha", "beta", "gamma", "δ", ("t", 1)]
    mine = [channel_for_key(k, 128, 7) for k in keys]
    code = ("from airflow_flinkchain.runtime.core.partitioners import channel_for_key;"
            f"print([channel_for_key(k, 128, 7) for k in {keys!r}])")
    for seed in ("1", "12345"):
        env = dict(os.environ, PYTHONHASHSEED=seed)
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
        assert out.stdout.strip() == str(mine)


def test_custom_partitioner_and_range_check():
    sel = selector(P.CUSTOM, key_selector=lambda v: v, custom_partitioner=lambda key, n: key % n)
    assert [sel(v) for v in range(5)] == [0, 1, 2, 3, 0]

    from airflow_flinkchain.functions import Partitioner as PartitionerFn

    class Last(PartitionerFn):
        def partition(self, key, n):
            return n - 1

    assert selector(P.CUSTOM, custom_partitioner=Last())("x") == 3
    bad = selector(P.CUSTOM, custom_partitioner=lambda key, n: n)
    with pytest.raises(PartitionerError, match=r"leaving operator 'op' returned 4.*\[0, 4\)"):
        bad(1)


def test_failing_custom_key_selector_is_named():
    def bad_key(value):
        raise ValueError("no key")

    sel = selector(P.CUSTOM, key_selector=bad_key, custom_partitioner=lambda key, n: 0)
    with pytest.raises(KeySelectorError, match=r"key selector .*bad_key of partition_custom\(\) on the edge "
                                               r"'a__b' leaving operator 'op' failed: ValueError: no key"):
        sel(1)
