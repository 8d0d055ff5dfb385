import pytest

from airflow_flinkchain import functions
from airflow_flinkchain.common import Duration, Time, Types
from airflow_flinkchain.functions import ReduceFunction
from airflow_flinkchain.state import (
    AggregatingStateDescriptor,
    ListStateDescriptor,
    MapStateDescriptor,
    ReducingStateDescriptor,
    StateTtlConfig,
    ValueState,
    ValueStateDescriptor,
)
from airflow_flinkchain.window_functions import AggregateFunction


def test_value_state_descriptor_is_importable_from_both_modules():
    assert functions.ValueStateDescriptor is ValueStateDescriptor
    assert functions.ValueState is ValueState
    d = ValueStateDescriptor("count", Types.LONG())
    assert d.get_name() == "count" and d.value_type == Types.LONG()


def test_descriptors_carry_pyflink_type_info():
    assert ListStateDescriptor("l", Types.INT()).type_info == Types.LIST(Types.INT())
    assert MapStateDescriptor("m", Types.STRING(), Types.LONG()).type_info == Types.MAP(Types.STRING(), Types.LONG())
    with pytest.raises(ValueError):
        ValueStateDescriptor("")


def test_reducing_descriptor_accepts_a_reduce_function_or_a_callable():
    class Add(ReduceFunction):
        def reduce(self, a, b):
            return a + b

    assert ReducingStateDescriptor("r", Add(), Types.INT()).reduce(1, 2) == 3
    assert ReducingStateDescriptor("r", lambda a, b: a * b).reduce(3, 4) == 12
    with pytest.raises(TypeError, match="'r'"):
        ReducingStateDescriptor("r", 5)


def test_aggregating_descriptor_needs_an_aggregate_function():
    class Sum(AggregateFunction):
        def create_accumulator(self):
            return 0

    agg = Sum()
    assert AggregatingStateDescriptor("a", agg, Types.LONG()).get_agg_function() is agg
    with pytest.raises(TypeError, match="AggregateFunction"):
        AggregatingStateDescriptor("a", lambda a, b: a, Types.LONG())


def test_ttl_builder_defaults_and_options():
    cfg = StateTtlConfig.new_builder(Time.seconds(1)).build()
    assert cfg.get_update_type() is StateTtlConfig.UpdateType.OnCreateAndWrite
    assert cfg.get_state_visibility() is StateTtlConfig.StateVisibility.NeverReturnExpired
    assert cfg.get_ttl_time_characteristic() is StateTtlConfig.TtlTimeCharacteristic.ProcessingTime
    assert cfg.is_enabled() and cfg.ttl_millis() == 1000
    cfg = (StateTtlConfig.new_builder(Duration.of_millis(50))
           .set_update_type(StateTtlConfig.UpdateType.OnReadAndWrite)
           .set_state_visibility(StateTtlConfig.StateVisibility.ReturnExpiredIfNotCleanedUp)
           .cleanup_full_snapshot().cleanup_incrementally(10, True).cleanup_in_rocksdb_compact_filter(1000)
           .disable_cleanup_in_background().use_processing_time().build())
    assert cfg.get_update_type() is StateTtlConfig.UpdateType.OnReadAndWrite
    assert cfg.get_cleanup_strategies().in_full_snapshot()
    assert not cfg.get_cleanup_strategies().is_cleanup_in_background()
    assert not StateTtlConfig.new_builder(Time.seconds(1)).set_update_type(
        StateTtlConfig.UpdateType.Disabled).build().is_enabled()
    with pytest.raises(ValueError):
        StateTtlConfig.new_builder(Time.milliseconds(0))


def test_enable_time_to_live_checks_its_argument():
    d = ValueStateDescriptor("v")
    with pytest.raises(TypeError, match="'v'"):
        d.enable_time_to_live(5)
