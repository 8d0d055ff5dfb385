"""PyFlink's `pyflink.datastream.state` (defined in `airflow_flinkchain.state`)."""

from airflow_flinkchain.graph.errors import unsupported_names
from airflow_flinkchain.state import (AggregatingState, AggregatingStateDescriptor, AppendingState, BroadcastState,
                                      ListState, ListStateDescriptor, MapState, MapStateDescriptor, MergingState,
                                      ReadOnlyBroadcastState, ReducingState, ReducingStateDescriptor, State,
                                      StateDescriptor, StateTtlConfig, ValueState, ValueStateDescriptor)

__all__ = [
    "State", "ValueState", "AppendingState", "MergingState", "ReducingState", "AggregatingState", "ListState",
    "MapState", "ReadOnlyBroadcastState", "BroadcastState", "StateTtlConfig", "StateDescriptor",
    "ValueStateDescriptor", "ListStateDescriptor", "MapStateDescriptor", "ReducingStateDescriptor",
    "AggregatingStateDescriptor",
]

__getattr__ = unsupported_names(__name__, {"OperatorStateStore": "Use broadcast state or keyed state."})
