"""Keyed state in every operator of a keyed stream, key equality across the
hash exchange and inside a subtask, and key selectors under on_error."""

import datetime as dt
import os
import subprocess
import sys
from collections import namedtuple
from decimal import Decimal
from fractions import Fraction

import numpy as np
import pytest

from airflow_flinkchain.functions import (DEAD_LETTER_TAG, FilterFunction, FlatMapFunction,
                                          ProcessFunction, ValueStateDescriptor)
from airflow_flinkchain.graph.model import Partitioner, PartitionSpec
from airflow_flinkchain.runtime.core.errors import ChainExecutionError, KeySelectorError
from airflow_flinkchain.runtime.core.keys import grouping_key, stable_hash
from airflow_flinkchain.runtime.core.partitioners import channel_for_key

from tests.pipeline_functions import CountPerKey, RunningCount

from .helpers import K, build_job, edge, node, run


def first(v):
    return v[0]


def keyed(kind, fn, runtime_mode="batch", **kw):
    return build_job([node(0, K.SOURCE), node(1, kind, fn, name="op", key_selector=first, **kw),
                      node(2, K.SINK, name="out")], [edge(0, 1), edge(1, 2)], runtime_mode=runtime_mode)


class RepeatOnSecond(FlatMapFunction):
    def open(self, ctx):
        self.seen = ctx.get_state(ValueStateDescriptor("seen"))

    def flat_map(self, value):
        if self.seen.value():
            yield value
            yield value
        self.seen.update(True)


class FirstPerKey(FilterFunction):
    def open(self, ctx):
        self.seen = ctx.get_state(ValueStateDescriptor("seen"))

    def filter(self, value):
        if self.seen.value():
            return False
        self.seen.update(True)
        return True


class CountProcess(ProcessFunction):
    """RunningCount as a plain ProcessFunction on a KeyedStream (keyed state and the current key)."""

    open = RunningCount.open
    process_element = RunningCount.process_element


RECORDS = [("a", 1), ("b", 2), ("a", 3), ("c", 4), ("b", 5), ("a", 6)]


def test_keyed_state_in_map_flat_map_filter_and_process():
    # STREAMING: records in arrival order (BATCH processes them key by key)
    w, _ = run(keyed(K.MAP, CountPerKey(), "streaming"), RECORDS)
    assert w.sink_values("out") == [("a", 1), ("b", 1), ("a", 2), ("c", 1), ("b", 2), ("a", 3)]
    w, _ = run(keyed(K.FLAT_MAP, RepeatOnSecond(), "streaming"), RECORDS)
    assert w.sink_values("out") == [("a", 3), ("a", 3), ("b", 5), ("b", 5), ("a", 6), ("a", 6)]
    w, m = run(keyed(K.FILTER, FirstPerKey(), "streaming"), RECORDS)
    assert w.sink_values("out") == [("a", 1), ("b", 2), ("c", 4)] and m.operator("op").filtered == 3
    w, _ = run(keyed(K.KEYED_PROCESS, CountProcess(), "streaming"), RECORDS)
    assert w.sink_values("out") == [("a", 1), ("b", 1), ("a", 2), ("c", 1), ("b", 2), ("a", 3)]


def test_keyed_state_without_key_by_names_the_operator_and_the_fix():
    job = build_job([node(0, K.SOURCE), node(1, K.MAP, CountPerKey(), name="counter"), node(2, K.SINK, name="out")],
                    [edge(0, 1), edge(1, 2)])
    with pytest.raises(ChainExecutionError, match=r"'counter'.*during open.*KeyedStream.*key_by"):
        run(job, RECORDS)


MIXED_ONES = [1, 1.0, True, np.int64(1), np.int32(1), np.float64(1.0), np.bool_(True), Decimal(1), Decimal("1.00"),
              Fraction(1, 1)]


def test_equal_keys_hash_alike_in_every_process():
    Point = namedtuple("Point", "x y")
    groups = [
        MIXED_ONES,
        [1.5, Decimal("1.5"), Fraction(3, 2), np.float64(1.5), np.float32(1.5)],
        ["k", np.str_("k")],
        [(1, "a"), Point(1, "a"), (np.int64(1), np.str_("a")), (Decimal(1), "a")],
        [dt.datetime(2024, 5, 1, 12, tzinfo=dt.timezone.utc),
         dt.datetime(2024, 5, 1, 14, tzinfo=dt.timezone(dt.timedelta(hours=2)))],
        [frozenset({"x", "y"}), frozenset({"y", "x"})],
        [2**70, Decimal(2**70)],
        [float("inf"), Decimal("Infinity"), np.float64("inf")],
    ]
    for group in groups:
        assert all(k == group[0] and group[0] == k for k in group), group  # Python says they are equal ...
        assert len({stable_hash(k) for k in group}) == 1, group  # ... so they hash alike
        assert len({channel_for_key(k, 128, 4) for k in group}) == 1, group
    assert stable_hash([1, "a"]) == stable_hash((1, "a"))  # lists are grouped as the tuple of their items
    assert stable_hash(dt.date(2024, 5, 1)) != stable_hash(dt.datetime(2024, 5, 1))  # not equal in Python
    keys = "[1, 1.5, 'k', (1, 'a'), frozenset({'x', 'y', 'z'}), __import__('datetime').date(2024, 5, 1)]"
    code = f"from airflow_flinkchain.runtime.core.keys import stable_hash; print([stable_hash(k) for k in {keys}])"
    mine = [stable_hash(k) for k in eval(keys)]
    for seed in ("1", "4242"):
        out = subprocess.run([sys.executable, "-c", code], env=dict(os.environ, PYTHONHASHSEED=seed),
                             capture_output=True, text=True, check=True)
        assert out.stdout.strip() == str(mine)


