"""What every task of a pipeline run agrees on: the run's key, exchange area,
plan file, and the run store. Computed from the Airflow context at run time
(never at parse time), identically in the setup, chain and teardown tasks."""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass
from typing import Any, Mapping, Optional

from airflow_flinkchain.airflow import paths
from airflow_flinkchain.metrics_schema import COUNTER_NAMES, GAUGE_NAMES, lowest
from airflow_flinkchain.airflow.spec import PipelineSpec

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PipelineRun:
    dag_id: str
    run_id: str          # Airflow's run id (the run store's key)
    run_key: str         # path-safe run id (exchange paths, the runtime's --run-id)
    exchange_root: str
    area: str            # the run's exchange area (ExchangeArea.run)
    try_number: int

    @classmethod
    def from_context(cls, context: Mapping[str, Any], spec: PipelineSpec, area_suffix: str = "") -> "PipelineRun":
        from airflow_flinkchain.airflow import storage_credentials

        storage_credentials.apply(spec.storage_conn_id, f"pipeline {spec.pipeline!r}")
        ti = context.get("ti") or context.get("task_instance")
        dag_id = getattr(ti, "dag_id", None) or context["dag"].dag_id
        run_id = context.get("run_id") or getattr(ti, "run_id")
        key = paths.run_key(run_id) + area_suffix
        root = spec.exchange_root or paths.default_exchange_root()
        if paths.local_path(root) is not None and not root.startswith("file://"):
            root = os.path.abspath(root)  # the spark-submit process may run in another directory
        return cls(
            dag_id=dag_id,
            run_id=run_id,
            run_key=key,
            exchange_root=root,
            area=_exchange_area(root, dag_id, key).run.uri,
            try_number=int(getattr(ti, "try_number", None) or 1),
        )

    @property
    def exchange(self):
        """The runtime's ExchangeArea of this run: both sides compute paths with it."""
        return _exchange_area(self.exchange_root, self.dag_id, self.run_key)

    @property
    def plan_path(self) -> str:
        return self.exchange.plan().uri

    def metrics_path(self, chain_id: str) -> str:
        return self.exchange.metrics(chain_id).uri

    def edge_path(self, edge_id: str) -> str:
        return self.exchange.edge(edge_id).uri

    @staticmethod
    def location(path: str):
        """A runtime Location (pyarrow file system: local paths and hdfs://, s3a://... URIs)."""
        from airflow_flinkchain.runtime.exchange.layout import Location

        return Location(path)

    def exists(self, path: str) -> bool:
        return self.location(path).exists()

    def read_metrics(self, chain_id: str) -> Optional[dict]:
        loc = self.location(self.metrics_path(chain_id))
        if not loc.exists():
            return None
        try:
            return json.loads(loc.read_text())
        except ValueError:
            log.warning("unreadable metrics file %s", loc.uri)
            return None


def _exchange_area(root: str, dag_id: str, key: str):
    from airflow_flinkchain.runtime.exchange.layout import ExchangeArea  # pyarrow: run time only

    return ExchangeArea(root, dag_id, key)


def operator_totals(operators: list) -> dict[str, dict[str, float]]:
    """Every counter of each operator, summed over its subtasks (the metrics
    document has one entry per operator and subtask), and every gauge some
    subtask has, its lowest value; keyed by operator name."""
    totals: dict[str, dict[str, float]] = {}
    gauges: dict[str, dict[str, list]] = {}
    for o in operators:
        if not isinstance(o, dict):
            continue
        name = str(o.get("name") or o.get("key"))
        t = totals.setdefault(name, {})
        for k in COUNTER_NAMES:
            if isinstance(o.get(k), (int, float)):
                t[k] = round(t.get(k, 0) + o[k], 3)
        for k in GAUGE_NAMES:
            if isinstance(o.get(k), (int, float)):
                gauges.setdefault(name, {}).setdefault(k, []).append(o[k])
    for name, values in gauges.items():
        for k, v in values.items():
            totals[name][k] = lowest(v)
    return totals


def run_store():
    """The run store, or None when it cannot be opened (a broken store must not
    fail a data pipeline: metrics are also in XCom and the task log)."""
    try:
        from airflow_flinkchain.airflow.compat import store_url
        from airflow_flinkchain.store import RunStore

        return RunStore(store_url())
    except Exception as exc:  # pragma: no cover - depends on deployment
        log.warning("flinkchain run store unavailable (%s: %s); metrics go to XCom only", type(exc).__name__, exc)
        return None


def store_call(what: str, fn, *args, **kwargs) -> Any:
    """Call a run-store method; log and continue on failure (see run_store())."""
    try:
        return fn(*args, **kwargs)
    except Exception as exc:
        log.warning("flinkchain run store: %s failed (%s: %s)", what, type(exc).__name__, exc)
        return None


def check_spark_connection(conn_id: str, where: str) -> None:
    """The provider silently falls back to `--master yarn` when the connection is
    missing; fail early instead, naming the task and what to do."""
    from airflow_flinkchain.airflow.compat import AirflowFailException, get_connection

    try:
        get_connection(conn_id)
    except Exception as exc:
        raise AirflowFailException(
            f"{where}: Spark connection {conn_id!r} is not defined ({type(exc).__name__}). Create it "
            f"in Admin > Connections (type Spark, host e.g. local[2], spark://host:7077, yarn, "
            f"k8s://https://host) or set AIRFLOW_CONN_{conn_id.upper()}="
            "'{\"conn_type\":\"spark\",\"host\":\"local[2]\"}'"
        ) from exc
