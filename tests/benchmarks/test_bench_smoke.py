"""Smoke test of the `make bench` harness (not a timed test: structure, never speed).

Runs `python -m benchmarks.run --quick --only runtime,parse --repeat 1` in a
subprocess (its own SparkSession, none shared with the test process) and checks
that the report has every key the README table reads and that the plots exist.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

pytestmark = [pytest.mark.spark, pytest.mark.airflow]


def test_quick_bench_writes_report_and_plots(tmp_path):
    out = tmp_path / "results"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (REPO, os.environ.get("PYTHONPATH")) if p)}
    env.setdefault("AIRFLOW_HOME", str(tmp_path / "airflow_home"))
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks.run", "--quick", "--only", "runtime,parse", "--repeat", "1",
         "--out", str(out)],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=900,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    report = json.loads((out / "report.json").read_text())

    machine = report["machine"]
    for key in ("cpu_count", "memory_bytes", "load_average_at_start", "load_average_at_end", "date"):
        assert key in machine
    for mod in ("python", "pyspark", "airflow"):
        assert machine["versions"][mod]
    assert report["settings"]["quick"] is True and report["settings"]["sections"] == ["runtime", "parse"]
    assert "airflow" not in report and "scale" not in report and "flink" not in report

    runtime = report["runtime"]
    assert set(runtime["pipelines"]) == {"3_operators", "10_operators"}
    for shape in runtime["pipelines"].values():
        for variant in ("chain", "fused", "rdd", "native", "staged"):
            stat = shape["records_per_s"][variant]
            assert stat["min"] <= stat["median"] <= stat["max"]
            assert len(shape["seconds"][variant]["samples"]) == 1
        assert set(shape["ratios"]) == {"chain_over_fused", "chain_over_rdd", "chain_over_native", "chain_over_staged"}
        counts = shape["output_records"]  # every variant computed the same thing
        assert len(set(counts.values())) == 1 and counts["chain"] > 0, counts
        assert isinstance(shape["meets_target"], bool)

    parse = report["parse"]
    assert parse["airflow_tasks"]["with_pipeline"] > parse["airflow_tasks"]["baseline"]
    assert parse["operators_planned"] == 200
    assert {"baseline", "with_pipeline"} <= set(parse["seconds"]) and "extra_seconds" in parse

    assert sorted(report["plots"]) == ["parse.png", "runtime.png"]
    for png in report["plots"]:
        data = (out / png).read_bytes()
        assert data.startswith(b"\x89PNG") and len(data) > 1000
