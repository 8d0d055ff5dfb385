"""Connectors: source and sink descriptors (plain data, importable at parse time).
They only describe what to read and write; the runtime reads and writes them
(`runtime.connectors`, looked up by descriptor type)."""

from airflow_flinkchain.io.sinks import (CollectSink, CsvSink, DeltaSink, FileSink, IcebergSink, JsonLinesSink,
                                        ParquetSink, Sink, SqlSink)
from airflow_flinkchain.io.sources import (
    CollectionSource,
    CsvSource,
    DeltaSource,
    FileSource,
    JsonLinesSource,
    NatsJetStreamSource,
    ParquetSource,
    PostgresCdcSource,
    Source,
    SqlSource,
)

__all__ = [
    "CollectSink", "CollectionSource", "CsvSink", "CsvSource", "DeltaSink", "DeltaSource", "FileSink", "FileSource",
    "IcebergSink", "JsonLinesSink", "JsonLinesSource", "NatsJetStreamSource", "ParquetSink", "ParquetSource",
    "PostgresCdcSource", "Sink", "Source", "SqlSink", "SqlSource",
]
