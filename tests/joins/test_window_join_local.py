"""Window join and co-group end to end through execute_local(): tumbling, sliding and session
windows, keys on one side only, empty windows, triggers, allowed lateness, late records,
parallelism 2, both runtime modes (BATCH: nothing is late), the plan (Flink's tagged union)."""

from __future__ import annotations

from collections import Counter

import pytest

from airflow_flinkchain import (CountTrigger, Duration, EventTimeSessionWindows, GlobalWindows, PlanningError,
                                SlidingEventTimeWindows, StreamPipeline, TumblingEventTimeWindows)
from airflow_flinkchain.functions import CoGroupFunction, JoinFunction, KeySelector

from tests.windows.util import events, key, stamped

A = [("a", 1, 100), ("a", 2, 900), ("b", 3, 1100), ("a", 4, 1500), ("c", 5, 1200)]
B = [("a", 10, 200), ("a", 20, 1700), ("b", 30, 1900), ("d", 40, 1000)]


def pair(left, right):
    return (left[0], left[1], right[1])


def groups(first, second):
    k = (first or second)[0][0]
    yield (k, tuple(sorted(r[1] for r in first)), tuple(sorted(r[1] for r in second)))


def run(p, name="out"):
    return Counter(p.execute_local().output(name))


def joined(p, assigner, a=A, b=B, bounded=0):
    return events(p, a, bounded).join(events(p, b, bounded)).where(key).equal_to(key).window(assigner)


def co_grouped(p, assigner, a=A, b=B, bounded=0):
    return events(p, a, bounded).co_group(events(p, b, bounded)).where(key).equal_to(key).window(assigner)


MODES = ["streaming", "batch"]


@pytest.mark.parametrize("mode", MODES)
def test_tumbling_join_pairs_keys_of_both_sides_per_window(mode):
    p = StreamPipeline("j", runtime_mode=mode)
    joined(p, TumblingEventTimeWindows.of(Duration.of_seconds(1))).apply(pair).process(stamped).collect("out")
    # c and d are on one side only: a join emits nothing for them
    assert run(p) == Counter({(("a", 1, 10), 999): 1, (("a", 2, 10), 999): 1,
                              (("a", 4, 20), 1999): 1, (("b", 3, 30), 1999): 1})


@pytest.mark.parametrize("mode", MODES)
def test_tumbling_co_group_sees_keys_of_one_side_only(mode):
    p = StreamPipeline("j", runtime_mode=mode)
    co_grouped(p, TumblingEventTimeWindows.of(1000)).apply(groups).process(stamped).collect("out")
    assert run(p) == Counter({(("a", (1, 2), (10,)), 999): 1, (("a", (4,), (20,)), 1999): 1,
                              (("b", (3,), (30,)), 1999): 1, (("c", (5,), ()), 1999): 1,
                              (("d", (), (40,)), 1999): 1})


@pytest.mark.parametrize("mode", MODES)
def test_sliding_join_pairs_per_shared_window(mode):
    p = StreamPipeline("j", runtime_mode=mode)
    joined(p, SlidingEventTimeWindows.of(1000, 500)).apply(pair).process(stamped).collect("out")
    assert run(p) == Counter({(("a", 1, 10), 499): 1, (("a", 1, 10), 999): 1, (("a", 2, 10), 999): 1,
                              (("a", 4, 20), 1999): 1, (("a", 4, 20), 2499): 1, (("b", 3, 30), 1999): 1})


