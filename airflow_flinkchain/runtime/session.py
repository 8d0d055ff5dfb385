"""The SparkSession used by chain runs (spark-submit entry, execute(), tests)."""

from __future__ import annotations

import os
import sys
from typing import Optional

DEFAULT_CONF = {
    "spark.ui.enabled": "false",
    "spark.sql.shuffle.partitions": "2",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.driver.memory": "1g",
    "spark.ui.showConsoleProgress": "false",
}


def get_or_create_spark(master: Optional[str] = None, app_name: str = "flinkchain", conf: Optional[dict] = None):
    """Return the active SparkSession or start one (local[2] unless `master` says otherwise).

    Checks first that pyspark's Python files match its jars (see `versions`)."""
    from airflow_flinkchain.versions import check_pyspark

    check_pyspark()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    builder = SparkSession.builder.appName(app_name)
    if master or not os.environ.get("SPARK_MASTER_FROM_SUBMIT"):
        builder = builder.master(master or "local[2]")
    for k, v in {**DEFAULT_CONF, **(conf or {})}.items():
        builder = builder.config(k, v)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("WARN")
    return session