def test_keyed_reduce_groups_equal_keys_of_mixed_types_once():
    values = [(k, 1) for k in MIXED_ONES] + [(2, 1), (np.int64(2), 1), ([1, "a"], 5), ((1, "a"), 5)]
    w, m = run(keyed(K.REDUCE, lambda a, b: (a[0], a[1] + b[1])), values)
    assert [v[1] for v in w.sink_values("out")] == [len(MIXED_ONES), 2, 10]
    assert m.operator("op").records_out == 3
    assert grouping_key([1, [2, "a"]]) == (1, (2, "a"))


def test_unhashable_key_names_the_key_selector_and_the_operator():
    job = build_job([node(0, K.SOURCE), node(1, K.REDUCE, lambda a, b: a, name="sum", key_selector=lambda v: {1: v}),
                     node(2, K.SINK, name="out")], [edge(0, 1), edge(1, 2)])
    with pytest.raises(ChainExecutionError, match=r"'sum'.*KeySelectorError: key selector .*<lambda> of operator "
                                                  r"'sum' returned an unhashable key"):
        run(job, [1])


def broken_key(v):
    if v[0] is None:
        raise KeyError("no key")
    return v[0]


def keyed_with_dead_letters(kind, fn, policy):
    nodes = [node(0, K.SOURCE), node(1, kind, fn, name="op", key_selector=broken_key, on_error=policy),
             node(2, K.SINK, name="out"), node(3, K.SINK, name="dlq")]
    return build_job(nodes, [edge(0, 1), edge(1, 2), edge(1, 3, output_tag=DEAD_LETTER_TAG.tag_id)])


KEYED_OPERATORS = [(K.MAP, CountPerKey()), (K.FLAT_MAP, lambda v: [v]), (K.FILTER, lambda v: True),
                   (K.KEYED_PROCESS, CountProcess()), (K.REDUCE, lambda a, b: a)]


@pytest.mark.parametrize("kind,fn", KEYED_OPERATORS, ids=[k.value for k, _ in KEYED_OPERATORS])
@pytest.mark.parametrize("policy", ["dead_letter", "skip"])
def test_failing_key_selector_follows_on_error_and_balances_the_books(kind, fn, policy):
    w, m = run(keyed_with_dead_letters(kind, fn, policy), [("a", 1), (None, 2), ("b", 3)])
    assert len(w.sink_values("out")) == 2
    d = m.operator("op").to_dict()
    assert d["records_in"] == 3
    if kind is not K.REDUCE:  # reduce emits per key at end of input
        assert d["records_in"] == d["records_out"] + d["filtered"] + d["dead_lettered"] + d["skipped"]
    if policy == "skip":
        assert d["skipped"] == 1 and w.sink_values("dlq") == []
    else:
        assert d["dead_lettered"] == 1
        (dead,) = w.sink_values("dlq")
        assert dead["record"] == (None, 2) and dead["operator"] == "op" and dead["error_type"] == "KeySelectorError"
        assert "key selector broken_key of operator 'op' failed: KeyError" in dead["error"]


@pytest.mark.parametrize("kind,fn", KEYED_OPERATORS, ids=[k.value for k, _ in KEYED_OPERATORS])
def test_failing_key_selector_under_fail_names_it(kind, fn):
    with pytest.raises(ChainExecutionError, match=r"operator 'op'.*key selector broken_key of operator 'op' "
                                                  r"failed: KeyError") as err:
        run(keyed_with_dead_letters(kind, fn, "fail"), [("a", 1), (None, 2)])
    assert isinstance(err.value.__cause__, KeySelectorError) and isinstance(err.value.__cause__.__cause__, KeyError)


def hash_job(policy, target_kind=K.REDUCE):
    spec = PartitionSpec(Partitioner.HASH, key_selector=broken_key, max_parallelism=128)
    nodes = [node(0, K.SOURCE, name="src"),
             node(1, target_kind, lambda a, b: a, name="sum", key_selector=broken_key, on_error=policy,
                  parallelism=4),
             node(2, K.SINK, name="out", parallelism=4)]
    return build_job(nodes, [edge(0, 1, spec), edge(1, 2)], chains=[[0], [1, 2]])


def test_hash_exchange_fails_on_a_key_selector_error_naming_it_under_fail():
    with pytest.raises(ChainExecutionError, match=r"operator 'src'.*write to edge.*KeySelectorError: key selector "
                                                  r"broken_key of operator 'sum' failed: KeyError"):
        run(hash_job("fail"), [("a", 1), (None, 2)])


def test_hash_exchange_leaves_key_selector_errors_to_the_keyed_operator_policy():
    w, m = run(hash_job("dead_letter"), [("a", 1), (None, 2), ("b", 3)])
    ((edge_id, _subtask),) = w.channel
    sent = {ch: w.edge_values(edge_id, ch) for ch in range(4)}
    assert (None, 2) in sent[0]  # the keyed operator recomputes the key and dead-letters it
    assert sorted(v for vs in sent.values() for v in vs if v[0]) == [("a", 1), ("b", 3)]
    assert m.operator("src").records_out == 3
    with pytest.raises(ChainExecutionError, match="key selector broken_key of operator 'sum'"):
        run(hash_job("skip", K.SINK), [(None, 2)])  # a keyed sink cannot route a record aside
