"""Co-map, co-flat-map and (non-keyed) co-process: both inputs, the min watermark,
timestamps, side outputs, error policies; the input interleaving rule."""

from __future__ import annotations

import pytest

from airflow_flinkchain import OutputTag, StreamPipeline
from airflow_flinkchain.functions import CoFlatMapFunction, CoMapFunction, CoProcessFunction
from airflow_flinkchain.runtime.core.elements import MIN_WATERMARK_TS, StreamRecord, Watermark
from airflow_flinkchain.runtime.core.input_selection import END_OF_INPUT, TwoInputs
from airflow_flinkchain.testing import TestingSource
from airflow_flinkchain.runtime.spark.job import ChainRunError


class Tag(CoMapFunction):
    def map1(self, value):
        return ("a", value)

    def map2(self, value):
        return ("b", 10 // value)


class Split(CoFlatMapFunction):
    def flat_map1(self, value):
        yield from value.split()

    def flat_map2(self, value):
        return [value.upper()] * 2


SMALL = OutputTag("small")


class Watch(CoProcessFunction):
    """(input, value, timestamp, operator watermark); input-2 values below 0 to side output."""

    output_tags = [SMALL]

    def process_element1(self, value, ctx):
        yield (1, value, ctx.timestamp(), ctx.current_watermark())

    def process_element2(self, value, ctx):
        if value < 0:
            ctx.output(SMALL, value)
            return
        yield (2, value, ctx.timestamp(), ctx.current_watermark())


@pytest.mark.parametrize("mode", ["batch", "streaming"])
def test_co_map_and_co_flat_map_at_parallelism_two(mode):
    p = StreamPipeline("co", parallelism=2, runtime_mode=mode)
    a, b = p.from_collection([1, 2, 3]), p.from_collection([5, 2])
    a.connect(b).map(Tag()).name("tag").collect("map")
    words, names = p.from_collection(["x y", "z"]), p.from_collection(["n"])
    words.connect(names).flat_map(Split()).name("split").collect("flat")
    result = p.execute_local()
    assert sorted(result.output("map")) == [("a", 1), ("a", 2), ("a", 3), ("b", 2), ("b", 5)]
    assert sorted(result.output("flat")) == ["N", "N", "x", "y", "z"]
    tag = [o for o in result.metrics["tag"]["operators"] if o["name"] == "tag"]
    assert sum(o["records_in"] for o in tag) == 5 and sum(o["records_out"] for o in tag) == 5


def test_co_map_error_policy_applies_to_both_inputs():
    p = StreamPipeline("err")
    a, b = p.from_collection([1]), p.from_collection([0, 5])
    a.connect(b).map(Tag(), on_error="skip").name("tag").collect("out")
    result = p.execute_local()
    assert sorted(result.output("out")) == [("a", 1), ("b", 2)]
    assert sum(o.get("skipped", 0) for o in result.metrics["tag"]["operators"]) == 1
    p = StreamPipeline("fail")
    p.from_collection([1]).connect(p.from_collection([0])).map(Tag()).name("tag").collect("out")
    with pytest.raises(ChainRunError, match="tag.*ZeroDivisionError"):
        p.execute_local()


def test_co_process_sees_timestamps_the_min_watermark_and_side_outputs():
    """Input 1 runs ahead (watermark 100, then 200); the operator's watermark follows input 2 (50)."""
    p = StreamPipeline("watch", runtime_mode="streaming")
    a = p.from_source(TestingSource([StreamRecord("a", 1), Watermark(100), StreamRecord("b", 2),
                                     Watermark(200)]), name="a")
    b = p.from_source(TestingSource([StreamRecord(5, 3), Watermark(50), StreamRecord(-1, 4),
                                     StreamRecord(6, 5)]), name="b")
    watched = a.connect(b).process(Watch()).name("watch")
    watched.collect("out")
    watched.get_side_output(SMALL).collect("small")
    result = p.execute_local()
    assert result.output("out") == [(1, "a", 1, MIN_WATERMARK_TS), (2, 5, 3, MIN_WATERMARK_TS),
                                    (1, "b", 2, MIN_WATERMARK_TS), (2, 6, 5, 50)]
    assert result.output("small") == [-1]


def test_co_process_timers_need_keyed_streams():
    class Timer(CoProcessFunction):
        def process_element1(self, value, ctx):
            ctx.timer_service().register_event_time_timer(5)

        def process_element2(self, value, ctx):
            pass

    p = StreamPipeline("timers")
    p.from_collection([1]).connect(p.from_collection([2])).process(Timer()).name("t").collect("out")
    with pytest.raises(ChainRunError, match="key_by"):
        p.execute_local()


def test_inputs_alternate_record_by_record_with_their_watermarks():
    w = Watermark
    one = ["a", w(1), "b", w(2), "c"]
    two = [w(5), "x", "y"]
    assert list(TwoInputs(one, two).elements()) == [
        (1, "a"), (2, w(5)), (2, "x"), (1, w(1)), (1, "b"), (2, "y"), (1, w(2)), (1, "c"),
        (2, END_OF_INPUT), (1, END_OF_INPUT)]


def test_a_broadcast_input_is_read_in_full_first():
    assert list(TwoInputs(["a", "b"], ["r", Watermark(3)], broadcast_first=True).elements()) == [
        (2, "r"), (2, Watermark(3)), (2, END_OF_INPUT), (1, "a"), (1, "b"), (1, END_OF_INPUT)]


@pytest.mark.parametrize("mode", ["batch", "streaming"])
def test_keyed_co_map_and_co_flat_map_use_keyed_state_of_both_inputs(mode):
    from airflow_flinkchain.state import ValueStateDescriptor

    class Running(CoMapFunction):
        def open(self, runtime_context):
            self.total = runtime_context.get_state(ValueStateDescriptor("total"))

        def _add(self, value):
            self.total.update((self.total.value() or 0) + value[1])
            return (value[0], self.total.value())

        map1 = map2 = _add

    class Twice(CoFlatMapFunction):
        def open(self, runtime_context):
            self.seen = runtime_context.get_state(ValueStateDescriptor("seen"))

        def flat_map1(self, value):
            self.seen.update((self.seen.value() or 0) + 1)
            yield (value[0], self.seen.value())

        flat_map2 = flat_map1

    p = StreamPipeline("keyed_maps", parallelism=2, runtime_mode=mode)
    a, b = p.from_collection([("a", 1), ("b", 2)]), p.from_collection([("a", 10), ("b", 20), ("a", 100)])
    keyed = a.connect(b).key_by(lambda r: r[0], lambda r: r[0])
    keyed.map(Running()).name("running").collect("map")
    keyed.flat_map(Twice()).name("twice").collect("flat")
    result = p.execute_local()
    finals = {}
    for k, total in result.output("map"):
        finals[k] = max(finals.get(k, 0), total)
    assert finals == {"a": 111, "b": 22}
    assert sorted(result.output("flat")) == [("a", 1), ("a", 2), ("a", 3), ("b", 1), ("b", 2)]


def test_a_union_feeds_one_input():
    p = StreamPipeline("union_input", parallelism=2)
    a, c = p.from_collection([1]).name("a"), p.from_collection([3]).name("c")
    b = p.from_collection([2]).name("b")
    a.union(c).connect(b).map(Tag()).name("tag").collect("out")
    plan = p.plan()
    assert sorted((e.source, e.input_number) for e in plan.edges) == [("a", 1), ("b", 2), ("c", 1)]
    assert sorted(p.execute_local().output("out")) == [("a", 1), ("a", 3), ("b", 5)]
