"""BATCH windows that reduce or aggregate replay each key in local accumulators
(runtime/core/operators/window_replay.py). Each case runs twice through execute_local(): with
the default trigger (the local fold) and with an EventTimeTrigger of another type (the same
trigger logic, which the fold does not take: the core's per-record path), and must give the
same outputs in the same order, the same side outputs, dead letters and counters."""

from __future__ import annotations

import random

import pytest

from airflow_flinkchain import (Duration, OutputTag, ProcessWindowFunction, SlidingEventTimeWindows,
                                StreamPipeline, TumblingEventTimeWindows, WatermarkStrategy)
from airflow_flinkchain.runtime.core.operators import window_replay
from airflow_flinkchain.window import EventTimeTrigger

from tests.windows.util import LATE, Mean, key, stamped

CLEARED = OutputTag("cleared")


class PerRecordEventTimeTrigger(EventTimeTrigger):
    """EventTimeTrigger under another type: the window runs through the core record by record."""


def records(n=400, seed=7, untimed_key=None):
    rng = random.Random(seed)
    out = []
    for i in range(n):
        k = rng.choice("abcde")
        ts = None if k == untimed_key and i % 5 == 0 else rng.randrange(-1500, 6000)
        out.append((k, rng.randrange(0, 20), ts))
    return out


def timestamps(r, _ts):
    return r[2]


def add(a, b):
    if b[1] == 13:
        raise ValueError("13 is not added")
    total = a[1] + b[1]
    return None if total % 11 == 0 else (a[0], total, max(a[2], b[2]))


class Describe(ProcessWindowFunction):
    """Results with the window and the watermark; its clear() says so on a side output."""

    def process(self, key, context, elements):
        yield (key, context.window().start, context.window().end, list(elements), context.current_watermark())

    def clear(self, context):
        context.output(CLEARED, ("cleared", context.window().start))


def run_twins(build, data, tags, parallelism=1):
    """The outputs and counters of `build(keyed stream, trigger)` with the local fold (trigger
    None: the default) and with the per-record path; asserts the fold ran, in the first only."""
    results, folded = [], []
    original = window_replay.KeyWindowFold.fold

    def counting(self, recs):
        folded.append(len(recs))
        return original(self, recs)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(window_replay.KeyWindowFold, "fold", counting)
        for trigger in (None, PerRecordEventTimeTrigger()):
            before = len(folded)
            p = StreamPipeline("replay", runtime_mode="batch", parallelism=parallelism)
            strategy = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(timestamps)
            keyed = p.from_collection(data).name("src").assign_timestamps_and_watermarks(strategy).key_by(key)
            collect_all(build(keyed, trigger), tags)
            res = p.execute_local()
            metrics = [{k: v for k, v in m.items() if k != "time_ms"} for m in res.operator_metrics("win")]
            results.append((dict(res.outputs), metrics))
            assert (len(folded) > before) == (trigger is None)
    (fold_out, fold_metrics), (per_record_out, per_record_metrics) = results
    assert fold_out == per_record_out
    assert fold_metrics == per_record_metrics
    return fold_out, {k: sum(m[k] for m in fold_metrics) for k in ("records_in", "records_out", "dead_lettered")}


def triggered(windowed, trigger):
    return windowed if trigger is None else windowed.trigger(trigger)


def collect_all(stream, tags):
    stream = stream.name("win").on_error("dead_letter")
    stream.process(stamped).collect("out")
    for tag in tags:
        stream.get_side_output(tag).process(stamped).collect(tag.tag_id)
    stream.dead_letters().process(stamped).collect("dead")


def test_tumbling_reduce_with_none_results_and_failures():
    def build(keyed, trigger):
        w = keyed.window(TumblingEventTimeWindows.of(Duration.of_millis(1000), Duration.of_millis(300)))
        return triggered(w, trigger).side_output_late_data(LATE).reduce(add)

    out, metrics = run_twins(build, records(), [LATE])
    assert out["out"] and out["dead"] and not out["late"]
    assert metrics["dead_lettered"] == len(out["dead"]) and metrics["records_in"] == 400


def test_sliding_aggregate_with_a_window_function_its_clear_and_allowed_lateness():
    def build(keyed, trigger):
        w = keyed.window(SlidingEventTimeWindows.of(Duration.of_millis(1000), Duration.of_millis(250)))
        return triggered(w, trigger).allowed_lateness(700).aggregate(Mean(), window_function=Describe())

    out, _metrics = run_twins(build, records(seed=3), [CLEARED])
    assert out["out"] and len(out["cleared"]) == len(out["out"])
    assert {r[0][4] for r in out["out"]} == {2**63 - 1}  # fired at the MAX watermark


def test_tumbling_reduce_with_a_window_function_at_parallelism_two():
    def build(keyed, trigger):
        w = keyed.window(TumblingEventTimeWindows.of(Duration.of_millis(700)))
        return triggered(w, trigger).reduce(add, Describe())

    out, _metrics = run_twins(build, records(seed=11), [CLEARED], parallelism=2)
    assert out["out"] and out["cleared"]


def test_a_key_with_records_without_timestamp_goes_per_record_and_dead_letters_them():
    def build(keyed, trigger):
        return triggered(keyed.window(TumblingEventTimeWindows.of(Duration.of_millis(1000))), trigger).aggregate(Mean())

    out, metrics = run_twins(build, records(seed=5, untimed_key="c"), [])
    assert any(d[0]["record"][0] == "c" for d in out["dead"])
    assert metrics["dead_lettered"] == len(out["dead"])
