"""The pipeline-level setup and teardown tasks (Airflow `as_setup` / `as_teardown`).

Setup: validate, create the run's exchange area, serialize the plan (user
functions from the DAG file included), record the run, run `p.on_setup` hooks.
Teardown (runs even when a chain failed): run `p.on_dispose` hooks, drop the
run's exchange data, finalize the run record.

Both are idempotent: a cleared task re-runs them. The setup never deletes
exchange data (a single cleared chain still needs its upstream chains' output);
the teardown drops it only when every chain succeeded, so a failed chain can be
fixed and cleared without re-running the whole pipeline.
"""

from __future__ import annotations

import inspect
from typing import Any, Callable, Optional

from airflow_flinkchain.airflow.assets import AssetRef, plan_assets, published_extra
from airflow_flinkchain.airflow.compat import AirflowException, AirflowFailException, BaseOperator
from airflow_flinkchain.airflow.run_context import PipelineRun, check_spark_connection, run_store, store_call
from airflow_flinkchain.airflow.spec import PipelineSpec


class _PipelineTask(BaseOperator):
    ui_color = "#fdf1d6"
    shallow_copy_attrs = ("pipeline", "pipeline_spec")

    def __init__(self, *, pipeline: Any, pipeline_spec: PipelineSpec, area_suffix: str = "", **kwargs: Any):
        super().__init__(**kwargs)
        self.pipeline = pipeline
        self.pipeline_spec = pipeline_spec
        self.area_suffix = area_suffix

    def _run(self, context) -> PipelineRun:
        return PipelineRun.from_context(context, self.pipeline_spec, self.area_suffix)

    def _where(self) -> str:
        return f"pipeline {self.pipeline_spec.pipeline!r}"


class PipelineSetupOperator(_PipelineTask):
    """Prepares one run of a pipeline (see module doc)."""

    shallow_copy_attrs = ("pipeline", "pipeline_spec", "strategy")

    def __init__(self, *, strategy: Any = None, **kwargs: Any):
        super().__init__(**kwargs)
        self.strategy = strategy  # the planner strategy the DAG was rendered with

    def execute(self, context) -> dict:
        from airflow_flinkchain.runtime.connectors.inferred_types import with_inferred_types
        from airflow_flinkchain.runtime.spark.plan_file import dump_plan

        spec = self.pipeline_spec
        job_graph = self.pipeline.plan(self.strategy)
        planned = tuple(c.id for c in job_graph.chains)
        if set(planned) != set(spec.chain_ids):
            raise AirflowFailException(
                f"{self._where()}: the plan's chains {sorted(planned)} differ from the DAG's tasks "
                f"{sorted(spec.chain_ids)}; the DAG file changed between parsing and running: re-parse it "
                "(airflow dags reserialize) and trigger a new run"
            )
        for conn_id in sorted({c.spark.conn_id or "spark_default" for c in spec.chains}):
            check_spark_connection(conn_id, self._where())
        run = self._run(context)
        run.location(run.area).makedirs()
        job_graph = with_inferred_types(job_graph, self._source_paths(job_graph, context, run))
        dump_plan(job_graph, run.plan_path)  # atomic: a re-run replaces it, chains never see half a plan
        stream = None
        if spec.checkpoint_dir:
            from airflow_flinkchain.airflow import stream_runs

            stream = stream_runs.begin(job_graph, spec, run, context,
                                       getattr(self.pipeline, "allow_non_restored_state", False), self.log)
        store = run_store()
        if store is not None:
            store_call("start_run", store.start_run, run.dag_id, run.run_id,
                       plan={**job_graph.to_dict(), "assets": plan_assets(job_graph)}, pipeline=spec.pipeline)
        _run_hooks(self.pipeline.setup_hooks, context, "on_setup", self._where(), stop_on_error=True)
        self.log.info("%s: run %s prepared in %s (%d chains)", self._where(), run.run_id, run.area, len(planned))
        return {"pipeline": spec.pipeline, "run_id": run.run_id, "exchange_area": run.area,
                "plan": run.plan_path, "chains": list(spec.chain_ids), **({"stream": stream} if stream else {})}


    def _source_paths(self, job_graph: Any, context, run: PipelineRun) -> dict:
        """{node key: {"path": rendered}} of the templated source paths, rendered as the chain
        tasks render them (Airflow's context plus `run_key`): their files' schemas are read here."""
        from airflow_flinkchain.airflow.spec import templated_fields_of
        from airflow_flinkchain.graph.model import OperatorKind

        context = {**context, "run_key": run.run_key}
        rendered = {}
        for node in job_graph.stream_graph.nodes:
            path = templated_fields_of(node.function).get("path") if node.kind is OperatorKind.SOURCE else None
            if isinstance(path, str):
                rendered[node.key] = {"path": self.render_template(path, context)}
        return rendered


