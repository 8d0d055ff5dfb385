"""The chain runtime on Spark (shared local SparkSession): partitioners end to end,
side outputs, split/select, unions, keyed operators across a HASH exchange,
watermarks across an exchange, object reuse, errors, typed edges."""

from __future__ import annotations

import os
from decimal import Decimal

import numpy as np
import pytest

from airflow_flinkchain import OutputTag, StreamPipeline
from airflow_flinkchain.runtime.core.elements import StreamRecord, Watermark
from airflow_flinkchain.runtime.exchange.layout import ExchangeArea
from airflow_flinkchain.runtime.spark.local import execute_pipeline
from airflow_flinkchain.runtime.core.partitioners import channel_for_key, rescale_channels
from airflow_flinkchain.runtime.spark.job import ChainRunError

from tests.pipeline_functions import (CountPerKey, EventTimeProbe, MainThenSide, Mutate, by_subtask,
                                      keyed_count_pipeline, partitioner_pipeline, side_output_pipeline)

pytestmark = pytest.mark.spark


def test_every_partitioner_channel_choice(spark):
    p, branches = partitioner_pipeline()
    res = execute_pipeline(p, spark=spark)
    up_split = {0: [x for x in range(12) if x % 2 == 0], 1: [x for x in range(12) if x % 2 == 1]}
    out = {name: by_subtask(res.output(name)) for name in branches}
    assert out["forward"] == up_split
    assert out["global"] == {0: list(range(12))}
    assert all(v == list(range(12)) for v in out["broadcast"].values())
    assert sorted(out["broadcast"]) == [0, 1, 2]
    assert all(channel_for_key(x % 5, 128, 3) == k for k, xs in out["hash"].items() for x in xs)
    assert out["custom"] == by_subtask([((x // 4) % 3, x) for x in range(12)])
    for name in ("rebalance", "shuffle", "rescale"):
        assert sorted(x for xs in out[name].values() for x in xs) == list(range(12)), name
    # round robin: each upstream subtask spreads its 6 records 2/2/2 over 3 channels
    assert sorted(len(v) for v in out["rebalance"].values()) == [4, 4, 4]
    for k, xs in out["rescale"].items():  # rescale stays inside the upstream subtask's local group
        assert all(k in rescale_channels(x % 2, 2, 3) for x in xs)
    again = execute_pipeline(p, spark=spark)  # deterministic across runs (retries write the same data)
    assert by_subtask(again.output("shuffle")) == out["shuffle"]
    assert by_subtask(again.output("rebalance")) == out["rebalance"]


def test_side_outputs_split_select_union(spark):
    p = side_output_pipeline()
    res = execute_pipeline(p, spark=spark)
    assert sorted(res.output("even")) == [0, 20, 40, 60, 80]
    assert sorted(res.output("odd_chained")) == [-9, -7, -5, -3, -1]
    assert sorted(res.output("odd_across")) == [1001, 1003, 1005, 1007, 1009]
    assert sorted(res.output("small")) == [("s", x) for x in range(5)]
    assert sorted(res.output("big")) == [("b", x) for x in range(5, 10)]
    assert sorted(res.output("union")) == [0, 1, 1, 2, 3, 3, 4, 5, 7, 9]
    side = [m for m in res.operator_metrics("proc")]
    assert side and side[0]["records_in"] == 10 and side[0]["side_outputs"] == {"odd": 5}


def test_keyed_reduce_and_state_across_hash_exchange(spark):
    p = keyed_count_pipeline()
    res = execute_pipeline(p, spark=spark)
    assert sorted(res.output("sums")) == [("a", 10), ("b", 7), ("c", 4)]
    assert sorted(res.output("counts")) == [("a", 1), ("a", 2), ("a", 3), ("b", 1), ("b", 2), ("c", 1)]


def test_keyed_map_state_and_equal_keys_of_mixed_types_across_hash_exchange(spark):
    p = StreamPipeline("keyed_fidelity", parallelism=2, runtime_mode="batch")
    src = p.from_collection([("a", 1), ("b", 2), ("a", 3), ("c", 4), ("b", 5), ("a", 6)]).name("src")
    src.key_by(lambda r: r[0]).map(CountPerKey()).name("count").collect("counts")
    mixed = [(k, 1) for i in range(10) for k in (i, np.int64(i), Decimal(i))]  # equal keys, three types
    (p.from_collection(mixed).name("mixed").key_by(lambda r: r[0])
     .reduce(lambda a, b: (a[0], a[1] + b[1])).name("sum").collect("sums"))
    res = execute_pipeline(p, spark=spark)
    assert sorted(res.output("counts")) == [("a", 1), ("a", 2), ("a", 3), ("b", 1), ("b", 2), ("c", 1)]
    assert sorted((int(k), n) for k, n in res.output("sums")) == [(i, 3) for i in range(10)]


def region(order):
    return order["region"]  # KeyError for an order without a region


def test_failing_key_selector_follows_the_keyed_operator_policy_across_hash_exchange(spark):
    orders = [{"region": "eu", "n": 1}, {"n": 2}, {"region": "us", "n": 3}, {"region": "eu", "n": 4}]
    p = StreamPipeline("key_errors", parallelism=2, runtime_mode="batch")
    total = (p.from_collection(orders).name("src").map(dict).name("copy").key_by(region)
             .reduce(lambda a, b: {**a, "n": a["n"] + b["n"]}).name("total").on_error("dead_letter"))
    total.collect("totals")
    total.dead_letters().collect("bad")
    res = execute_pipeline(p, spark=spark)
    assert sorted((r["region"], r["n"]) for r in res.output("totals")) == [("eu", 5), ("us", 3)]
    (bad,) = res.output("bad")
    assert bad["record"] == {"n": 2} and bad["error_type"] == "KeySelectorError"
    assert "key selector region of operator 'total' failed: KeyError" in bad["error"]
    counts = res.operator_metrics("total")
    assert sum(m["records_in"] for m in counts) == 4 and sum(m["dead_lettered"] for m in counts) == 1
    strict = StreamPipeline("key_errors_fail", parallelism=2)
    (strict.from_collection(orders).name("src").map(dict).name("copy").key_by(region)
     .reduce(lambda a, b: a).name("total").collect("totals"))
    with pytest.raises(ChainRunError, match=r"KeySelectorError: key selector region of operator 'total' failed"):
        execute_pipeline(strict, spark=spark)


def test_timestamps_and_watermarks_across_an_exchange(spark):
    p = StreamPipeline("event_time", parallelism=2)
    items = [StreamRecord(1, 10), StreamRecord(2, 12), Watermark(16), StreamRecord(3, 20), Watermark(30)]
    (p.from_collection(items).name("src").map(lambda x: x * 10).name("times10")
     .key_by(lambda x: 0).process(EventTimeProbe()).name("probe").collect("out"))
    res = execute_pipeline(p, spark=spark)
    out = res.output("out")
    assert sorted(o for o in out if o[0] == "rec") == [("rec", 10, 10), ("rec", 20, 12), ("rec", 30, 20)]
    assert sorted(o for o in out if o[0] == "timer") == [("timer", 0, 15), ("timer", 0, 17), ("timer", 0, 25)]
    # timers 15 and 17 fire on watermark 16 / 30, i.e. before the end of input, in timestamp order
    timers = [o[2] for o in out if o[0] == "timer"]
    assert timers == sorted(timers)


@pytest.mark.parametrize("reuse", [False, True])
def test_object_reuse_on_off(spark, reuse):
    p = StreamPipeline("reuse", parallelism=1)
    if reuse:
        p.set_object_reuse(True)
    proc = p.from_collection([{"n": 0}]).name("src").process(MainThenSide()).name("proc")
    proc.map(Mutate()).name("mutate").collect("main")
    proc.get_side_output(OutputTag("again")).map(lambda d: d).name("ident").collect("side")
    res = execute_pipeline(p, spark=spark)
    assert res.output("main") == [{"n": 1}]
    # default (CopyingChainingOutput): the side branch gets its own copy; with object
    # reuse (ChainingOutput) it gets the very object the main branch mutated
    assert res.output("side") == ([{"n": 1}] if reuse else [{"n": 0}])


def test_user_error_names_operator_and_commits_nothing(spark, tmp_path):
    p = StreamPipeline("boom", parallelism=1)
    src = p.from_collection([1, 2, 0, 4]).name("src")
    src.map(lambda x: x).name("ok").rebalance().map(lambda x: x).name("after").collect("after")
    src.map(lambda x: 10 // x).name("divide").collect("out")
    with pytest.raises(ChainRunError, match=r"operator 'divide'.*ZeroDivisionError.*record: 0") as err:
        execute_pipeline(p, spark=spark, exchange_root=str(tmp_path), run_id="r1")
    assert err.value.metrics["state"] == "failed"
    area = ExchangeArea(str(tmp_path), "boom", "r1")
    assert not area.collect("out").exists() and not area.run.join("_attempts").exists()
    assert os.path.exists(area.metrics(p.plan().chains[0].id).path)


def test_typed_edge_readable_by_plain_spark_and_bad_record(spark, tmp_path):
    p = StreamPipeline("typed", parallelism=1)
    src = p.from_collection(range(3)).name("src")
    src.map(lambda x: {"id": x, "name": f"n{x}"}, output_type={"id": "int64", "name": "string"}).name("rows") \
        .rebalance().map(lambda r: r["id"]).name("ids").collect("ids")
    res = execute_pipeline(p, spark=spark, exchange_root=str(tmp_path), run_id="r1")
    assert sorted(res.output("ids")) == [0, 1, 2]
    edge = p.plan().edges[0].id
    df = spark.read.parquet(ExchangeArea(str(tmp_path), "typed", "r1").edge(edge).path)
    assert sorted((r["id"], r["name"]) for r in df.collect()) == [(0, "n0"), (1, "n1"), (2, "n2")]

    bad = StreamPipeline("typed_bad", parallelism=1)
    bad.from_collection([1, 2.5]).name("src").map(lambda x: {"v": x}, output_type={"v": "int64"}).name("to_row") \
        .rebalance().map(lambda r: r).name("next").collect("out")
    with pytest.raises(ChainRunError, match=r"operator 'to_row'.*field 'v' expects int64 but got 2.5"):
        execute_pipeline(bad, spark=spark)
