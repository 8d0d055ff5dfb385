"""The fixed cost of one stream run through Airflow (section `stream_run_fixed_cost` of `make bench`).

The stream-runs example (dags/flinkchain_stream_runs.py: 60 click records per run, 3 chains:
clicks -> page_views, sessions) run as `make demo DEMO_ARGS=stream` runs it: the runs' `dag.test()`
one after the other in one process, real spark-submit per chain. Run 1 begins the stream (and creates the
JVM class-data archive, docs/deployment.md#jvm-class-data-sharing); runs 2..N are the figures;
then a drained run. Each run's seconds are split into where they went, from the task instances'
start and end, and the marks each chain task returns in its XCom (`timings`,
airflow_flinkchain/runtime/core/timings.py): Airflow's task start, spark-submit and the JVM up to
the Python driver, the driver's imports, the plan, the SparkContext, the Spark job (Python worker
start, plan, the subtask: restore, records, snapshot, writes), the chain's commit, Spark's stop and
the JVM's exit, the store record; and the setup, commit and teardown tasks.

The anchor: a Spark Structured Streaming script (the same two aggregations: 1-minute event-time
windows per page and 2-minute session windows per user, JSON-lines in and out, a checkpoint)
started by spark-submit with `trigger(availableNow=True)` over the same slices, one spark-submit
per slice, timed the same way (spark-submit to the Python driver, imports, SparkSession, the
queries, stop and exit).

CPU seconds (user + system of the run's processes) are reported beside wall seconds: on a loaded
machine the wall clock shows the load, the CPU seconds the work.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time

from benchmarks.bench_common import REPO

DAG_ID = "flinkchain_stream_runs"
DAGS = os.path.join(REPO, "dags")

# One process runs every dag.test(), as make demo does (airflow_flinkchain/demo.py): Airflow's
# import and the in-process execution API are paid once. Per run it prints the task instances,
# the chain tasks' timings and its own and its children's CPU seconds.
_SERVE = """
import json, resource, runpy, sys, time
sys.path.insert(0, {dags!r})
t0 = time.time()
dag = runpy.run_path({path!r}, run_name="flinkchain_bench")["dag"]
parse = time.time() - t0
def cpu():
    return sum(getattr(resource.getrusage(w), f) for w in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)
               for f in ("ru_utime", "ru_stime"))
from airflow.models.xcom import XComModel
from airflow.utils.session import create_session
for line in sys.stdin:
    c0, t1 = cpu(), time.time()
    dr = dag.test(run_conf=json.loads(line))
    t2 = time.time()
    tasks = {{}}
    with create_session() as session:
        for ti in dr.get_task_instances(session=session):
            tasks[ti.task_id] = {{"state": str(getattr(ti.state, "value", ti.state)),
                                 "start": ti.start_date.timestamp() if ti.start_date else None,
                                 "end": ti.end_date.timestamp() if ti.end_date else None}}
        for x in session.scalars(XComModel.get_many(run_id=dr.run_id, dag_ids=dr.dag_id, key="return_value")):
            value = XComModel.deserialize_value(x)
            if isinstance(value, dict) and "timings" in value:
                tasks[x.task_id]["timings"] = value["timings"]
    print("FIXEDCOST " + json.dumps({{"run_id": dr.run_id, "state": str(getattr(dr.state, "value", dr.state)),
                                      "parse_seconds": parse, "dag_test_started": t1, "dag_test_ended": t2,
                                      "cpu_seconds": cpu() - c0, "tasks": tasks}}), flush=True)
    parse = 0.0
