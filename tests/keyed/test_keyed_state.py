"""Keyed state of every kind, taken from the runtime context in open(), in every function
after key_by, with TTL; in BATCH and STREAMING mode (execute_local)."""

from __future__ import annotations

import pytest

from airflow_flinkchain.common import Time
from airflow_flinkchain.functions import FilterFunction, FlatMapFunction, KeyedProcessFunction, MapFunction, \
    ReduceFunction
from airflow_flinkchain.runtime.state import abstract_backend as backend_module
from airflow_flinkchain.state import (
    AggregatingStateDescriptor,
    ListStateDescriptor,
    MapStateDescriptor,
    ReducingStateDescriptor,
    StateTtlConfig,
    ValueStateDescriptor,
)
from airflow_flinkchain.window_functions import AggregateFunction

from .util import pipeline

MODES = ["batch", "streaming"]
RECORDS = [(("a", 1), None), (("b", 10), None), (("a", 2), None), (("b", 20), None), (("a", 3), None)]


class Average(AggregateFunction):
    def create_accumulator(self):
        return (0, 0)

    def add(self, value, acc):
        return (acc[0] + value, acc[1] + 1)

    def get_result(self, acc):
        return acc[0] / acc[1]

    def merge(self, a, b):
        return (a[0] + b[0], a[1] + b[1])


class EveryKind(KeyedProcessFunction):
    def open(self, runtime_context):
        self.count = runtime_context.get_state(ValueStateDescriptor("count"))
        self.seen = runtime_context.get_list_state(ListStateDescriptor("seen"))
        self.by_value = runtime_context.get_map_state(MapStateDescriptor("by_value"))
        self.total = runtime_context.get_reducing_state(ReducingStateDescriptor("total", lambda a, b: a + b))
        self.avg = runtime_context.get_aggregating_state(AggregatingStateDescriptor("avg", Average()))

    def process_element(self, value, ctx):
        key, v = value
        self.count.update((self.count.value() or 0) + 1)
        self.seen.add(v)
        self.by_value.put(v, self.count.value())
        self.total.add(v)
        self.avg.add(v)
        yield (ctx.get_current_key(), self.count.value(), list(self.seen.get()), sorted(self.by_value.items()),
               self.total.get(), self.avg.get())


@pytest.mark.parametrize("mode", MODES)
def test_every_state_kind_is_per_key(mode):
    p, src = pipeline(mode, RECORDS)
    src.key_by(lambda r: r[0]).process(EveryKind()).collect("out")
    out = p.execute_local().output("out")
    assert sorted(out) == [
        ("a", 1, [1], [(1, 1)], 1, 1.0),
        ("a", 2, [1, 2], [(1, 1), (2, 2)], 3, 1.5),
        ("a", 3, [1, 2, 3], [(1, 1), (2, 2), (3, 3)], 6, 2.0),
        ("b", 1, [10], [(10, 1)], 10, 10.0),
        ("b", 2, [10, 20], [(10, 1), (20, 2)], 30, 15.0),
    ]
    if mode == "batch":  # key by key
        assert [o[0] for o in out] == ["a", "a", "a", "b", "b"]
    else:  # arrival order
        assert [o[0] for o in out] == ["a", "b", "a", "b", "a"]


class RunningList(MapFunction):
    def open(self, runtime_context):
        self.items = runtime_context.get_list_state(ListStateDescriptor("items"))

    def map(self, value):
        self.items.add(value[1])
        return (value[0], list(self.items.get()))


class EmitOnNewMax(FlatMapFunction):
    def open(self, runtime_context):
        self.best = runtime_context.get_reducing_state(ReducingStateDescriptor("best", max))

    def flat_map(self, value):
        before = self.best.get()
        self.best.add(value[1])
        if before is None or value[1] > before:
            yield value


class FirstOfKey(FilterFunction):
    def open(self, runtime_context):
        self.seen = runtime_context.get_map_state(MapStateDescriptor("seen"))

    def filter(self, value):
        if self.seen.contains("any"):
            return False
        self.seen.put("any", True)
        return True


class CountingReduce(ReduceFunction):
    """A reduce function with its own keyed state (the number of records it combined)."""

    def open(self, runtime_context):
        self.calls = runtime_context.get_state(ValueStateDescriptor("calls"))

    def reduce(self, a, b):
        n = (self.calls.value() or 1) + 1
        self.calls.update(n)
        return (a[0], a[1] + b[1], n)


