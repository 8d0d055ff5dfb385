"""`python -m airflow_flinkchain.demo cluster` (make demo DEMO_ARGS=cluster): the stream-runs
example on a Spark standalone cluster with every location on an S3 server.

Starts an S3 server (moto, in memory) and a Spark standalone master and worker on 127.0.0.1,
points the Airflow side at them the way a deployment would (the standard AWS variables,
`[flinkchain] exchange_root` on S3, the Spark connection at the master in client mode, the
examples' root on S3), runs the stream-runs demo (three slices of click files and a drained
run, demo_stream.py), prints where everything is, and stops what it started.
"""

from __future__ import annotations

import json
import os
import sys
import time

BUCKET = "flinkchain-demo"


def cluster_demo(env: dict, run_dag_test) -> int:
    from airflow_flinkchain.demo_stream import DAG_FILE, log_path
    from airflow_flinkchain.localcluster.s3_server import S3Server
    from airflow_flinkchain.localcluster.standalone import StandaloneCluster

    workdir = os.path.join(env["AIRFLOW_HOME"], "demo-cluster")
    started = time.time()
    print("Starting an S3 server (moto) and a Spark standalone master and worker on 127.0.0.1 ...", flush=True)
    os.makedirs(workdir, exist_ok=True)
    s3, cluster = S3Server(), StandaloneCluster(workdir, workers=1, cores=2, memory="2g")
    root = f"s3://{BUCKET}"
    settings = {  # the ports are chosen already: the Airflow side can start with the servers
        **s3.env,
        "AIRFLOW__FLINKCHAIN__EXCHANGE_ROOT": f"{root}/exchange",
        "FLINKCHAIN_EXAMPLES_ROOT": f"{root}/flinkchain",
        "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps({"conn_type": "spark", "host": "spark://127.0.0.1",
                                                  "port": cluster.port, "extra": {"deploy-mode": "client"}}),
    }
    env = {**env, **settings}
    if hasattr(run_dag_test, "start"):  # Airflow's import and the DAG's parse while the servers start
        run_dag_test.start(env, DAG_FILE, log_path(env))
    s3.start(os.path.join(workdir, "moto.log"))
    try:
        with cluster:
            code = _run_on(cluster, s3, env, settings, run_dag_test, started)
    finally:
        s3.stop()
    return code


def _run_on(cluster, s3, env: dict, settings: dict, run_dag_test, started: float) -> int:
    from airflow_flinkchain.demo_stream import stream_demo

    s3.client().create_bucket(Bucket=BUCKET)
    root = f"s3://{BUCKET}"
    os.environ.update(settings)  # this process drops the slices and reads the outputs on S3 too
    print(f"  S3 server      {s3.endpoint}  bucket {BUCKET} (AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID, ... set)")
    print(f"  Spark master   {cluster.master_url}  web UI {cluster.webui_url}")
    print(f"  Spark worker   1 (work dir {cluster.work_dir(0)}, logs {cluster.workdir})")
    print(f"  exchange root  {settings['AIRFLOW__FLINKCHAIN__EXCHANGE_ROOT']}")
    print(f"  ready in {time.time() - started:.0f} s\n", flush=True)
    code = stream_demo(env, run_dag_test)
    print(f"\nS3 objects under {root}/ (moto keeps them in memory; they go when it stops):")
    for prefix in ("flinkchain/incoming", "flinkchain/checkpoints", "flinkchain/output", "exchange"):
        keys = s3.keys(BUCKET, prefix + "/")
        print(f"  {root}/{prefix}/  {len(keys)} objects")
    print(f"\nStopping the worker, the master and the S3 server ({time.time() - started:.0f} s in all).")
    return code


if __name__ == "__main__":
    from airflow_flinkchain.demo import main

    sys.exit(main(["cluster", *sys.argv[1:]]))
