"""Run one DAG with dag.test() in a fresh process (AIRFLOW_HOME etc. from the environment),
with an optional trigger conf (`--conf JSON`), and print
{"run_id", "state", "tasks": {task_id: [state, try_number]}} as the last line."""

import argparse
import json
import os
import runpy
import sys

parser = argparse.ArgumentParser()
parser.add_argument("dag_file")
parser.add_argument("dag_id")
parser.add_argument("--conf", default=None)
args = parser.parse_args()
sys.path.insert(0, os.path.dirname(os.path.abspath(args.dag_file)))
namespace = runpy.run_path(args.dag_file, run_name="cluster_dag_under_test")
dag = next(v for v in namespace.values() if getattr(v, "dag_id", None) == args.dag_id and hasattr(v, "test"))
dr = dag.test(run_conf=json.loads(args.conf)) if args.conf else dag.test()
tasks = {ti.task_id: [str(getattr(ti.state, "value", ti.state)), ti.try_number] for ti in dr.get_task_instances()}
print(json.dumps({"run_id": dr.run_id, "state": str(getattr(dr.state, "value", dr.state)), "tasks": tasks}))
