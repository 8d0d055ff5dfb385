"""Every Airflow import of the package, in one place.

Airflow 3 moved the authoring API to `airflow.sdk` (the Task SDK); Airflow 2
had it spread over `airflow.models`, `airflow.utils` and `airflow.decorators`.
Only this module knows where things live, so a move costs one edit here.
"""

from __future__ import annotations

try:  # Airflow 3.x: the Task SDK is the authoring API
    from airflow.sdk import DAG, BaseOperator, TaskGroup, get_current_context, setup, teardown
    from airflow.sdk import conf as airflow_conf
    from airflow.sdk.definitions._internal.contextmanager import DagContext, TaskGroupContext

    AIRFLOW_3 = True
except ImportError:  # pragma: no cover - Airflow 2.x fallback, not in CI
    from airflow.configuration import conf as airflow_conf  # type: ignore[no-redef]
    from airflow.decorators import setup, teardown  # type: ignore[no-redef]
    from airflow.models.baseoperator import BaseOperator  # type: ignore[no-redef]
    from airflow.models.dag import DAG, DagContext  # type: ignore[no-redef]
    from airflow.operators.python import get_current_context  # type: ignore[no-redef]
    from airflow.utils.task_group import TaskGroup, TaskGroupContext  # type: ignore[no-redef]

    AIRFLOW_3 = False

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


__all__ = [
    "AIRFLOW_3",
    "DAG",
    "AirflowException",
    "AirflowFailException",
    "BaseOperator",
    "SparkSubmitOperator",
    "TaskGroup",
    "airflow_conf",
    "conf_get",
    "current_dag",
    "current_task_group",
    "get_current_context",
    "setup",
    "teardown",
]
