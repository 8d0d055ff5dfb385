"""Real spark-submit against a real standalone master + worker on 127.0.0.1."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from airflow_flinkchain.localcluster.standalone import spark_home, spark_submit_command

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(300)]

TINY_APP = textwrap.dedent(
    """
    import json, os, sys
    import pyarrow as pa
    from pyspark.sql import SparkSession

    spark = SparkSession.builder.appName(sys.argv[2]).getOrCreate()
    df = spark.range(0, 40, numPartitions=4)

    def square(batches):
        import airflow_flinkchain.cluster as shipped  # from --py-files (first on the executor's sys.path)
        for b in batches:
            ids = b.column("id").to_pylist()
            yield pa.RecordBatch.from_pydict({"id": ids, "sq": [i * i for i in ids], "pid": [os.getpid()] * len(ids),
                                              "pkg": [shipped.__file__] * len(ids)})

    rows = df.mapInArrow(square, "id long, sq long, pid long, pkg string").collect()
    with open(sys.argv[1], "w") as f:
        json.dump({"master": spark.sparkContext.master, "driver_pid": os.getpid(),
                   "rows": sorted([r.id, r.sq] for r in rows), "pids": sorted({r.pid for r in rows}),
                   "pkgs": sorted({r.pkg for r in rows})}, f)
    spark.stop()
    """
)


def run(cmd, env, timeout=180):
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)


def test_cluster_is_up(standalone_cluster):
    state = standalone_cluster.state()
    assert state["status"] == "ALIVE"
    assert standalone_cluster.alive_workers(state) == 1
    assert state["cores"] == 1


def test_tiny_pyspark_app_in_client_mode(standalone_cluster, tmp_path):
    """mapInArrow over 4 partitions on the worker; the package comes from package_archive() via --py-files."""
    from airflow_flinkchain.cluster import package_archive

    archive = package_archive(cache_dir=tmp_path / "pkg")
    app = tmp_path / "tiny_app.py"
    app.write_text(TINY_APP)
    out = tmp_path / "out.json"
    cmd = spark_submit_command(standalone_cluster.master_url, str(app), str(out), "flinkchain-tiny-app",
                               name="flinkchain-tiny-app", py_files=archive)
    res = run(cmd, standalone_cluster.env)
    assert res.returncode == 0, res.stderr[-3000:]
    got = json.loads(out.read_text())
    assert got["master"] == standalone_cluster.master_url
    assert got["rows"] == [[i, i * i] for i in range(40)]
    assert got["driver_pid"] not in got["pids"]
    # Executors imported the shipped zip (fetched into their work dir), not the installed package.
    assert got["pkgs"] and all(p.endswith(".zip/airflow_flinkchain/cluster.py") for p in got["pkgs"]), got["pkgs"]
    # The application really ran on the standalone cluster (the master knows it).
    assert "flinkchain-tiny-app" in standalone_cluster.app_names()


def test_standalone_refuses_python_cluster_deploy_mode(standalone_cluster, tmp_path):
    """Spark itself: no cluster deploy mode for Python apps on standalone. Our rule says so up front."""
    from airflow_flinkchain.cluster import (
        STANDALONE_PYTHON_CLUSTER_MODE_ERROR, DeployModeNotSupported, check_deploy_mode)

    app = tmp_path / "app.py"
    app.write_text("print('never runs')\n")
    res = run(spark_submit_command(standalone_cluster.master_url, str(app), deploy_mode="cluster"), standalone_cluster.env)
    assert res.returncode != 0
    assert STANDALONE_PYTHON_CLUSTER_MODE_ERROR in res.stderr + res.stdout
    with pytest.raises(DeployModeNotSupported, match="deploy_mode='client'") as err:
        check_deploy_mode(standalone_cluster.master_url, "cluster")
    assert STANDALONE_PYTHON_CLUSTER_MODE_ERROR in str(err.value)
