"""The example stream-run DAG (dags/flinkchain_stream_runs.py) through dag.test() with real
spark-submit: two slices of files over two runs, then a drained run, equal one STREAMING
run over all the files; then a re-run of the first run is refused."""

from __future__ import annotations

import json
import logging
import os
import shutil
import sys
from collections import Counter
from types import SimpleNamespace

import pytest

from conftest import run_dag

pytestmark = [pytest.mark.e2e, pytest.mark.airflow]
DAG_ID = "flinkchain_stream_runs"


def sink_rows(output_dir: str) -> Counter:
    """Every line of every published part file, per sink directory."""
    rows: Counter = Counter()
    for sink in sorted(os.listdir(output_dir)):
        for name in sorted(os.listdir(os.path.join(output_dir, sink))):
            if not name.startswith((".", "_")):
                with open(os.path.join(output_dir, sink, name)) as f:
                    rows.update((sink, json.dumps(json.loads(line), sort_keys=True)) for line in f)
    return rows


def one_streaming_run(module, slices, tmp_path) -> Counter:
    """The reference: the same pipeline, no checkpoint_dir, all files, one run (in process)."""
    ref_in, ref_out = str(tmp_path / "ref_in"), str(tmp_path / "ref_out")
    for k, part in enumerate(slices):
        module.drop_slice(ref_in, k, part)
    module.stream_runs_pipeline(ref_in, ref_out, None).execute_local(run_id="reference")
    return sink_rows(ref_out)


def test_two_slices_and_a_drain_equal_one_streaming_run(airflow_home, tmp_path):
    env, dags = airflow_home
    sys.path.insert(0, dags)
    import flinkchain_stream_runs as example

    where = example.paths(env["AIRFLOW_HOME"])
    for d in where.values():
        shutil.rmtree(d, ignore_errors=True)
    slices = example.click_slices(n_slices=2, per_slice=50)
    dag_file = os.path.join(dags, "flinkchain_stream_runs.py")
    runs = []
    for k, part in enumerate(slices + [None]):
        if part is not None:
            example.drop_slice(where["input_dir"], k, part)
        result = run_dag(env, dag_file, DAG_ID, conf={"drain": part is None})
        assert result["state"] == "success", result["log"][-6000:]
        assert set(result["tasks"].values()) == {"success"}, result["tasks"]
        runs.append(result["run_id"])
        if k == 0:  # a normal run leaves open windows and sessions pending
            latest = json.loads(open(os.path.join(where["checkpoint_dir"], "_latest.json")).read())
            assert latest["seq"] == 1
    want = one_streaming_run(example, slices, tmp_path)
    got = sink_rows(where["output_dir"])
    assert got == want, (sorted((got - want).elements())[:5], sorted((want - got).elements())[:5])
    assert max(got.values()) == 1  # no duplicates (every output row is distinct here)
    parts = sorted(os.listdir(os.path.join(where["output_dir"], "sessions")))
    assert {p.split("-")[1] for p in parts} <= {"000001", "000002", "000003"}
    latest = json.loads(open(os.path.join(where["checkpoint_dir"], "_latest.json")).read())
    assert latest["seq"] == 3

    # Clearing the first run (not the latest) would corrupt the stream: its setup task refuses.
    from airflow_flinkchain.airflow.compat import AirflowFailException
    from airflow_flinkchain.airflow.paths import run_key
    from airflow_flinkchain.airflow.spec import pipeline_spec
    from airflow_flinkchain.airflow.stream_runs import begin

    p = example.stream_runs_pipeline(**where)
    job = p.plan()
    spec = pipeline_spec(job, p.settings, checkpoint_dir=p.checkpoint_dir)
    first = SimpleNamespace(dag_id=DAG_ID, run_id=runs[0], run_key=run_key(runs[0]))
    with pytest.raises(AirflowFailException, match="only the latest run can be re-run"):
        begin(job, spec, first, {"params": {"drain": False}}, False, logging.getLogger("test"))
