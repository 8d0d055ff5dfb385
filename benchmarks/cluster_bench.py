"""Benchmark (not a test): one pipeline, every chain through real spark-submit, on

  1. local mode      (--master local[2], the driver's own executor threads)
  2. a standalone cluster with 1 worker   (1 core, 1g)
  3. a standalone cluster with 2 workers  (1 core, 1g each)

all on this machine (127.0.0.1), and prints wall-clock seconds per chain and per run.
The clusters are the same ones the cluster tests start (airflow_flinkchain/localcluster/standalone.py),
stopped by process group at the end.

    .venv/bin/python -m benchmarks.cluster_bench [--records 20000] [--repeat 1]

On one small machine the cluster numbers mostly measure the extra JVMs (an executor
per application on each worker) rather than a speed-up: the point of a cluster is
capacity beyond one machine, and the overhead per chain is what this shows.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "cluster"))

from chains import submit_pipeline  # noqa: E402
from pipelines import expected_word_counts, word_counts  # noqa: E402
from airflow_flinkchain.localcluster.standalone import StandaloneCluster, spark_env  # noqa: E402


def one_run(label: str, master: str, env: dict, records: int, workdir: str, run_no: int, conf: dict) -> dict:
    root = os.path.join(workdir, f"exchange-{label.replace(' ', '_')}-{run_no}")
    pipeline = word_counts(name="bench_words", n=records, parallelism=2)
    started = time.monotonic()
    run = submit_pipeline(pipeline, master, root, f"bench_{run_no}", env, shared=True, conf=conf)
    wall = time.monotonic() - started
    failed = {c: r.stderr.strip().splitlines()[-1:] for c, r in run.results.items() if r.returncode != 0}
    if failed:
        raise SystemExit(f"{label}: chains failed: {failed}")
    chains = {c: _chain_seconds(run.metrics(c)) for c in run.results}
    ok = sorted(map(tuple, run.output("totals"))) == expected_word_counts(records)["totals"]
    shutil.rmtree(root, ignore_errors=True)
    return {"label": label, "wall": wall, "chains": chains, "correct": ok}


def _chain_seconds(doc: dict) -> float:
    from datetime import datetime

    fmt = "%Y-%m-%dT%H:%M:%SZ"
    return (datetime.strptime(doc["ended_at"], fmt) - datetime.strptime(doc["started_at"], fmt)).total_seconds()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=20000, help="input lines (default 20000)")
    ap.add_argument("--repeat", type=int, default=1, help="runs per configuration (default 1)")
    args = ap.parse_args(argv)
    conf = {"spark.executor.memory": "512m", "spark.driver.memory": "512m"}
    workdir = tempfile.mkdtemp(prefix="flinkchain-cluster-bench-")
    results = []
    try:
        local_env = spark_env(os.path.join(workdir, "local-logs"))
        for i in range(args.repeat):
            results.append(one_run("local[2]", "local[2]", local_env, args.records, workdir, i, conf))
        for workers in (1, 2):
            with StandaloneCluster(os.path.join(workdir, f"cluster{workers}"), workers=workers, cores=1, memory="1g") as c:
                for i in range(args.repeat):
                    results.append(one_run(f"standalone {workers} worker(s)", c.master_url, c.env, args.records,
                                           workdir, i, conf))
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    print(f"\npipeline word_counts, {args.records} lines, 2 chains, each chain = one spark-submit (client mode)")
    print(f"{'configuration':<26} {'run wall s':>10}  per chain (driver start -> end, s)          correct")
    for r in results:
        chains = ", ".join(f"{c}={s:.0f}" for c, s in r["chains"].items())
        print(f"{r['label']:<26} {r['wall']:>10.1f}  {chains:<44} {r['correct']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
