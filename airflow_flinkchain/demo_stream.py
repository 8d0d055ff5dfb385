"""`python -m airflow_flinkchain.demo stream`: the stream-runs example DAG
(dags/flinkchain_stream_runs.py) run as three slices of files and a drain."""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import time
from collections import Counter

DAG_ID = "flinkchain_stream_runs"
SLICES = 3


def sink_rows(output_dir: str) -> Counter:
    rows: Counter = Counter()
    if not os.path.isdir(output_dir):
        return rows
    for sink in sorted(os.listdir(output_dir)):
        for name in sorted(os.listdir(os.path.join(output_dir, sink))):
            if not name.startswith((".", "_")):
                with open(os.path.join(output_dir, sink, name)) as f:
                    rows.update((sink, json.dumps(json.loads(line), sort_keys=True)) for line in f)
    return rows


def stream_demo(env: dict, run_dag_test) -> int:
    from airflow_flinkchain.demo import DAGS

    sys.path.insert(0, DAGS)
    import flinkchain_stream_runs as example

    where = example.paths(env["AIRFLOW_HOME"])
    for d in where.values():  # a fresh stream (the reset of docs/stream-runs.md)
        shutil.rmtree(d, ignore_errors=True)
    slices = example.click_slices(n_slices=SLICES)
    log_path = os.path.join(env["AIRFLOW_HOME"], f"demo-{DAG_ID}.log")
    print(f"Stream runs of DAG {DAG_ID}: {SLICES} slices of click files, then a drained run; log: {log_path}")
    print(f"  input {where['input_dir']}\n  checkpoints {where['checkpoint_dir']}\n  outputs {where['output_dir']}")
    open(log_path, "w").close()
    for k, part in enumerate(slices + [None]):
        if part is not None:
            path = example.drop_slice(where["input_dir"], k, part)
            what = f"run {k + 1}: dropped {os.path.basename(path)} ({len(part)} clicks)"
        else:
            what = f"run {k + 1}: drain (fires the windows and sessions still open)"
        print(f"\n{what}", flush=True)
        started = time.time()
        before = sink_rows(where["output_dir"])
        result = run_dag_test(env, "flinkchain_stream_runs.py", log_path, conf={"drain": part is None}, mode="a")
        if result is None:
            return 1
        print(f"  DAG run {result['run_id']}: {result['state'].upper()} in {time.time() - started:.0f} s")
        if result["state"] != "success":
            for task, state in sorted(result["tasks"].items()):
                print(f"    {task:<40} {state}")
            return 1
        new = sink_rows(where["output_dir"]) - before
        for sink in ("page_views", "sessions"):
            print(f"  published {sum(n for (s, _), n in new.items() if s == sink):>4} {sink} records")
        latest = json.load(open(os.path.join(where["checkpoint_dir"], "_latest.json")))
        print(f"  committed checkpoint {latest['checkpoint']} (run {latest['seq']} of the stream)")
    got = sink_rows(where["output_dir"])
    with tempfile.TemporaryDirectory() as tmp:
        ref_in, ref_out = os.path.join(tmp, "in"), os.path.join(tmp, "out")
        for k, part in enumerate(slices):
            example.drop_slice(ref_in, k, part)
        example.stream_runs_pipeline(ref_in, ref_out, None).execute_local(run_id="reference")
        want = sink_rows(ref_out)
    print(f"\nOutputs in {where['output_dir']}:")
    for sink in ("page_views", "sessions"):
        rows = sorted(r for (s, r), n in got.items() if s == sink for _ in range(n))
        print(f"  {sink}: {len(rows)} records, e.g. {rows[0] if rows else '-'}")
    same = got == want
    print(f"\nEqual to one STREAMING run over all {sum(len(s) for s in slices)} clicks: {'yes' if same else 'NO'}"
          f"; duplicates: {'none' if max(got.values(), default=1) == 1 else 'YES'}")
    return 0 if same else 1