"""

#: (phase, from mark, to mark) of one chain task; "task" marks are the operator's, the others the driver's
CHAIN_PHASES = [
    ("airflow_task_start", "ti_start", "task_started"),
    ("operator_checks", "task_started", "submit_called"),
    ("spark_submit_and_jvm_start", "submit_called", "driver_started"),
    ("driver_python_imports", "driver_started", "imported"),
    ("plan_load", "imported", "plan_loaded"),
    ("spark_session_start", "plan_loaded", "session_ready"),
    ("stream_run_open_and_job_setup", "session_ready", "job_prepared"),
    ("spark_job_to_python_daemon", "job_prepared", "worker_daemon_started"),
    ("python_daemon_start_and_fork", "worker_daemon_started", "worker_started"),
    ("python_worker_imports", "worker_started", "partition_started"),
    ("worker_plan_load", "partition_started", "worker_plan_loaded"),
    ("subtask_restore_run_snapshot_write", "worker_plan_loaded", "subtask_done"),
    ("spark_job_end", "subtask_done", "job_done"),
    ("chain_commit", "job_done", "chain_committed"),
    ("spark_stop_and_jvm_exit", "chain_committed", "submit_returned"),
    ("store_record", "submit_returned", "recorded"),
    ("airflow_task_end", "recorded", "ti_end"),
]

_SPARK = """
import os, time
def started(pid):  # as airflow_flinkchain.runtime.core.timings.process_start_time, without its package's imports
    btime = next(float(l.split()[1]) for l in open("/proc/stat") if l.startswith("btime "))
    return btime + int(open(f"/proc/{{pid}}/stat").read().rsplit(")", 1)[1].split()[19]) / os.sysconf("SC_CLK_TCK")
marks = {{"driver_started": started(os.getpid())}}
from pyspark.sql import SparkSession, functions as F
marks["imported"] = time.time()
spark = SparkSession.builder.appName("available-now").config("spark.ui.enabled", "false").getOrCreate()
spark.sparkContext.setLogLevel("WARN")
marks["session_ready"] = time.time()
clicks = (spark.readStream.schema("id long, user string, page string, ts long").json({input!r})
          .withColumn("t", F.timestamp_millis("ts")).withWatermark("t", "10 seconds"))
views = clicks.groupBy("page", F.window("t", "1 minute")).count()
sessions = clicks.groupBy("user", F.session_window("t", "2 minutes")).count()
queries = [df.writeStream.format("json").outputMode("append").option("checkpointLocation", {ckpt!r} + "/" + name)
           .trigger(availableNow=True).start({out!r} + "/" + name) for name, df in (("page_views", views), ("sessions", sessions))]
for q in queries:
    q.awaitTermination()
marks["queries_done"] = time.time()
spark.stop()
marks["stopped"] = time.time()
import json
print("ANCHOR " + json.dumps(marks), flush=True)
"""

ANCHOR_PHASES = [
    ("spark_submit_and_jvm_start", "submit_called", "driver_started"),
    ("driver_python_imports", "driver_started", "imported"),
    ("spark_session_start", "imported", "session_ready"),
    ("queries_available_now", "session_ready", "queries_done"),
    ("spark_stop", "queries_done", "stopped"),
    ("jvm_exit", "stopped", "exited"),
]


def _cpu_children() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _durations(marks: dict, phases: list) -> dict:
    return {name: round(marks[b] - marks[a], 3) for name, a, b in phases if a in marks and b in marks}


def chain_breakdown(task: dict) -> dict:
    """{phase: seconds} of one chain task from its task instance and its timings marks."""
    t = task.get("timings") or {}
    subtasks = t.get("subtasks") or [{}]
    first = min(subtasks, key=lambda s: s.get("partition_started", float("inf")))
    last = max(subtasks, key=lambda s: s.get("subtask_done", 0))
    marks = {**t.get("driver", {}), **t.get("task", {}), "ti_start": task["start"], "ti_end": task["end"],
             "worker_daemon_started": first.get("worker_daemon_started"), "worker_started": first.get("worker_started"),
             "partition_started": first.get("partition_started"), "worker_plan_loaded": first.get("plan_loaded"),
             "subtask_done": last.get("subtask_done")}
    return _durations({k: v for k, v in marks.items() if v is not None}, CHAIN_PHASES)


def run_breakdown(result: dict, wall: float, cpu: float) -> dict:
    """One DAG run: wall and CPU seconds, per task seconds, per chain phase seconds."""
    tasks = result["tasks"]
    lifecycle = {tid.rsplit(".", 1)[-1]: round(t["end"] - t["start"], 3) for tid, t in tasks.items()
                 if "timings" not in t and t["start"] and t["end"]}
    chains = {tid.rsplit(".", 1)[-1]: chain_breakdown(t) for tid, t in tasks.items() if "timings" in t}
    busy = sum(t["end"] - t["start"] for t in tasks.values() if t["start"] and t["end"])
    starts = [t["start"] for t in tasks.values() if t["start"]]
    ends = [t["end"] for t in tasks.values() if t["end"]]
    span = max(ends) - min(starts) if starts and ends else None
    return {"state": result["state"], "wall_seconds": round(wall, 3), "cpu_seconds": round(cpu, 3),
            "dag_run_seconds": round(result["dag_test_ended"] - result["dag_test_started"], 3),
            "dag_file_parse_seconds": round(result["parse_seconds"], 3),
            "first_task_start_to_last_task_end": round(span, 3) if span else None,
            "sum_of_task_seconds": round(busy, 3),
            "between_tasks_seconds": round(span - busy, 3) if span else None,
            "lifecycle_tasks": lifecycle, "chains": chains}


def _median_phases(runs: list, getter) -> dict:
    keys: dict = {}
    for r in runs:
        for k, v in getter(r).items():
            keys.setdefault(k, []).append(v)
    return {k: round(statistics.median(v), 3) for k, v in keys.items()}


class DagRuns:
    """The child process that runs the DAG's dag.test() runs, one per `run(conf)`."""

    def __init__(self, env: dict, log_path: str):
        self.log = open(log_path, "a")
        code = _SERVE.format(dags=DAGS, path=os.path.join(DAGS, f"{DAG_ID}.py"))
        self.proc = subprocess.Popen([sys.executable, "-c", code], env=env, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=self.log, text=True)

    def run(self, conf: dict) -> tuple[dict, float]:
        t0 = time.time()
        self.proc.stdin.write(json.dumps(conf) + "\n")
        self.proc.stdin.flush()
        for line in self.proc.stdout:
            if line.startswith("FIXEDCOST "):
                return json.loads(line[len("FIXEDCOST "):]), time.time() - t0
            self.log.write(line)  # Airflow's log of the run
        raise RuntimeError(f"the DAG run did not finish; see {self.log.name}")

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait()
        self.log.close()


