"""ChainSubmitOperator: one chain of a pipeline = one spark-submit of the chain runtime.

A thin subclass of the provider's SparkSubmitOperator, using the provider's
public API only: its Spark arguments come from one `SparkSettings` (see
spark_settings.py) as the operator's constructor arguments; at run time it
sets what only the run knows through the operator's public attributes
(`application_args`: plan, chain, run key, exchange root, rendered templated
fields; `env_vars`: the worker's Python for local masters, the SQL connections'
URLs; `py_files`: the package archive for cluster masters) and builds the
provider's hook with its constructor arguments, as `ChainSubmitHook`, which
sizes a local master to the chain's parallelism (local[N]) through the hook's
public connection lookup. Spark's location defaults to the installed pyspark,
so it works whatever PATH the worker has. After the job it reads the runtime's
metrics file, records it in the run store and returns a summary (XCom
`return_value`). The chain's sources and sinks are the task's inlets and outlets
(assets.py): each committed sink's asset event gets what was written as its
extra; the OpenLineage provider gets the same inputs and outputs (lineage.py).
"""

from __future__ import annotations

import copy
import inspect
import json
import os
import re
import signal
import time
import uuid
from datetime import datetime, timezone
from typing import Any, Optional

from airflow_flinkchain.airflow import class_data_sharing, paths
from airflow_flinkchain.airflow.assets import AssetRef, event_extra
from airflow_flinkchain.airflow.compat import (AirflowException, AirflowFailException, SparkSubmitHook,
                                               SparkSubmitOperator, get_connection, sqlalchemy_url)
from airflow_flinkchain.airflow.run_context import (PipelineRun, check_spark_connection, operator_totals, run_store,
                                                    store_call)
from airflow_flinkchain.airflow.spec import ChainTaskSpec, PipelineSpec

_LOCAL_N = re.compile(r"^local\[(\d+|\*)(?:,\s*\d+)?\]$")
#: Seconds between SIGTERM (Spark's shutdown hooks cancel the job, subtasks dispose)
#: and the provider's SIGKILL when a task is killed.
KILL_GRACE_SECONDS = 10
#: The provider hook's constructor arguments: what the operator hands to its hook.
_HOOK_ARGS = frozenset(inspect.signature(SparkSubmitHook.__init__).parameters) - {"self"}
#: The Spark conf key each hook of a chain task gets with a value of its own (`--conf
#: spark.flinkchain.submission=<uuid>`): how on_kill finds this task's spark-submit among the
#: processes on the command line, without the provider's private attributes.
SUBMISSION_CONF = "spark.flinkchain.submission"
#: Caps a chain's cores on a standalone master (`spark://`) to its parallelism, unless the
#: chain sets it or `total_executor_cores` itself.
STANDALONE_CORES_CONF = "spark.cores.max"


class ChainSubmitHook(SparkSubmitHook):
    """The provider's SparkSubmitHook for one chain: a local master in the Spark
    connection (`local[k]` / `local[*]`: the machine's budget) becomes
    `local[min(k, parallelism)]`. Done in `get_connection`, the public lookup the
    hook resolves its master with."""

    def __init__(self, *, parallelism: int, **kwargs: Any):
        self.chain_parallelism = parallelism
        super().__init__(**kwargs)

    def get_connection(self, conn_id: str):  # type: ignore[override]
        conn = super().get_connection(conn_id)
        master = spark_master(conn)
        if _is_local(master) and _local_master(master, self.chain_parallelism) != master:
            conn = copy.copy(conn)
            conn.host, conn.port = _local_master(master, self.chain_parallelism), None
        return conn


