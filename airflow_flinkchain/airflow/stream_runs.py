"""The Airflow side of stream runs (docs/stream-runs.md): a pipeline with a
`checkpoint_dir` makes every DAG run one step of a single stream.

* the DAG: `max_active_runs=1` (set; another value is refused) and a `drain` param;
* the setup task begins the run (`begin_stream_run`, `drain` from the param);
* each chain task's spark-submit gets `--checkpoint-dir` (the runtime restores from the
  run's base checkpoint, so a retry starts where the first attempt started);
* `StreamCommitOperator`, downstream of every chain task and upstream of the teardown
  (all_success: never after a failed chain), commits the run.

Refusals of the runtime (`StreamRunError`: a concurrent run, clearing a run that is not
the latest) and damaged checkpoint files (`CheckpointFileError`) fail the task with
`AirflowFailException`: no retry, the message says why and what to do.
"""

from __future__ import annotations

import contextlib
import os
from typing import Any, Iterator, Optional

from airflow_flinkchain.airflow.compat import (AirflowFailException, active_run_count, add_dag_param,
                                               default_max_active_runs)
from airflow_flinkchain.airflow.spec import PipelineSpec

DRAIN_PARAM = "drain"


def prepare_dag(dag: Any, spec: PipelineSpec) -> None:
    """One run at a time, and the `drain` param (render time, no I/O)."""
    current = getattr(dag, "max_active_runs", None)
    if current not in (None, 1, default_max_active_runs()):
        raise ValueError(
            f"pipeline {spec.pipeline!r}: DAG {dag.dag_id!r} has max_active_runs={current}, but a pipeline with a "
            "checkpoint_dir runs as stream runs, one run at a time (each continues the last one's snapshot): "
            "leave max_active_runs unset or set it to 1")
    dag.max_active_runs = 1
    add_dag_param(dag, DRAIN_PARAM, False, type="boolean",
                  description="Stream runs: the last run of the stream; fire every pending window and timer "
                              "(Flink's stop --drain)")


def drain_requested(context: Any) -> bool:
    value = (context.get("params") or {}).get(DRAIN_PARAM)
    conf = getattr(context.get("dag_run"), "conf", None) or {}
    if DRAIN_PARAM in conf:  # trigger conf wins even where params do not follow it
        value = conf[DRAIN_PARAM]
    if isinstance(value, str):
        return value.strip().lower() in ("1", "true", "yes", "on")
    return bool(value)


def begin(job: Any, spec: PipelineSpec, run: Any, context: Any, allow_non_restored_state: bool, log) -> dict:
    """The setup task's part: refuse a second active run, then begin the run (or keep
    it, when the setup re-runs for a run in progress whose chains staged already)."""
    from airflow_flinkchain.runtime.exchange.checkpoints import CheckpointArea, CheckpointFileError
    from airflow_flinkchain.runtime.stream_run import StreamRun, StreamRunError, begin_stream_run

    where = f"pipeline {spec.pipeline!r}"
    active = active_run_count(context)
    if active is not None and active > 1:
        refuse(run, f"{where}: {active} runs of DAG {run.dag_id!r} are running; a stream (checkpoint_dir "
                    f"{spec.checkpoint_dir}) runs one run at a time (max_active_runs=1): this run is refused, "
                    "trigger it again when the other run finished")
    drain = drain_requested(context)
    checkpoint_dir = spec.checkpoint_dir
    try:
        current: Optional[StreamRun] = StreamRun.open(checkpoint_dir, run.run_key)
    except (StreamRunError, CheckpointFileError):  # not begun, or its record damaged: begin it anew
        current = None
    try:
        latest = CheckpointArea(checkpoint_dir).read_latest()
    except CheckpointFileError as exc:
        refuse(run, f"{where}, run {run.run_id!r}: {exc}", exc)
    if current is not None and current.drain == drain and \
            current.expected_latest == (latest["checkpoint"] if latest else None):
        log.info("%s: stream run %s already begun on checkpoint %s; keeping its staged chains",
                 where, run.run_key, current.base)
        try:
            current.verify_base()  # as a new begin does: before any chain task restores from it
        except CheckpointFileError as exc:
            refuse(run, f"{where}, run {run.run_id!r}: {exc}", exc)
        stream = current
    else:
        try:
            with sql_connections(job, where):  # begin finishes an interrupted publication
                stream = begin_stream_run(job, checkpoint_dir, run.run_key, drain=drain,
                                          allow_non_restored_state=allow_non_restored_state)
        except (StreamRunError, CheckpointFileError) as exc:
            refuse(run, f"{where}, run {run.run_id!r}: {exc}", exc)
    log.info("%s: stream run %s (seq %s) restores checkpoint %s%s", where, run.run_key, stream.seq, stream.base,
             ", drain" if stream.drain else "")
    return {"checkpoint_dir": checkpoint_dir, "base": stream.base, "seq": stream.seq, "drain": stream.drain}