@pytest.mark.parametrize("mode", MODES)
def test_session_windows_merge_across_both_inputs(mode):
    p = StreamPipeline("j", runtime_mode=mode)
    sessions = EventTimeSessionWindows.with_gap(Duration.of_millis(300))
    joined(p, sessions).apply(pair).process(stamped).collect("out")
    co_grouped(p, sessions).apply(groups).process(stamped).collect("groups")
    # a: A@100 + B@200 merge into [100, 500); A@900 alone; A@1500 + B@1700 merge into [1500, 2000)
    assert run(p) == Counter({(("a", 1, 10), 499): 1, (("a", 4, 20), 1999): 1})
    want = Counter({
        (("a", (1,), (10,)), 499): 1, (("a", (2,), ()), 1199): 1, (("a", (4,), (20,)), 1999): 1,
        (("b", (3,), ()), 1399): 1, (("b", (), (30,)), 2199): 1, (("c", (5,), ()), 1499): 1})
    if mode == "batch":  # STREAMING: B's d@1000 arrives after B's watermark 1899, its session [1000, 1300) is late
        want[(("d", (), (40,)), 1299)] = 1
    assert run(p, "groups") == want


@pytest.mark.parametrize("mode", MODES)
def test_function_classes_and_key_selectors(mode):
    class Pair(JoinFunction):
        def open(self, runtime_context):
            self.prefix = "j"

        def join(self, first, second):
            return (self.prefix, first[1] + second[1])

    class Sums(CoGroupFunction):
        def co_group(self, first, second):
            return [sum(r[1] for r in first) + sum(r[1] for r in second)]

    class First(KeySelector):
        def get_key(self, value):
            return value[0]

    p = StreamPipeline("j", runtime_mode=mode)
    tumbling = TumblingEventTimeWindows.of(1000)
    a, b = events(p, A), events(p, B)
    a.join(b).where(First()).equal_to(key).window(tumbling).apply(Pair()).collect("out")
    a.co_group(b).where(key).equal_to(First()).window(tumbling).apply(Sums()).collect("sums")
    assert run(p) == Counter({("j", 11): 1, ("j", 12): 1, ("j", 24): 1, ("j", 33): 1})
    assert run(p, "sums") == Counter({13: 1, 24: 1, 33: 1, 5: 1, 40: 1})


@pytest.mark.parametrize("mode", MODES)
def test_empty_input_and_empty_windows(mode):
    p = StreamPipeline("j", runtime_mode=mode)
    tumbling = TumblingEventTimeWindows.of(1000)
    joined(p, tumbling, b=[]).apply(pair).collect("out")
    co_grouped(p, tumbling, a=[("a", 1, 100), ("a", 2, 5100)], b=[("a", 3, 5200)]).apply(groups).process(
        stamped).collect("groups")
    assert run(p) == Counter()
    # the windows between 1000 and 5000 hold nothing: they never fire
    assert run(p, "groups") == Counter({(("a", (1,), ()), 999): 1, (("a", (2,), (3,)), 5999): 1})


def test_late_records_of_the_second_input_are_dropped_in_streaming_not_in_batch():
    b = [("a", 10, 200), ("a", 20, 2500), ("a", 30, 300)]  # 300 arrives after watermark 2499: its window is gone
    expected = {"streaming": Counter({("a", 1, 10): 1, ("a", 2, 10): 1}),
                "batch": Counter({("a", 1, 10): 1, ("a", 2, 10): 1, ("a", 1, 30): 1, ("a", 2, 30): 1})}
    for mode, want in expected.items():
        p = StreamPipeline("j", runtime_mode=mode)
        joined(p, TumblingEventTimeWindows.of(1000), a=A[:2], b=b).apply(pair).collect("out")
        assert run(p) == want, mode


def test_allowed_lateness_fires_the_window_again():
    b = [("a", 10, 200), ("a", 20, 1300), ("a", 30, 300)]  # 300 is late (watermark 1299) but within lateness
    p = StreamPipeline("j", runtime_mode="streaming")
    w = joined(p, TumblingEventTimeWindows.of(1000), a=A[:2], b=b).allowed_lateness(Duration.of_millis(500))
    w.apply(pair).process(stamped).collect("out")
    # first firing: 1x10, 2x10; late firing: every pair of the window again, with 30
    assert run(p) == Counter({(("a", 1, 10), 999): 2, (("a", 2, 10), 999): 2,
                              (("a", 1, 30), 999): 1, (("a", 2, 30), 999): 1})