@pytest.mark.parametrize("mode", MODES)
def test_state_in_map_flat_map_filter_and_reduce_functions(mode):
    p, src = pipeline(mode, RECORDS)
    keyed = src.key_by(lambda r: r[0])
    keyed.map(RunningList()).collect("map")
    keyed.flat_map(EmitOnNewMax()).collect("flat_map")
    keyed.filter(FirstOfKey()).collect("filter")
    src.map(lambda r: (r[0], r[1], 1)).key_by(lambda r: r[0]).reduce(CountingReduce()).collect("reduce")
    res = p.execute_local()
    assert sorted(res.output("map")) == [("a", [1]), ("a", [1, 2]), ("a", [1, 2, 3]), ("b", [10]), ("b", [10, 20])]
    assert sorted(res.output("flat_map")) == sorted(v for v, _ in RECORDS)
    assert sorted(res.output("filter")) == [("a", 1), ("b", 10)]
    final = {("a", 6, 3), ("b", 30, 2)}
    if mode == "batch":
        assert set(res.output("reduce")) == final and len(res.output("reduce")) == 2
    else:  # rolling: the first record of a key passes as it is
        assert sorted(res.output("reduce")) == [("a", 1, 1), ("a", 3, 2), ("a", 6, 3), ("b", 10, 1), ("b", 30, 2)]


def test_state_kind_mismatch_and_wrong_descriptor_name_the_operator():
    class Both(KeyedProcessFunction):
        def open(self, runtime_context):
            runtime_context.get_state(ValueStateDescriptor("s"))
            runtime_context.get_list_state(ListStateDescriptor("s"))

        def process_element(self, value, ctx):
            yield value

    p, src = pipeline("streaming", RECORDS)
    src.key_by(lambda r: r[0]).process(Both()).name("both").collect("out")
    with pytest.raises(Exception, match=r"both.*already registered as value state"):
        p.execute_local()

    class Wrong(KeyedProcessFunction):
        def open(self, runtime_context):
            runtime_context.get_list_state(ValueStateDescriptor("s"))

        def process_element(self, value, ctx):
            yield value

    p, src = pipeline("streaming", RECORDS)
    src.key_by(lambda r: r[0]).process(Wrong()).name("wrong").collect("out")
    with pytest.raises(Exception, match=r"wrong.*get_list_state\(\) takes a ListStateDescriptor"):
        p.execute_local()


# ---- TTL -------------------------------------------------------------------------------------

class ManualClock:
    """Processing time of the state backend, set by the function under test from its records
    (reached through the backend module: test functions are pickled by value)."""

    def __init__(self):
        self.now = 0

    def __call__(self):
        return self.now


@pytest.fixture
def manual_clock(monkeypatch):
    clock = ManualClock()
    monkeypatch.setattr(backend_module, "system_clock", clock)
    return clock


class TtlProbe(KeyedProcessFunction):
    """Records (key, op, now): op "w" writes now, "r" reads; yields what the read saw."""

    def __init__(self, ttl_config):
        self.ttl_config = ttl_config

    def open(self, runtime_context):
        d = ValueStateDescriptor("v")
        d.enable_time_to_live(self.ttl_config)
        self.v = runtime_context.get_state(d)
        ld = ListStateDescriptor("l")
        ld.enable_time_to_live(self.ttl_config)
        self.l = runtime_context.get_list_state(ld)

    def process_element(self, value, ctx):
        _key, op, now = value
        backend_module.system_clock.now = now
        if op == "w":
            self.v.update(now)
            self.l.add(now)
        else:
            yield (now, self.v.value(), list(self.l.get()))


def _ttl_run(mode, config, ops):
    p, src = pipeline(mode, [(("k", op, now), None) for op, now in ops])
    src.key_by(lambda r: r[0]).process(TtlProbe(config)).collect("out")
    return p.execute_local().output("out")


@pytest.mark.parametrize("mode", MODES)
def test_ttl_on_create_and_write_never_returns_expired(mode, manual_clock):
    config = StateTtlConfig.new_builder(Time.milliseconds(100)).build()
    out = _ttl_run(mode, config, [("w", 0), ("r", 50), ("r", 99), ("r", 100), ("w", 120), ("r", 219)])
    assert out == [(50, 0, [0]), (99, 0, [0]), (100, None, []), (219, 120, [120])]


@pytest.mark.parametrize("mode", MODES)
def test_ttl_on_read_and_write_refreshes_on_read(mode, manual_clock):
    config = StateTtlConfig.new_builder(Time.milliseconds(100)).update_ttl_on_read_and_write().build()
    out = _ttl_run(mode, config, [("w", 0), ("r", 80), ("r", 170), ("r", 271)])
    assert out == [(80, 0, [0]), (170, 0, [0]), (271, None, [])]


@pytest.mark.parametrize("mode", MODES)
def test_ttl_return_expired_if_not_cleaned_up_returns_it_once(mode, manual_clock):
    config = (StateTtlConfig.new_builder(Time.milliseconds(100)).return_expired_if_not_cleaned_up().build())
    out = _ttl_run(mode, config, [("w", 0), ("r", 150), ("r", 160)])
    assert out == [(150, 0, [0]), (160, None, [])]