def refuse(run: Any, message: str, cause: Optional[BaseException] = None) -> None:
    """Fail the setup task without retries, and record the refusal in the run store: a refused
    re-run of a run that succeeded before must not stay "success" on the Chains tab. Also for
    a damaged checkpoint: a retry cannot repair it (the message says what can)."""
    from airflow_flinkchain.airflow.run_context import run_store, store_call

    store = run_store()
    if store is not None:
        store_call("refuse_run", store.refuse_run, run.dag_id, run.run_id, message)
    raise AirflowFailException(message) from cause


@contextlib.contextmanager
def sql_connections(job: Any, where: str) -> Iterator[None]:
    """The Airflow connections of the pipeline's sources and sinks (`conn_id`), resolved for the
    publication and the sources' confirmation (a CDC slot advances) in this process, as the
    chain task hands them to spark-submit: in the environment only."""
    from airflow_flinkchain.airflow.compat import sqlalchemy_url
    from airflow_flinkchain.runtime.connectors.sql import conn_url_env

    conn_ids = sorted({c for n in job.stream_graph.nodes if isinstance(c := getattr(n.function, "conn_id", None), str)})
    saved = {conn_url_env(c): os.environ.get(conn_url_env(c)) for c in conn_ids}
    try:
        for c in conn_ids:
            os.environ[conn_url_env(c)] = sqlalchemy_url(c, where)
        yield
    finally:
        for env, value in saved.items():
            if value is None:
                os.environ.pop(env, None)
            else:
                os.environ[env] = value


def check_begun(spec: PipelineSpec, run: Any, where: str) -> None:
    """A chain task of a run whose staging is gone (another run began since) fails clearly."""
    from airflow_flinkchain.runtime.exchange.checkpoints import CheckpointFileError
    from airflow_flinkchain.runtime.stream_run import StreamRun, StreamRunError

    try:
        StreamRun.open(spec.checkpoint_dir, run.run_key)
    except CheckpointFileError as exc:
        raise AirflowFailException(f"{where}: {exc}; or clear the whole run, setup task included") from exc
    except StreamRunError as exc:
        raise AirflowFailException(
            f"{where}: {exc}. Another run of the stream began after this one (concurrent runs of one stream "
            "are refused); clear the whole run, setup task included") from exc


def commit(job: Any, spec: PipelineSpec, run: Any) -> dict:
    """The commit task's part: commit, or finish a commit an earlier try began."""
    from airflow_flinkchain.runtime.exchange.checkpoints import CheckpointFileError
    from airflow_flinkchain.runtime.stream_run import StreamRun, StreamRunError, commit_stream_run, stream_result

    where = f"pipeline {spec.pipeline!r}, run {run.run_id!r}"
    try:
        with sql_connections(job, where):
            manifest = commit_stream_run(job, StreamRun.open(spec.checkpoint_dir, run.run_key))
    except (StreamRunError, CheckpointFileError) as exc:
        raise AirflowFailException(f"{where}: {exc}") from exc
    return stream_result(manifest)