@pytest.mark.parametrize("mode", MODES)
def test_custom_trigger(mode):
    p = StreamPipeline("j", runtime_mode=mode)
    a = p.from_collection([("a", 1), ("a", 2)])
    b = p.from_collection([("a", 10), ("a", 20)])
    w = a.join(b).where(key).equal_to(key).window(GlobalWindows.create()).trigger(CountTrigger.of(2))
    w.apply(lambda x, y: x[1] + y[1]).collect("out")
    # fires at every second record of the window; the contents are kept (not purging)
    out = run(p)
    assert sum(out.values()) in (1 + 4, 4)  # order of the two inputs decides the first firing
    assert set(out) == {11, 12, 21, 22}


@pytest.mark.parametrize("mode", MODES)
def test_parallelism_2(mode):
    keys = ["k%d" % i for i in range(7)]
    a = [(k, i, 100 * i) for i, k in enumerate(keys * 3)]
    b = [(k, -i, 100 * i + 50) for i, k in enumerate(keys * 2)]
    p = StreamPipeline("j", parallelism=2, runtime_mode=mode)
    left = events(p, a).rebalance().map(lambda r: r)
    right = events(p, b)
    left.join(right).where(key).equal_to(key).window(TumblingEventTimeWindows.of(1000)).apply(pair).process(
        stamped).collect("out")
    want = Counter()
    for la in a:
        for rb in b:
            if la[0] == rb[0] and la[2] // 1000 == rb[2] // 1000:
                want[((la[0], la[1], rb[1]), la[2] // 1000 * 1000 + 999)] += 1
    assert want and run(p) == want
    chains = {c.name: c.parallelism for c in p.plan().chains}
    assert chains["Window Join -> Process -> out"] == 2


def test_plan_chains_as_flink_tagged_union():
    p = StreamPipeline("j", parallelism=2)
    a = p.from_collection([("a", 1)]).name("orders")
    b = p.from_collection([("a", 2)]).name("payments").map(lambda r: r).name("clean")
    a.join(b).where(key).equal_to(key).window(TumblingEventTimeWindows.of(10)).apply(pair).name("enrich").collect(
        "out")
    plan = p.plan()
    # each tagger chains with its input (same parallelism), the window follows a HASH edge
    assert [(c.name, c.parallelism) for c in plan.chains] == [
        ("orders -> Input1Tagger", 1), ("payments", 1), ("clean -> Input2Tagger", 2), ("enrich -> out", 2)]
    assert sorted((e.source_operator, e.target_operator, e.partitioner.value) for e in plan.edges) == [
        ("Input1Tagger", "enrich", "HASH"), ("Input2Tagger", "enrich", "HASH"), ("payments", "clean", "REBALANCE")]


def test_api_errors_name_the_fix():
    p = StreamPipeline("j")
    a, b = p.from_collection([1]), p.from_collection([2])
    with pytest.raises(PlanningError, match="WindowAssigner"):
        a.join(b).where(key).equal_to(key).window(1000)
    with pytest.raises(PlanningError, match="pass an instance"):
        a.co_group(b).where(key).equal_to(key).window(TumblingEventTimeWindows)
    with pytest.raises(PlanningError, match="same pipeline"):
        a.join(StreamPipeline("other").from_collection([1]))
    with pytest.raises(PlanningError, match="get_key"):
        a.join(b).where(42)
    with pytest.raises(PlanningError, match="function class"):
        a.join(b).where(key).equal_to(key).window(TumblingEventTimeWindows.of(5)).apply(JoinFunction)
    with pytest.raises(PlanningError, match="Trigger"):
        a.join(b).where(key).equal_to(key).window(TumblingEventTimeWindows.of(5)).trigger("count")
