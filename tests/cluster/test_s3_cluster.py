"""The example DAGs under Airflow on a Spark cluster that shares nothing but an S3 server
(shared_nothing.py: two workers and the driver side each in a private mount namespace).

- the clickstream example: outputs on S3 (and its SQL table on the driver side) equal a
  local run, although a worker's executor was SIGKILLed while a subtask of the first chain
  was running: Spark ran the task again, and the output holds every record exactly once;
- the stream-runs example: three slices and a drain, the driver of the second run's first
  chain SIGKILLed while its subtask ran and the chain task retried by Airflow; the published
  outputs equal one STREAMING run over all the clicks, without duplicates.
"""

from __future__ import annotations

import json
import os
import sqlite3
import sys
from collections import Counter
from pathlib import Path

import pyarrow.dataset as ds
import pyarrow.fs as pafs
import pytest

from airflow_flinkchain.localcluster.standalone import kill_tree
from shared_nothing import REPO, SharedNothingCluster, wait_for

pytestmark = [pytest.mark.cluster, pytest.mark.airflow, pytest.mark.shared_nothing]
DAG_FILE = "s3_cluster_dags.py"
sys.path.insert(0, str(REPO / "dags"))


@pytest.fixture(scope="module")
def cluster(s3_server, tmp_path_factory):
    """On the session's S3 server (tests/conftest.py), whose AWS_* settings this process has:
    it reads S3 as the driver side does, and so does the session SparkSession's reference run."""
    c = SharedNothingCluster(tmp_path_factory.mktemp("shared-nothing"), s3=s3_server,
                             dag_files=[Path(__file__).resolve().parent / DAG_FILE]).start()
    try:
        yield c
    finally:
        c.stop()


def _fs(location: str):
    return pafs.FileSystem.from_uri(location if "://" in location else os.path.abspath(location))


def visible_files(location: str) -> list[tuple[pafs.FileSystem, str]]:
    """The files readers see under `location` (names starting with '_' or '.' are not data)."""
    fs, path = _fs(location)
    infos = fs.get_file_info(pafs.FileSelector(path, recursive=True, allow_not_found=True))
    return [(fs, i.path) for i in infos if i.type == pafs.FileType.File
            and not any(p.startswith(("_", ".")) for p in i.path[len(path):].split("/") if p)]


def json_rows(location: str) -> Counter:
    rows: Counter = Counter()
    for fs, path in visible_files(location):
        with fs.open_input_stream(path) as f:
            rows.update(json.dumps(json.loads(l), sort_keys=True) for l in f.read().decode().splitlines() if l)
    return rows


def parquet_rows(location: str) -> Counter:
    fs, path = _fs(location)
    table = ds.dataset(path, filesystem=fs, format="parquet").to_table()
    return Counter(json.dumps(r, sort_keys=True) for r in table.to_pylist())


def sql_rows(db: Path, table: str) -> Counter:
    con = sqlite3.connect(str(db))
    try:
        cur = con.execute(f"select * from {table}")
        names = [d[0] for d in cur.description]
        return Counter(json.dumps({k: v for k, v in zip(names, r) if not k.startswith("_")}, sort_keys=True)
                       for r in cur.fetchall())
    finally:
        con.close()


def arm(location: str) -> None:
    import sample_data

    sample_data.write_text(location, "")


def kill_paused_executor(cluster, run, name: str) -> int:
    """Wait for the subtask paused in `name`'s PauseOnce, SIGKILL its executor JVM with its
    Python processes; the worker it ran on."""
    marker = cluster.uri("flinkchain", "faults", name, "paused.json")  # s3_cluster_dags.pause_marker
    doc = wait_for(f"a subtask paused in {name}", lambda: _read_json(marker), 600, while_=run.running)
    worker, killed = cluster.kill_executor_of(doc["pid"])
    assert doc["pid"] in killed
    return worker


def _read_json(location: str):
    fs, path = _fs(location)
    try:
        with fs.open_input_stream(path) as f:
            return json.loads(f.read())
    except (FileNotFoundError, OSError):
        return None