class StreamCommitOperator(_PipelineTask):
    """Commits one stream run (its snapshot and sink outputs) after every chain succeeded;
    a retry finishes an interrupted commit (docs/stream-runs.md). The run's file sinks are
    this task's outlets: their asset events (and OpenLineage outputs) come from here, after
    the publication, naming the published files."""

    ui_color = "#e3f4e1"
    shallow_copy_attrs = ("pipeline", "pipeline_spec", "strategy", "asset_refs")

    def __init__(self, *, strategy: Any = None, asset_refs: tuple[AssetRef, ...] = (), **kwargs: Any):
        kwargs["outlets"] = [*(kwargs.get("outlets") or []), *(r.asset() for r in asset_refs)]
        super().__init__(**kwargs)
        self.strategy = strategy
        self.asset_refs = tuple(asset_refs)
        self._summary: Optional[dict] = None

    def execute(self, context) -> dict:
        from airflow_flinkchain.airflow import stream_runs

        run = self._run(context)
        summary = self._summary = stream_runs.commit(self.pipeline.plan(self.strategy), self.pipeline_spec, run)
        self.log.info("%s: run %s committed checkpoint %s (seq %s%s)", self._where(), run.run_id,
                      summary["checkpoint"], summary["seq"], ", drained" if summary["drained"] else "")
        published = summary["sinks"]
        events = context.get("outlet_events")
        for ref in self.asset_refs:
            if ref.operator_key not in published:
                raise AirflowException(f"{self._where()}: checkpoint {summary['checkpoint']} has no publication of "
                                       f"sink {ref.operator!r}, so its asset {ref.uri!r} is not marked updated")
            if events is not None:
                events[ref.asset()].extra = published_extra(ref, published[ref.operator_key], run,
                                                            self.pipeline_spec)
        store = run_store()
        if store is not None and published:
            store_call("record_publication", store.record_publication, run.dag_id, run.run_id,
                       {key: sink["path"] for key, sink in published.items()})
        return summary

    # ---- OpenLineage (called by apache-airflow-providers-openlineage only) ------------------
    def get_openlineage_facets_on_start(self):
        from airflow_flinkchain.airflow.lineage import commit_lineage

        return commit_lineage(self, None)

    def get_openlineage_facets_on_complete(self, task_instance):
        from airflow_flinkchain.airflow.lineage import commit_lineage

        return commit_lineage(self, self._summary)

    def get_openlineage_facets_on_failure(self, task_instance):
        from airflow_flinkchain.airflow.lineage import commit_lineage

        return commit_lineage(self, None)


class PipelineTeardownOperator(_PipelineTask):
    """Disposes one run of a pipeline (see module doc)."""

    def __init__(self, *, keep_exchange: bool = False, **kwargs: Any):
        super().__init__(**kwargs)
        self.keep_exchange = keep_exchange

    def execute(self, context) -> dict:
        spec = self.pipeline_spec
        run = self._run(context)
        errors = _run_hooks(self.pipeline.dispose_hooks, context, "on_dispose", self._where(), stop_on_error=False)
        states = {c: (run.read_metrics(c) or {}).get("state") for c in spec.chain_ids}
        succeeded = [c for c, state in states.items() if state == "success"]
        failed = [c for c in spec.chain_ids if c not in succeeded]
        dropped = False
        if self.keep_exchange:
            self.log.info("%s: keeping exchange data in %s (keep_exchange=True)", self._where(), run.area)
        elif failed:
            self.log.warning(
                "%s: chains %s did not succeed; keeping %s so they can be cleared and re-run "
                "(it is dropped by the teardown of that re-run once all chains succeed)",
                self._where(), failed, run.area,
            )
        elif run.exists(run.area):
            run.location(run.area).delete()
            dropped = True
            self.log.info("%s: dropped exchange data %s", self._where(), run.area)
        store = run_store()
        state = None
        if store is not None:
            state = store_call("finish_run", store.finish_run, run.dag_id, run.run_id,
                               state="failed" if failed else "success")
        if errors:
            raise AirflowFailException(f"{self._where()}: on_dispose hook(s) failed: " + "; ".join(errors))
        return {"pipeline": spec.pipeline, "run_id": run.run_id, "succeeded": succeeded, "failed": failed,
                "exchange_dropped": dropped, "state": state or ("failed" if failed else "success")}


def _run_hooks(hooks: list[Callable[..., Any]], context, kind: str, where: str, stop_on_error: bool) -> list[str]:
    """Call user hooks with the Airflow context if they take an argument. Dispose
    hooks all run even if one fails (like Flink's dispose); errors are returned."""
    errors: list[str] = []
    for fn in hooks:
        name = getattr(fn, "__qualname__", repr(fn))
        try:
            fn(context) if _takes_argument(fn) else fn()
        except Exception as exc:
            if stop_on_error:
                raise AirflowFailException(f"{where}: {kind} hook {name} failed: {type(exc).__name__}: {exc}") from exc
            errors.append(f"{name}: {type(exc).__name__}: {exc}")
    return errors


def _takes_argument(fn: Callable[..., Any]) -> bool:
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return False
    return any(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.VAR_POSITIONAL) for p in params)
