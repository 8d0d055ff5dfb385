"""The enrichment example DAG (dags/flinkchain_enrichment.py), planned by `flinkchain plan` as a
user would (in a subprocess: the DAG file imports Airflow): each two-input operator heads its own
chain with both input edges (input 1 first), and what follows it chains as usual."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

DAG_FILE = Path(__file__).resolve().parents[2] / "dags" / "flinkchain_enrichment.py"


def plan(fmt: str) -> str:
    script = shutil.which("flinkchain", path=str(Path(sys.executable).parent))
    cmd = [script] if script else [sys.executable, "-m", "airflow_flinkchain.cli"]
    out = subprocess.run([*cmd, "plan", "--format", fmt, str(DAG_FILE)], capture_output=True, text=True,
                         timeout=120, cwd=DAG_FILE.parent)
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout


def test_enrichment_example_chains_as_flink():
    [p] = json.loads(plan("json"))["pipelines"]
    assert p["pipeline"] == "enrichment"
    chains = {c["id"]: c for c in p["chains"]}
    assert [([o["name"] for o in c["operators"]], c["parallelism"]) for c in p["chains"]] == [
        (["orders", "order_time"], 2),
        (["customers", "customer_time"], 2),
        (["rules"], 1),
        (["enrich_customer"], 2),
        (["apply_rules", "enriched", "needs_review", "review"], 2),
    ]
    assert chains["enrich_customer"]["operators"][0]["kind"] == "keyed_co_process"
    assert chains["apply_rules"]["operators"][0]["kind"] == "broadcast_process"
    edges = {e["id"]: (e["source_operator"], e["target_operator"], e["partitioner"], e["input"])
             for e in p["edges"]}
    # both input edges of each two-input chain, input 1 first
    assert [edges[e] for e in chains["enrich_customer"]["in_edges"]] == [
        ("order_time", "enrich_customer", "HASH", 1), ("customer_time", "enrich_customer", "HASH", 2)]
    assert [edges[e] for e in chains["apply_rules"]["in_edges"]] == [
        ("enrich_customer", "apply_rules", "FORWARD", 1), ("rules", "apply_rules", "BROADCAST", 2)]
    assert len(edges) == 4


def test_enrichment_example_text_plan_shows_both_inputs():
    text = plan("text")
    assert "pipeline 'enrichment': 5 chains, 4 edges" in text
    for line in ("order_time => enrich_customer  (input 1)", "customer_time => enrich_customer  (input 2)",
                 "rules => apply_rules  (input 2)", "enrich_customer => apply_rules  (input 1)"):
        assert line in text, text
