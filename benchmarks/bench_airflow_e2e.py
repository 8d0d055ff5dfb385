"""End to end through Airflow (section 2 of `make bench`): reuses benchmarks/airflow_bench.py.

The 8-operator pipeline with one key_by boundary as a chained DAG (2 chain
tasks) and an unchained DAG (strategy="none": 8 tasks), each run with
dag.test() in a fresh process (real Airflow DAG run, real spark-submit in
local mode), repeated and interleaved; wall-clock of the DAG run.
"""

from __future__ import annotations

import os

from benchmarks import airflow_bench as ab
from benchmarks.bench_common import summarize


def run_airflow(tmp: str, records: int, repeat: int) -> dict:
    env, path = ab.prepare(os.path.join(tmp, "af_home"), os.path.join(tmp, "af_dags"), records)
    samples, tasks, states = {"chained": [], "unchained": []}, {}, {"chained": [], "unchained": []}
    for _ in range(repeat):
        for var in ("chained", "unchained"):
            r = ab.run(env, path, var)
            samples[var].append(r["seconds"])
            tasks[var] = r["tasks"]
            states[var].append(r["state"])
    secs = {k: summarize(v) for k, v in samples.items()}
    ratio = secs["unchained"]["median"] / secs["chained"]["median"]
    ok = all(s == "success" for v in states.values() for s in v)
    return {"records": records, "pipeline": "source -> parse -> valid -> enrich -> key_by -> total -> format -> "
                                            "nonzero -> sink (8 operators, one key_by boundary)",
            "tasks": tasks, "states": states, "seconds": secs, "ratio_unchained_over_chained": ratio,
            "target_ratio": 3.0, "meets_target": ok and ratio >= 3.0, "all_runs_succeeded": ok}
