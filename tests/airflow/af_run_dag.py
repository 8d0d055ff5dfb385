"""Run one DAG with dag.test() in a fresh process (AIRFLOW_HOME etc. come from the
environment), with the trigger conf given as a third argument (JSON), and print {"run_id", "state", "tasks": {task_id: state}} as the last line."""

import json
import os
import runpy
import sys

dag_file, dag_id = sys.argv[1], sys.argv[2]
sys.path.insert(0, os.path.dirname(os.path.abspath(dag_file)))
namespace = runpy.run_path(dag_file, run_name="af_dag_under_test")
dag = next(v for v in namespace.values() if getattr(v, "dag_id", None) == dag_id and hasattr(v, "test"))
dr = dag.test(run_conf=json.loads(sys.argv[3])) if len(sys.argv) > 3 else dag.test()
tasks = {ti.task_id: str(getattr(ti.state, "value", ti.state)) for ti in dr.get_task_instances()}
print(json.dumps({"run_id": dr.run_id, "state": str(getattr(dr.state, "value", dr.state)), "tasks": tasks}))
