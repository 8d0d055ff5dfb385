"""User functions and pipelines the runtime tests share (execute_local and Spark runs of the same pipelines)."""

from __future__ import annotations

from airflow_flinkchain import OutputTag, StreamPipeline
from airflow_flinkchain.functions import KeyedProcessFunction, MapFunction, ProcessFunction, ValueStateDescriptor


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


class EvenOdd(ProcessFunction):
    def __init__(self):
        self.odd = OutputTag("odd")

    def process_element(self, value, ctx):
        if value % 2:
            ctx.output(self.odd, value)
        else:
            yield value


class RunningCount(KeyedProcessFunction):
    def open(self, ctx):
        self.count = ctx.get_state(ValueStateDescriptor("count"))

    def process_element(self, value, ctx):
        n = (self.count.value() or 0) + 1
        self.count.update(n)
        yield (ctx.get_current_key(), n)


class CountPerKey(MapFunction):
    """Keyed state in a map on a KeyedStream, as PyFlink allows."""

    def open(self, ctx):
        self.count = ctx.get_state(ValueStateDescriptor("count"))

    def map(self, value):
        n = (self.count.value() or 0) + 1
        self.count.update(n)
        return (value[0], n)


class EventTimeProbe(KeyedProcessFunction):
    def process_element(self, value, ctx):
        ctx.timer_service().register_event_time_timer(ctx.timestamp() + 5)
        yield ("rec", value, ctx.timestamp())

    def on_timer(self, timestamp, ctx):
        yield ("timer", ctx.get_current_key(), timestamp)


class Mutate(MapFunction):
    def map(self, value):
        value["n"] += 1
        return value


class MainThenSide(ProcessFunction):
    """Emits the same object to the main output, then to side output 'again'."""

    def process_element(self, value, ctx):
        yield value
        ctx.output(OutputTag("again"), value)


def partitioner_pipeline() -> tuple[StreamPipeline, list[str]]:
    """Every partitioner from 2 upstream subtasks (3 downstream, forward: 2); each sink, named for
    its partitioner, collects `(downstream subtask, value)`."""
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
    return p, list(branches)


def side_output_pipeline() -> StreamPipeline:
    """Side outputs and split/select, chained and across exchanges, and a union of both."""
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
    return p


def keyed_count_pipeline() -> StreamPipeline:
    """A keyed reduce ("sums") and a KeyedProcessFunction with a running count ("counts") behind
    a HASH exchange."""
    p = StreamPipeline("keyed", parallelism=2, runtime_mode="batch")
    src = p.from_collection([("a", 1), ("b", 2), ("a", 3), ("c", 4), ("b", 5), ("a", 6)]).name("src")
    src.key_by(lambda r: r[0]).reduce(lambda x, y: (x[0], x[1] + y[1])).name("sum").collect("sums")
    src.key_by(lambda r: r[0]).process(RunningCount()).name("count").collect("counts")
    return p
