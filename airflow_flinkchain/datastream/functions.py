"""PyFlink's `pyflink.datastream.functions`: the function classes (defined in
`airflow_flinkchain.functions`, `.co_functions` and `.window_functions`)."""

from airflow_flinkchain.co_functions import (BroadcastProcessFunction, CoFlatMapFunction, CoGroupFunction,
                                             CoMapFunction, CoProcessFunction, JoinFunction,
                                             KeyedBroadcastProcessFunction, KeyedCoProcessFunction,
                                             ProcessJoinFunction)
from airflow_flinkchain.functions import (FilterFunction, FlatMapFunction, Function, KeyedProcessFunction,
                                          KeySelector, MapFunction, OutputSelector, Partitioner, ProcessFunction,
                                          ReduceFunction, RuntimeContext)
from airflow_flinkchain.graph.errors import unsupported_names
from airflow_flinkchain.state import (AggregatingState, AggregatingStateDescriptor, BroadcastState, ListState,
                                      ListStateDescriptor, MapState, MapStateDescriptor, ReadOnlyBroadcastState,
                                      ReducingState, ReducingStateDescriptor, ValueState, ValueStateDescriptor)
from airflow_flinkchain.window_functions import (AggregateFunction, AllWindowFunction, KeyedStateStore,
                                                 ProcessAllWindowFunction, ProcessWindowFunction, WindowFunction)

__all__ = [
    "Function", "MapFunction", "FlatMapFunction", "FilterFunction", "ReduceFunction", "KeySelector", "Partitioner",
    "OutputSelector", "ProcessFunction", "KeyedProcessFunction", "RuntimeContext", "CoMapFunction",
    "CoFlatMapFunction", "CoProcessFunction", "KeyedCoProcessFunction", "BroadcastProcessFunction",
    "KeyedBroadcastProcessFunction", "JoinFunction", "CoGroupFunction", "ProcessJoinFunction", "AggregateFunction",
    "ProcessWindowFunction", "ProcessAllWindowFunction", "WindowFunction", "AllWindowFunction", "KeyedStateStore",
    "ValueState", "ValueStateDescriptor", "ListState", "ListStateDescriptor", "MapState", "MapStateDescriptor",
    "ReducingState", "ReducingStateDescriptor", "AggregatingState", "AggregatingStateDescriptor",
    "BroadcastState", "ReadOnlyBroadcastState",
]

__getattr__ = unsupported_names(__name__, {
    "SourceFunction": "Use a source of airflow_flinkchain.io.sources.",
    "SinkFunction": "Use a sink of airflow_flinkchain.io.sinks.",
    **dict.fromkeys(("AsyncFunction", "AsyncRetryPredicate", "AsyncRetryStrategy"),
                    "Call the service from a map_batches() / process() function."),
    "TimeDomain": "", "TimerService": "Use ctx.timer_service() in a process function.",
})
