"""PyFlink's `pyflink.datastream.data_stream` (defined in `airflow_flinkchain.api`)."""

from airflow_flinkchain.api.connected import BroadcastConnectedStream, BroadcastStream, ConnectedStreams
from airflow_flinkchain.api.datastream import DataStream, DataStreamSink, KeyedStream
from airflow_flinkchain.api.windowed import AllWindowedStream, WindowedStream

__all__ = ["DataStream", "KeyedStream", "WindowedStream", "AllWindowedStream", "ConnectedStreams",
           "BroadcastStream", "BroadcastConnectedStream", "DataStreamSink"]
