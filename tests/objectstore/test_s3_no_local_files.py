"""With every location on S3, nothing of a run lands on local disk outside Spark's own scratch
space: a batch pipeline on Spark and stream runs, in a process whose TMPDIR and working
directory are empty directories watched by the test (Spark's scratch is SPARK_LOCAL_DIRS)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.objectstore.s3_pipelines import read_json_dir

pytestmark = [pytest.mark.s3, pytest.mark.spark]
REPO = Path(__file__).resolve().parents[2]

RUNS = """
import sys
sys.path.insert(0, {repo!r})
from tests.objectstore.s3_pipelines import EVENTS, stream_pipeline, totals_pipeline, write_events, write_orders
bucket = {bucket!r}
write_orders(bucket + "/in")
totals_pipeline(bucket + "/in", bucket + "/out").execute(exchange_root=bucket + "/exchange")
for k in range(2):
    write_events(bucket + "/events", k, EVENTS[k * 30:(k + 1) * 30])
    stream_pipeline(bucket + "/events", bucket + "/windows", bucket + "/checkpoints").execute_local(
        run_id="r%d" % k, drain=k == 1)
"""


def test_nothing_of_a_run_lands_on_local_disk(s3_server, tmp_path):
    bucket = f"s3://{s3_server.new_bucket()}"
    tmp, cwd, scratch = tmp_path / "tmp", tmp_path / "cwd", tmp_path / "spark-scratch"
    for d in (tmp, cwd, scratch):
        d.mkdir()
    env = {**os.environ, "TMPDIR": str(tmp), "SPARK_LOCAL_DIRS": str(scratch), "PYTHONPATH": str(REPO),
           "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    proc = subprocess.run([sys.executable, "-c", RUNS.format(repo=str(REPO), bucket=bucket)], cwd=cwd, env=env,
                          capture_output=True, timeout=900)
    assert proc.returncode == 0, proc.stderr.decode()[-3000:]
    assert len(read_json_dir(f"{bucket}/out")) == 4 and read_json_dir(f"{bucket}/windows")
    left = sorted(str(p.relative_to(tmp_path)) for d in (tmp, cwd) for p in d.rglob("*"))
    assert left == [], left
