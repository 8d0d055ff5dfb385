"""DataStreamSink (PyFlink's): what `sink_to()`, `collect()` and `print()` return; and those
DataStream methods (StreamSinks)."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Optional

from airflow_flinkchain.api.operator_settings import OperatorSettings
from airflow_flinkchain.graph.errors import PlanningError
from airflow_flinkchain.graph.model import OperatorKind
from airflow_flinkchain.graph.transformations import OperatorTransformation
from airflow_flinkchain.io.sinks import CollectSink, PrintSink, RowFormatFileSink, Sink

if TYPE_CHECKING:  # pragma: no cover
    from airflow_flinkchain.api.pipeline import StreamPipeline


class DataStreamSink(OperatorSettings):
    """What sink_to()/collect() return: operator settings only, no stream methods.

    Examples:
        >>> from airflow_flinkchain import StreamPipeline
        >>> p = StreamPipeline("doc")
        >>> sink = p.from_collection([1]).collect("out").uid("out-v1").set_parallelism(1)
    """

    def __init__(self, pipeline: "StreamPipeline", transformation: OperatorTransformation):
        self._pipeline = pipeline
        self._t = transformation

    def __repr__(self) -> str:
        return f"<DataStreamSink {self._t.name!r} of pipeline {self._pipeline.name!r}>"

    def __getattr__(self, attr: str):
        if attr.startswith("_"):
            raise AttributeError(attr)
        from airflow_flinkchain.api.datastream import DataStream

        if hasattr(DataStream, attr):
            raise PlanningError(
                f"sink {self._t.name!r} has no outputs, so it has no {attr}(): a sink ends its stream. "
                f"Call {attr}() on the stream before sink_to()/collect().",
                operator=self._t.name,
            )
        raise AttributeError(attr)


class StreamSinks:
    """The sink methods of DataStream: `sink_to`, `collect`, `print`."""

    def sink_to(self, sink: Sink, name: Optional[str] = None) -> "DataStreamSink":
        """Write the stream to a sink (`airflow_flinkchain.io.sinks`); named `name`, else
        `Sink: <Type>`. A sink's destination belongs to it alone.

        Examples:
            >>> from airflow_flinkchain import StreamPipeline
            >>> from airflow_flinkchain.io.sinks import ParquetSink
            >>> p = StreamPipeline("doc")
            >>> _ = p.from_collection([{"n": 1}]).sink_to(ParquetSink("/data/out/{{ run_key }}"), name="numbers")
        """
        if isinstance(sink, type) and issubclass(sink, Sink):
            raise PlanningError(f"sink_to() got the sink class {sink.__name__}, not an instance of it: pass "
                                f"{sink.__name__}(...) with its settings")
        if not isinstance(sink, Sink):
            raise PlanningError(f"sink_to() needs a Sink descriptor (see airflow_flinkchain.io.sinks), got {sink!r}")
        if isinstance(sink, RowFormatFileSink) and sink.type_info is None:
            sink = dataclasses.replace(sink, type_info=self._type_info())  # lines as print() shows the records
        if name is None:
            name = sink.name if isinstance(sink, CollectSink) else f"Sink: {type(sink).__name__}"
        t = self._pipeline._add_operator(
            OperatorKind.SINK, name, (self._t,), function=sink,
            key_selector=self._key_selector(),
        )
        return DataStreamSink(self._pipeline, t)

    def print(self, sink_identifier: Optional[str] = None) -> "DataStreamSink":
        """Print every record to stdout as Flink does: Java's toString of the stream's PyFlink
        type (a TUPLE as "(a,1)", a ROW as "+I[1,a]"), `str(value)` for Python objects; lines
        prefixed "N> " (the 1-based subtask) when the sink's parallelism is > 1, and with
        `sink_identifier` ("id> ", "id:N> "). The driver writes the lines when the run
        commits the sink (see `io.sinks.PrintSink`).

        Examples:
            >>> from airflow_flinkchain import StreamPipeline
            >>> p = StreamPipeline("doc")
            >>> _ = p.from_collection([1, 2]).map(lambda x: x * 10).print()
            >>> _ = p.execute_local()
            10
            20
        """
        if sink_identifier is not None and not isinstance(sink_identifier, str):
            raise PlanningError(f"print(): sink_identifier must be a string, got {sink_identifier!r}")
        taken = {t.function.name for t in self._pipeline._transformations
                 if isinstance(t, OperatorTransformation) and isinstance(t.function, CollectSink)}
        name = next(f"print-{i}" for i in range(len(taken) + 1) if f"print-{i}" not in taken)
        sink = PrintSink(name, sink_identifier, self._type_info())
        return self.sink_to(sink, name="Print to Std. Out")

    def collect(self, name: str) -> "DataStreamSink":
        """Keep the records under `name` (for tests and examples); the sink is named `name`,
        and `execute().output(name)` returns its records.

        Examples:
            >>> from airflow_flinkchain import StreamPipeline
            >>> p = StreamPipeline("doc")
            >>> sink = p.from_collection([1, 2]).collect("numbers")
            >>> [c.name for c in p.plan().chains]
            ['Collection Source -> numbers']
        """
        return self.sink_to(CollectSink(name), name=name)
