"""DeltaSink in stream runs against real Delta tables (deltalake): N runs plus a drain equal
one STREAMING run; one Delta commit per run carrying (app id, checkpoint id); a repeated
publication writes nothing; merge_keys upserts; runs SIGKILLed while running, after the
commit point before the Delta commit and after it, then retried, lose and duplicate nothing."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from airflow_flinkchain import StreamPipeline
from airflow_flinkchain.io.sinks import DeltaSink
from airflow_flinkchain.runtime.exchange.checkpoints import CheckpointArea
from airflow_flinkchain.runtime.stream_run import StreamRunError, publish_sinks
from tests.conformance_cases import first_field, sum_values, watermark_strategy, window_assigner
from tests.streamruns.cases import FailOn, make_records, slices
from tests.streamruns.partitioned_log import PartitionedLog, append

deltalake = pytest.importorskip("deltalake", reason="deltalake is not installed (pip install -r requirements.txt)")
REPO = Path(__file__).resolve().parents[2]


def as_row(r: tuple) -> dict:
    return {"key": r[0], "value": r[1], "ts": r[2]}


def pipeline(name: str, log: str, ckpt, windows, totals, fail=None) -> StreamPipeline:
    """Tumbling-window sums appended to `windows`; the running sum per key merged into `totals`
    (None: collect sinks only)."""
    p = StreamPipeline(name, runtime_mode="streaming", checkpoint_dir=ckpt)
    s = p.from_source(PartitionedLog(directory=log), name="log").uid("log").set_parallelism(1)
    s = s.assign_timestamps_and_watermarks(watermark_strategy({"bounded": 500})).uid("wm").set_parallelism(1)
    if fail is not None:
        s = s.map(fail).name("fail").set_parallelism(1)
    keyed = s.key_by(first_field)
    w = keyed.window(window_assigner(["tumbling", 1000])).reduce(sum_values).uid("win").set_parallelism(2)
    r = keyed.reduce(sum_values).uid("rolling").set_parallelism(2)
    if windows is not None:
        w.map(as_row).name("win.row").set_parallelism(2).sink_to(DeltaSink(windows), name="windows")
        r.map(as_row).name("rolling.row").set_parallelism(2).sink_to(DeltaSink(totals, merge_keys=("key",)),
                                                                        name="totals")
    w.collect("windows")
    r.collect("rolling")
    return p


def table_rows(path) -> list:
    return deltalake.DeltaTable(str(path)).to_pyarrow_table().to_pylist()


def expected(tmp_path, records) -> tuple[Counter, dict]:
    """One STREAMING run over everything (collect sinks): window rows, and each key's last sum."""
    log = str(tmp_path / "whole")
    append(log, "p0", records)
    res = pipeline("whole", log, None, None, None).execute_local()
    windows = Counter(tuple(sorted(as_row(v).items())) for v in res.output("windows"))
    totals = {}
    for v in res.output("rolling"):
        totals[v[0]] = as_row(v)
    return windows, totals


def check_tables(tmp_path, windows_path, totals_path, records) -> None:
    want_windows, want_totals = expected(tmp_path, records)
    assert Counter(tuple(sorted(r.items())) for r in table_rows(windows_path)) == want_windows
    assert sorted(table_rows(totals_path), key=lambda r: r["key"]) == sorted(want_totals.values(),
                                                                              key=lambda r: r["key"])


@pytest.mark.parametrize("n", [1, 4])
def test_n_runs_and_a_drain_equal_one_streaming_run_one_commit_per_run(tmp_path, n):
    records = make_records(seed=21)
    log, ckpt, wpath, tpath = str(tmp_path / "log"), str(tmp_path / "ckpt"), tmp_path / "w", tmp_path / "t"
    for k, part in enumerate(slices(records, n)):
        append(log, "p0", part)
        pipeline("delta", log, ckpt, str(wpath), str(tpath)).execute_local(run_id=f"r{k}")
    pipeline("delta", log, ckpt, str(wpath), str(tpath)).execute_local(run_id="drain", drain=True)
    check_tables(tmp_path, wpath, tpath, records)
    table = deltalake.DeltaTable(str(wpath))
    commits = [h for h in table.history() if h.get("flinkchain.checkpoint")]
    assert len(commits) == len(table.history())  # every commit is one run's publication
    assert len(commits) <= n + 1
    sink_key = next(k for k in (commits[0].get("flinkchain.sink"),))
    assert table.transaction_version(f"flinkchain/delta/{sink_key}") == n + 1  # the drain's checkpoint


