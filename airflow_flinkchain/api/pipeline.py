"""StreamPipeline: Flink's StreamExecutionEnvironment for one Airflow pipeline.

Examples:
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
from airflow_flinkchain.api.validation import check_on_error, check_parallelism, check_sink_destinations, typed_fields
from airflow_flinkchain.function_types import HookCallable
from airflow_flinkchain.graph.builder import build_stream_graph
from airflow_flinkchain.graph.errors import PlanningError
from airflow_flinkchain.graph.model import (
    DEFAULT_AUTO_WATERMARK_INTERVAL,
    RUNTIME_MODES,
    OperatorKind,
    StreamGraph,
)
from airflow_flinkchain.graph.transformations import OperatorTransformation, Transformation
from airflow_flinkchain.io.sources import CollectionSource, Source
from airflow_flinkchain.planner.jobgraph import JobGraph
from airflow_flinkchain.state_backend import HashMapStateBackend, StateBackend, as_state_backend


def parse_runtime_mode(mode: Any, where: str) -> str:
    """`RuntimeExecutionMode` or its name (any case) as "batch" / "streaming".

    AUTOMATIC is BATCH: Flink picks BATCH when every source is bounded, and
    every source here is."""
    name = getattr(mode, "name", mode)
    value = name.lower() if isinstance(name, str) else None
    if value == "automatic":
        value = "batch"
    if value not in RUNTIME_MODES:
        raise PlanningError(
            f"{where}: runtime mode must be RuntimeExecutionMode.BATCH / STREAMING / AUTOMATIC "
            f"or one of {', '.join(map(repr, RUNTIME_MODES))}, got {mode!r}"
        )
    return value


class ExecutionConfig:
    """PyFlink's ExecutionConfig of a pipeline (`p.get_config()`): a view on its settings.

    Examples:
        >>> p = StreamPipeline("doc")
        >>> p.get_config().set_auto_watermark_interval(0).get_auto_watermark_interval()
        0
    """

    def __init__(self, pipeline: "StreamPipeline"):
        self._pipeline = pipeline

    def set_auto_watermark_interval(self, interval: int) -> "ExecutionConfig":
        """Milliseconds between watermarks of the watermark assigners in STREAMING
        mode (here: a watermark after every record when > 0); 0 emits none until
        the end of the input."""
        if isinstance(interval, bool) or not isinstance(interval, int) or interval < 0:
            raise PlanningError(
                f"pipeline {self._pipeline.name!r}: auto watermark interval must be an int >= 0 (ms), "
                f"got {interval!r}"
            )
        self._pipeline.auto_watermark_interval = interval
        return self

    def get_auto_watermark_interval(self) -> int:
        return self._pipeline.auto_watermark_interval

    def enable_object_reuse(self) -> "ExecutionConfig":
        self._pipeline.set_object_reuse(True)
        return self

    def disable_object_reuse(self) -> "ExecutionConfig":
        self._pipeline.set_object_reuse(False)
        return self

    def is_object_reuse_enabled(self) -> bool:
        return self._pipeline.object_reuse


def check_checkpoint_dir(checkpoint_dir: Any, runtime_mode: str, name: str) -> Optional[str]:
    """A checkpoint_dir is a stable path of a streaming pipeline (no template: every run
    must find the same snapshots)."""
    if checkpoint_dir is None:
        return None
    if not isinstance(checkpoint_dir, str) or not checkpoint_dir.strip():
        raise PlanningError(f"pipeline {name!r}: checkpoint_dir must be a non-empty path string, got {checkpoint_dir!r}")
    if "{{" in checkpoint_dir or "{%" in checkpoint_dir:
        raise PlanningError(f"pipeline {name!r}: checkpoint_dir {checkpoint_dir!r} is a template; it must be the same "
                            "path in every run (stream runs restore from it)")
    if runtime_mode != "streaming":
        raise PlanningError(f"pipeline {name!r}: checkpoint_dir needs runtime_mode='streaming' (stream runs)")
    return checkpoint_dir


class StreamPipeline:
    """Records a DataStream pipeline; `plan()` turns it into chains.

    `settings` (conn_id, spark_conf, driver_memory, executor_memory,
    executor_cores, env_vars, exchange_root, keep_exchange, on_error, ...)
    are kept untouched in `self.settings` for the Airflow layer; `on_error`
    is also the default error policy of every operator. `runtime_mode`
    ("batch", the default, or "streaming", or a `RuntimeExecutionMode`) is
    Flink's execution mode (see `set_runtime_mode`). A streaming pipeline with a
    `checkpoint_dir` runs as stream runs: each run continues where the last one
    stopped (docs/stream-runs.md); `allow_non_restored_state=True` lets a run drop
    the state of operators the pipeline no longer has.

    Examples:
        >>> p = StreamPipeline("orders", parallelism=4, conn_id="spark_default", executor_memory="2g")
        >>> p.settings["executor_memory"], p.parallelism
        ('2g', 4)
    """

    # Stack of lists recording every pipeline created while active (see `recording()`).
    _recorders: list[list["StreamPipeline"]] = []

    def __init__(self, name: str, parallelism: int = 1, runtime_mode: Any = "batch",
                 checkpoint_dir: Optional[str] = None, allow_non_restored_state: bool = False, **settings: Any):
        if not isinstance(name, str) or not name.strip():
            raise PlanningError(f"StreamPipeline needs a non-empty name, got {name!r}")
        self.name = name
        self.parallelism = check_parallelism(parallelism, "parallelism", name)
        check_on_error(settings.get("on_error"), None)
        self.settings: dict[str, Any] = settings
        self.chaining_enabled = True
        self.object_reuse = False
        self.runtime_mode = parse_runtime_mode(runtime_mode, f"pipeline {name!r}")
        self.checkpoint_dir = check_checkpoint_dir(checkpoint_dir, self.runtime_mode, name)
        self.allow_non_restored_state = bool(allow_non_restored_state)
        self.auto_watermark_interval = DEFAULT_AUTO_WATERMARK_INTERVAL
        self.state_backend: StateBackend = HashMapStateBackend()
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
        do not accumulate pipelines.

        Examples:
            >>> with StreamPipeline.recording() as created:
            ...     _ = StreamPipeline("a"), StreamPipeline("b")
            >>> [p.name for p in created]
            ['a', 'b']
        """
        created: list[StreamPipeline] = []
        cls._recorders.append(created)
        try:
            yield created
        finally:
            cls._recorders.remove(created)

    # -- sources -----------------------------------------------------------
    def from_collection(self, items: Iterable[Any], output_type: Any = None) -> DataStream:
        """A non-parallel source (parallelism 1, as Flink's from_collection) of `items`.

        Examples:
            >>> p = StreamPipeline("doc", parallelism=2)
            >>> _ = p.from_collection([1, 2, 3]).map(str).collect("out")
            >>> [(c.name, c.parallelism) for c in p.plan().chains]
            [('Collection Source', 1), ('Map -> out', 2)]
        """
        source = CollectionSource(items=tuple(items))
        return self._source(source, "Collection Source", output_type)

    def from_source(self, source: Source, name: Optional[str] = None, output_type: Any = None) -> DataStream:
        """Any source descriptor (`airflow_flinkchain.io.sources`); parallel unless
        `source.parallel` is False. Named `name`, else `Source: <Type>`.

        Examples:
            >>> from airflow_flinkchain.io.sources import ParquetSource
            >>> p = StreamPipeline("doc", parallelism=2)
            >>> _ = p.from_source(ParquetSource("/data/orders"), name="orders").collect("out")
            >>> [(c.name, c.parallelism) for c in p.plan().chains]
            [('orders -> out', 2)]
        """
        if not isinstance(source, Source):
            raise PlanningError(
                f"from_source() needs a Source descriptor (see airflow_flinkchain.io.sources), got {source!r}"
            )
        return self._source(source, name or f"Source: {type(source).__name__}", output_type)

    def _source(self, source: Source, name: str, output_type: Any) -> DataStream:
        t = self._add_operator(
            OperatorKind.SOURCE, name, (), function=source, **typed_fields(output_type, f"source {name!r}"),
            non_parallel=not getattr(source, "parallel", True),
        )
        return DataStream(self, t)

    # -- pipeline settings -------------------------------------------------
    def set_parallelism(self, parallelism: int) -> "StreamPipeline":
        """Default parallelism of operators without their own (applied at plan time).

        Examples:
            >>> StreamPipeline("doc").set_parallelism(8).parallelism
            8
        """
        self.parallelism = check_parallelism(parallelism, "parallelism", self.name)
        return self

    def set_runtime_mode(self, mode: Any) -> "StreamPipeline":
        """Flink's execution mode: `RuntimeExecutionMode.BATCH` (the default; keyed
        input processed key by key in timestamp order, timers fire at the end of
        each key, reduce emits one result per key) or `STREAMING` (watermarks,
        rolling reduce results); also "batch" / "streaming".

        Examples:
            >>> from airflow_flinkchain.common import RuntimeExecutionMode
            >>> StreamPipeline("doc").set_runtime_mode(RuntimeExecutionMode.STREAMING).runtime_mode
            'streaming'
        """
        self.runtime_mode = parse_runtime_mode(mode, f"pipeline {self.name!r}")
        return self

    def set_state_backend(self, state_backend: Any) -> "StreamPipeline":
        """Where keyed state lives while a chain runs (PyFlink's `env.set_state_backend`):
        `HashMapStateBackend()` (the default) or `EmbeddedRocksDBStateBackend()` from
        `airflow_flinkchain.state_backend`, or their names "hashmap" / "rocksdb". Snapshots
        have one format for both, so the backend may change between runs.

        Examples:
            >>> from airflow_flinkchain.state_backend import EmbeddedRocksDBStateBackend
            >>> p = StreamPipeline("doc").set_state_backend(EmbeddedRocksDBStateBackend())
            >>> p.get_state_backend()
            EmbeddedRocksDBStateBackend(enable_incremental_checkpointing=False, db_storage_paths=[])
        """
        try:
            self.state_backend = as_state_backend(state_backend, f"pipeline {self.name!r}: set_state_backend")
        except TypeError as exc:
            raise PlanningError(str(exc)) from None
        return self

    def get_state_backend(self) -> StateBackend:
        """The pipeline's state backend (PyFlink's `env.get_state_backend`; default HashMapStateBackend)."""
        return self.state_backend

    def get_config(self) -> ExecutionConfig:
        """The pipeline's ExecutionConfig (PyFlink's `env.get_config()`)."""
        return ExecutionConfig(self)

    def disable_operator_chaining(self) -> "StreamPipeline":
        """Every operator alone in its chain (Flink's `disable_operator_chaining`).

        Examples:
            >>> p = StreamPipeline("doc").disable_operator_chaining()
            >>> _ = p.from_collection([1]).map(str).collect("out")
            >>> [c.name for c in p.plan().chains]
            ['Collection Source', 'Map', 'out']
        """
        self.chaining_enabled = False
        return self

    def set_object_reuse(self, enabled: bool = True) -> "StreamPipeline":
        """Chained operators pass records without copying (Flink's enableObjectReuse):
        faster, and safe when no function changes a record it received.

        Examples:
            >>> StreamPipeline("doc").set_object_reuse().object_reuse
            True
        """
        self.object_reuse = bool(enabled)
        return self

    def on_setup(self, fn: HookCallable) -> HookCallable:
        """Register a pipeline-level setup hook, run by the setup task (usable as a decorator).

        Examples:
            >>> p = StreamPipeline("doc")
            >>> @p.on_setup
            ... def make_input_dir(**context):
            ...     pass
            >>> p.setup_hooks == [make_input_dir]
            True
        """
        self.setup_hooks.append(fn)
        return fn

    def on_dispose(self, fn: HookCallable) -> HookCallable:
        """Register a pipeline-level dispose hook, run by the teardown task even when a
        chain failed (usable as a decorator).

        Examples:
            >>> p = StreamPipeline("doc")
            >>> @p.on_dispose
            ... def notify(**context):
            ...     pass
            >>> p.dispose_hooks == [notify]
            True
        """
        self.dispose_hooks.append(fn)
        return fn

    # -- planning ----------------------------------------------------------
    def stream_graph(self) -> StreamGraph:
        """The StreamGraph (Flink's): one node per operator, edges with partitioners.

        Examples:
            >>> p = StreamPipeline("doc")
            >>> _ = p.from_collection([1]).rebalance().map(str).collect("out")
            >>> [n.name for n in p.stream_graph().nodes]
            ['Collection Source', 'Map', 'out']
        """
        transformations = self._job_transformations()
        check_sink_destinations(t for t in transformations
                                if isinstance(t, OperatorTransformation) and t.kind is OperatorKind.SINK)
        return build_stream_graph(
            self.name,
            transformations,
            default_parallelism=self.parallelism,
            chaining_enabled=self.chaining_enabled,
            object_reuse=self.object_reuse,
            on_error=self.settings.get("on_error") or "fail",
            runtime_mode=self.runtime_mode,
            auto_watermark_interval=self.auto_watermark_interval,
            state_backend=self.state_backend.spec(),
        )

    def plan(self, strategy: Any = None) -> JobGraph:
        """Chains and edges. `strategy`: None / "flink" (Flink's rules), "none"
        (every operator alone), or a ChainingStrategy object. Raises PlanningError,
        naming the operator and the fix, for a pipeline that cannot run.

        Examples:
            >>> p = StreamPipeline("doc")
            >>> _ = p.from_collection([1]).map(str).collect("out")
            >>> [c.name for c in p.plan().chains], [c.name for c in p.plan("none").chains]
            (['Collection Source -> Map -> out'], ['Collection Source', 'Map', 'out'])
        """
        from airflow_flinkchain.planner.chaining import build_job_graph, resolve_strategy

        return build_job_graph(self.stream_graph(), resolve_strategy(strategy))

    # -- running -----------------------------------------------------------
    def execute(self, spark: Any = None, drain: bool = False, **kwargs: Any) -> Any:
        """Run every chain on a local Spark session (imports the runtime only now);
        the result's `output(name)` gives the records of `collect(name)`. With a
        `checkpoint_dir` this is one stream run; `drain=True` (Flink's `stop --drain`)
        ends it with the MAX watermark, firing every pending window and timer.

        Example (needs Spark):

            result = p.execute()
            result.output("out")
        """
        from airflow_flinkchain.runtime.spark.local import execute_pipeline

        return execute_pipeline(self, spark=spark, drain=drain, **kwargs)

    def execute_local(self, run_id: Optional[str] = None, context: Optional[dict] = None,
                      drain: bool = False) -> Any:
        """Run the whole pipeline in this process, without Spark: for tests and
        debugging on small inputs. The chains run with the same chain runtime as
        on Spark (lifecycle, side outputs, keyed state, partitioners, watermarks,
        error policies); only the exchange between chains is in memory. Returns
        the same result as `execute()`: `.output(name)` of each collect sink and
        the metrics per chain; a failing chain raises ChainRunError. Runs
        collection, SQL and file sources, collect and file sinks (see
        `airflow_flinkchain.testing` for a test source and sink). The name says
        what differs from `execute()`: the whole pipeline runs locally, in this
        process.

        >>> from airflow_flinkchain import StreamPipeline
        >>> p = StreamPipeline("squares", parallelism=2)
        >>> _ = p.from_collection([1, 2, 3]).map(lambda x: x * x).collect("out")
        >>> sorted(p.execute_local().output("out"))
        [1, 4, 9]
        """
        from airflow_flinkchain.runtime.local import execute_local

        return execute_local(self, run_id=run_id, context=context, drain=drain)

    def to_airflow(self, **kwargs: Any) -> Any:
        """Add one Airflow task per chain, plus setup and teardown tasks, inside a
        TaskGroup named after the pipeline (imports Airflow only now). `kwargs`
        override settings and pass task arguments (`retries`, `execution_timeout`, ...).

        Example (in a DAG file):

            with DAG("orders", schedule="@daily", ...):
                p.to_airflow(retries=2)
        """
        from airflow_flinkchain.airflow.render import render_pipeline

        return render_pipeline(self, **kwargs)

    # -- recording (used by DataStream) ------------------------------------
    def _job_transformations(self) -> list[Transformation]:
        """What the next plan / run holds: every transformation (a StreamPipeline is one job,
        run as often as asked; StreamExecutionEnvironment starts a new job after execute())."""
        return self._transformations

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
