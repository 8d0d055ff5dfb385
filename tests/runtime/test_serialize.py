"""Plans with user functions from a DAG file imported under an odd module name
load in a fresh process that cannot import that file."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import textwrap

from airflow_flinkchain.runtime.core.serialize import by_value_modules
from airflow_flinkchain.runtime.spark.plan_file import dump_plan

DAG_FILE = textwrap.dedent('''
    import math
    FACTOR = 3

    class Scale:
        def __init__(self, k):
            self.k = k
        def __call__(self, x):
            return x * self.k + FACTOR

    def make_closure(offset):
        return lambda x: math.floor(x) + offset

    FUNCS = {"cls": Scale(2), "closure": make_closure(10), "lambda": lambda x: -x}
''')


def test_dag_module_functions_load_in_fresh_process(tmp_path):
    dag_dir = tmp_path / "dags"
    dag_dir.mkdir()
    path = dag_dir / "my_dag.py"
    path.write_text(DAG_FILE)
    name = "unusual_prefix_0123abcd_my_dag"  # how Airflow's DAG processor names DAG modules
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
        assert name in by_value_modules()
        plan = tmp_path / "plan.pkl"
        dump_plan(module.FUNCS, str(plan))
    finally:
        del sys.modules[name]
    code = ("import sys; from airflow_flinkchain.runtime.spark.plan_file import load_plan; "
            "f = load_plan(sys.argv[1]); print(f['cls'](5), f['closure'](2.5), f['lambda'](4))")
    env = {**os.environ, "PYTHONPATH": ""}
    out = subprocess.run([sys.executable, "-c", code, str(plan)], capture_output=True, text=True,
                         cwd=str(tmp_path), env=env, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["13", "12", "-4"]