def test_a_repeated_publication_writes_nothing_and_rerunning_a_published_run_is_refused(tmp_path):
    from airflow_flinkchain.runtime.connectors.published import Publication, publish_staged, staged_writer
    from airflow_flinkchain.runtime.exchange.layout import Location
    from airflow_flinkchain.runtime.connectors.published import write_descriptor

    path = tmp_path / "t"
    stage = Location(str(tmp_path / "stage"))
    w = staged_writer(stage, "k", 0, "sink 'k'")
    for r in ({"key": "a", "value": 1}, {"key": "a", "value": 3}, {"key": "b", "value": 2}):
        w.write(r)
    w.close()
    write_descriptor(stage, DeltaSink(str(path), merge_keys=("key",)))
    first = publish_staged(stage, Publication("p", "k", 7, "sink 'k'"))
    again = publish_staged(stage, Publication("p", "k", 7, "sink 'k'"))
    older = publish_staged(stage, Publication("p", "k", 6, "sink 'k'"))
    assert first["records"] == 2 and again.get("already") and older.get("already")
    assert sorted(table_rows(path), key=lambda r: r["key"]) == [{"key": "a", "value": 3}, {"key": "b", "value": 2}]
    assert deltalake.DeltaTable(str(path)).version() == 0

    log, ckpt = str(tmp_path / "log"), str(tmp_path / "ckpt")
    append(log, "p0", [("a", 1, 100), ("a", 2, 2000)])
    pipeline("p", log, ckpt, str(tmp_path / "w"), str(tmp_path / "t2")).execute_local(run_id="r1")
    with pytest.raises(StreamRunError, match="published it to .*re-running it is refused"):
        pipeline("p", log, ckpt, str(tmp_path / "w"), str(tmp_path / "t2")).execute_local(run_id="r1")


def test_records_that_do_not_fit_the_table_fail_naming_the_sink(tmp_path):
    path = tmp_path / "t"
    deltalake.write_deltalake(str(path), __import__("pyarrow").table({"key": ["a"], "value": [1]}))
    log, ckpt = str(tmp_path / "log"), str(tmp_path / "ckpt")
    append(log, "p0", [("a", 1, 100)])
    p = StreamPipeline("bad", runtime_mode="streaming", checkpoint_dir=ckpt)
    p.from_source(PartitionedLog(directory=log), name="log").map(as_row).sink_to(DeltaSink(str(path)), name="out")
    with pytest.raises(Exception, match=r"sink .*field\(s\) \['ts'\] that Delta table .* has no column"):
        p.execute_local(run_id="r1")


KILL_SCRIPT = """
import os, signal, sys
sys.path.insert(0, {repo!r})
where = {where!r}
if where != "running":
    import deltalake
    real = deltalake.write_deltalake
    def killing(*args, **kwargs):
        if where == "before-delta-commit":
            os.kill(os.getpid(), signal.SIGKILL)
        real(*args, **kwargs)
        os.kill(os.getpid(), signal.SIGKILL)
    deltalake.write_deltalake = killing
from tests.connectors.test_delta_sink import pipeline
from tests.streamruns.cases import FailOn
pipeline("p", {log!r}, {ckpt!r}, {wpath!r}, {tpath!r}, fail=FailOn({marker!r}, {value!r}, kill=True)).execute_local(
    run_id={run_id!r}, drain={drain!r})
"""


@pytest.mark.parametrize("where", ["running", "before-delta-commit", "after-delta-commit"])
def test_runs_killed_and_retried_publish_exactly_once(tmp_path, where):
    """SIGKILL while the run reads (a record chosen at random), or after the commit point
    just before / just after the Delta commit; the retry (or the next run's begin) finishes."""
    import random

    records = make_records(seed=23)
    log, ckpt, wpath, tpath = str(tmp_path / "log"), str(tmp_path / "ckpt"), tmp_path / "w", tmp_path / "t"
    marker, rng = tmp_path / "kill-now", random.Random(where)
    fail = FailOn(str(marker), -1, kill=True)
    parts = slices(records, 3)
    for k, part in enumerate(parts):
        drain = k == len(parts) - 1
        append(log, "p0", part)
        value = rng.choice(part)[1] if where == "running" else -1
        marker.write_text("")
        script = KILL_SCRIPT.format(repo=str(REPO), where=where, log=log, ckpt=ckpt, wpath=str(wpath),
                                    tpath=str(tpath), marker=str(marker), value=value, run_id=f"r{k}", drain=drain)
        proc = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, timeout=300)
        assert proc.returncode == -9, proc.stderr.decode()[-2000:]
        marker.unlink()
        if where == "running":  # nothing committed: the same run again
            pipeline("p", log, ckpt, str(wpath), str(tpath), fail=fail).execute_local(run_id=f"r{k}", drain=drain)
        else:  # killed after the commit point: the roll-forward the next begin (or commit retry) does
            latest = json.loads((Path(ckpt) / "_latest.json").read_text())
            assert latest["run_id"] == f"r{k}"
            publish_sinks(CheckpointArea(ckpt), latest["checkpoint"])
            publish_sinks(CheckpointArea(ckpt), latest["checkpoint"])  # once more: nothing happens
    check_tables(tmp_path, wpath, tpath, records)


