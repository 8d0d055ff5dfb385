"""PyFlink's `pyflink.datastream.connectors`: the file system connector (`.file_system`).
Other PyFlink connectors (Kafka, JDBC, ...) raise UnsupportedFeatureError; the project's own
sources and sinks are in `airflow_flinkchain.io`."""

from airflow_flinkchain.datastream.connectors.file_system import (FileSink, FileSource, OutputFileConfig,
                                                                  RollingPolicy, StreamFormat)
from airflow_flinkchain.graph.errors import unsupported_names

__all__ = ["FileSource", "FileSink", "StreamFormat", "OutputFileConfig", "RollingPolicy"]

__getattr__ = unsupported_names(__name__, dict.fromkeys(
    ("KafkaSource", "KafkaSink", "FlinkKafkaConsumer", "FlinkKafkaProducer", "JdbcSink", "PulsarSource",
     "PulsarSink", "RMQSource", "RMQSink", "KinesisStreamsSink", "NumberSequenceSource", "StreamingFileSink",
     "HybridSource", "ElasticsearchSink", "CassandraSink", "DynamicKafkaSource"),
    "Use a source or sink of airflow_flinkchain.io (files, SQL, collections) or register a connector."))
