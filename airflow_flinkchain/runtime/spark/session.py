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
    # JVM <-> Python worker over Unix domain sockets: no TCP delayed-ACK stalls (~40 ms per
    # small task stream on loopback), which a chain job of small inputs would pay per task
    "spark.python.unix.domain.socket.enabled": "true",
}


def launched_by_spark_submit() -> bool:
    """True in a driver started by spark-submit: the JVM already knows the master
    (and the submitted conf), so neither must be forced here."""
    return bool(os.environ.get("PYSPARK_GATEWAY_PORT") or os.environ.get("SPARK_MASTER_FROM_SUBMIT"))


def get_or_create_spark(master: Optional[str] = None, app_name: str = "flinkchain", conf: Optional[dict] = None):
    """Return the active SparkSession or start one (local[2] unless `master` says otherwise;
    under spark-submit the submitted master and conf win over these defaults).

    Checks first that pyspark's Python files match its jars (see `versions`)."""
    from airflow_flinkchain.versions import check_pyspark

    check_pyspark()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    builder = SparkSession.builder
    submitted = None
    if master or not launched_by_spark_submit():
        builder = builder.master(master or "local[2]").appName(app_name)
    else:
        from pyspark import SparkConf, SparkContext

        # The gateway JVM holds the submitted conf as system properties; SparkConf()
        # only sees them once the gateway is up (before that it is an empty dict).
        SparkContext._ensure_initialized()
        submitted = SparkConf()
        if not submitted.contains("spark.app.name"):
            builder = builder.appName(app_name)
    for k, v in DEFAULT_CONF.items():
        if submitted is None or not submitted.contains(k):
            builder = builder.config(k, v)
    from airflow_flinkchain.runtime.exchange.storage import executor_env_conf

    # the storage settings of this driver's environment reach the executors' Python workers
    for k, v in executor_env_conf().items():
        if submitted is None or not submitted.contains(k):
            builder = builder.config(k, v)
    for k, v in (conf or {}).items():
        builder = builder.config(k, v)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("WARN")
    return session
