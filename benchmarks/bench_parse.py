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
from benchmarks.plan_bench import build

DAG_TEMPLATE = '''
import pendulum
from airflow.sdk import DAG
from benchmarks.plan_bench import build  # the same mixed-shape pipeline the planning benchmark uses

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
    job = build(operators).plan()
    return {"operators": operators, "operators_planned": len(job.stream_graph.nodes), "chains": len(job.chains),
            "airflow_tasks": tasks, "method": "DagBag(dag_folder=file) in a fresh process with Airflow pre-imported",
            "seconds": secs, "extra_seconds": extra, "target_extra_seconds": 1.0, "meets_target": extra < 1.0}
