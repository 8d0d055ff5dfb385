"""ChainSubmitOperator: one chain of a pipeline = one spark-submit of the chain runtime.

A thin subclass of the provider's SparkSubmitOperator. Its Spark arguments come
from one `SparkSettings` (see spark_settings.py); at run time it adds what only
the run knows: the runtime's arguments (plan, chain, run key, exchange root,
rendered templated fields), Spark's location (the installed pyspark, so it works
whatever PATH the worker has) and, for local masters, local[N] for the chain's
parallelism. After the job it reads the runtime's metrics file, records it in
the run store and returns a summary (XCom `return_value`).
"""

from __future__ import annotations

import json
import os
import re
import signal
import time
from typing import Any, Mapping, Optional

from airflow_flinkchain.airflow import paths
from airflow_flinkchain.airflow.compat import AirflowFailException, SparkSubmitOperator
from airflow_flinkchain.airflow.run_context import PipelineRun, check_spark_connection, run_store, store_call
from airflow_flinkchain.airflow.spec import ChainTaskSpec, PipelineSpec

_LOCAL_N = re.compile(r"^local\[(\d+|\*)(?:,\s*\d+)?\]$")
#: Seconds between SIGTERM (Spark's shutdown hooks cancel the job, subtasks dispose)
#: and the provider's SIGKILL when a task is killed.
KILL_GRACE_SECONDS = 10


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
    shallow_copy_attrs = ("chain_spec", "pipeline_spec")

    def __init__(self, *, chain_spec: ChainTaskSpec, pipeline_spec: PipelineSpec, area_suffix: str = "", **kwargs: Any):
        spark_kwargs = chain_spec.spark.operator_kwargs()
        spark_kwargs.update({k: kwargs.pop(k) for k in list(kwargs) if k in spark_kwargs and k != "conf"})
        super().__init__(
            application=paths.spark_entry_path(),
            name=f"flinkchain:{pipeline_spec.pipeline}:{chain_spec.chain_id}",
            **spark_kwargs,
            **kwargs,
        )
        self.chain_spec = chain_spec
        self.pipeline_spec = pipeline_spec
        self.area_suffix = area_suffix
        self.templated_fields: dict[str, Any] = {k: dict(v) for k, v in chain_spec.templated_fields.items()}
        self._spark_settings = chain_spec.spark
        self._run: Optional[PipelineRun] = None

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
        check_spark_connection(self._conn_id, where)
        run = self._run = PipelineRun.from_context(context, self.pipeline_spec, self.area_suffix)
        self._check_inputs(run, where)
        # A previous attempt's metrics must not make a failed retry look successful.
        stale = run.location(run.metrics_path(chain.chain_id))
        if stale.exists():
            stale.delete()
        self.application_args = self._runtime_args(run)
        self.log.info("%s: spark-submit %s %s", where, self.application, " ".join(self.application_args))
        started = time.time()
        super().execute(context)
        return self._after_submit(run, started, where)

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
        return args

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

    def _after_submit(self, run: PipelineRun, started: float, where: str) -> dict:
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
        operators = metrics.get("operators") or []
        summary["state"] = metrics.get("state")
        totals: dict[str, dict[str, float]] = {}
        for o in operators:  # one entry per operator and subtask: sum over subtasks
            if not isinstance(o, dict):
                continue
            t = totals.setdefault(str(o.get("name") or o.get("key")), {})
            for k in ("records_in", "records_out", "filtered", "dead_lettered", "time_ms"):
                if isinstance(o.get(k), (int, float)):
                    t[k] = round(t.get(k, 0) + o[k], 3)
        summary["operators"] = totals
        summary["outputs"] = metrics.get("outputs") or []
        return summary

    # ---- Spark location, master, parallelism ----------------------------------------------
    def _get_hook(self):
        binary = self._spark_binary or _default_spark_binary()
        self._spark_binary = binary
        hook = super()._get_hook()
        master = hook._connection.get("master") or ""
        self._check_cluster_rules(hook, master)
        if _is_local(master):
            hook._connection["master"] = _local_master(master, self.chain_spec.parallelism)
            env = {
                "PYSPARK_PYTHON": paths.python_executable(),
                "PYSPARK_DRIVER_PYTHON": paths.python_executable(),
                **(self.env_vars or {}),
            }
            if binary.startswith(paths.bundled_spark_home()):
                env.setdefault("SPARK_HOME", paths.bundled_spark_home())
            hook._env_vars = env
        elif binary.startswith(paths.bundled_spark_home()) and not os.environ.get("SPARK_HOME"):
            # spark-submit itself runs here; executors on the cluster use their own Spark.
            os.environ["SPARK_HOME"] = paths.bundled_spark_home()
        if not _is_local(master):
            from airflow_flinkchain.cluster import package_archive

            shipped = package_archive()
            hook._py_files = ",".join(x for x in (hook._py_files, shipped) if x)
        return hook

    def _check_cluster_rules(self, hook, master: str) -> None:
        try:
            from airflow_flinkchain.cluster import check_deploy_mode, check_exchange_root_reachable
        except ImportError:  # pragma: no cover
            return
        run = self._run
        try:
            check_deploy_mode(master, hook._connection.get("deploy_mode"))
            if run is not None:
                shared = self.pipeline_spec.exchange_root_shared or _conf_bool("flinkchain", "exchange_root_shared")
                check_exchange_root_reachable(master, run.exchange_root, shared=shared)
        except ValueError as exc:
            raise AirflowFailException(f"chain {self.chain_spec.chain_id!r}: {exc}") from exc

    # ---- kill ----------------------------------------------------------------------------
    def on_kill(self) -> None:
        """SIGTERM the spark-submit process tree first: the JVM's shutdown hook stops
        the SparkContext, which cancels the running tasks so subtasks reach their
        `dispose`; after KILL_GRACE_SECONDS the provider's on_kill SIGKILLs what is left
        (and kills the driver/application on a cluster)."""
        hook = self._hook
        proc = getattr(hook, "_submit_sp", None) if hook is not None else None
        if proc is not None and proc.poll() is None:
            family = _process_tree(proc.pid)
            self.log.info("Stopping spark-submit (pid %s) and %d child process(es)", proc.pid, len(family) - 1)
            for pid in family:
                _signal(pid, signal.SIGTERM)
            deadline = time.time() + KILL_GRACE_SECONDS
            while time.time() < deadline and proc.poll() is None:
                time.sleep(0.2)
            for pid in family[1:]:  # leftover Python workers; the provider kills the JVM
                _signal(pid, signal.SIGKILL)
        if hook is not None:
            super().on_kill()


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
