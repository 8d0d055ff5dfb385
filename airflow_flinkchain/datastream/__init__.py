"""PyFlink's `pyflink.datastream`: `sed s/pyflink/airflow_flinkchain/` ports a PyFlink
DataStream program. Every name is defined once elsewhere in the package and offered here
under PyFlink's module paths (`.functions`, `.window`, `.state`, `.state_backend`,
`.connectors.file_system`, ...). PyFlink names this project does not offer raise
UnsupportedFeatureError naming them (see docs/porting.md).
"""

from airflow_flinkchain.api.connected import BroadcastConnectedStream, BroadcastStream, ConnectedStreams
from airflow_flinkchain.api.datastream import DataStream, DataStreamSink, KeyedStream
from airflow_flinkchain.api.windowed import AllWindowedStream, WindowedStream
from airflow_flinkchain.common.execution_mode import RuntimeExecutionMode
from airflow_flinkchain.datastream.stream_execution_environment import StreamExecutionEnvironment
from airflow_flinkchain.datastream.functions import (AggregateFunction, AllWindowFunction, BroadcastProcessFunction,
                                                     CoFlatMapFunction, CoGroupFunction, CoMapFunction,
                                                     CoProcessFunction, FilterFunction, FlatMapFunction, JoinFunction,
                                                     KeyedBroadcastProcessFunction, KeyedCoProcessFunction,
                                                     KeyedProcessFunction, KeySelector, MapFunction, Partitioner,
                                                     ProcessAllWindowFunction, ProcessFunction, ProcessJoinFunction,
                                                     ProcessWindowFunction, ReduceFunction, RuntimeContext,
                                                     WindowFunction)
from airflow_flinkchain.functions import OutputTag
from airflow_flinkchain.graph.errors import unsupported_names
from airflow_flinkchain.state_backend import (EmbeddedRocksDBStateBackend, HashMapStateBackend, PredefinedOptions,
                                              StateBackend)
from airflow_flinkchain.window import (CountWindow, GlobalWindow, MergingWindowAssigner, TimeWindow, Trigger,
                                       TriggerResult, Window, WindowAssigner)

__all__ = [
    "StreamExecutionEnvironment", "RuntimeExecutionMode", "DataStream", "KeyedStream", "WindowedStream",
    "AllWindowedStream", "ConnectedStreams", "BroadcastStream", "BroadcastConnectedStream", "DataStreamSink",
    "OutputTag", "MapFunction", "FlatMapFunction", "FilterFunction", "ReduceFunction", "KeySelector", "Partitioner",
    "ProcessFunction", "KeyedProcessFunction", "RuntimeContext", "AggregateFunction", "ProcessWindowFunction",
    "ProcessAllWindowFunction", "WindowFunction", "AllWindowFunction", "CoMapFunction", "CoFlatMapFunction",
    "CoProcessFunction", "KeyedCoProcessFunction", "BroadcastProcessFunction", "KeyedBroadcastProcessFunction",
    "JoinFunction", "CoGroupFunction", "ProcessJoinFunction", "StateBackend", "HashMapStateBackend",
    "EmbeddedRocksDBStateBackend", "PredefinedOptions", "Window", "TimeWindow", "CountWindow", "GlobalWindow",
    "WindowAssigner", "MergingWindowAssigner", "Trigger", "TriggerResult",
]

_CHECKPOINTS = "Stream runs checkpoint once per run: StreamPipeline(checkpoint_dir=...) (docs/stream-runs.md)."
__getattr__ = unsupported_names(__name__, {
    **dict.fromkeys(("CheckpointConfig", "CheckpointingMode", "CheckpointStorage", "CustomCheckpointStorage",
                     "FileSystemCheckpointStorage", "JobManagerCheckpointStorage",
                     "ExternalizedCheckpointRetention"), _CHECKPOINTS),
    **dict.fromkeys(("AsyncDataStream", "AsyncFunction", "AsyncRetryPredicate", "AsyncRetryStrategy"),
                    "Call the service from a map_batches() / process() function."),
    "SourceFunction": "Use a source of airflow_flinkchain.io.sources.",
    "SinkFunction": "Use a sink of airflow_flinkchain.io.sinks.",
    "CustomStateBackend": "Use HashMapStateBackend or EmbeddedRocksDBStateBackend.",
    "SlotSharingGroup": "Use slot_sharing_group(name) on operators.",
    "MemorySize": "", "TimeDomain": "", "TimerService": "Use ctx.timer_service() in a process function.",
})
