"""Run store: pipelines and their plans, runs, chain attempts, per-operator
metrics and committed exchange datasets (SQLAlchemy; no Airflow, no Spark).
See run_store.RunStore for the API."""

from airflow_flinkchain.store.config import resolve_store_url
from airflow_flinkchain.store.migrations import LATEST_VERSION, SchemaTooNewError
from airflow_flinkchain.store.run_store import FAILED, RUNNING, SUCCESS, RunStore

__all__ = ["RunStore", "resolve_store_url", "LATEST_VERSION", "SchemaTooNewError", "RUNNING", "SUCCESS", "FAILED"]
