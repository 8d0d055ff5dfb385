"""PyFlink's `pyflink.common`: time, watermark strategies, type information, `Row`,
`Configuration`, `Encoder` (and the runtime mode). Each name is defined in the submodule
named as PyFlink's (`typeinfo`, `watermark_strategy`, `time`, `types`, `configuration`,
`serialization`) and offered here too.
"""

from airflow_flinkchain.common.configuration import Configuration
from airflow_flinkchain.common.execution_mode import RuntimeExecutionMode
from airflow_flinkchain.common.serialization import Encoder
from airflow_flinkchain.common.time import LONG_MAX, LONG_MIN, Duration, Time, to_millis
from airflow_flinkchain.common.typeinfo import (BasicTypeInfo, ListTypeInfo, MapTypeInfo, PickledBytesTypeInfo,
                                                RowTypeInfo, TupleTypeInfo, TypeInformation, Types, to_output_type)
from airflow_flinkchain.common.types import Row, RowKind
from airflow_flinkchain.common.watermark_strategy import (AscendingTimestampsWatermarks,
                                                          BoundedOutOfOrdernessWatermarks,
                                                          CollectingWatermarkOutput, NoWatermarksGenerator,
                                                          TimestampAssigner, Watermark, WatermarkGenerator,
                                                          WatermarkOutput, WatermarksWithIdleness, WatermarkStrategy)

__all__ = [
    "Configuration", "RuntimeExecutionMode", "Encoder", "Duration", "Time", "Types", "TypeInformation",
    "BasicTypeInfo", "PickledBytesTypeInfo", "RowTypeInfo", "TupleTypeInfo", "ListTypeInfo", "MapTypeInfo",
    "Row", "RowKind", "WatermarkStrategy", "TimestampAssigner", "Watermark", "WatermarkGenerator",
    "WatermarkOutput", "CollectingWatermarkOutput", "BoundedOutOfOrdernessWatermarks",
    "AscendingTimestampsWatermarks", "NoWatermarksGenerator", "WatermarksWithIdleness",
    "LONG_MIN", "LONG_MAX", "to_millis", "to_output_type",
]

from airflow_flinkchain.graph.errors import unsupported_names  # noqa: E402

__getattr__ = unsupported_names(__name__, {
    **dict.fromkeys(("SimpleStringSchema", "JsonRowSerializationSchema", "JsonRowDeserializationSchema",
                     "CsvRowSerializationSchema", "CsvRowDeserializationSchema", "AvroRowSerializationSchema",
                     "AvroRowDeserializationSchema", "ByteArraySchema", "SerializationSchema",
                     "DeserializationSchema"),
                    "Serialization schemas belong to Kafka-style connectors; "
                    "read and write with airflow_flinkchain.io."),
    "RestartStrategies": "Airflow task retries restart a chain: to_airflow(retries=...).",
    "RestartStrategyConfiguration": "Airflow task retries restart a chain: to_airflow(retries=...).",
    "JobClient": "", "JobExecutionResult": "execute() returns the run's result (output(name), metrics).",
    "JobID": "", "JobStatus": "", "CompletableFuture": "", "Instant": "", "TypeSerializer": "",
    "ConfigOptions": "Set keys of Configuration directly.", "ConfigOption": "Set keys of Configuration directly.",
    "ExecutionConfig": "env.get_config() gives the pipeline's ExecutionConfig.",
    "InputDependencyConstraint": "",
})