def run_anchor(env: dict, root: str, slices: list, log_path: str) -> list:
    """One spark-submit of the AvailableNow script per slice: [{wall, cpu, phases}]."""
    sys.path.insert(0, DAGS)
    import flinkchain_stream_runs as example

    base = os.path.join(root, "available_now")
    shutil.rmtree(base, ignore_errors=True)
    script = os.path.join(base, "available_now.py")
    os.makedirs(base)
    with open(script, "w") as fh:
        fh.write(_SPARK.format(input=os.path.join(base, "in"), ckpt=os.path.join(base, "ckpt"),
                               out=os.path.join(base, "out")))
    from airflow_flinkchain.airflow.paths import bundled_spark_home

    submit = os.path.join(os.environ.get("SPARK_HOME") or bundled_spark_home(), "bin", "spark-submit")
    runs = []
    for k, part in enumerate(slices):
        example.drop_slice(os.path.join(base, "in"), k, part)
        cpu0, t0 = _cpu_children(), time.time()
        with open(log_path, "a") as log:
            # one partition per shuffle and state store, as the chain tasks (parallelism 1) get
            proc = subprocess.run([submit, "--master", "local[1]", "--conf", "spark.sql.shuffle.partitions=1",
                                   script], env=env, stdout=subprocess.PIPE,
                                  stderr=log, text=True)
        exited, cpu = time.time(), _cpu_children() - cpu0
        lines = [line for line in proc.stdout.splitlines() if line.startswith("ANCHOR ")]
        if proc.returncode != 0 or not lines:
            raise RuntimeError(f"the AvailableNow spark-submit failed; see {log_path}")
        marks = {**json.loads(lines[-1][len("ANCHOR "):]), "submit_called": t0, "exited": exited}
        runs.append({"wall_seconds": round(exited - t0, 3), "cpu_seconds": round(cpu, 3),
                     "phases": _durations(marks, ANCHOR_PHASES)})
    return runs


