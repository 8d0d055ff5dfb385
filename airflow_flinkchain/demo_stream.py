"""`python -m airflow_flinkchain.demo stream`: the stream-runs example DAG
(dags/flinkchain_stream_runs.py) run as three slices of files and a drain."""

from __future__ import annotations

import json
import logging
import os
import sys
import tempfile
import time
from collections import Counter

DAG_ID = "flinkchain_stream_runs"
DAG_FILE = f"{DAG_ID}.py"
SLICES = 3


def log_path(env: dict) -> str:
    return os.path.join(env["AIRFLOW_HOME"], f"demo-{DAG_ID}.log")


def sink_rows(output_dir: str) -> Counter:
    """(sink, record) -> count of the published files of the sinks under `output_dir` (a path or URI)."""
    import pyarrow.fs as pafs
    import sample_data

    fs, root = sample_data.filesystem(output_dir)
    rows: Counter = Counter()
    for info in sorted(fs.get_file_info(pafs.FileSelector(root, recursive=True, allow_not_found=True)),
                       key=lambda i: i.path):
        sink, *rest = info.path[len(root):].strip("/").split("/")
        if info.type == pafs.FileType.File and rest and not any(p.startswith((".", "_")) for p in rest):
            with fs.open_input_stream(info.path) as f:
                rows.update((sink, json.dumps(json.loads(line), sort_keys=True))
                            for line in f.read().decode().splitlines() if line)
    return rows


def _delete(location: str) -> None:
    import pyarrow.fs as pafs
    import sample_data

    fs, path = sample_data.filesystem(location)
    if fs.get_file_info(path).type == pafs.FileType.Directory:
        fs.delete_dir(path)


def stream_demo(env: dict, run_dag_test) -> int:
    from airflow_flinkchain.demo import DAGS
    from airflow_flinkchain.runtime.exchange.checkpoints import CheckpointArea

    sys.path.insert(0, DAGS)
    import flinkchain_stream_runs as example
    import sample_data

    logging.getLogger("botocore").setLevel(logging.WARNING)  # "Found credentials ..." per S3 client
    where = example.paths(env.get(sample_data.ROOT_ENV) or os.path.join(env["AIRFLOW_HOME"], "flinkchain"))
    for d in where.values():  # a fresh stream (the reset of docs/stream-runs.md)
        _delete(d)
    slices = example.click_slices(n_slices=SLICES)
    log = log_path(env)
    print(f"Stream runs of DAG {DAG_ID}: {SLICES} slices of click files, then a drained run; log: {log}")
    print(f"  input {where['input_dir']}\n  checkpoints {where['checkpoint_dir']}\n  outputs {where['output_dir']}")
    open(log, "w").close()
    for k, part in enumerate(slices + [None]):
        if part is not None:
            path = example.drop_slice(where["input_dir"], k, part)
            what = f"run {k + 1}: dropped {path.rsplit('/', 1)[-1]} ({len(part)} clicks)"
        else:
            what = f"run {k + 1}: drain (fires the windows and sessions still open)"
        print(f"\n{what}", flush=True)
        started = time.time()
        before = sink_rows(where["output_dir"])
        result = run_dag_test(env, DAG_FILE, log, conf={"drain": part is None}, mode="a")
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
        latest = CheckpointArea(where["checkpoint_dir"]).read_latest()
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
