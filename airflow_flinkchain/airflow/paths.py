"""Where a pipeline run's files live, and where Spark is. No Airflow import.

Layout (DESIGN.md "Exchange between chains")::

    {exchange_root}/{dag_id}/{run_key}/            the run's exchange area
        {edge_id}/                                 one dataset per chain edge
        _plan/plan.pkl                             the serialized JobGraph (setup task)
        _metrics/{chain_id}.json                   per-chain metrics (written by the runtime)

`run_key` is the Airflow run_id made safe for Hadoop paths: run ids such as
``manual__2026-01-01T00:00:00+00:00`` contain ':' which Hadoop's Path rejects
("Relative path in absolute URI").
"""

from __future__ import annotations

import hashlib
import os
import re
import sys
from typing import Optional

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")

PLAN_DIR = "_plan"
PLAN_FILE = "plan.pkl"
METRICS_DIR = "_metrics"


def run_key(run_id: str) -> str:
    """Path-safe, readable, collision-free key of an Airflow run id.

    >>> run_key("scheduled__2026-01-02")
    'scheduled__2026-01-02'
    >>> run_key("manual__2026-01-02T03:04:05+00:00")
    'manual__2026-01-02T03_04_05_00_00-0d530c'
    """
    safe = _UNSAFE.sub("_", run_id)
    if safe == run_id:
        return safe
    # sha1, not hash(): str hashes differ between processes (workers re-parse).
    return f"{safe}-{hashlib.sha1(run_id.encode()).hexdigest()[:6]}"


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


def join(root: str, *parts: str) -> str:
    """Join path parts under a root that may be a URI (s3a://...) or a plain path."""
    return "/".join([root.rstrip("/"), *(p.strip("/") for p in parts)])


def run_area(exchange_root: str, dag_id: str, key: str) -> str:
    return join(exchange_root, dag_id, key)


def plan_path(area: str) -> str:
    return join(area, PLAN_DIR, PLAN_FILE)


def metrics_path(area: str, chain_id: str) -> str:
    return join(area, METRICS_DIR, f"{chain_id}.json")


def local_path(path: str) -> Optional[str]:
    """The local file-system path of `path`, or None for remote URIs (hdfs://, s3a://...)."""
    if path.startswith("file://"):
        return path[len("file://"):]
    if re.match(r"^[A-Za-z][A-Za-z0-9+.-]+://", path):
        return None
    return path


def spark_entry_path() -> str:
    """The spark-submit application: the chain runtime's entry point (a .py file)."""
    import airflow_flinkchain.runtime as runtime_pkg

    return os.path.join(os.path.dirname(os.path.abspath(runtime_pkg.__file__)), "spark_entry.py")


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
