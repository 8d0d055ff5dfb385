"""Where a pipeline run's exchange root is, and where Spark is. No Airflow import.

The layout of a run's files under the exchange root is
`runtime.exchange.layout.ExchangeArea`'s (the Airflow tasks use it too).
`run_key` is the Airflow run_id made safe for Hadoop paths: run ids such as
``manual__2026-01-01T00:00:00+00:00`` contain ':' which Hadoop's Path rejects
("Relative path in absolute URI").
"""

from __future__ import annotations

import os
import re
import sys
from typing import Optional

from airflow_flinkchain.path_names import path_segment


def run_key(run_id: str) -> str:
    """Path-safe, readable, collision-free key of an Airflow run id
    (`path_names.path_segment`; run ids such as '..' or 'a/b' are refused).

    >>> run_key("scheduled__2026-01-02")
    'scheduled__2026-01-02'
    >>> run_key("manual__2026-01-02T03:04:05+00:00")
    'manual__2026-01-02T03_04_05_00_00-0d530c'
    """
    return path_segment(run_id, "Airflow run id")


def default_exchange_root() -> str:
    """`[flinkchain] exchange_root` (env AIRFLOW__FLINKCHAIN__EXCHANGE_ROOT), else
    `$AIRFLOW_HOME/flinkchain/exchange`. Resolved at run time, on the worker."""
    try:
        from airflow_flinkchain.airflow.compat import conf_get

        configured = conf_get("flinkchain", "exchange_root", fallback=None)
    except Exception:  # pragma: no cover - config not loadable
        configured = None
    if configured:
        return configured
    home = os.environ.get("AIRFLOW_HOME") or os.path.join(os.path.expanduser("~"), "airflow")
    return os.path.join(home, "flinkchain", "exchange")


def local_path(path: str) -> Optional[str]:
    """The local file-system path of `path`, or None for remote URIs (hdfs://, s3a://...)."""
    if path.startswith("file://"):
        return path[len("file://"):]
    if re.match(r"^[A-Za-z][A-Za-z0-9+.-]+://", path):
        return None
    return path


def spark_entry_path() -> str:
    """The spark-submit application: the chain runtime's entry point (a .py file)."""
    import airflow_flinkchain.runtime.spark as spark_pkg

    return os.path.join(os.path.dirname(os.path.abspath(spark_pkg.__file__)), "entry.py")


def bundled_spark_home() -> str:
    """SPARK_HOME of the installed pyspark (it ships bin/spark-submit and the jars).
    Found from the package location, without importing pyspark (slow)."""
    import importlib.util

    spec = importlib.util.find_spec("pyspark")
    if spec is None or not spec.origin:
        raise RuntimeError("pyspark is not installed in this Python; install it or set SPARK_HOME")
    return os.path.dirname(os.path.abspath(spec.origin))


def python_executable() -> str:
    """The Python that runs the Airflow task: it has airflow_flinkchain and pyspark installed."""
    return sys.executable
