"""Small two-input pipelines shared by the planner, rendering and runtime tests."""

from __future__ import annotations

from airflow_flinkchain import StreamPipeline
from airflow_flinkchain.functions import KeyedBroadcastProcessFunction, KeyedCoProcessFunction
from airflow_flinkchain.state import MapStateDescriptor, ValueStateDescriptor

RATES = MapStateDescriptor("rates", None, None)


class LatestLevel(KeyedCoProcessFunction):
    """Input 1: orders (customer, amount); input 2: customers (customer, level).
    Emits (customer, amount, level known at that moment)."""

    def open(self, runtime_context):
        self.level = runtime_context.get_state(ValueStateDescriptor("level"))

    def process_element1(self, order, ctx):
        yield (order[0], order[1], self.level.value())

    def process_element2(self, customer, ctx):
        self.level.update(customer[1])


class Convert(KeyedBroadcastProcessFunction):
    """Input 1: keyed (customer, amount, level); broadcast: (currency, rate).
    Emits (customer, amount * rate of 'eur', level) and counts records per key."""

    def open(self, runtime_context):
        self.count = runtime_context.get_state(ValueStateDescriptor("count"))

    def process_element(self, value, ctx):
        n = (self.count.value() or 0) + 1
        self.count.update(n)
        rate = ctx.get_broadcast_state(RATES).get("eur")
        yield (ctx.get_current_key(), value[1] * rate, value[2], n)

    def process_broadcast_element(self, value, ctx):
        ctx.get_broadcast_state(RATES).put(value[0], value[1])


def enrich_pipeline(parallelism: int = 2, mode: str = "batch", name: str = "enrich") -> StreamPipeline:
    """customers + orders -> keyed co-process -> keyed broadcast (rates) -> sink `out`."""
    p = StreamPipeline(name, parallelism=parallelism, runtime_mode=mode)
    customers = p.from_collection([("a", 1), ("b", 2), ("c", 3)]).name("customers")
    orders = p.from_collection([("a", 10), ("b", 20), ("c", 30), ("a", 11)]).name("orders")
    rates = p.from_collection([("eur", 2), ("usd", 3)]).name("rates")
    enriched = customers.connect(orders).key_by(lambda c: c[0], lambda o: o[0])
    # customers are input 1 here: in BATCH each key's customer precedes its orders (arrival order, no timestamps)
    levels = enriched.process(_SwapInputs(LatestLevel())).name("levels")
    converted = levels.key_by(lambda r: r[0]).connect(rates.broadcast(RATES)).process(Convert()).name("convert")
    converted.map(lambda r: r).name("fmt").collect("out")
    return p


class _SwapInputs(KeyedCoProcessFunction):
    """`inner` with its inputs swapped (customers arrive on input 1)."""

    def __init__(self, inner):
        self.inner = inner

    def open(self, runtime_context):
        self.inner.open(runtime_context)

    def process_element1(self, value, ctx):
        return self.inner.process_element2(value, ctx)

    def process_element2(self, value, ctx):
        return self.inner.process_element1(value, ctx)