@pytest.mark.spark
def test_stream_runs_on_spark_publish_the_same_tables(spark, tmp_path):
    """execute() (Spark): the subtasks stage into the run, the commit publishes one Delta commit."""
    records = make_records(n=120, seed=29)
    log, ckpt, wpath, tpath = str(tmp_path / "log"), str(tmp_path / "ckpt"), tmp_path / "w", tmp_path / "t"
    for k, part in enumerate(slices(records, 2)):
        append(log, "p0", part)
        pipeline("spark", log, ckpt, str(wpath), str(tpath)).execute(spark=spark, run_id=f"r{k}")
    pipeline("spark", log, ckpt, str(wpath), str(tpath)).execute(spark=spark, run_id="drain", drain=True)
    check_tables(tmp_path, wpath, tpath, records)
    assert deltalake.DeltaTable(str(wpath)).version() <= 2


def silver(name: str, bronze, ckpt) -> StreamPipeline:
    from airflow_flinkchain.io.sources import DeltaSource

    p = StreamPipeline(name, runtime_mode="streaming", checkpoint_dir=ckpt)
    p.from_source(DeltaSource(str(bronze)), name="bronze").uid("bronze").collect("rows")
    return p


def test_delta_source_reads_each_appended_version_once_bronze_to_silver(tmp_path):
    """A second pipeline reads the first one's Delta sink incrementally: each of its runs
    reads the versions committed since its last run; all together, the table's rows once."""
    records = make_records(seed=41)
    log, ckpt, wpath, tpath = str(tmp_path / "log"), str(tmp_path / "ckpt"), tmp_path / "w", tmp_path / "t"
    silver_ckpt = str(tmp_path / "silver-ckpt")
    read = []
    for k, part in enumerate(slices(records, 3)):
        append(log, "p0", part)
        pipeline("bronze", log, ckpt, str(wpath), str(tpath)).execute_local(run_id=f"r{k}", drain=k == 2)
        before = deltalake.DeltaTable(str(wpath)).version() if wpath.exists() else None
        result = silver("silver", wpath, silver_ckpt).execute_local(run_id=f"s{k}") if wpath.exists() else None
        if result is not None:
            read.append(result.output("rows"))
            assert result.stream["sources"]["bronze"] == {"splits": {"versions": before + 1}}
    again = silver("silver", wpath, silver_ckpt).execute_local(run_id="s-again")
    assert again.output("rows") == []
    assert sum(1 for rows in read if rows) >= 2  # more than one run read something
    rows = Counter(tuple(sorted(r.items())) for rs in read for r in rs)
    assert rows == Counter(tuple(sorted(r.items())) for r in table_rows(wpath))


def test_delta_source_fails_on_a_version_that_is_not_an_append(tmp_path):
    import pyarrow as pa

    path = tmp_path / "bronze"
    deltalake.write_deltalake(str(path), pa.table({"key": ["a", "b"], "value": [1, 2]}))
    first = silver("silver", path, str(tmp_path / "ckpt")).execute_local(run_id="s0")
    assert sorted(r["value"] for r in first.output("rows")) == [1, 2]
    deltalake.DeltaTable(str(path)).delete("value = 1")
    with pytest.raises(Exception, match=r"'bronze'.*DeltaSource.*version 1 is not an append \(operation 'DELETE'"):
        silver("silver", path, str(tmp_path / "ckpt")).execute_local(run_id="s1")
    with pytest.raises(Exception, match="no Delta table at"):
        silver("missing", tmp_path / "nothing", str(tmp_path / "ckpt2")).execute_local(run_id="s0")
