import pyarrow as pa
import pytest

from airflow_flinkchain.common import (
    LONG_MIN,
    CollectingWatermarkOutput,
    Duration,
    RuntimeExecutionMode,
    Time,
    TimestampAssigner,
    Types,
    Watermark,
    WatermarkGenerator,
    WatermarkStrategy,
    to_output_type,
)
from airflow_flinkchain.runtime.exchange.schema import parse_output_type


def _emit(strategy, timestamps, clock=None):
    gen = strategy.create_watermark_generator(clock=clock)
    out = CollectingWatermarkOutput()
    for ts in timestamps:
        gen.on_event(None, ts, out)
        gen.on_periodic_emit(out)
    return out


def test_durations_and_times():
    assert Duration.of_millis(5).to_milliseconds() == 5
    assert Duration.of_minutes(2).to_milliseconds() == 120_000
    assert Duration.of_hours(1).to_milliseconds() == 3_600_000
    assert Duration.of_days(1).to_milliseconds() == 86_400_000
    assert Time.seconds(3).to_milliseconds() == 3000
    assert Time.milliseconds(7) == Time.milliseconds(7)
    assert Time.days(1).to_milliseconds() == Duration.of_days(1).to_milliseconds()


def test_bounded_out_of_orderness_is_max_minus_delay_minus_one():
    gen = WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_millis(500)).create_watermark_generator()
    out = CollectingWatermarkOutput()
    gen.on_periodic_emit(out)
    assert out.watermarks == [LONG_MIN]  # before any event
    assert _emit(WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_millis(500)),
                 [100, 1200, 900, 1700]).watermarks == [-401, 699, 1199]


def test_monotonous_timestamps_lag_by_one():
    assert _emit(WatermarkStrategy.for_monotonous_timestamps(), [10, 20, 20, 30]).watermarks == [9, 19, 29]


def test_no_watermarks_emits_nothing():
    assert _emit(WatermarkStrategy.no_watermarks(), [10, 20]).watermarks == []


def test_for_generator_uses_the_custom_generator():
    class Punctuated(WatermarkGenerator):
        def on_event(self, event, ts, output):
            if ts % 100 == 0:
                output.emit_watermark(Watermark(ts))

    assert _emit(WatermarkStrategy.for_generator(lambda ctx: Punctuated()), [50, 100, 150, 300]).watermarks == [100, 300]
    with pytest.raises(TypeError):
        WatermarkStrategy.for_generator(lambda ctx: 3).create_watermark_generator()


def test_with_timestamp_assigner_returns_a_new_strategy():
    class Third(TimestampAssigner):
        def extract_timestamp(self, value, record_timestamp):
            return value[2]

    base = WatermarkStrategy.for_monotonous_timestamps()
    s = base.with_timestamp_assigner(Third())
    assert base.get_timestamp_assigner() is None
    assert s.get_timestamp_assigner().extract_timestamp(("k", 1, 77), None) == 77
    assert base.with_timestamp_assigner(lambda v, ts: v * 2).get_timestamp_assigner().extract_timestamp(4, None) == 8


def test_with_idleness_marks_idle_after_the_timeout_and_active_with_the_next_watermark():
    now = [0]
    s = WatermarkStrategy.for_monotonous_timestamps().with_idleness(Duration.of_millis(100))
    gen = s.create_watermark_generator(clock=lambda: now[0])
    out = CollectingWatermarkOutput()
    gen.on_event(None, 10, out)
    gen.on_periodic_emit(out)
    assert out.watermarks == [9] and not out.idle
    now[0] = 50
    gen.on_periodic_emit(out)  # inactivity starts
    now[0] = 200
    gen.on_periodic_emit(out)
    assert out.idle
    gen.on_event(None, 20, out)
    gen.on_periodic_emit(out)
    assert not out.idle and out.watermarks == [9, 19]
    with pytest.raises(ValueError):
        WatermarkStrategy.no_watermarks().with_idleness(Duration.of_millis(0))


def test_runtime_execution_mode():
    assert RuntimeExecutionMode.BATCH is not RuntimeExecutionMode.STREAMING


def test_types_are_values():
    assert Types.INT() == Types.INT() and Types.INT() != Types.LONG()
    assert Types.ROW_NAMED(["a"], [Types.STRING()]).get_field_names() == ["a"]
    assert Types.ROW([Types.INT(), Types.STRING()]).get_field_names() == ["f0", "f1"]
    assert Types.TUPLE([Types.INT()]).get_field_types() == [Types.INT()]
    assert Types.LIST(Types.INT()).element_type == Types.INT()
    assert Types.MAP(Types.STRING(), Types.LONG()).value_type == Types.LONG()


def test_row_named_of_basic_types_maps_to_a_parse_output_type_dict():
    info = Types.ROW_NAMED(["id", "name", "score", "ok", "at"],
                           [Types.LONG(), Types.STRING(), Types.DOUBLE(), Types.BOOLEAN(), Types.SQL_TIMESTAMP()])
    schema = parse_output_type(to_output_type(info))
    assert schema == pa.schema([("id", pa.int64()), ("name", pa.string()), ("score", pa.float64()),
                                ("ok", pa.bool_()), ("at", pa.timestamp("us"))])


def test_other_types_keep_records_pickled_and_non_types_pass_through():
    assert to_output_type(Types.PICKLED_BYTE_ARRAY()) is None
    assert to_output_type(Types.ROW([Types.INT()])) is None
    assert to_output_type(Types.TUPLE([Types.INT(), Types.STRING()])) is None
    assert to_output_type(Types.ROW_NAMED(["a"], [Types.LIST(Types.INT())])) is None
    assert to_output_type({"a": "int64"}) == {"a": "int64"}
