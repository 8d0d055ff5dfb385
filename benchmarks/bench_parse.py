"""Parse cost (section 3 of `make bench`): what a 200-operator pipeline adds to a DAG file's parse.

Two DAG files, identical but for the pipeline: `with_pipeline.py` builds a
200-operator pipeline (the mixed shape of benchmarks/plan_bench.py: chained
runs, fan-out, side outputs, key_by, parallelism changes, unions) and renders
it with `to_airflow()` inside the DAG; `baseline.py` is the same file with
those two lines removed. Each parse runs in a fresh Python process that has
Airflow imported already (as the DAG processor has) and then times
`DagBag(dag_folder=<file>)`, Airflow's own parse of the file (import, DAG
collection, task validation). Reported: the median parse time of each file and
the difference (target: < 1 s).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

from benchmarks.bench_common import REPO, summarize

DAG_TEMPLATE = '''
import pendulum
from airflow.sdk import DAG
from airflow_flinkchain import OutputTag, StreamPipeline

TAG = OutputTag("side")


def build(operators):
    p = StreamPipeline("parse_bench", parallelism=4)
    stream = p.from_collection(range(10)).name("source")
    count = 1
    pending = []
    while count < operators - 1:
        step = count % 10
        if step == 3:
            proc = stream.process(lambda v, ctx: [v], output_tags=[TAG])
            pending.append(proc.get_side_output(TAG).map(str))
            stream, count = proc, count + 2
        elif step == 5:
            stream, count = stream.key_by(lambda v: v % 7).reduce(lambda a, b: a), count + 1
        elif step == 7:
            stream, count = stream.map(str).set_parallelism(2), count + 1
        elif step == 9 and pending:
            stream, count = stream.union(pending.pop()).map(str), count + 1
        else:
            stream, count = stream.filter(bool), count + 1
    for branch in pending:
        stream = stream.union(branch)
    stream.collect("sink")
    return p


with DAG("parse_bench", schedule=None, start_date=pendulum.datetime(2026, 1, 1, tz="UTC"), catchup=False) as dag:
{body}
'''

PIPELINE_BODY = '''    pipeline = build({operators})
    pipeline.to_airflow()'''
BASELINE_BODY = '''    pass'''

PARSE = '''
import json, sys, time, warnings
warnings.simplefilter("ignore")
import airflow, airflow.sdk
from airflow.dag_processing.dagbag import DagBag
t = time.perf_counter()
bag = DagBag(dag_folder={path!r}, safe_mode=False)
elapsed = time.perf_counter() - t
dag = bag.dags.get("parse_bench")
print("PARSE " + json.dumps({{"seconds": elapsed, "tasks": len(dag.tasks) if dag else None,
                             "import_errors": {{k: str(v)[-500:] for k, v in bag.import_errors.items()}}}}))
'''


def parse_once(path: str, env: dict) -> dict:
    out = subprocess.run([sys.executable, "-c", PARSE.format(path=path)], env=env, capture_output=True, text=True,
                         cwd=REPO, timeout=300)
    lines = [line for line in out.stdout.splitlines() if line.startswith("PARSE ")]
    if not lines:
        raise RuntimeError(f"parse of {path} failed:\n{out.stdout[-2000:]}\n{out.stderr[-2000:]}")
    res = json.loads(lines[-1][6:])
    if res["import_errors"]:
        raise RuntimeError(f"import errors parsing {path}: {res['import_errors']}")
    return res


def run_parse(tmp: str, operators: int, repeat: int) -> dict:
    dags = os.path.join(tmp, "parse_dags")
    os.makedirs(dags, exist_ok=True)
    files = {"baseline": os.path.join(dags, "baseline.py"), "with_pipeline": os.path.join(dags, "with_pipeline.py")}
    with open(files["baseline"], "w") as fh:
        fh.write(DAG_TEMPLATE.format(body=BASELINE_BODY))
    with open(files["with_pipeline"], "w") as fh:
        fh.write(DAG_TEMPLATE.format(body=PIPELINE_BODY.format(operators=operators)))
    env = {**os.environ, "AIRFLOW__CORE__LOAD_EXAMPLES": "False", "PYTHONWARNINGS": "ignore"}
    env.setdefault("AIRFLOW_HOME", os.path.join(tmp, "airflow_home"))
    samples = {k: [] for k in files}
    tasks = {}
    for _ in range(repeat):
        for k, path in files.items():  # interleaved
            r = parse_once(path, env)
            samples[k].append(r["seconds"])
            tasks[k] = r["tasks"]
    secs = {k: summarize(v) for k, v in samples.items()}
    extra = secs["with_pipeline"]["median"] - secs["baseline"]["median"]
    ns: dict = {}
    exec(compile(DAG_TEMPLATE.split("with DAG(")[0], "parse_bench", "exec"), ns)
    job = ns["build"](operators).plan()
    return {"operators": operators, "operators_planned": len(job.stream_graph.nodes), "chains": len(job.chains),
            "airflow_tasks": tasks, "method": "DagBag(dag_folder=file) in a fresh process with Airflow pre-imported",
            "seconds": secs, "extra_seconds": extra, "target_extra_seconds": 1.0, "meets_target": extra < 1.0}
