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
    """Unpause once the DAG is serialized (an unpause racing its first parse is undone by
    DAGS_ARE_PAUSED_AT_CREATION): again until a run of it exists."""
    deadline = time.time() + 600
    while not _runs(env, dag_id):
        assert time.time() < deadline, f"{dag_id} never ran"
        airflow(env, "dags", "unpause", dag_id)
        time.sleep(20)


def _succeeded(env, dag_id: str) -> int:
    runs = _runs(env, dag_id)
    assert not [r for r in runs if r["state"] == "failed"], runs
    return sum(r["state"] == "success" for r in runs)


def _state(root: Path) -> tuple:
    """(rows of the merged table, Counter of the changelog's ops, the gold counts) as they are now."""
    from deltalake import DeltaTable

    from airflow_flinkchain.runtime.connectors.delta import pyarrow_dataset

    def rows(name):
        path = str(root / name)
        return pyarrow_dataset(DeltaTable(path), path).to_table().to_pylist() if DeltaTable.is_deltatable(path) else []

    return rows("silver"), rows("changes"), {r["op"]: r["changes"] for r in rows("gold")}


def test_cdc_to_delta_dags_under_the_scheduler(airflow_home, pg_cluster, tmp_path):  # noqa: F811
    db = pg_cluster.new_database()
    pg_cluster.execute(db, "create table orders (id int primary key, item text, qty int)",
                       "insert into orders select i, 'item' || i, i from generate_series(1, 10) i")
    base_env, _ = airflow_home
    root = Path(base_env["AIRFLOW_HOME"]) / "flinkchain" / "af_cdc"
    want_ops = Counter({"r": 10}) + Counter({"insert": "c", "update": "u", "delete": "d"}[sql.split()[0]]
                                            for batch in BATCHES for sql in batch)  # one row per statement
    with airflow_stack(base_env, tmp_path, AIRFLOW__CORE__PARALLELISM="2",
                       FLINKCHAIN_CDC_URL=pg_cluster.url(db)) as running:
        env = running["env"]
        try:
            _unpause(env, CDC_DAG)
            _unpause(env, GOLD_DAG)  # runs on the changelog's asset events: after each CDC commit
            applied, deadline = 0, time.time() + 1800
            while time.time() < deadline:
                cdc_done = _succeeded(env, CDC_DAG)
                _succeeded(env, GOLD_DAG)
                if applied < len(BATCHES) and cdc_done > applied:  # a change batch between two runs
                    pg_cluster.execute(db, "begin", *BATCHES[applied], "commit")
                    applied += 1
                if applied == len(BATCHES) and cdc_done > applied + 1:  # a run began after the last batch
                    airflow(env, "dags", "pause", CDC_DAG)
                    silver, changes, gold = _state(root)
                    if Counter(r["op"] for r in changes) == want_ops and gold == dict(want_ops):
                        break
                time.sleep(5)
            else:
                pytest.fail(f"not done in time: {_runs(env, CDC_DAG)} {_runs(env, GOLD_DAG)} {_state(root)}")
        except AssertionError as exc:
            running["log_file"].flush()
            raise AssertionError(f"{exc}\n{Path(running['log']).read_text()[-6000:]}") from None
        finally:
            airflow(env, "dags", "pause", CDC_DAG)
            airflow(env, "dags", "pause", GOLD_DAG)
    silver, changes, gold = _state(root)
    table = sorted(pg_cluster.execute(db, "select id, item, qty from orders"))
    assert sorted((r["id"], r["item"], r["qty"]) for r in silver if not r["deleted"]) == table
    assert {r["id"] for r in silver if r["deleted"]} == {2, 3, 11}
    assert len({(r["op"], r["id"], r["lsn"]) for r in changes}) == len(changes)  # each change once
