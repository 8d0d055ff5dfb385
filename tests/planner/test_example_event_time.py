"""The event-time example DAG (dags/flinkchain_event_time.py), planned by `flinkchain plan` as a
user would (in a subprocess: the DAG file imports Airflow), gives the chains Flink makes: the
watermark assigner chains with its non-parallel source, the window and the keyed process function
each start a chain after their HASH edge, and their sinks (the late-data side output's too) chain
after them."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

DAG_FILE = Path(__file__).resolve().parents[2] / "dags" / "flinkchain_event_time.py"


def test_event_time_example_chains_as_flink():
    script = shutil.which("flinkchain", path=str(Path(sys.executable).parent))
    cmd = [script] if script else [sys.executable, "-m", "airflow_flinkchain.cli"]
    out = subprocess.run([*cmd, "plan", "--format", "json", str(DAG_FILE)], capture_output=True, text=True,
                         timeout=120, cwd=DAG_FILE.parent)
    assert out.returncode == 0, out.stderr[-3000:]
    [plan] = json.loads(out.stdout)["pipelines"]
    assert plan["pipeline"] == "event_time"
    assert [([o["name"] for o in c["operators"]], c["parallelism"]) for c in plan["chains"]] == [
        (["readings", "timestamps"], 1),
        (["minute_stats", "minute_stats_parquet", "late_readings_json"], 2),
        (["overheat", "alerts_parquet"], 2),
    ]
    assert [(e["source_operator"], e["target_operator"], e["partitioner"], e["output_tag"])
            for e in plan["edges"]] == [("timestamps", "minute_stats", "HASH", None),
                                        ("timestamps", "overheat", "HASH", None)]
    [late_edge] = [e for e in plan["chained_edges"] if e["target_operator"] == "late_readings_json"]
    assert late_edge["output_tag"] == "late_readings"
