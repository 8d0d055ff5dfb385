import os
import subprocess
import sys

import pytest

from airflow_flinkchain.runtime.state.key_groups import (
    KeyGroupRange,
    assign_key_to_parallel_operator,
    assign_to_key_group,
    compute_default_max_parallelism,
    compute_key_group_range_for_operator_index,
    compute_operator_index_for_key_group,
    murmur_hash,
    stable_key_hash,
)

# (int, MathUtils.murmurHash(int)) computed by Java (int overflow semantics)
JAVA_MURMUR = [(0, 593689054), (1, 68075478), (-1, 1982413648), (42, 1134849565), (123456789, 1088346449),
               (-2**31, 1718298732), (2**31 - 1, 1653689534)]


@pytest.mark.parametrize("code,expected", JAVA_MURMUR)
def test_murmur_hash_equals_flinks_java_result(code, expected):
    assert murmur_hash(code) == expected


def test_int_float_and_double_keys_hash_as_java():
    assert stable_key_hash(1 << 40) == 256  # Long.hashCode
    assert stable_key_hash(2.5) == 1074003968  # Double.hashCode
    assert assign_to_key_group(42, 128) == 29


def test_equal_keys_share_a_key_group():
    assert stable_key_hash(1) == stable_key_hash(1.0) == stable_key_hash(True)
    assert stable_key_hash(("a", 1)) == stable_key_hash(("a", 1.0))
    assert stable_key_hash("a") != stable_key_hash("b")


def test_str_key_groups_do_not_depend_on_the_process_hash_seed():
    code = ("from airflow_flinkchain.runtime.state.key_groups import assign_to_key_group as a;"
            "print([a(k, 128) for k in ['alpha', 'beta', ('x', 3), None, b'z', 'é']])")
    outs = set()
    for seed in ("1", "2"):
        env = dict(os.environ, PYTHONHASHSEED=seed)
        outs.add(subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                                check=True).stdout)
    assert len(outs) == 1


@pytest.mark.parametrize("parallelism,expected", [(1, 128), (85, 128), (86, 256), (100, 256), (1000, 2048),
                                                  (30000, 32768)])
def test_default_max_parallelism(parallelism, expected):
    assert compute_default_max_parallelism(parallelism) == expected


def test_default_max_parallelism_rejects_bad_parallelism():
    with pytest.raises(ValueError):
        compute_default_max_parallelism(0)


@pytest.mark.parametrize("parallelism", [1, 2, 3, 5, 7, 128])
def test_ranges_partition_all_key_groups_and_agree_with_operator_index(parallelism):
    seen = []
    for index in range(parallelism):
        r = compute_key_group_range_for_operator_index(128, parallelism, index)
        for kg in r:
            assert compute_operator_index_for_key_group(128, parallelism, kg) == index
        seen.extend(r)
    assert seen == list(range(128))


def test_key_to_operator_is_in_its_range():
    for key in ["a", "b", 7, ("k", 2)]:
        index = assign_key_to_parallel_operator(key, 128, 3)
        assert assign_to_key_group(key, 128) in compute_key_group_range_for_operator_index(128, 3, index)


def test_key_group_range_basics():
    r = KeyGroupRange(3, 5)
    assert 3 in r and 5 in r and 6 not in r and len(r) == 3 and list(r) == [3, 4, 5]
    assert len(KeyGroupRange(1, 0)) == 0
