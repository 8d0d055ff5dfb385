"""Smoke test of the `make bench` harness (not a timed test: structure, never speed).

Runs `python -m benchmarks.run --quick --only runtime,parse,eventtime,join,aggregations,connectors --repeat 1` in a
subprocess (its own SparkSession, none shared with the test process) and checks
that the report has every key the docs table (benchmarks.bench_table) reads and that the plots exist.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

pytestmark = [pytest.mark.spark, pytest.mark.airflow]
SECTIONS = ("runtime", "parse", "eventtime", "join", "aggregations", "connectors")


def test_quick_bench_writes_report_and_plots(tmp_path):
    out = tmp_path / "results"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (REPO, os.environ.get("PYTHONPATH")) if p)}
    env.setdefault("AIRFLOW_HOME", str(tmp_path / "airflow_home"))
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks.run", "--quick", "--only", ",".join(SECTIONS), "--repeat", "1",
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
    assert report["settings"]["quick"] is True and report["settings"]["sections"] == list(SECTIONS)
    assert "airflow" not in report and "scale" not in report and "flink" not in report

    runtime = report["runtime"]
    assert set(runtime["pipelines"]) == {"3_operators", "10_operators"}
    for shape in runtime["pipelines"].values():
        for variant in ("chain", "fused", "pyarrow", "rdd", "native", "staged"):
            stat = shape["records_per_s"][variant]
            assert stat["min"] <= stat["median"] <= stat["max"]
            assert len(shape["seconds"][variant]["samples"]) == 1
            assert shape["cpu_seconds"][variant]["median"] > 0
        assert set(shape["ratios"]) == {"chain_over_fused", "chain_over_pyarrow", "chain_over_rdd", "chain_over_native",
                                        "chain_over_staged"}
        counts = shape["output_records"]  # every variant computed the same thing
        assert len(set(counts.values())) == 1 and counts["chain"] > 0, counts
        assert isinstance(shape["meets_target"], bool)

    # the Spark baselines read the P input files as P splits (no repartition); a second size beside
    assert runtime["input"] == "2 Parquet files, read by Spark as 2 splits", runtime["input"]
    other = runtime["at_other_sizes"][str(report["settings"]["sizes"]["runtime_other"][0])]
    assert other["records"] == report["settings"]["sizes"]["runtime_other"][0] and "baseline_note" in runtime
    assert len(set(other["pipelines"]["3_operators"]["output_records"].values())) == 1

    parse = report["parse"]
    assert parse["airflow_tasks"]["with_pipeline"] > parse["airflow_tasks"]["baseline"]
    assert parse["operators_planned"] == 200
    assert {"baseline", "with_pipeline"} <= set(parse["seconds"]) and "extra_seconds" in parse

    eventtime = report["eventtime"]
    from benchmarks.bench_eventtime import VARIANTS, expected_outputs

    assert set(eventtime["records_per_s"]) == set(VARIANTS)
    for variant in VARIANTS:  # every variant computed its results (none dropped as late)
        assert eventtime["output_records"][variant] == expected_outputs(variant, eventtime["records"]) > 0
    assert set(eventtime["ratios"]) == {f"{v}_over_reduce_batch" for v in VARIANTS if v != "reduce_batch"}
    assert isinstance(eventtime["meets_target"], bool)
    from benchmarks.bench_flink import flink_python

    if flink_python() is None:  # why it was skipped
        assert eventtime["flink"]["status"].startswith("skipped"), eventtime["flink"]
    else:  # PyFlink ran the same window and computed every result
        flink = eventtime["flink"]
        assert flink["status"] == "measured", flink
        assert flink["output_records"] == expected_outputs("window_streaming", eventtime["records"]), flink
    from benchmarks.bench_table import table

    assert "| window, streaming |" in table(report)
    join = report["join"]
    assert join["records"] == report["settings"]["sizes"]["join"]
    for variant in ("keyed_process", "co_process", "interval_join"):
        stat = join["records_per_s"][variant]
        assert stat["min"] <= stat["median"] <= stat["max"] and len(join["seconds"][variant]["samples"]) == 1
    assert join["output_records"] == join["expected_output_records"]  # every pipeline computed what it should
    assert set(join["ratios"]) == {"co_process_over_keyed_process", "interval_join_over_keyed_process"}
    assert "| interval join: " in table(report)

    agg = report["aggregations"]
    from benchmarks.bench_aggregations import VARIANTS as AGG_VARIANTS

    assert set(agg["records_per_s"]) == set(AGG_VARIANTS) and all(agg["results_equal_spark"].values()), agg
    for ratio in ("sum_vectorized_over_spark_groupby", "sum_per_record_over_spark_groupby",
                  "window_vectorized_over_spark_window", "window_per_record_over_spark_window",
                  "window_streaming_over_spark_window"):
        assert agg["ratios"][ratio] > 0
    sr = agg["stream_runs"]  # asserted equal in the bench; some windows closed before the drain
    assert sr["results_equal"] is True and sr["windows_compared"] > 0 and sr["windows_open_in_spark_state"] > 0
    for who in ("stream_runs", "spark_available_now"):
        assert len(sr[who]["run_seconds"]) == sr["slices"] and sr[who]["total_seconds"] > 0

    connectors = report["connectors"]
    from benchmarks.bench_connectors import CONNECTORS

    assert set(connectors["connectors"]) == {c.name for c in CONNECTORS}
    for name, c in connectors["connectors"].items():  # measured (every record written), or why not
        if c["status"] == "measured":
            assert c["records_written"] == connectors["records"] and c["records_per_s"] > 0, (name, c)
        else:
            assert c["status"].startswith("skipped: ") and os.environ.get("CI") != "true", (name, c)
    assert connectors["connectors"]["file_source"]["status"] == "measured"
    assert "| aggregations, " in table(report) and "| stream runs (+ drain) |" in table(report)
    assert "| connector, one stream run of " in table(report)

    assert sorted(report["plots"]) == ["parse.png", "runtime.png"]
    for png in report["plots"]:
        data = (out / png).read_bytes()
        assert data.startswith(b"\x89PNG") and len(data) > 1000
