"""A two-input chain head driven directly through run_subtask with a TwoInputs (no runner):
apply_to_keyed_state on keys that hold state, and the end of one input releasing the
watermark to the other's."""

from __future__ import annotations

from airflow_flinkchain.functions import CoProcessFunction, KeyedBroadcastProcessFunction
from airflow_flinkchain.graph.model import TwoInputSpec
from airflow_flinkchain.runtime.core.elements import MIN_WATERMARK_TS, StreamRecord, Watermark
from airflow_flinkchain.runtime.core.input_selection import TwoInputs
from airflow_flinkchain.state import MapStateDescriptor, ValueStateDescriptor

from tests.runtime_core.helpers import K, build_job, edge, node, run

RULES = MapStateDescriptor("rules", None, None)
COUNT = ValueStateDescriptor("count")


class Reset(KeyedBroadcastProcessFunction):
    def open(self, runtime_context):
        self.count = runtime_context.get_state(COUNT)

    def process_element(self, value, ctx):
        self.count.update((self.count.value() or 0) + 1)
        yield ("count", ctx.get_current_key(), self.count.value())

    def process_broadcast_element(self, value, ctx):
        ctx.get_broadcast_state(RULES).put("reset", value)
        seen = []

        def reset(key, state):
            seen.append((key, state.value()))
            state.clear()

        ctx.apply_to_keyed_state(COUNT, reset)
        yield ("reset", sorted(seen))


def _job(kind, fn, spec, mode="streaming", key=None):
    nodes = [node(0, K.SOURCE, name="a"), node(1, K.SOURCE, name="b"),
             node(2, kind, fn, name="op", key_selector=key, two_input=spec), node(3, K.SINK, name="out")]
    edges = [edge(0, 2, type_number=1), edge(1, 2, type_number=2), edge(2, 3)]
    return build_job(nodes, edges, chains=[[0], [1], [2, 3]], runtime_mode=mode)


def test_apply_to_keyed_state_visits_every_key_with_state():
    job = _job(K.KEYED_BROADCAST_PROCESS, Reset(), TwoInputSpec(broadcast_state_descriptors=(RULES,)),
               key=lambda r: r[0])
    # not broadcast-first here, to have keyed state before the broadcast record
    inputs = TwoInputs([("a", 1), ("b", 1), ("a", 2), ("a", 3)], ["now"])
    writers, _ = run(job, inputs, chain_id="c2")
    assert writers.sink_values("out") == [
        ("count", "a", 1), ("reset", [("a", 1)]), ("count", "b", 1), ("count", "a", 1), ("count", "a", 2)]


class Watermarks(CoProcessFunction):
    def process_element1(self, value, ctx):
        yield (value, ctx.current_watermark())

    def process_element2(self, value, ctx):
        yield (value, ctx.current_watermark())


def test_an_ended_input_no_longer_holds_the_watermark_back():
    job = _job(K.CO_PROCESS, Watermarks(), TwoInputSpec())
    inputs = TwoInputs([StreamRecord("a", 1)], [StreamRecord("x", 1), Watermark(70), StreamRecord("y", 2)])
    writers, _ = run(job, inputs, chain_id="c2")
    # input 1 ended after "a": the operator's watermark is then input 2's
    assert writers.sink_values("out") == [("a", MIN_WATERMARK_TS), ("x", MIN_WATERMARK_TS), ("y", 70)]
