"""Where the run store lives. Import-light: Airflow is only consulted inside
`resolve_store_url`, and only if it is already installed (task code, the
runtime and tests can use the store without Airflow)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Optional

STORE_URL_ENV = "FLINKCHAIN_STORE_URL"
AIRFLOW_STORE_URL_ENV = "AIRFLOW__FLINKCHAIN__STORE_URL"
DEFAULT_DB_FILE = "flinkchain_store.db"


def resolve_store_url(url: Optional[str] = None) -> str:
    """The store's SQLAlchemy URL, first match wins:
    explicit `url` > $FLINKCHAIN_STORE_URL > Airflow config `[flinkchain] store_url`
    (also $AIRFLOW__FLINKCHAIN__STORE_URL) > SQLite at $AIRFLOW_HOME/flinkchain_store.db."""
    if url:
        return url
    for env in (STORE_URL_ENV, AIRFLOW_STORE_URL_ENV):
        if os.environ.get(env):
            return os.environ[env]
    from_airflow = _airflow_config_url()
    if from_airflow:
        return from_airflow
    home = Path(os.environ.get("AIRFLOW_HOME") or Path.home() / "airflow").expanduser()
    return f"sqlite:///{home / DEFAULT_DB_FILE}"


def _airflow_config_url() -> Optional[str]:
    try:
        from airflow.configuration import conf
    except ImportError:  # the store works without Airflow installed
        return None
    return conf.get("flinkchain", "store_url", fallback=None) or None