def run_stream_fixed_cost(tmp: str, runs: int = 3) -> dict:
    """`runs` stream runs of the example (the first begins the stream), a drained run, and the
    AvailableNow anchor over the same slices."""
    from airflow_flinkchain.demo import demo_env, ensure_db

    sys.path.insert(0, DAGS)
    import flinkchain_stream_runs as example

    home = os.path.join(tmp, "fixedcost_home")
    env = demo_env()
    env.update({"AIRFLOW_HOME": home, "AIRFLOW__CORE__DAGS_FOLDER": DAGS, "FLINKCHAIN_EXAMPLES_ROOT":
                os.path.join(home, "flinkchain")})
    ensure_db(env)
    where = example.paths(env["FLINKCHAIN_EXAMPLES_ROOT"])
    for d in where.values():
        shutil.rmtree(d, ignore_errors=True)
    slices = example.click_slices(n_slices=runs)
    log_path = os.path.join(tmp, "fixedcost.log")
    measured = []
    dag_runs = DagRuns(env, log_path)
    try:
        for k, part in enumerate(slices + [None]):
            if part is not None:
                example.drop_slice(where["input_dir"], k, part)
            load = os.getloadavg()[0]
            result, wall = dag_runs.run({"drain": part is None})
            if result["state"] != "success":
                raise RuntimeError(f"stream run {k + 1} ended {result['state']}: {result['tasks']}; see {log_path}")
            measured.append({"run": k + 1, "drain": part is None, "load_average_1m_before": round(load, 2),
                             **run_breakdown(result, wall, result["cpu_seconds"])})
    finally:
        dag_runs.close()
    warm = [r for r in measured if r["run"] > 1 and not r["drain"]] or measured[:1]
    anchor = run_anchor(env, tmp, slices, log_path)
    anchor_warm = anchor[1:] or anchor
    report = {
        "pipeline": "dags/flinkchain_stream_runs.py: clicks -> timestamps -> page_views (1-minute windows), "
                    "sessions (KeyedProcessFunction); 3 chains; 60 records per run",
        "how": "dag.test() runs one after the other in one process (as make demo DEMO_ARGS=stream); run 1 "
               "begins the stream and pays Airflow's import and in-process API (dag_file_parse_seconds: the first "
               "run's process start)",
        "runs": measured,
        "stream_run_seconds": {"median": statistics.median(r["wall_seconds"] for r in warm),
                               "samples": [r["wall_seconds"] for r in warm]},
        "stream_run_cpu_seconds": statistics.median(r["cpu_seconds"] for r in warm),
        "median_chain_phases": {c: _median_phases(warm, lambda r, c=c: r["chains"].get(c, {}))
                                for c in warm[0]["chains"]},
        "median_lifecycle_tasks": _median_phases(warm, lambda r: r["lifecycle_tasks"]),
        "spark_available_now": {"runs": anchor,
                                "seconds_per_run": statistics.median(r["wall_seconds"] for r in anchor_warm),
                                "cpu_seconds_per_run": statistics.median(r["cpu_seconds"] for r in anchor_warm),
                                "median_phases": _median_phases(anchor_warm, lambda r: r["phases"])},
        "target_seconds": 25.0,
    }
    report["ratio_stream_run_over_available_now"] = round(
        report["stream_run_seconds"]["median"] / report["spark_available_now"]["seconds_per_run"], 2)
    report["meets_target"] = report["stream_run_seconds"]["median"] <= report["target_seconds"]
    return report


def summary_line(report: dict) -> str:
    chains = report["median_chain_phases"]
    per_chain = ", ".join(f"{c} {sum(p.values()):.1f}s" for c, p in chains.items())
    return (f"stream run fixed cost: {report['stream_run_seconds']['median']:.1f}s per run (target <= "
            f"{report['target_seconds']:.0f}s; chains: {per_chain}) | Spark AvailableNow by spark-submit "
            f"{report['spark_available_now']['seconds_per_run']:.1f}s per run | ratio "
            f"{report['ratio_stream_run_over_available_now']:.2f}")


if __name__ == "__main__":
    import tempfile

    out = tempfile.mkdtemp(prefix="flinkchain-fixedcost-")
    print(json.dumps(run_stream_fixed_cost(out, int(sys.argv[1]) if len(sys.argv) > 1 else 3), indent=1))
