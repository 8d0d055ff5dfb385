"""The chain runtime on Spark (shared local SparkSession): partitioners end to end,
side outputs, split/select, unions, keyed operators across a HASH exchange,
watermarks across an exchange, object reuse, errors, typed edges."""

from __future__ import annotations

import os

import pytest

from airflow_flinkchain import OutputTag, StreamPipeline
from airflow_flinkchain.functions import KeyedProcessFunction, MapFunction, ProcessFunction, ValueStateDescriptor
from airflow_flinkchain.runtime.elements import StreamRecord, Watermark
from airflow_flinkchain.runtime.exchange_fs import ExchangeArea
from airflow_flinkchain.runtime.local import execute_pipeline
from airflow_flinkchain.runtime.partitioners import channel_for_key, rescale_channels
from airflow_flinkchain.runtime.spark_job import ChainRunError

pytestmark = pytest.mark.spark


class TagSubtask(MapFunction):
    """(subtask index, value): shows which channel a record was sent to."""

    def open(self, ctx):
        self.index = ctx.get_index_of_this_subtask()

    def map(self, value):
        return (self.index, value)


def by_subtask(records):
    out = {}
    for k, v in records:
        out.setdefault(k, []).append(v)
    return {k: sorted(v) for k, v in out.items()}


def test_every_partitioner_channel_choice(spark):
    p = StreamPipeline("partitioners", parallelism=2)
    up = p.from_collection(range(12)).name("src").map(lambda x: x).name("up").set_parallelism(2)
    branches = {
        "forward": up.forward(), "rebalance": up.rebalance(), "rescale": up.rescale(),
        "shuffle": up.shuffle(), "broadcast": up.broadcast(), "global": up.global_(),
        "hash": up.key_by(lambda x: x % 5), "custom": up.partition_custom(lambda k, n: k % n, lambda x: x // 4),
    }
    for name, stream in branches.items():
        down = stream.map(TagSubtask()).name(f"down_{name}").set_parallelism(2 if name == "forward" else 3)
        if name == "forward":
            down = down.start_new_chain()
        down.collect(name)
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


class EvenOdd(ProcessFunction):
    def __init__(self):
        self.odd = OutputTag("odd")

    def process_element(self, value, ctx):
        if value % 2:
            ctx.output(self.odd, value)
        else:
            yield value


def test_side_outputs_split_select_union(spark):
    p = StreamPipeline("side", parallelism=1)
    src = p.from_collection(range(10)).name("src")
    proc = src.process(EvenOdd()).name("proc")
    proc.map(lambda x: x * 10).name("even_chained").collect("even")  # chained main output
    odd = proc.get_side_output(OutputTag("odd"))
    odd.map(lambda x: -x).name("odd_chained").collect("odd_chained")  # side output, chained
    odd.rebalance().map(lambda x: x + 1000).name("odd_across").set_parallelism(2).collect("odd_across")
    parts = src.map(lambda x: x).name("pre_split").split(lambda x: ["small"] if x < 5 else ["big", "all"])
    parts.select("small").map(lambda x: ("s", x)).name("small").collect("small")
    parts.select("big").rebalance().map(lambda x: ("b", x)).name("big").set_parallelism(2).collect("big")
    u = parts.select("small").map(lambda x: x).name("u1").union(odd.map(lambda x: x).name("u2"))
    u.rebalance().map(lambda x: x).name("after_union").set_parallelism(2).collect("union")
    res = execute_pipeline(p, spark=spark)
    assert sorted(res.output("even")) == [0, 20, 40, 60, 80]
    assert sorted(res.output("odd_chained")) == [-9, -7, -5, -3, -1]
    assert sorted(res.output("odd_across")) == [1001, 1003, 1005, 1007, 1009]
    assert sorted(res.output("small")) == [("s", x) for x in range(5)]
    assert sorted(res.output("big")) == [("b", x) for x in range(5, 10)]
    assert sorted(res.output("union")) == [0, 1, 1, 2, 3, 3, 4, 5, 7, 9]
    side = [m for m in res.operator_metrics("proc")]
    assert side and side[0]["records_in"] == 10 and side[0]["side_outputs"] == {"odd": 5}


class RunningCount(KeyedProcessFunction):
    def open(self, ctx):
        self.count = ctx.get_state(ValueStateDescriptor("count"))

    def process_element(self, value, ctx):
        n = (self.count.value() or 0) + 1
        self.count.update(n)
        yield (ctx.get_current_key(), n)


def test_keyed_reduce_and_state_across_hash_exchange(spark):
    p = StreamPipeline("keyed", parallelism=2)
    src = p.from_collection([("a", 1), ("b", 2), ("a", 3), ("c", 4), ("b", 5), ("a", 6)]).name("src")
    src.key_by(lambda r: r[0]).reduce(lambda x, y: (x[0], x[1] + y[1])).name("sum").collect("sums")
    src.key_by(lambda r: r[0]).process(RunningCount()).name("count").collect("counts")
    res = execute_pipeline(p, spark=spark)
    assert sorted(res.output("sums")) == [("a", 10), ("b", 7), ("c", 4)]
    assert sorted(res.output("counts")) == [("a", 1), ("a", 2), ("a", 3), ("b", 1), ("b", 2), ("c", 1)]


class EventTimeProbe(KeyedProcessFunction):
    def process_element(self, value, ctx):
        ctx.timer_service().register_event_time_timer(ctx.timestamp() + 5)
        yield ("rec", value, ctx.timestamp())

    def on_timer(self, timestamp, ctx):
        yield ("timer", ctx.get_current_key(), timestamp)


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


class Mutate(MapFunction):
    def map(self, value):
        value["n"] += 1
        return value


class MainThenSide(ProcessFunction):
    """Emits the same object to the main output, then to side output 'again'."""

    def process_element(self, value, ctx):
        yield value
        ctx.output(OutputTag("again"), value)


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