@pytest.mark.timeout(2700)  # 14 spark-submits: ~8 min alone on 2 cores, 35 min beside 7 other test runs
def test_stream_runs_example_with_a_killed_run_equals_one_streaming_run(cluster, tmp_path, monkeypatch):
    import flinkchain_stream_runs as example

    root = cluster.uri("flinkchain")
    monkeypatch.setenv("FLINKCHAIN_EXAMPLES_ROOT", root)
    where = example.paths(root)
    slices = example.click_slices(n_slices=3)
    published: list = []
    for k, part in enumerate(slices + [None]):
        if part is not None:
            example.drop_slice(where["input_dir"], k, part)
        before = json_rows(where["output_dir"])
        if k == 1:  # the second run: its first chain's driver is killed while its subtask runs
            arm(cluster.uri("flinkchain", "faults", "stream_runs", "armed"))
            run = cluster.start_dag(DAG_FILE, "cluster_stream_runs", conf={"drain": False}, log_name=f"stream-{k}")
            chain_id = next(c.id for c in example.stream_runs_pipeline(**where).plan().chains if "clicks" in c.name)
            wait_for("the paused subtask", lambda: _read_json(
                cluster.uri("flinkchain", "faults", "stream_runs", "paused.json")), 600, while_=run.running)
            drivers = cluster.spark_submits(chain_id)
            assert drivers, f"no spark-submit of chain {chain_id} on the driver side"
            for pid in drivers:
                kill_tree(pid)
            result = run.result()
            (task,) = [t for t in result["tasks"] if t.endswith(f".{chain_id}")]
            assert result["tasks"][task] == ["success", 2], result["tasks"]  # killed, then retried
        else:
            result = cluster.run_dag(DAG_FILE, "cluster_stream_runs", conf={"drain": part is None},
                                     log_name=f"stream-{k}")
        assert result["state"] == "success", (k, result["tasks"], result["log"][-8000:])
        published.append(json_rows(where["output_dir"]) - before)
    got = json_rows(where["output_dir"])
    ref_in, ref_out = str(tmp_path / "in"), str(tmp_path / "out")
    for k, part in enumerate(slices):
        example.drop_slice(ref_in, k, part)
    example.stream_runs_pipeline(ref_in, ref_out, None).execute_local(run_id="reference")
    want = json_rows(ref_out)
    assert got == want and max(got.values()) == 1
    assert all(published[:3]) and sum(published, Counter()) == got  # every run published, nothing twice


@pytest.mark.timeout(1800)
def test_clickstream_example_with_a_worker_killed_equals_a_local_run(cluster, spark, tmp_path, monkeypatch):
    import flinkchain_clickstream as example
    import sample_data

    monkeypatch.setenv("FLINKCHAIN_EXAMPLES_ROOT", cluster.uri("flinkchain"))
    arm(cluster.uri("flinkchain", "faults", "clickstream", "armed"))
    run = cluster.start_dag(DAG_FILE, "cluster_clickstream")
    worker = kill_paused_executor(cluster, run, "clickstream")
    result = run.result()
    assert result["state"] == "success", (result["tasks"], result["log"][-8000:])
    assert all(state == "success" for state, _ in result["tasks"].values()), result["tasks"]
    # Spark, not Airflow, recovered: every chain task ran once; the lost task ran again.
    assert all(tries == 1 for _, tries in result["tasks"].values()), result["tasks"]
    assert "ExecutorLostFailure" in result["log"] or "Lost executor" in result["log"], result["log"][-8000:]
    assert cluster.cluster.alive_workers(cluster.cluster.state()) == 2  # the worker launched a new executor

    from airflow_flinkchain.airflow.paths import run_key

    key = run_key(result["run_id"])
    out = f"{cluster.uri('flinkchain', 'output', 'clickstream', key)}"
    local_sample, local_out = str(tmp_path / "sample"), str(tmp_path / "out")
    sample_data.write_clickstream(local_sample)
    db = tmp_path / "local.db"
    example.clickstream_pipeline(local_sample, local_out, f"sqlite:///{db}").execute(
        spark=spark, run_id="local", context={"run_key": "local"}, exchange_root=str(tmp_path / "exchange"))
    ref = f"{local_out}/clickstream/local"
    for name in ("engagement_per_user", "revenue_per_user"):
        got, want = parquet_rows(f"{out}/{name}"), parquet_rows(f"{ref}/{name}")
        assert got == want and max(got.values()) == 1, name
    assert json_rows(f"{out}/malformed") == json_rows(f"{ref}/malformed")
    driver_db = cluster.copy_from_driver("/tmp/home/airflow/flinkchain/examples.db", tmp_path / "driver.db")
    assert sql_rows(driver_db, "revenue_per_user") == sql_rows(db, "revenue_per_user")
    # The workers kept nothing of the run but Spark's own application folders.
    for i in cluster.cluster.mounts:
        assert all(p.name.startswith("app-") for p in cluster.cluster.work_dir(i).iterdir())
