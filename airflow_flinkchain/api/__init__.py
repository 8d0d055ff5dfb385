"""Authoring API: StreamPipeline, DataStream, KeyedStream, SplitStream (pure Python)."""

from airflow_flinkchain.api.datastream import DataStream, DataStreamSink, KeyedStream, SplitStream
from airflow_flinkchain.api.pipeline import StreamPipeline

__all__ = ["StreamPipeline", "DataStream", "KeyedStream", "SplitStream", "DataStreamSink"]
