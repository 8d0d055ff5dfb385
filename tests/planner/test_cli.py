"""`flinkchain plan`: every format, pipelines found inside `with DAG(...)`, exit codes."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from airflow_flinkchain.cli import main

DAGS = Path(__file__).parent / "dag_files"


def run(capsys, *args):
    code = main(["plan", *map(str, args)])
    out, err = capsys.readouterr()
    return code, out, err


def test_text_two_pipelines_and_planning_warning(capsys):
    code, out, err = run(capsys, DAGS / "two_pipelines.py")
    assert code == 0
    assert out.startswith("pipeline 'first': 1 chain, 0 edges (chaining: flink; runtime mode: STREAMING)\n")
    assert "    rows  p=1  rows -> fmt -> out" in out
    assert "pipeline 'second': 4 chains, 2 edges" in out
    assert "rows -> say_hi  REBALANCE  rows => say \"hi\"" in out
    assert "select 'b'" in out
    assert "warning: operator 'never' selects ['b']" in err


def test_json(capsys):
    code, out, _ = run(capsys, DAGS / "two_pipelines.py", "--format", "json")
    doc = json.loads(out)
    assert code == 0 and [p["pipeline"] for p in doc["pipelines"]] == ["first", "second"]
    assert doc["pipelines"][1]["edges"][0]["partitioner"] == "REBALANCE"


def test_dot(capsys):
    code, out, _ = run(capsys, DAGS / "two_pipelines.py", "-f", "dot")
    assert code == 0 and out.startswith("digraph flinkchain {")
    assert '"second/rows" -> "second/say_hi" [label="REBALANCE"];' in out
    assert 'label="say_hi (p=3)\\nsay \\"hi\\"\\nout"' in out


def test_mermaid(capsys):
    code, out, _ = run(capsys, DAGS / "two_pipelines.py", "--format", "mermaid")
    assert code == 0 and out.startswith("flowchart LR\n")
    assert 'p1_c0 -->|"REBALANCE"| p1_c1' in out and "#quot;hi#quot;" in out


def test_no_chaining_strategy(capsys):
    code, out, _ = run(capsys, DAGS / "two_pipelines.py", "--strategy", "none")
    assert code == 0 and "pipeline 'first': 3 chains, 2 edges (chaining: none; runtime mode: STREAMING)" in out


def test_bad_pipeline_exits_1_with_planner_message(capsys):
    code, out, err = run(capsys, DAGS / "bad_forward.py")
    assert code == 1 and out == ""
    assert "pipeline 'bad' cannot be planned: Forward partitioning does not allow change of parallelism" in err


def test_planning_error_during_import_exits_1(capsys):
    code, _, err = run(capsys, DAGS / "raises_on_import.py")
    assert code == 1 and "select('a',) without split()" in err


@pytest.mark.parametrize("name, message", [
    ("broken.py", "No module named 'no_such_module_flinkchain'"),
    ("empty.py", "no StreamPipeline found"),
    ("missing.py", "no such file"),
])
def test_unusable_files_exit_2(capsys, name, message):
    code, _, err = run(capsys, DAGS / name)
    assert code == 2 and message in err


@pytest.fixture(scope="module")
def orders_cli_run():
    """The console script on a DAG file that imports airflow.sdk and builds its
    pipeline inside `with DAG` (no global name). Run once: importing Airflow is slow."""
    script = shutil.which("flinkchain", path=str(Path(sys.executable).parent))
    cmd = [script] if script else [sys.executable, "-m", "airflow_flinkchain.cli"]
    return subprocess.run([*cmd, "plan", str(DAGS / "orders_dag.py")], capture_output=True, text=True, timeout=120)


def test_console_script_on_a_real_dag_file_without_global_pipeline(orders_cli_run):
    out = orders_cli_run
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[:4] == [
        "pipeline 'orders': 3 chains, 2 edges (chaining: flink; runtime mode: STREAMING)",
        "  chains:",
        "    orders  p=1  orders",
        "    parse   p=2  parse -> valid -> flag_late -> (alert -> alerts, audit -> big_orders)",
    ]


def test_docs_show_the_real_plan_output(orders_cli_run):
    page = Path(__file__).resolve().parents[2] / "docs" / "writing-pipelines.md"
    text = page.read_text()
    marker = "$ flinkchain plan tests/planner/dag_files/orders_dag.py\n"
    assert marker in text, f"{page} lost its `flinkchain plan` example"
    shown = text.split(marker, 1)[1].split("```", 1)[0].rstrip("\n")
    assert orders_cli_run.stdout.rstrip("\n") == shown
