"""DataStreamSink (PyFlink's): what `sink_to()`, `collect()` and `print()` return."""

from __future__ import annotations

from typing import TYPE_CHECKING

from airflow_flinkchain.api.operator_settings import OperatorSettings
from airflow_flinkchain.graph.errors import PlanningError
from airflow_flinkchain.graph.transformations import OperatorTransformation

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

