"""Run one DAG with dag.test() in a fresh process (AIRFLOW_HOME etc. from the
environment), optionally for a logical date, and print
{"run_id", "state", "tasks": {task_id: [state, try_number]}} as the last line."""

import json
import os
import runpy
import sys

import pendulum

dag_file, dag_id = sys.argv[1], sys.argv[2]
logical_date = pendulum.parse(sys.argv[3]) if len(sys.argv) > 3 else None
sys.path.insert(0, os.path.dirname(os.path.abspath(dag_file)))
namespace = runpy.run_path(dag_file, run_name="af_dag_under_test")
dag = next(v for v in namespace.values() if getattr(v, "dag_id", None) == dag_id and hasattr(v, "test"))
dr = dag.test(logical_date=logical_date) if logical_date else dag.test()
tasks = {ti.task_id: [str(getattr(ti.state, "value", ti.state)), ti.try_number] for ti in dr.get_task_instances()}
print(json.dumps({"run_id": dr.run_id, "state": str(getattr(dr.state, "value", dr.state)), "tasks": tasks}))
