"""`make demo`: run the clickstream example end to end through Airflow + spark-submit.

Sets up an AIRFLOW_HOME with embedded defaults (SQLite metadata DB, local Spark
connection, the repo's dags/ folder), runs the example DAG with `dag.test()`
(a real DAG run: setup task, one spark-submit per chain, teardown), then prints
the chains, the task states and where the outputs are. The Airflow log of the
run goes to $AIRFLOW_HOME/demo-<dag>.log.

    python -m airflow_flinkchain.demo [--dag flinkchain_clickstream|flinkchain_orders]
    python -m airflow_flinkchain.demo stream     (make demo DEMO_ARGS=stream)
    python -m airflow_flinkchain.demo cluster    (make demo DEMO_ARGS=cluster)

`stream` runs dags/flinkchain_stream_runs.py as stream runs: it drops a slice of click
files into the monitored directory, runs the DAG, three times, then runs it drained
(`{"drain": true}`) and prints what each run published and the outputs, checked against
one STREAMING run over all the files (docs/stream-runs.md). It starts the stream afresh.

`cluster` (make demo DEMO_ARGS=cluster) does the same on a Spark standalone master and
worker with the exchange root, checkpoints, input and outputs on an S3 server, all started
here and stopped at the end (demo_cluster.py, docs/deployment.md).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DAGS = os.path.join(REPO, "dags")
DAG_FILES = {"flinkchain_clickstream": "flinkchain_clickstream.py", "flinkchain_orders": "flinkchain_orders.py"}

# One process runs every dag.test() of a demo: Airflow's import, the DAG folder's parse and
# the in-process execution API (cached per process) are paid once, not once per run.
_SERVE = """
import json, runpy, sys
sys.path.insert(0, {dags!r})
dag = runpy.run_path({path!r}, run_name="flinkchain_demo")["dag"]
for line in sys.stdin:
    dr = dag.test(run_conf=json.loads(line))
    print("FLINKCHAIN_RESULT " + json.dumps({{"run_id": dr.run_id, "state": str(getattr(dr.state, "value", dr.state)),
        "tasks": {{ti.task_id: str(getattr(ti.state, "value", ti.state)) for ti in dr.get_task_instances()}}}}),
        flush=True)
