"""Where the run store lives. Never imports Airflow: the Airflow side passes the
value of its config option `[flinkchain] store_url` in (`configured`); the
option's environment form is read here as well."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Optional

STORE_URL_ENV = "FLINKCHAIN_STORE_URL"
AIRFLOW_STORE_URL_ENV = "AIRFLOW__FLINKCHAIN__STORE_URL"
DEFAULT_DB_FILE = "flinkchain_store.db"


def resolve_store_url(url: Optional[str] = None, configured: Optional[str] = None) -> str:
    """The store's SQLAlchemy URL, first match wins:
    explicit `url` > $FLINKCHAIN_STORE_URL > Airflow config `[flinkchain] store_url`
    ($AIRFLOW__FLINKCHAIN__STORE_URL, or `configured`: the value the Airflow side read
    from airflow.cfg) > SQLite at $AIRFLOW_HOME/flinkchain_store.db."""
    if url:
        return url
    for env in (STORE_URL_ENV, AIRFLOW_STORE_URL_ENV):
        if os.environ.get(env):
            return os.environ[env]
    if configured:
        return configured
    home = Path(os.environ.get("AIRFLOW_HOME") or Path.home() / "airflow").expanduser()
    return f"sqlite:///{home / DEFAULT_DB_FILE}"

