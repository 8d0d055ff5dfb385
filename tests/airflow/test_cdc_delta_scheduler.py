"""The example CDC -> Delta DAGs (dags/flinkchain_cdc_delta.py, as af_cdc_orders and
af_orders_gold in af_test_dags.py, every minute) under the real scheduler, against a
PostgreSQL cluster with wal_level=logical that the test starts: inserts, updates and deletes
between the scheduled runs; at the end the merged Delta table equals the source table, the
changelog holds every change once, and the second pipeline's counts (read from the
changelog with DeltaSource) match it."""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path

import pytest

from tests.airflow.test_airflow_scheduler import _runs, airflow, airflow_stack
from tests.connectors.pg_logical import pg_cluster  # noqa: F401  (fixture)

pytestmark = [pytest.mark.e2e, pytest.mark.airflow]

CDC_DAG, GOLD_DAG = "af_cdc_orders", "af_orders_gold"
BATCHES = [
    ["update orders set qty = qty + 10 where id = 1", "delete from orders where id = 2",
     "insert into orders values (11, 'item11', 1)"],
    ["update orders set item = 'renamed' where id = 11", "insert into orders values (12, 'item12', 2)",
     "delete from orders where id = 3"],
    ["delete from orders where id = 11", "update orders set qty = 0 where id = 12"],
]


def _unpause(env, dag_id: str) -> None:
    deadline = time.time() + 300
    out = airflow(env, "dags", "unpause", dag_id)
    while out.returncode != 0 and time.time() < deadline:  # not parsed yet
        time.sleep(5)
        out = airflow(env, "dags", "unpause", dag_id)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]


def _succeeded(env, dag_id: str) -> int:
    runs = _runs(env, dag_id)
    assert not [r for r in runs if r["state"] == "failed"], runs
    return sum(r["state"] == "success" for r in runs)


def test_cdc_to_delta_dags_under_the_scheduler(airflow_home, pg_cluster, tmp_path):  # noqa: F811
    from deltalake import DeltaTable

    db = pg_cluster.new_database()
    pg_cluster.execute(db, "create table orders (id int primary key, item text, qty int)",
                       "insert into orders select i, 'item' || i, i from generate_series(1, 10) i")
    base_env, _ = airflow_home
    with airflow_stack(base_env, tmp_path, AIRFLOW__CORE__PARALLELISM="2",
                       FLINKCHAIN_CDC_URL=pg_cluster.url(db)) as running:
        env = running["env"]
        _unpause(env, CDC_DAG)
        _unpause(env, GOLD_DAG)
        applied, gold_after_last, deadline = 0, None, time.time() + 1800
        try:
            while time.time() < deadline:
                cdc_done, gold_done = _succeeded(env, CDC_DAG), _succeeded(env, GOLD_DAG)
                if applied < len(BATCHES) and cdc_done > applied:  # a change batch between two runs
                    pg_cluster.execute(db, "begin", *BATCHES[applied], "commit")
                    applied += 1
                elif applied == len(BATCHES) and gold_after_last is None and cdc_done > applied + 1:
                    gold_after_last = gold_done + 2  # a CDC run began after the last batch; a gold run after its commit
                if gold_after_last is not None and gold_done >= gold_after_last:
                    break
                time.sleep(3)
            else:
                pytest.fail(f"not done in time: {_runs(env, CDC_DAG)} {_runs(env, GOLD_DAG)}")
        except AssertionError:
            running["log_file"].flush()
            raise AssertionError(Path(running["log"]).read_text()[-6000:])
        finally:
            airflow(env, "dags", "pause", CDC_DAG)
            airflow(env, "dags", "pause", GOLD_DAG)
    root = Path(env["AIRFLOW_HOME"]) / "flinkchain" / "af_cdc"
    silver = DeltaTable(str(root / "silver")).to_pyarrow_table().to_pylist()
    table = sorted(pg_cluster.execute(db, "select id, item, qty from orders"))
    assert sorted((r["id"], r["item"], r["qty"]) for r in silver if not r["deleted"]) == table
    assert {r["id"] for r in silver if r["deleted"]} == {2, 3, 11}
    changes = DeltaTable(str(root / "changes")).to_pyarrow_table().to_pylist()
    ops = Counter(r["op"] for r in changes)
    assert ops == Counter({"r": 10, "u": 4, "d": 4, "c": 2}), ops  # each change once
    assert len({(r["op"], r["id"], r["lsn"]) for r in changes}) == len(changes)
    gold = {r["op"]: r["changes"] for r in DeltaTable(str(root / "gold")).to_pyarrow_table().to_pylist()}
    assert gold == dict(ops)
