"""An input of a two-input operator that is idle as a whole does not hold back the operator's
watermark (Flink's AbstractStreamOperator.processWatermarkStatus1/2 over an
IndexedCombinedWatermarkStatus); both idle: the operator is idle."""

from __future__ import annotations

from airflow_flinkchain import StreamPipeline
from airflow_flinkchain.common import Duration, WatermarkGenerator, WatermarkStrategy
from airflow_flinkchain.functions import CoProcessFunction
from airflow_flinkchain.graph.model import TwoInputSpec
from airflow_flinkchain.runtime.core.elements import MIN_WATERMARK_TS, StreamRecord, Watermark, WatermarkStatus
from airflow_flinkchain.runtime.core.input_selection import TwoInputs
from airflow_flinkchain.runtime.core.valve import WatermarkValve
from tests.runtime_core.helpers import K, build_job, edge, node, run

IDLE, ACTIVE = WatermarkStatus.IDLE, WatermarkStatus.ACTIVE
MIN = MIN_WATERMARK_TS


class Watermarks(CoProcessFunction):
    def process_element1(self, value, ctx):
        yield (value, ctx.current_watermark())

    def process_element2(self, value, ctx):
        yield (value, ctx.current_watermark())


def _job(sink_chained: bool = True):
    nodes = [node(0, K.SOURCE, name="a"), node(1, K.SOURCE, name="b"),
             node(2, K.CO_PROCESS, Watermarks(), name="op", two_input=TwoInputSpec()), node(3, K.SINK, name="out")]
    edges = [edge(0, 2, type_number=1), edge(1, 2, type_number=2), edge(2, 3)]
    chains = [[0], [1], [2, 3]] if sink_chained else [[0], [1], [2], [3]]
    return build_job(nodes, edges, chains=chains, runtime_mode="streaming")


def _run(input1, input2):
    writers, _ = run(_job(), TwoInputs(input1, input2), chain_id="c2")
    return writers.sink_values("out")


def test_an_idle_input_is_left_out_of_the_combined_watermark():
    r = StreamRecord
    # input 2 goes idle after "x": from then on the operator's watermark is input 1's
    out = _run([r("a1", 1), Watermark(10), r("a2", 2), Watermark(20), r("a3", 3)],
               [r("x", 1), IDLE, r("y", 2)])
    assert out == [("a1", MIN), ("x", MIN), ("a2", MIN), ("y", 10), ("a3", 20)]


def test_without_the_idle_status_the_quiet_input_holds_the_watermark_back():
    r = StreamRecord
    out = _run([r("a1", 1), Watermark(10), r("a2", 2), Watermark(20), r("a3", 3)], [r("x", 1), r("y", 2)])
    assert out == [("a1", MIN), ("x", MIN), ("a2", MIN), ("y", MIN), ("a3", MIN)]


def test_an_input_active_again_counts_from_its_next_watermark_and_never_moves_the_watermark_back():
    r = StreamRecord
    out = _run([r("a1", 1), Watermark(10), r("a2", 2), Watermark(20), r("a3", 3), Watermark(30), r("a4", 4)],
               [r("x", 1), IDLE, r("y", 2), ACTIVE, Watermark(15), r("z", 3)])
    # y: input 2 idle (10); z: input 2 active at 15 -> min(20, 15) = 15 would go back: stays 20;
    # a4: min(30, 15) = 15: the watermark does not move back
    assert out == [("a1", MIN), ("x", MIN), ("a2", MIN), ("y", 10), ("a3", 20), ("z", 20), ("a4", 20)]


def test_both_inputs_idle_make_the_operator_idle_with_the_higher_watermark():
    r = StreamRecord
    writers, _ = run(_job(sink_chained=False),
                     TwoInputs([r("a", 1), Watermark(10), IDLE, r("b", 2)], [r("x", 1), Watermark(40), IDLE, r("y", 2)]),
                     chain_id="c2")
    (channel_writer,) = [w for (e, _s), w in writers.channel.items()]
    marks = [el for el in channel_writer.channels[0] if type(el) is not StreamRecord]
    # 10 is held back by input 2 (MIN); input 1 idle: input 2's 40; both idle: IDLE at max(10, 40);
    # input 1 ends: active with MAX - the watermark first, then the status (Flink's order)
    assert marks == [Watermark(40), IDLE, Watermark(2**63 - 1), ACTIVE]


def test_the_valve_passes_on_the_combined_status_when_asked():
    valve = WatermarkValve(2)
    out = list(valve.merge([(0, Watermark(5)), (0, IDLE), (1, Watermark(7)), (1, IDLE), (0, ACTIVE), (0, "r")],
                           statuses=True))
    assert out == [Watermark(7), IDLE, ACTIVE, "r"]
    assert list(WatermarkValve(2).merge([(0, IDLE), (1, IDLE)])) == []  # statuses stay inside by default
    one = WatermarkValve(1)
    one.input_watermark_status(0, True)  # idle from the start (an upstream subtask without records)
    assert list(one.merge_single([IDLE, ACTIVE, Watermark(3)], statuses=True)) == [IDLE, ACTIVE, Watermark(3)]


class IdleAfterEachRecord(WatermarkGenerator):
    """A quiet input (a rules stream): idle after each of its records, no watermark of its own."""

    def on_event(self, event, event_timestamp, output):
        output.mark_idle()


def test_pipeline_an_idle_rules_input_does_not_hold_back_event_time():
    p = StreamPipeline("idle_input", runtime_mode="streaming")
    events = p.from_collection([("a", 100), ("a", 200), ("a", 300)]).assign_timestamps_and_watermarks(
        WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_millis(0)).with_timestamp_assigner(
            lambda r, _ts: r[1]))
    rules = p.from_collection([("r", 0), ("r", 1)]).assign_timestamps_and_watermarks(
        WatermarkStrategy.for_generator(lambda ctx: IdleAfterEachRecord()).with_timestamp_assigner(
            lambda r, _ts: r[1]))
    events.connect(rules).process(Watermarks()).name("watch").collect("out")
    out = p.execute_local().output("out")
    # the rules input is idle from after its first record on: the second rule and the third
    # event see the events' watermark (99, 199) instead of MIN
    assert out == [(("a", 100), MIN), (("r", 0), MIN), (("a", 200), MIN), (("r", 1), 99), (("a", 300), 199)]
