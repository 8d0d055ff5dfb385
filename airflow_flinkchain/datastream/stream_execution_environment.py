"""StreamExecutionEnvironment, PyFlink's entry point, on top of StreamPipeline.

A PyFlink program ports by renaming `pyflink` to `airflow_flinkchain`:

    env = StreamExecutionEnvironment.get_execution_environment()
    env.from_collection([1, 2, 3], type_info=Types.INT()).map(lambda x: x * 2).print()
    env.execute("doubles")          # runs on local Spark, prints 2, 4, 6

`execute()` runs the job declared since the previous `execute()` (the sinks added since,
with everything they read from, as Flink's StreamGraphGenerator walks back from them),
then starts a new job: a second `execute()` in one script runs only what was added after
the first. Streams declared before an `execute()` may feed sinks of a later job, as in Flink.

Examples:
    >>> env = StreamExecutionEnvironment.get_execution_environment()
    >>> numbers = env.from_collection([1, 2], type_info=Types.INT())
    >>> _ = numbers.map(lambda x: x + 1).print()
    >>> _ = env.execute_local()
    2
    3
    >>> _ = numbers.map(lambda x: -x).print()
    >>> _ = env.execute_local()
    -1
    -2
"""

from __future__ import annotations

from typing import Any, Optional

from airflow_flinkchain.api.datastream import DataStream
from airflow_flinkchain.api.pipeline import StreamPipeline
from airflow_flinkchain.api.validation import check_parallelism
from airflow_flinkchain.common.configuration import Configuration
from airflow_flinkchain.common.typeinfo import Types  # noqa: F401  (the module example)
from airflow_flinkchain.common.watermark_strategy import WatermarkStrategy
from airflow_flinkchain.graph.errors import PlanningError, UnsupportedFeatureError
from airflow_flinkchain.graph.transformations import Transformation
from airflow_flinkchain.io.sources import Source

#: Flink's default job name ("Flink Streaming Job"), as a path-safe pipeline name.
DEFAULT_JOB_NAME = "flink_streaming_job"

#: PyFlink methods of the environment this project does not offer, with what to do instead.
_UNSUPPORTED = {
    "add_jars": "Java connectors and jars do not apply: use the sources and sinks of airflow_flinkchain.io.",
    "add_classpaths": "Java connectors and jars do not apply: use the sources and sinks of airflow_flinkchain.io.",
    "add_python_file": "Ship Python files with the Spark job (Spark's --py-files; the DAG's spark_conf).",
    "add_python_archive": "Ship archives with the Spark job (Spark's --archives; the DAG's spark_conf).",
    "set_python_requirements": "Install requirements in the environment Spark's Python workers use.",
    "set_python_executable": "Spark's Python workers use PYSPARK_PYTHON.",
    "enable_checkpointing": "Stream runs checkpoint once per run: StreamPipeline(checkpoint_dir=...).",
    "get_checkpoint_config": "Stream runs checkpoint once per run: StreamPipeline(checkpoint_dir=...).",
    "get_checkpoint_interval": "", "get_checkpointing_mode": "", "get_checkpointing_consistency_mode": "",
    "enable_changelog_state_backend": "", "is_changelog_state_backend_enabled": "",
    "is_unaligned_checkpoints_enabled": "", "is_force_unaligned_checkpoints": "",
    "set_default_savepoint_directory": "", "get_default_savepoint_directory": "",
    "execute_async": "Use execute(), or to_airflow() to run the pipeline as Airflow tasks.",
    "create_input": "Use from_source() with a source of airflow_flinkchain.io.sources.",
    "register_cached_file": "", "register_slot_sharing_group": "Use slot_sharing_group(name) on operators.",
    "set_buffer_timeout": "", "get_buffer_timeout": "", "get_execution_plan": "Use plan() (chains) instead.",
    "set_default_local_parallelism": "Use set_parallelism().", "get_default_local_parallelism": "",
    "is_chaining_of_operators_with_different_max_parallelism_enabled": "", "configure": "",
    "close": "",
}


