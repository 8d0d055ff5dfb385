"""Two-input operators across stream runs: an interval join whose buffers and timers span
runs, and broadcast state written in the first run and read in later ones."""

from __future__ import annotations

import pytest

from airflow_flinkchain import StreamPipeline
from airflow_flinkchain.functions import BroadcastProcessFunction, ProcessJoinFunction
from airflow_flinkchain.state import MapStateDescriptor
from tests.conformance_cases import WithTimestamp, as_multiset, first_field, watermark_strategy
from tests.streamruns.cases import slices
from tests.streamruns.partitioned_log import PartitionedLog, append

RULES = MapStateDescriptor("factors", None, None)


class Pairs(ProcessJoinFunction):
    def process_element(self, left, right, ctx):
        yield (left[1], right[1])


class Scale(BroadcastProcessFunction):
    def process_element(self, value, ctx):
        factor = ctx.get_broadcast_state(RULES).get(value[0])
        if factor is not None:
            yield (value[0], value[1] * factor)

    def process_broadcast_element(self, value, ctx):
        ctx.get_broadcast_state(RULES).put(value[0], value[1])


def build(root: str, checkpoint_dir=None) -> StreamPipeline:
    p = StreamPipeline("two", runtime_mode="streaming", checkpoint_dir=checkpoint_dir)

    def side(name):
        s = p.from_source(PartitionedLog(directory=f"{root}/{name}"), name=name).uid(name)
        return s.assign_timestamps_and_watermarks(watermark_strategy({"bounded": 300})).uid(f"{name}-wm")

    left, right = side("left"), side("right")
    joined = left.key_by(first_field).interval_join(right.key_by(first_field)).between(-400, 600)
    joined.process(Pairs()).uid("join").set_parallelism(2).process(WithTimestamp()).collect("pairs")
    rules = p.from_source(PartitionedLog(directory=f"{root}/rules"), name="rules").uid("rules")
    left.connect(rules.broadcast(RULES)).process(Scale()).uid("scale").set_parallelism(2).collect("scaled")
    return p


def feed(root: str, left: list, right: list, rules: list) -> None:
    append(f"{root}/left", "p0", left)
    append(f"{root}/right", "p0", right)
    append(f"{root}/rules", "p0", rules)


def data():
    left = [("k" + str(i % 3), i, 150 * i) for i in range(60)]  # event time rising on each side
    right = [("k" + str(i % 4), 100 + i, 170 * i + 20) for i in range(50)]
    return left, right, [("k0", 10), ("k1", 100), ("k2", 1000)]


@pytest.mark.parametrize("n", [3])
def test_interval_join_and_broadcast_state_span_runs(tmp_path, n):
    left, right, rules = data()
    feed(str(tmp_path / "whole"), left, right, rules)
    whole = build(str(tmp_path / "whole")).execute_local()
    root, ckpt = str(tmp_path / "sliced"), str(tmp_path / "ckpt")
    results = []
    for k, (l_part, r_part) in enumerate(zip(slices(left, n), slices(right, n))):
        feed(root, l_part, r_part, rules if k == 0 else [])  # the rules come in the first run only
        results.append(build(root, ckpt).execute_local(run_id=f"r{k}"))
    results.append(build(root, ckpt).execute_local(run_id="drain", drain=True))
    for sink in ("pairs", "scaled"):
        got = as_multiset([r for res in results for r in res.output(sink)])
        assert got == as_multiset(whole.output(sink)), sink
    assert len(whole.output("pairs")) > 50
    assert len(results[-1].output("pairs")) < len(whole.output("pairs"))  # most were emitted before the drain
    assert len(results[1].output("scaled")) > 0  # the broadcast rules came back from the snapshot