class ChainSubmitOperator(SparkSubmitOperator):
    """Runs one chain (Flink's JobVertex) as a Spark application.

    Built by `render_pipeline` from a ChainTaskSpec; not meant to be
    instantiated by hand. `templated_fields` ({operator key: {field: template}})
    is an Airflow template field: source/sink paths such as
    ``/data/out/{{ run_key }}/`` or ``{{ ds }}`` are rendered per run and passed
    to the runtime as ``--overrides`` JSON. Besides Airflow's context, templates
    can use ``run_key`` (the run id made path-safe; manual runs have no ``ds``).
    """

    template_fields = (*SparkSubmitOperator.template_fields, "templated_fields")
    template_fields_renderers = {"templated_fields": "json", "conf": "json"}
    ui_color = "#e6f0fb"
    shallow_copy_attrs = ("chain_spec", "pipeline_spec", "asset_refs")

    def __init__(self, *, chain_spec: ChainTaskSpec, pipeline_spec: PipelineSpec, area_suffix: str = "",
                 asset_refs: tuple[AssetRef, ...] = (), **kwargs: Any):
        # sources are the task's inlets, sinks its outlets (Airflow emits their events on success)
        kwargs["inlets"] = [*(kwargs.get("inlets") or []), *(r.asset() for r in asset_refs if r.role == "source")]
        kwargs["outlets"] = [*(kwargs.get("outlets") or []), *(r.asset() for r in asset_refs if r.role == "sink")]
        spark_kwargs = chain_spec.spark.operator_kwargs()
        spark_kwargs.update({k: kwargs.pop(k) for k in list(kwargs) if k in spark_kwargs and k != "conf"})
        spark_kwargs["spark_binary"] = kwargs.pop("spark_binary", None) or spark_kwargs.get("spark_binary") \
            or _default_spark_binary()
        name = kwargs.pop("name", None) or f"flinkchain:{pipeline_spec.pipeline}:{chain_spec.chain_id}"
        super().__init__(application=paths.spark_entry_path(), name=name, **spark_kwargs, **kwargs)
        # the hook's constructor arguments as given (templated ones are re-read when the hook is built)
        self.hook_kwargs = {k: v for k, v in {**spark_kwargs, **kwargs}.items() if k in _HOOK_ARGS}
        self.chain_spec = chain_spec
        self.pipeline_spec = pipeline_spec
        self.area_suffix = area_suffix
        self.asset_refs = tuple(asset_refs)
        self.templated_fields: dict[str, Any] = {k: dict(v) for k, v in chain_spec.templated_fields.items()}
        self._run: Optional[PipelineRun] = None
        self._summary: Optional[dict] = None
        self._class_data: Optional[class_data_sharing.ClassDataSharing] = None

    # ---- templates ----------------------------------------------------------------
    def render_template_fields(self, context, jinja_env=None) -> None:
        run_id = context.get("run_id")
        if run_id and "run_key" not in context:
            context["run_key"] = paths.run_key(run_id) + self.area_suffix
        super().render_template_fields(context, jinja_env=jinja_env)

    # ---- execution -------------------------------------------------------------------
    def execute(self, context) -> dict:
        chain = self.chain_spec
        where = f"pipeline {self.pipeline_spec.pipeline!r}, chain {chain.chain_id!r}"
        check_spark_connection(self.spark_conn_id, where)
        run = self._run = PipelineRun.from_context(context, self.pipeline_spec, self.area_suffix)
        started = time.time()
        marks = {"task_started": round(started, 3)}
        try:
            self._check_inputs(run, where)
            # A previous attempt's metrics must not make a failed retry look successful.
            stale = run.location(run.metrics_path(chain.chain_id))
            if stale.exists():
                stale.delete()
            self.application_args = self._runtime_args(run)
            self.log.info("%s: spark-submit %s %s", where, self.application, " ".join(self.application_args))
            marks["submit_called"] = round(time.time(), 3)
            try:
                super().execute(context)
            except BaseException:
                self._finish_class_data(succeeded=False)
                raise
            self._finish_class_data(succeeded=True)
            marks["submit_returned"] = round(time.time(), 3)
        except BaseException as exc:
            self._record_failure(run, started, exc)
            raise
        summary = self._summary = self._after_submit(run, started, where, marks)
        self._annotate_asset_events(context, run, summary, where)
        return summary

    def _annotate_asset_events(self, context, run: PipelineRun, summary: dict, where: str) -> None:
        """The extra of each sink's asset event (Airflow emits the events when this task
        succeeds). A sink without a commit record fails the task: no event for uncommitted data."""
        committed = {o["sink"]: o for o in summary.get("outputs") or [] if "sink" in o}
        events = context.get("outlet_events")
        for ref in self.asset_refs:
            if ref.role != "sink":
                continue
            if ref.operator_key not in committed:
                raise AirflowException(
                    f"{where}: sink {ref.operator!r} reported no commit (metrics of the chain missing or "
                    f"incomplete), so its asset {ref.uri!r} is not marked updated; retry the task")
            if events is not None:
                events[ref.asset()].extra = event_extra(ref, committed[ref.operator_key], run, self.pipeline_spec,
                                                        self.chain_spec.chain_id)

    # ---- OpenLineage (called by apache-airflow-providers-openlineage only) ------------------
    def get_openlineage_facets_on_start(self):
        from airflow_flinkchain.airflow.lineage import operator_lineage

        return operator_lineage(self, None)

    def get_openlineage_facets_on_complete(self, task_instance):
        from airflow_flinkchain.airflow.lineage import operator_lineage

        return operator_lineage(self, self._summary)

    def get_openlineage_facets_on_failure(self, task_instance):
        from airflow_flinkchain.airflow.lineage import operator_lineage

        return operator_lineage(self, None, failed=True)

    def _runtime_args(self, run: PipelineRun) -> list[str]:
        args = [
            "--plan", run.plan_path,
            "--chain", self.chain_spec.chain_id,
            "--run-id", run.run_key,
            "--exchange-root", run.exchange_root,
            "--dag-id", run.dag_id,
            "--attempt-id", str(run.try_number),
        ]
        if self.templated_fields:
            args += ["--overrides", json.dumps(self.templated_fields, sort_keys=True, default=str)]
        if self.pipeline_spec.checkpoint_dir:  # a stream run: restore from, and stage into, its checkpoints
            args += ["--checkpoint-dir", self.pipeline_spec.checkpoint_dir]
        return args

    @property
    def spark_conn_id(self) -> str:
        return self.hook_kwargs.get("conn_id") or "spark_default"

    def _connection_urls(self) -> dict[str, str]:
        """The SQL sources'/sinks' Airflow connections, resolved here (the runtime never
        imports Airflow) and handed to spark-submit in its environment only: never
        on disk, nor in an operator attribute (rendered fields are stored)."""
        from airflow_flinkchain.runtime.connectors.sql import conn_url_env

        where = f"pipeline {self.pipeline_spec.pipeline!r}, chain {self.chain_spec.chain_id!r}"
        return {conn_url_env(c): sqlalchemy_url(c, where) for c in self.chain_spec.conn_ids}

    def _storage_env(self) -> dict[str, str]:
        """The storage connection's AWS_* variables (storage_credentials.py), for spark-submit's
        environment only, as the SQL connections' URLs."""
        from airflow_flinkchain.airflow import storage_credentials

        return storage_credentials.apply(self.pipeline_spec.storage_conn_id,
                                         f"pipeline {self.pipeline_spec.pipeline!r}, chain {self.chain_spec.chain_id!r}")

    def _check_inputs(self, run: PipelineRun, where: str) -> None:
        """Fail clearly (not deep inside Spark) when the plan or an upstream chain's
        committed output is missing, e.g. a chain cleared after the teardown dropped
        the run's exchange data."""
        if not run.exists(run.plan_path):
            raise AirflowFailException(
                f"{where}: the run's plan {run.plan_path} does not exist: the pipeline's setup task "
                f"({self.pipeline_spec.setup_task_id}) has not run for {run.run_id!r} or the teardown "
                "dropped the run's exchange area. Clear the chain task together with its setup task "
                "(Airflow clears setup/teardown with the task by default)."
            )
        for edge in self.chain_spec.in_edges:
            if not run.exists(run.edge_path(edge.id)):
                raise AirflowFailException(
                    f"{where}: input edge {edge.id!r} from chain {edge.source_chain!r} has no committed "
                    f"data in {run.area}. Clear the upstream chain too (Clear > 'Upstream'), or set "
                    "keep_exchange=True on the pipeline to keep exchange data after the run."
                )
        if self.pipeline_spec.checkpoint_dir:
            from airflow_flinkchain.airflow.stream_runs import check_begun

            check_begun(self.pipeline_spec, run, where)

    def _record_failure(self, run: PipelineRun, started: float, exc: BaseException) -> None:
        """The failed attempt in the run store, with the runtime's error (its metrics document,
        with what was counted up to the failure) or, when the chain did not get to write one
        (its inputs missing, spark-submit failing to start, the task killed), the task's."""
        store = run_store()
        if store is None:
            return
        doc = store_call("read_metrics", run.read_metrics, self.chain_spec.chain_id)
        if not doc or doc.get("state") != "failed" or not doc.get("error"):
            doc = {"attempt": str(run.try_number), "operators": [], "outputs": [], "spark_app_id": None,
                   "started_at": datetime.fromtimestamp(started, timezone.utc).isoformat(),
                   "ended_at": datetime.now(timezone.utc).isoformat(),
                   "error": str(exc) or type(exc).__name__}
        doc = {**doc, "state": "failed", "run_id": run.run_id, "run_key": run.run_key, "dag_id": run.dag_id,
               "chain": self.chain_spec.chain_id, "pipeline": self.pipeline_spec.pipeline}
        store_call("record_attempt", store.record_attempt, doc, try_number=run.try_number)

    def _after_submit(self, run: PipelineRun, started: float, where: str, marks: Optional[dict] = None) -> dict:
        metrics = run.read_metrics(self.chain_spec.chain_id)
        summary: dict[str, Any] = {
            "pipeline": self.pipeline_spec.pipeline,
            "chain": self.chain_spec.chain_id,
            "name": self.chain_spec.display_name,
            "run_id": run.run_id,
            "attempt": run.try_number,
            "exchange_area": run.area,
            "wall_seconds": round(time.time() - started, 3),
        }
        if metrics is None:
            self.log.warning("%s: no metrics file at %s", where, run.metrics_path(self.chain_spec.chain_id))
            return summary
        doc = {**metrics, "run_id": run.run_id, "run_key": run.run_key, "dag_id": run.dag_id}
        doc.setdefault("chain", self.chain_spec.chain_id)
        doc.setdefault("pipeline", self.pipeline_spec.pipeline)
        store = run_store()
        if store is not None:
            store_call("record_attempt", store.record_attempt, doc, try_number=run.try_number)
        summary["state"] = metrics.get("state")
        summary["operators"] = operator_totals(metrics.get("operators") or [])
        summary["outputs"] = metrics.get("outputs") or []
        # where the attempt's time went (runtime.core.timings): this task's marks, the driver's, the subtasks'
        summary["timings"] = {"task": {**(marks or {}), "recorded": round(time.time(), 3)},
                              **(metrics.get("timings") or {})}
        return summary

    # ---- Spark location, master, parallelism ----------------------------------------------
    def _get_hook(self) -> SparkSubmitHook:
        """The provider's hook (as ChainSubmitHook), from its constructor arguments: the
        ones this operator was given, templated ones as rendered, plus what the master
        asks for: the worker's Python (and bundled Spark) for a local master, the package
        archive as py_files for a cluster, and the submission's own `SUBMISSION_CONF`."""
        kwargs = {**self.hook_kwargs, **{k: getattr(self, k) for k in self.template_fields if k in _HOOK_ARGS}}
        master = self._master()
        deploy_mode = self._check_cluster_rules(master, kwargs.get("deploy_mode"))
        bundled = kwargs["spark_binary"].startswith(paths.bundled_spark_home())
        env: dict[str, str] = {}
        if _is_local(master):
            env = {"PYSPARK_PYTHON": paths.python_executable(), "PYSPARK_DRIVER_PYTHON": paths.python_executable()}
            if bundled:
                env["SPARK_HOME"] = paths.bundled_spark_home()
        else:
            from airflow_flinkchain.cluster import package_archive

            # executors on the cluster use their own Spark and get this package as py_files
            kwargs["py_files"] = ",".join(x for x in (kwargs.get("py_files"), package_archive()) if x)
            if bundled and master.startswith("spark://") and not os.environ.get("SPARK_HOME"):
                env["SPARK_HOME"] = paths.bundled_spark_home()  # spark-submit's own environment (client mode)
        env = {**env, **(kwargs.get("env_vars") or {}), **self._connection_urls(), **self._storage_env()}
        self._class_data = class_data_sharing.for_chain_task(master, deploy_mode, kwargs["spark_binary"], env)
        if self._class_data is not None:
            env.update(self._class_data.submit_env(env))
        kwargs["env_vars"] = env or None
        self.submission_id = uuid.uuid4().hex
        kwargs["conf"] = {**(kwargs.get("conf") or {}), SUBMISSION_CONF: self.submission_id}
        if master.startswith("spark://") and kwargs.get("total_executor_cores") is None:
            # a standalone master gives an application every free core unless capped: one chain
            # would starve the chains running beside it
            kwargs["conf"].setdefault(STANDALONE_CORES_CONF, str(self.chain_spec.parallelism))
        return ChainSubmitHook(parallelism=self.chain_spec.parallelism, **kwargs)

    def _finish_class_data(self, succeeded: bool) -> None:
        if self._class_data is not None and self._class_data.finish(succeeded):
            self.log.info("JVM class-data archive written: %s", self._class_data.archive)
        self._class_data = None

    def _master(self) -> str:
        try:
            return spark_master(get_connection(self.spark_conn_id))
        except Exception:
            return "yarn"  # the provider's default when the connection is missing

    def _check_cluster_rules(self, master: str, deploy_mode: Optional[str]) -> Optional[str]:
        """Fails the task when the master and deploy mode cannot run the chain; returns the deploy mode."""
        from airflow_flinkchain.cluster import check_deploy_mode, check_exchange_root_reachable

        run = self._run
        if deploy_mode is None:
            try:
                deploy_mode = get_connection(self.spark_conn_id).extra_dejson.get("deploy-mode")
            except Exception:
                deploy_mode = None
        try:
            check_deploy_mode(master, deploy_mode)
            if run is not None:
                shared = self.pipeline_spec.exchange_root_shared or _conf_bool("flinkchain", "exchange_root_shared")
                check_exchange_root_reachable(master, run.exchange_root, shared=shared)
        except ValueError as exc:
            raise AirflowFailException(f"chain {self.chain_spec.chain_id!r}: {exc}") from exc
        return deploy_mode

    # ---- kill ----------------------------------------------------------------------------
    def on_kill(self) -> None:
        """SIGTERM the spark-submit process tree first: the JVM's shutdown hook stops
        the SparkContext, which cancels the running tasks so subtasks reach their
        `dispose`; after KILL_GRACE_SECONDS the provider's on_kill SIGKILLs what is left
        (and kills the driver/application on a cluster)."""
        for proc in spark_submit_processes(getattr(self, "submission_id", None)):
            family = _process_tree(proc.pid)
            self.log.info("Stopping spark-submit (pid %s) and %d child process(es)", proc.pid, len(family) - 1)
            for pid in family:
                _signal(pid, signal.SIGTERM)
            deadline = time.time() + KILL_GRACE_SECONDS
            while time.time() < deadline and _running(proc):
                time.sleep(0.2)
            for pid in family[1:]:  # leftover Python workers; the provider kills the JVM
                _signal(pid, signal.SIGKILL)
        super().on_kill()