class StreamExecutionEnvironment(StreamPipeline):
    """PyFlink's StreamExecutionEnvironment: a StreamPipeline (same settings, plan(),
    to_airflow()) with PyFlink's signatures and Flink's job-per-execute() behaviour. The
    runtime mode defaults to StreamPipeline's. Honoured configuration keys:
    `parallelism.default`, `execution.runtime-mode`, `pipeline.name`,
    `pipeline.auto-watermark-interval` (ms); others are kept in `configuration`.

    Examples:
        >>> from airflow_flinkchain.common import Configuration
        >>> env = StreamExecutionEnvironment.get_execution_environment(
        ...     Configuration().set_integer("parallelism.default", 2))
        >>> env.get_parallelism(), env.is_chaining_enabled()
        (2, True)
    """

    def __init__(self, name: str = DEFAULT_JOB_NAME, configuration: Optional[Configuration] = None,
                 **settings: Any):
        super().__init__(name, **settings)
        self.configuration = Configuration(configuration)
        self._job_start = 0  # index of the first transformation declared after the last execute()
        c = self.configuration
        if c.contains_key("pipeline.name"):
            self.name = c.get_string("pipeline.name")
        if c.contains_key("parallelism.default"):
            self.set_parallelism(c.get_integer("parallelism.default", 1))
        if c.contains_key("execution.runtime-mode"):
            self.set_runtime_mode(c.get_string("execution.runtime-mode"))
        if c.contains_key("pipeline.auto-watermark-interval"):
            interval = c.get_string("pipeline.auto-watermark-interval").strip().lower().removesuffix("ms").strip()
            self.get_config().set_auto_watermark_interval(int(interval))
        self._default_job_name = self.name

    @staticmethod
    def get_execution_environment(configuration: Optional[Configuration] = None) -> "StreamExecutionEnvironment":
        """A new environment (its job named `flink_streaming_job` unless `pipeline.name` or
        `execute(job_name)` says otherwise)."""
        return StreamExecutionEnvironment(configuration=configuration)

    def __repr__(self) -> str:
        return f"<StreamExecutionEnvironment {self.name!r} with {len(self._job_transformations())} transformations>"

    def __getattr__(self, attr: str):
        if attr in _UNSUPPORTED:
            raise UnsupportedFeatureError(f"StreamExecutionEnvironment.{attr}()", _UNSUPPORTED[attr])
        raise AttributeError(f"'StreamExecutionEnvironment' object has no attribute {attr!r}")

    # -- settings ------------------------------------------------------------
    def get_parallelism(self) -> int:
        """The default parallelism of operators without their own."""
        return self.parallelism

    def set_max_parallelism(self, max_parallelism: int) -> "StreamExecutionEnvironment":
        """Accepted and checked; the number of key groups is set per operator
        (`set_max_parallelism` on a stream), 128 by default as in Flink."""
        self._max_parallelism = check_parallelism(max_parallelism, "max parallelism", self.name)
        return self

    def get_max_parallelism(self) -> int:
        """What set_max_parallelism() was given, -1 when it was not called (as Flink)."""
        return getattr(self, "_max_parallelism", -1)

    def is_chaining_enabled(self) -> bool:
        """False after disable_operator_chaining()."""
        return self.chaining_enabled

    # -- sources -------------------------------------------------------------
    def from_collection(self, collection: Any, type_info: Any = None) -> DataStream:  # type: ignore[override]
        """A non-parallel source of `collection`; with `type_info` its records are of that
        PyFlink type (a ROW_NAMED gives Rows, FLOAT rounds to float32, ...)."""
        return super().from_collection(collection, output_type=type_info)

    def from_source(self, source: Source,  # type: ignore[override]
                    watermark_strategy: Optional[WatermarkStrategy] = None,
                    source_name: Optional[str] = None, type_info: Any = None) -> DataStream:
        """PyFlink's `from_source(source, watermark_strategy, source_name, type_info=None)`.
        A watermark strategy with a timestamp assigner is applied to the source's records
        (Flink generates the watermarks in the source; here in an operator chained to it);
        one without an assigner gives no event time, as Flink's file source whose records
        carry no timestamp."""
        stream = super().from_source(source, name=source_name, output_type=type_info)
        if watermark_strategy is not None:
            if not isinstance(watermark_strategy, WatermarkStrategy):
                raise PlanningError(f"from_source(): watermark_strategy must be a WatermarkStrategy, "
                                    f"got {watermark_strategy!r}")
            if watermark_strategy.get_timestamp_assigner() is not None:
                stream = stream.assign_timestamps_and_watermarks(watermark_strategy)
        return stream

    def add_source(self, source_func: Any, source_name: str = "Custom Source", type_info: Any = None) -> DataStream:
        """A source descriptor of `airflow_flinkchain.io.sources` (PyFlink's Java
        SourceFunctions do not apply)."""
        if not isinstance(source_func, Source):
            raise UnsupportedFeatureError(f"add_source({type(source_func).__name__})",
                                          "Pass a source of airflow_flinkchain.io.sources or a FileSource of "
                                          "airflow_flinkchain.datastream.connectors.file_system.")
        return super().from_source(source_func, name=source_name, output_type=type_info)

    # -- running -------------------------------------------------------------
    def execute(self, job_name: Optional[str] = None,  # type: ignore[override]
                spark: Any = None, **kwargs: Any) -> Any:
        """Run the job declared since the last execute() on Spark (the active SparkSession,
        else a local one), then start a new job. Returns the run's result
        (`output(name)` of collect sinks, metrics); print() sinks have printed."""
        return self._run_job(job_name, lambda: StreamPipeline.execute(self, spark=spark, **kwargs))

    def execute_local(self, run_id: Optional[str] = None, context: Optional[dict] = None,
                      drain: bool = False) -> Any:
        """As execute(), in this process without Spark (see StreamPipeline.execute_local)."""
        return self._run_job(None, lambda: StreamPipeline.execute_local(self, run_id, context, drain))

    def _run_job(self, job_name: Optional[str], run: Any) -> Any:
        if not any(True for _ in self._job_transformations()):
            raise PlanningError(f"pipeline {self.name!r}: no operators defined since the last execute(); "
                                "add a sink (print(), sink_to(), collect()) before execute()")
        self.name = job_name if job_name is not None else self._default_job_name
        result = run()
        self._job_start = len(self._transformations)
        return result

    def _job_transformations(self) -> list[Transformation]:
        """The transformations declared since the last execute() and all they read from."""
        needed: set[int] = set()
        pending = list(self._transformations[self._job_start:])
        while pending:
            t = pending.pop()
            if t.id not in needed:
                needed.add(t.id)
                pending.extend(t.inputs)
        return [t for t in self._transformations if t.id in needed]
