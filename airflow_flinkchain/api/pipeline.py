"""StreamPipeline: Flink's StreamExecutionEnvironment for one Airflow pipeline.

>>> from airflow_flinkchain import StreamPipeline
>>> p = StreamPipeline("numbers", parallelism=2)
>>> evens = p.from_collection(range(10)).name("numbers").filter(lambda x: x % 2 == 0).name("evens")
>>> _ = evens.map(lambda x: x * 10).name("times_ten").collect("out")
>>> for chain in p.plan().chains:
...     print(chain.id, "|", chain.name, "| p =", chain.parallelism)
numbers | numbers | p = 1
evens | evens -> times_ten -> out | p = 2
"""

from __future__ import annotations

import contextlib
from typing import Any, Callable, Iterable, Iterator, Optional

from airflow_flinkchain.api.datastream import DataStream
from airflow_flinkchain.api.validation import check_on_error, check_parallelism
from airflow_flinkchain.graph.builder import build_stream_graph
from airflow_flinkchain.graph.errors import PlanningError
from airflow_flinkchain.graph.model import OperatorKind, StreamGraph
from airflow_flinkchain.graph.transformations import OperatorTransformation, Transformation
from airflow_flinkchain.io.sources import CollectionSource, Source
from airflow_flinkchain.planner.jobgraph import JobGraph


class StreamPipeline:
    """Records a DataStream pipeline; `plan()` turns it into chains.

    `settings` (conn_id, spark_conf, driver_memory, executor_memory,
    executor_cores, env_vars, exchange_root, keep_exchange, on_error, ...)
    are kept untouched in `self.settings` for the Airflow layer; `on_error`
    is also the default error policy of every operator."""

    # Stack of lists recording every pipeline created while active (see `recording()`).
    _recorders: list[list["StreamPipeline"]] = []

    def __init__(self, name: str, parallelism: int = 1, **settings: Any):
        if not isinstance(name, str) or not name.strip():
            raise PlanningError(f"StreamPipeline needs a non-empty name, got {name!r}")
        self.name = name
        self.parallelism = check_parallelism(parallelism, "parallelism", name)
        check_on_error(settings.get("on_error"), None)
        self.settings: dict[str, Any] = settings
        self.chaining_enabled = True
        self.object_reuse = False
        self.setup_hooks: list[Callable[..., Any]] = []
        self.dispose_hooks: list[Callable[..., Any]] = []
        self._transformations: list[Transformation] = []
        for recorder in StreamPipeline._recorders:
            recorder.append(self)

    def __repr__(self) -> str:
        return f"<StreamPipeline {self.name!r} with {len(self._transformations)} transformations>"

    @classmethod
    @contextlib.contextmanager
    def recording(cls) -> Iterator[list["StreamPipeline"]]:
        """Collect every pipeline created inside the block (used by `flinkchain plan`
        to find pipelines with no global name, e.g. inside `with DAG(...)`).
        Nothing is recorded outside such a block, so long-lived DAG processors
        do not accumulate pipelines."""
        created: list[StreamPipeline] = []
        cls._recorders.append(created)
        try:
            yield created
        finally:
            cls._recorders.remove(created)

    # -- sources -----------------------------------------------------------
    def from_collection(self, items: Iterable[Any], output_type: Any = None) -> DataStream:
        """A non-parallel source (parallelism 1, as Flink's from_collection)."""
        source = CollectionSource(items=tuple(items))
        return self._source(source, "Collection Source", output_type)

    def from_source(self, source: Source, name: Optional[str] = None, output_type: Any = None) -> DataStream:
        """Any source descriptor; parallel unless `source.parallel` is False."""
        if not isinstance(source, Source):
            raise PlanningError(
                f"from_source() needs a Source descriptor (see airflow_flinkchain.io.sources), got {source!r}"
            )
        return self._source(source, name or f"Source: {type(source).__name__}", output_type)

    def _source(self, source: Source, name: str, output_type: Any) -> DataStream:
        t = self._add_operator(
            OperatorKind.SOURCE, name, (), function=source, output_type=output_type,
            non_parallel=not getattr(source, "parallel", True),
        )
        return DataStream(self, t)

    # -- pipeline settings -------------------------------------------------
    def set_parallelism(self, parallelism: int) -> "StreamPipeline":
        """Default parallelism of operators without their own (applied at plan time)."""
        self.parallelism = check_parallelism(parallelism, "parallelism", self.name)
        return self

    def disable_operator_chaining(self) -> "StreamPipeline":
        self.chaining_enabled = False
        return self

    def set_object_reuse(self, enabled: bool = True) -> "StreamPipeline":
        """Chained operators pass records without copying (Flink's enableObjectReuse)."""
        self.object_reuse = bool(enabled)
        return self

    def on_setup(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        """Register a pipeline-level setup hook (usable as a decorator)."""
        self.setup_hooks.append(fn)
        return fn

    def on_dispose(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        """Register a pipeline-level dispose hook, run even when a chain failed."""
        self.dispose_hooks.append(fn)
        return fn

    # -- planning ----------------------------------------------------------
    def stream_graph(self) -> StreamGraph:
        return build_stream_graph(
            self.name,
            self._transformations,
            default_parallelism=self.parallelism,
            chaining_enabled=self.chaining_enabled,
            object_reuse=self.object_reuse,
            on_error=self.settings.get("on_error") or "fail",
        )

    def plan(self, strategy: Any = None) -> JobGraph:
        """Chains and edges. `strategy`: None / "flink" (Flink's rules), "none"
        (every operator alone), or a ChainingStrategy object."""
        from airflow_flinkchain.planner.chaining import build_job_graph, resolve_strategy

        return build_job_graph(self.stream_graph(), resolve_strategy(strategy))

    # -- running -----------------------------------------------------------
    def execute(self, spark: Any = None, **kwargs: Any) -> Any:
        """Run locally on Spark (imports the runtime only now)."""
        from airflow_flinkchain.runtime.local import execute_pipeline

        return execute_pipeline(self, spark=spark, **kwargs)

    def to_airflow(self, **kwargs: Any) -> Any:
        """Add one Airflow task per chain (imports Airflow only now)."""
        from airflow_flinkchain.airflow.render import render_pipeline

        return render_pipeline(self, **kwargs)

    # -- recording (used by DataStream) ------------------------------------
    def _add_operator(
        self, kind: OperatorKind, name: str, inputs: tuple[Transformation, ...], **fields: Any
    ) -> OperatorTransformation:
        for i in inputs:
            self._check_own(i)
        t = OperatorTransformation(id=len(self._transformations), inputs=inputs, kind=kind, name=name, **fields)
        self._transformations.append(t)
        return t

    def _add_virtual(self, cls: type, inputs: tuple[Transformation, ...], **fields: Any) -> Transformation:
        for i in inputs:
            self._check_own(i)
        t = cls(id=len(self._transformations), inputs=inputs, **fields)
        self._transformations.append(t)
        return t

    def _check_own(self, t: Transformation) -> None:
        if t.id >= len(self._transformations) or self._transformations[t.id] is not t:
            raise PlanningError(
                f"a stream of another pipeline was used in pipeline {self.name!r}: "
                "operators can only consume streams of their own pipeline"
            )