def spark_master(conn) -> str:
    """The master URL of a Spark connection, as the provider's hook reads it."""
    if conn.conn_type == "spark" and conn.host and ("://" in conn.host or not conn.port):
        master = conn.host
    else:
        master = f"{conn.conn_type}://{conn.host or ''}"
    return f"{master}:{conn.port}" if conn.port else master


def spark_submit_processes(submission_id: Optional[str]) -> list:
    """The running spark-submit process of the submission `submission_id` (its command line
    holds `--conf spark.flinkchain.submission=<id>`), among this process's descendants. Only
    that one: other SparkSubmit children of this process (a SparkSession's gateway JVM in the
    same interpreter, another task's submit) are not this task's to stop."""
    if not submission_id:
        return []
    import psutil

    marker = f"{SUBMISSION_CONF}={submission_id}"
    try:
        family = psutil.Process().children(recursive=True)
    except psutil.Error:
        return []
    found = []
    for proc in family:
        try:
            if marker in proc.cmdline() and _running(proc):
                found.append(proc)
        except psutil.Error:
            continue
    pids = {p.pid for p in found}
    return [p for p in found if _parent_pid(p) not in pids]  # the top of the submission's tree


def _parent_pid(proc) -> Optional[int]:
    try:
        return proc.ppid()
    except Exception:
        return None


