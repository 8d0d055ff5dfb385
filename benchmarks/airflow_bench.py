"""Benchmark (not a test): the same 8-operator pipeline through Airflow, chained vs unchained.

    source -> parse -> valid -> enrich -> key_by -> total -> format -> nonzero -> sink

With Flink's chaining the key_by is the only boundary: 2 chains = 2 spark-submits.
With chaining disabled every operator is its own task: 8 spark-submits, and 7
exchange datasets written and read. Both DAGs run with dag.test() (a real
Airflow DAG run, real spark-submit in local mode); the report is wall-clock
per DAG run and the ratio (target: chained >= 3x faster).

    python -m benchmarks.airflow_bench [--records 20000]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

DAG_FILE = '''
import pendulum
from airflow.sdk import DAG
from airflow_flinkchain import StreamPipeline

N = {records}


def pipeline():
    p = StreamPipeline("bench", parallelism=1, runtime_mode="batch")
    s = p.from_collection(range(N)).name("source")
    s = s.map(lambda i: {{"user": f"u{{i % 97}}", "value": i % 13}}).name("parse")
    s = s.filter(lambda r: r["value"] != 5).name("valid")
    s = s.map(lambda r: {{**r, "double": r["value"] * 2}}).name("enrich")
    s = s.key_by(lambda r: r["user"]).reduce(
        lambda a, b: {{"user": a["user"], "value": a["value"] + b["value"], "double": a["double"] + b["double"]}}
    ).name("total")
    s = s.map(lambda r: f"{{r['user']}},{{r['value']}},{{r['double']}}").name("format")
    s = s.filter(lambda line: not line.endswith(",0,0")).name("nonzero")
    s.collect("result")
    return p


START = pendulum.datetime(2026, 1, 1, tz="UTC")
with DAG("bench_chained", schedule=None, start_date=START, catchup=False) as chained:
    pipeline().to_airflow()
with DAG("bench_unchained", schedule=None, start_date=START, catchup=False) as unchained:
    pipeline().to_airflow(strategy="none")
'''

RUN = '''
import json, runpy, sys, time
ns = runpy.run_path({path!r}, run_name="bench_dags")
dag = ns[{var!r}]
t = time.time()
dr = dag.test()
print("BENCH " + json.dumps({{"seconds": time.time() - t, "state": str(getattr(dr.state, "value", dr.state)),
                             "tasks": len(dr.get_task_instances())}}))
'''


def run(env: dict, path: str, var: str) -> dict:
    out = subprocess.run([sys.executable, "-c", RUN.format(path=path, var=var)], env=env,
                         capture_output=True, text=True)
    lines = [l for l in out.stdout.splitlines() if l.startswith("BENCH ")]
    if not lines:
        raise SystemExit(f"{var} did not finish:\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}")
    return json.loads(lines[-1][6:])


def prepare(home: str, dags: str, records: int) -> tuple[dict, str]:
    """Write the benchmark DAG file into `dags`, migrate a metadata DB in `home`, and
    return (the environment the DAG runs get, the DAG file's path)."""
    os.makedirs(home, exist_ok=True)
    os.makedirs(dags, exist_ok=True)
    path = os.path.join(dags, "bench_dags.py")
    with open(path, "w") as fh:
        fh.write(DAG_FILE.format(records=records))
    env = {**os.environ, "AIRFLOW_HOME": home, "AIRFLOW__CORE__DAGS_FOLDER": dags,
           "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
           "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps({"conn_type": "spark", "host": "local[2]"}),
           "PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")}
    subprocess.run([os.path.join(os.path.dirname(sys.executable), "airflow"), "db", "migrate"],
                   env=env, capture_output=True, check=True)
    return env, path


def main(argv=None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=20000)
    args = parser.parse_args(argv)
    root = tempfile.mkdtemp(prefix="flinkchain-bench-")
    try:
        env, path = prepare(os.path.join(root, "home"), os.path.join(root, "dags"), args.records)
        chained = run(env, path, "chained")
        unchained = run(env, path, "unchained")
    finally:
        shutil.rmtree(root, ignore_errors=True)
    for name, r in (("chained (Flink chaining)", chained), ("unchained (one task per operator)", unchained)):
        print(f"{name:<36} {r['tasks']:>2} tasks  {r['seconds']:7.1f} s  {r['state']}")
    ratio = unchained["seconds"] / chained["seconds"]
    print(f"ratio unchained/chained: {ratio:.2f}x (target >= 3x)")
    return 0 if chained["state"] == unchained["state"] == "success" else 1


if __name__ == "__main__":
    sys.exit(main())
