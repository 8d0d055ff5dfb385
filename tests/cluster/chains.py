"""Run every chain of a pipeline through real spark-submit of runtime/spark/entry.py,
as the Airflow chain tasks do (shared by the cluster tests and the benchmark)."""

from __future__ import annotations

import json
import os
import subprocess
import time
from dataclasses import dataclass, field

from airflow_flinkchain.localcluster.standalone import spark_submit_command


@dataclass
class ClusterRun:
    exchange_root: str
    dag_id: str
    run_id: str
    results: dict = field(default_factory=dict)  # chain id -> CompletedProcess
    seconds: float = 0.0

    def metrics(self, chain_id: str) -> dict:
        from airflow_flinkchain.runtime.exchange.layout import ExchangeArea

        return json.loads(ExchangeArea(self.exchange_root, self.dag_id, self.run_id).metrics(chain_id).read_text())

    def output(self, name: str) -> list:
        from airflow_flinkchain.runtime.exchange.dataset import read_records
        from airflow_flinkchain.runtime.exchange.layout import ExchangeArea

        return read_records(ExchangeArea(self.exchange_root, self.dag_id, self.run_id).collect(name), f"collect:{name}")


def submit_pipeline(pipeline, master: str, exchange_root: str, run_id: str, env: dict, shared: bool = True,
                    conf: dict | None = None, stop_on_failure: bool = True, timeout: float = 240) -> ClusterRun:
    """Plan, write the plan under the exchange root (the driver may run anywhere), ship the
    package with --py-files, spark-submit each chain in topological order."""
    from airflow_flinkchain.airflow.paths import spark_entry_path  # no Airflow import
    from airflow_flinkchain.cluster import check_exchange_root_reachable, package_archive
    from airflow_flinkchain.runtime.spark.local import topological_chains
    from airflow_flinkchain.runtime.exchange.layout import ExchangeArea
    from airflow_flinkchain.runtime.spark.plan_file import dump_plan

    check_exchange_root_reachable(master, exchange_root, shared=shared)
    job = pipeline.plan()
    dag_id = job.pipeline
    plan_path = ExchangeArea(exchange_root, dag_id, run_id).plan().uri
    dump_plan(job, plan_path)
    archive = package_archive()
    run = ClusterRun(exchange_root, dag_id, run_id)
    started = time.monotonic()
    for chain in topological_chains(job):
        cmd = spark_submit_command(master, spark_entry_path(), "--plan", plan_path, "--chain", chain.id,
                                   "--run-id", run_id, "--exchange-root", exchange_root, "--dag-id", dag_id,
                                   name=f"flinkchain:{dag_id}:{chain.id}", py_files=archive, conf=conf)
        res = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout, cwd=os.path.dirname(archive))
        run.results[chain.id] = res
        if res.returncode != 0 and stop_on_failure:
            break
    run.seconds = time.monotonic() - started
    return run
