"""Every Airflow import of the package, in one place.

Airflow 3 moved the authoring API to `airflow.sdk` (the Task SDK); Airflow 2
had it spread over `airflow.models`, `airflow.utils` and `airflow.decorators`.
Only this module knows where things live, so a move costs one edit here.
"""

from __future__ import annotations

try:  # Airflow 3.x: the Task SDK is the authoring API
    from airflow.sdk import DAG, Asset, BaseHook, BaseOperator, Param, TaskGroup, get_current_context, setup, teardown
    from airflow.sdk import conf as airflow_conf
    from airflow.sdk.definitions._internal.contextmanager import DagContext, TaskGroupContext

    AIRFLOW_3 = True
except ImportError:  # pragma: no cover - Airflow 2.x fallback, not in CI
    from airflow.configuration import conf as airflow_conf  # type: ignore[no-redef]
    from airflow.datasets import Dataset as Asset  # type: ignore[no-redef]
    from airflow.decorators import setup, teardown  # type: ignore[no-redef]
    from airflow.hooks.base import BaseHook  # type: ignore[no-redef]
    from airflow.models.baseoperator import BaseOperator  # type: ignore[no-redef]
    from airflow.models.dag import DAG, DagContext  # type: ignore[no-redef]
    from airflow.models.param import Param  # type: ignore[no-redef]
    from airflow.operators.python import get_current_context  # type: ignore[no-redef]
    from airflow.utils.task_group import TaskGroup, TaskGroupContext  # type: ignore[no-redef]

    AIRFLOW_3 = False

from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook
from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator

try:
    from airflow.sdk.exceptions import AirflowException, AirflowFailException
except ImportError:  # pragma: no cover
    from airflow.exceptions import AirflowException, AirflowFailException  # type: ignore[no-redef]


def current_dag():
    """The DAG of the enclosing `with DAG(...)` block, or None."""
    return DagContext.get_current()


def current_task_group(dag):
    """The TaskGroup of the enclosing `with TaskGroup(...)` block, or None."""
    return TaskGroupContext.get_current(dag) if dag is not None else None


def conf_get(section: str, key: str, fallback=None):
    """`airflow.cfg` / `AIRFLOW__SECTION__KEY` value, or `fallback` (no I/O beyond the loaded config)."""
    try:
        return airflow_conf.get(section, key, fallback=fallback)
    except Exception:  # missing section on some versions raises instead of falling back
        return fallback


def default_max_active_runs() -> int:
    """The `max_active_runs` a DAG gets when its author does not pass one."""
    try:
        return int(conf_get("core", "max_active_runs_per_dag", fallback=16))
    except (TypeError, ValueError):
        return 16


def add_dag_param(dag, name: str, default, **schema) -> None:
    """Declare DAG param `name` (trigger form, `dag_run.conf`) unless the author already did."""
    if name not in dag.params:
        dag.params[name] = Param(default, **schema)


def active_run_count(context) -> "int | None":
    """How many runs of the task's DAG are running now (this one included); None when the
    Airflow version cannot say (Airflow 3's Task SDK asks the execution API)."""
    ti = context.get("ti") or context.get("task_instance")
    count = getattr(ti, "get_dr_count", None)
    if count is None:
        return None
    try:
        return int(count(dag_id=ti.dag_id, states=["running"]))
    except Exception:
        return None


def get_connection(conn_id: str):
    """The Airflow connection `conn_id` (UI, `AIRFLOW_CONN_...`, secrets backend); raises when undefined."""
    return BaseHook.get_connection(conn_id)


def sqlalchemy_url(conn_id: str, where: str) -> str:
    """The SQLAlchemy URL (password included) of Airflow connection `conn_id`: its
    provider hook's `sqlalchemy_url` when the connection type has one, else its URI."""
    try:
        conn = get_connection(conn_id)
    except Exception as exc:
        raise AirflowFailException(f"{where}: Airflow connection {conn_id!r} could not be read ({exc}); "
                                   "define it (UI, env AIRFLOW_CONN_...) or pass url= to the source/sink") from None
    try:
        hook_url = getattr(conn.get_hook(), "sqlalchemy_url", None)
        if hook_url is not None:
            return hook_url.render_as_string(hide_password=False) if hasattr(hook_url, "render_as_string") else str(hook_url)
    except Exception:
        pass  # no provider hook for this conn type: fall back to the connection URI
    uri = conn.get_uri()
    return "postgresql" + uri[len("postgres"):] if uri.startswith("postgres://") else uri


def store_url() -> str:
    """The run store's URL, with Airflow's `[flinkchain] store_url` taken into account."""
    from airflow_flinkchain.store.config import resolve_store_url

    return resolve_store_url(configured=conf_get("flinkchain", "store_url"))


__all__ = [
    "AIRFLOW_3",
    "Asset",
    "DAG",
    "AirflowException",
    "AirflowFailException",
    "BaseHook",
    "BaseOperator",
    "Param",
    "SparkSubmitHook",
    "SparkSubmitOperator",
    "TaskGroup",
    "active_run_count",
    "add_dag_param",
    "airflow_conf",
    "conf_get",
    "current_dag",
    "current_task_group",
    "default_max_active_runs",
    "get_connection",
    "get_current_context",
    "setup",
    "sqlalchemy_url",
    "store_url",
    "teardown",
]


def asset_ids(refs: list[tuple[str, str]]) -> dict[tuple[str, str], int]:
    """{(name, uri): id} of the assets Airflow knows among `refs` (the id addresses its
    asset page, `assets/{id}`). Reads the metadata database: only in the api-server or a
    task, never at parse time."""
    if not refs:
        return {}
    from sqlalchemy import select

    from airflow.models.asset import AssetModel
    from airflow.utils.session import create_session

    uris = sorted({uri for _name, uri in refs})
    with create_session() as session:
        rows = session.execute(select(AssetModel.id, AssetModel.name, AssetModel.uri)
                               .where(AssetModel.uri.in_(uris))).all()
    wanted = set(refs)
    return {(name, uri): id_ for id_, name, uri in rows if (name, uri) in wanted}