"""


def demo_env() -> dict:
    """Embedded defaults; anything already set in the environment wins."""
    env = dict(os.environ)
    env.setdefault("AIRFLOW_HOME", os.path.join(REPO, "build", "airflow_home"))
    env.setdefault("AIRFLOW__CORE__LOAD_EXAMPLES", "False")
    env.setdefault("AIRFLOW__CORE__DAGS_FOLDER", DAGS)
    env.setdefault("AIRFLOW_CONN_SPARK_DEFAULT", json.dumps({"conn_type": "spark", "host": "local[2]"}))
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (REPO, DAGS, env.get("PYTHONPATH")) if p)
    return env


def ensure_db(env: dict) -> None:
    home = env["AIRFLOW_HOME"]
    os.makedirs(home, exist_ok=True)
    if os.path.exists(os.path.join(home, "airflow.db")):
        return
    print(f"airflow db migrate (first run, into {home}) ...", flush=True)
    out = subprocess.run([os.path.join(os.path.dirname(sys.executable), "airflow"), "db", "migrate"],
                         env=env, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit("airflow db migrate failed:\n" + out.stdout[-3000:] + out.stderr[-3000:])


def print_chains(dag_id: str) -> None:
    sys.path.insert(0, DAGS)
    import importlib

    module = importlib.import_module(DAG_FILES[dag_id][:-3])
    import sample_data

    build = getattr(module, "clickstream_pipeline", None) or getattr(module, "orders_pipeline")
    pipeline = build(sample_data.sample_dir(), sample_data.output_dir(), sample_data.sqlite_url())
    job = pipeline.plan()
    ops = sum(len(c.node_ids) for c in job.chains)
    print(f"\nPipeline {job.pipeline!r}: {ops} operators in {len(job.chains)} chains (= Airflow tasks)")
    for c in job.chains:
        print(f"  task {c.id:<22} p={c.parallelism}  {c.name}")
    for e in job.edges:
        extra = f" tag={e.output_tag}" if e.output_tag else ""
        extra += f" select={','.join(e.selected_names)}" if e.selected_names else ""
        print(f"  edge {e.source} -> {e.target}  [{e.partitioner.value}{extra}]")


def print_outputs(env: dict, dag_id: str, run_id: str) -> None:
    from airflow_flinkchain.airflow.paths import run_key

    home = env["AIRFLOW_HOME"]
    out = os.path.join(home, "flinkchain", "output", dag_id.replace("flinkchain_", ""), run_key(run_id))
    print(f"\nOutputs of run {run_id}:")
    if os.path.isdir(out):
        import pyarrow.parquet as pq

        for name in sorted(os.listdir(out)):
            path = os.path.join(out, name)
            files = [f for f in os.listdir(path) if not f.startswith((".", "_"))]
            if any(f.endswith(".parquet") for f in files):
                n = pq.read_table(path).num_rows
            else:
                n = sum(sum(1 for _ in open(os.path.join(path, f))) for f in files)
            print(f"  {path}  ({n} records)")
    db = os.path.join(home, "flinkchain", "examples.db")
    if os.path.exists(db):
        import sqlite3

        con = sqlite3.connect(db)
        for (table,) in con.execute("select name from sqlite_master where type='table'"):
            n = con.execute(f"select count(*) from {table} where _run_id = ?", (run_key(run_id),)).fetchone()[0]
            print(f"  sqlite {db} table {table}  ({n} rows of this run)")
        con.close()
    print(f"  run store: {os.path.join(home, 'flinkchain_store.db')} (Airflow UI: the DAG's 'Chains' tab)")


class DagTests:
    """dag.test() runs of a DAG file, one after the other in one child process:
    `runs(env, dag_file, log_path, conf=..., mode=...)` is {run_id, state, tasks}, or None
    when the run did not finish. `close()` ends the process."""

    def __init__(self):
        self.proc = self.key = self.stderr = None

    def start(self, env: dict, dag_file: str, log_path: str) -> None:
        """Start the process (Airflow's import, the DAG file's parse) ahead of the first run."""
        if self.key != (dag_file, log_path):
            self.close()
            code = _SERVE.format(dags=DAGS, path=os.path.join(DAGS, dag_file))
            self.stderr = open(log_path, "a")
            self.proc = subprocess.Popen([sys.executable, "-c", code], env=env, stdin=subprocess.PIPE,
                                         stdout=subprocess.PIPE, stderr=self.stderr, text=True)
            self.key = (dag_file, log_path)

    def __call__(self, env: dict, dag_file: str, log_path: str, conf: dict = None, mode: str = "w"):
        if mode == "w":
            open(log_path, "w").close()
        with open(log_path, "a") as log:  # the process's stderr appends to it too
            self.start(env, dag_file, log_path)
            self.proc.stdin.write(json.dumps(conf or {}) + "\n")
            self.proc.stdin.flush()
            for line in self.proc.stdout:
                if line.startswith("FLINKCHAIN_RESULT "):
                    return json.loads(line[len("FLINKCHAIN_RESULT "):])
                log.write(line)
        self.close()
        print(f"the DAG run did not finish; see {log_path}")
        return None

    def close(self) -> None:
        if self.proc is not None:
            self.proc.stdin.close()
            self.proc.wait()
            self.stderr.close()
            self.proc = self.key = self.stderr = None


def run_dag_test(env: dict, dag_file: str, log_path: str, conf: dict = None, mode: str = "w"):
    """One dag.test() run of the DAG file's `dag` in a fresh process: {run_id, state, tasks}, or None."""
    runs = DagTests()
    try:
        return runs(env, dag_file, log_path, conf, mode)
    finally:
        runs.close()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", nargs="?", default="dag", choices=("dag", "stream", "cluster"),
                        help="dag: one run of --dag; stream: the stream-runs example, three slices and a drain; "
                             "cluster: the same on a Spark standalone cluster with every location on S3")
    parser.add_argument("--dag", default="flinkchain_clickstream", choices=sorted(DAG_FILES))
    args = parser.parse_args(argv)
    env = demo_env()
    os.environ.update({k: env[k] for k in ("AIRFLOW_HOME", "AIRFLOW__CORE__DAGS_FOLDER")})
    ensure_db(env)
    if args.what in ("stream", "cluster"):
        from airflow_flinkchain.demo_cluster import cluster_demo
        from airflow_flinkchain.demo_stream import stream_demo

        runs = DagTests()
        try:
            return (stream_demo if args.what == "stream" else cluster_demo)(env, runs)
        finally:
            runs.close()
    print_chains(args.dag)
    log_path = os.path.join(env["AIRFLOW_HOME"], f"demo-{args.dag}.log")
    print(f"\nRunning DAG {args.dag} with dag.test() (real spark-submit per chain); log: {log_path}", flush=True)
    started = time.time()
    result = run_dag_test(env, DAG_FILES[args.dag], log_path)
    if result is None:
        return 1
    print(f"\nDAG run {result['run_id']}: {result['state'].upper()} in {time.time() - started:.0f} s")
    for task, state in sorted(result["tasks"].items()):
        print(f"  {task:<40} {state}")
    print_outputs(env, args.dag, result["run_id"])
    return 0 if result["state"] == "success" else 1


if __name__ == "__main__":
    sys.exit(main())
