"""The examples in docstrings run, and the public API is documented."""

import doctest
import importlib
import inspect

import pytest

MODULES = [
    "airflow_flinkchain.api.datastream",
    "airflow_flinkchain.api.keyed_stream",
    "airflow_flinkchain.api.split_stream",
    "airflow_flinkchain.api.data_stream_sink",
    "airflow_flinkchain.api.operator_settings",
    "airflow_flinkchain.api.partitioning",
    "airflow_flinkchain.api.batches",
    "airflow_flinkchain.co_functions",
    "airflow_flinkchain.datastream.stream_execution_environment",
    "airflow_flinkchain.datastream.connectors.file_system",
    "airflow_flinkchain.api.connected",
    "airflow_flinkchain.api.pipeline",
    "airflow_flinkchain.api.windowed",
    "airflow_flinkchain.api.joins",
    "airflow_flinkchain.functions",
    "airflow_flinkchain.function_types",
    "airflow_flinkchain.io.sources",
    "airflow_flinkchain.io.sinks",
    "airflow_flinkchain.planner.formats",
    "conformance_cases",
]

# The classes of the authoring API, documented in docs/api/ from their docstrings.
API_CLASSES = [
    "airflow_flinkchain.api.pipeline:StreamPipeline",
    "airflow_flinkchain.api.datastream:DataStream",
    "airflow_flinkchain.api.keyed_stream:KeyedStream",
    "airflow_flinkchain.api.split_stream:SplitStream",
    "airflow_flinkchain.api.data_stream_sink:DataStreamSink",
    "airflow_flinkchain.api.windowed:WindowedStream",
    "airflow_flinkchain.api.windowed:AllWindowedStream",
    "airflow_flinkchain.api.joins:JoinedStreams",
    "airflow_flinkchain.api.joins:CoGroupedStreams",
    "airflow_flinkchain.api.joins:IntervalJoin",
    "airflow_flinkchain.api.joins:IntervalJoined",
    "airflow_flinkchain.api.connected:ConnectedStreams",
    "airflow_flinkchain.api.connected:BroadcastStream",
    "airflow_flinkchain.api.connected:BroadcastConnectedStream",
    "airflow_flinkchain.co_functions:CoMapFunction",
    "airflow_flinkchain.co_functions:CoFlatMapFunction",
    "airflow_flinkchain.co_functions:CoProcessFunction",
    "airflow_flinkchain.co_functions:KeyedCoProcessFunction",
    "airflow_flinkchain.co_functions:BroadcastProcessFunction",
    "airflow_flinkchain.co_functions:KeyedBroadcastProcessFunction",
    "airflow_flinkchain.functions:MapFunction",
    "airflow_flinkchain.functions:FlatMapFunction",
    "airflow_flinkchain.functions:FilterFunction",
    "airflow_flinkchain.functions:ReduceFunction",
    "airflow_flinkchain.functions:ProcessFunction",
    "airflow_flinkchain.functions:KeyedProcessFunction",
    "airflow_flinkchain.co_functions:JoinFunction",
    "airflow_flinkchain.co_functions:CoGroupFunction",
    "airflow_flinkchain.co_functions:ProcessJoinFunction",
    "airflow_flinkchain.functions:KeySelector",
    "airflow_flinkchain.functions:OutputSelector",
    "airflow_flinkchain.functions:Partitioner",
    "airflow_flinkchain.functions:OutputTag",
    "airflow_flinkchain.io.sources:Source",
    "airflow_flinkchain.io.sources:FileSource",
    "airflow_flinkchain.io.sources:SqlSource",
    "airflow_flinkchain.io.sinks:Sink",
    "airflow_flinkchain.io.sinks:FileSink",
    "airflow_flinkchain.io.sinks:SqlSink",
    "airflow_flinkchain.io.sources:TextLineFileSource",
    "airflow_flinkchain.io.sinks:RowFormatFileSink",
    "airflow_flinkchain.io.sinks:PrintSink",
    "airflow_flinkchain.datastream:StreamExecutionEnvironment",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    result = doctest.testmod(importlib.import_module(name))
    assert result.failed == 0 and result.attempted > 0


def _load(path):
    module, name = path.split(":")
    return getattr(importlib.import_module(module), name)


@pytest.mark.parametrize("path", API_CLASSES)
def test_public_api_has_docstrings_with_examples(path):
    cls = _load(path)
    assert ">>>" in (cls.__doc__ or ""), f"{path}: the class docstring needs an example"
    undocumented = [
        name for name, member in vars(cls).items()
        if not name.startswith("_") and (inspect.isfunction(member) or isinstance(member, property))
        and not inspect.getdoc(getattr(cls, name))  # getdoc: an override inherits its base's docstring
    ]
    assert not undocumented, f"{path}: public methods without a docstring: {undocumented}"
