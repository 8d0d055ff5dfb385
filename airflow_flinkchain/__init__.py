"""airflow-flinkchain: Flink-style operator chaining for Airflow, chains run on Spark.

Importing this package imports neither Airflow nor Spark (DAG parsing stays fast).
"""

from airflow_flinkchain.functions import ErrorPolicy, OutputTag
from airflow_flinkchain.api.pipeline import StreamPipeline
from airflow_flinkchain.api.datastream import DataStream, KeyedStream
from airflow_flinkchain.graph.errors import PlanningError, PlanningWarning
from airflow_flinkchain.testing import TestingSink, TestingSource
from airflow_flinkchain.api.windowed import AllWindowedStream, WindowedStream
from airflow_flinkchain.common import (Duration, RuntimeExecutionMode, Time, TimestampAssigner, Types,
                                       WatermarkGenerator, WatermarkStrategy)
from airflow_flinkchain.functions import (BroadcastProcessFunction, CoFlatMapFunction, CoGroupFunction, CoMapFunction,
                                          CoProcessFunction, JoinFunction, KeyedBroadcastProcessFunction,
                                          KeyedCoProcessFunction, KeyedProcessFunction, ProcessFunction,
                                          ProcessJoinFunction, ReduceFunction)
from airflow_flinkchain.state import (AggregatingStateDescriptor, ListStateDescriptor, MapStateDescriptor,
                                      ReducingStateDescriptor, StateTtlConfig, ValueStateDescriptor)
from airflow_flinkchain.state_backend import EmbeddedRocksDBStateBackend, HashMapStateBackend
from airflow_flinkchain.window import (ContinuousEventTimeTrigger, CountTrigger, CountWindow, EventTimeSessionWindows,
                                       EventTimeTrigger, GlobalWindows, PurgingTrigger, SlidingEventTimeWindows,
                                       TimeWindow, TumblingEventTimeWindows)
from airflow_flinkchain.window_functions import (AggregateFunction, AllWindowFunction, ProcessAllWindowFunction,
                                                 ProcessWindowFunction, WindowFunction)

__all__ = [
    "StreamPipeline", "DataStream", "KeyedStream", "OutputTag", "ErrorPolicy", "PlanningError", "PlanningWarning",
    "TestingSink", "TestingSource",
    # event time (PyFlink names)
    "WindowedStream", "AllWindowedStream",
    "Duration", "Time", "TimestampAssigner", "Types", "WatermarkGenerator", "WatermarkStrategy", "RuntimeExecutionMode",
    "ProcessFunction", "KeyedProcessFunction", "ReduceFunction",
    "AggregateFunction", "ProcessWindowFunction", "ProcessAllWindowFunction", "WindowFunction", "AllWindowFunction",
    "ValueStateDescriptor", "ListStateDescriptor", "MapStateDescriptor", "ReducingStateDescriptor",
    "AggregatingStateDescriptor", "StateTtlConfig", "HashMapStateBackend", "EmbeddedRocksDBStateBackend",
    "TumblingEventTimeWindows", "SlidingEventTimeWindows", "EventTimeSessionWindows", "GlobalWindows",
    "TimeWindow", "CountWindow", "EventTimeTrigger", "CountTrigger", "PurgingTrigger", "ContinuousEventTimeTrigger",
    # two inputs
    "CoMapFunction", "CoFlatMapFunction", "CoProcessFunction", "KeyedCoProcessFunction", "BroadcastProcessFunction",
    "KeyedBroadcastProcessFunction", "JoinFunction", "CoGroupFunction", "ProcessJoinFunction",
]
__version__ = "0.1.0"
