"""Run DAGs with dag.test() in a fresh process (AIRFLOW_HOME etc. from the environment), with an
optional trigger conf (`--conf JSON`), and print {"run_id", "state", "tasks": {task_id: [state,
try_number]}} as the last line. With `--serve`, run one DAG run per line of stdin
({"dag_id": ..., "conf": ...}), printing each result line: Airflow's import, the DAG folder's
parse and the in-process execution API are paid once for all the runs."""

import argparse
import json
import os
import runpy
import sys

parser = argparse.ArgumentParser()
parser.add_argument("dag_file")
parser.add_argument("dag_id", nargs="?")
parser.add_argument("--conf", default=None)
parser.add_argument("--serve", action="store_true")
args = parser.parse_args()
sys.path.insert(0, os.path.dirname(os.path.abspath(args.dag_file)))
namespace = runpy.run_path(args.dag_file, run_name="cluster_dag_under_test")


def run(dag_id: str, conf) -> None:
    dag = next(v for v in namespace.values() if getattr(v, "dag_id", None) == dag_id and hasattr(v, "test"))
    dr = dag.test(run_conf=conf) if conf is not None else dag.test()
    tasks = {ti.task_id: [str(getattr(ti.state, "value", ti.state)), ti.try_number] for ti in dr.get_task_instances()}
    print(json.dumps({"run_id": dr.run_id, "state": str(getattr(dr.state, "value", dr.state)), "tasks": tasks}),
          flush=True)


if args.serve:
    for line in sys.stdin:
        request = json.loads(line)
        run(request["dag_id"], request.get("conf"))
else:
    run(args.dag_id, json.loads(args.conf) if args.conf else None)