def _running(proc) -> bool:
    """Alive and not a zombie (polled, never waited for: the hook reaps its own child)."""
    import psutil

    try:
        return proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _default_spark_binary() -> str:
    """spark-submit of the installed pyspark unless SPARK_HOME points at a Spark install."""
    home = os.environ.get("SPARK_HOME")
    if home and os.path.exists(os.path.join(home, "bin", "spark-submit")):
        return os.path.join(home, "bin", "spark-submit")
    return os.path.join(paths.bundled_spark_home(), "bin", "spark-submit")


def _is_local(master: str) -> bool:
    from airflow_flinkchain.cluster import is_local_master

    return is_local_master(master)


def _local_master(master: str, parallelism: int) -> str:
    """local[k] / local[*] in the connection is the machine's budget; a chain uses
    min(budget, its parallelism) threads. Other local forms are left alone."""
    m = _LOCAL_N.match(master.strip())
    if not m:
        return master
    budget = (os.cpu_count() or 1) if m.group(1) == "*" else int(m.group(1))
    return f"local[{max(1, min(budget, parallelism))}]"


def _conf_bool(section: str, key: str) -> bool:
    from airflow_flinkchain.airflow.compat import conf_get

    return str(conf_get(section, key, fallback="False")).strip().lower() in ("1", "true", "yes")


def _process_tree(pid: int) -> list[int]:
    try:
        import psutil

        root = psutil.Process(pid)
        return [pid] + [c.pid for c in root.children(recursive=True)]
    except Exception:
        return [pid]


def _signal(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass
