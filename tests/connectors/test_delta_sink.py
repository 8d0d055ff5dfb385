"""DeltaSink in stream runs against real Delta tables (deltalake): N runs plus a drain equal
one STREAMING run; one Delta commit per run carrying (app id, checkpoint id); a repeated
publication writes nothing; merge_keys upserts; runs SIGKILLed while running, after the
commit point before the Delta commit and after it, then retried, lose and duplicate nothing."""

from __future__ import annotations

from collections import Counter

import pytest

from airflow_flinkchain import StreamPipeline
from airflow_flinkchain.io.sinks import DeltaSink
from airflow_flinkchain.runtime.exchange.checkpoints import CheckpointArea
from airflow_flinkchain.runtime.stream_run import StreamRunError
from tests.conformance_cases import first_field, sum_values, watermark_strategy, window_assigner
from tests.connectors.kill_runs import runs_killed_and_retried
from tests.streamruns.cases import make_records, slices
from tests.streamruns.partitioned_log import PartitionedLog, append

deltalake = pytest.importorskip("deltalake", reason="deltalake is not installed (pip install -r requirements.txt)")


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
    from airflow_flinkchain.runtime.connectors.delta import pyarrow_dataset

    return pyarrow_dataset(deltalake.DeltaTable(str(path)), str(path)).to_table().to_pylist()


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
    area = CheckpointArea(ckpt)
    stream_id = area.manifest(area.read_latest()["checkpoint"])["stream_id"]
    assert {c["flinkchain.stream"] for c in commits} == {stream_id}
    assert table.transaction_version(f"flinkchain/delta/{sink_key}/{stream_id}") == n + 1  # the drain's checkpoint


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


@pytest.mark.parametrize("where", ["running", "before-delta-commit", "after-delta-commit"])
def test_runs_killed_and_retried_publish_exactly_once(tmp_path, where):
    """SIGKILL while the run reads (a record chosen at random), or after the commit point
    just before / just after the Delta commit; the retry (or the next run's begin) finishes."""
    records = make_records(seed=23)
    log, ckpt, wpath, tpath = str(tmp_path / "log"), str(tmp_path / "ckpt"), tmp_path / "w", tmp_path / "t"
    runs_killed_and_retried(where, ("deltalake", "write_deltalake"), "tests.connectors.test_delta_sink", pipeline,
                            ("p", log, ckpt, str(wpath), str(tpath)), log, ckpt, tmp_path / "kill-now", records)
    check_tables(tmp_path, wpath, tpath, records)


def batch(name: str, values: list, path, **kwargs) -> StreamPipeline:
    p = StreamPipeline(name)
    p.from_collection([{"key": k, "value": v} for k, v in values]).sink_to(DeltaSink(str(path), **kwargs),
                                                                           name="totals")
    return p


def test_batch_runs_replace_their_rows_in_one_commit_each(tmp_path):
    """A run, the same run retried (other output), another run, another DAG's run with the same
    run id: the retry's rows once and the other runs' rows; each run one Delta commit."""
    path = tmp_path / "t"
    batch("daily", [("a", 1), ("b", 2)], path).execute_local(run_id="d1")
    batch("daily", [("a", 1), ("b", 3)], path).execute_local(run_id="d1")
    batch("daily", [("c", 4)], path).execute_local(run_id="d2")
    batch("hourly", [("z", 9)], path).execute_local(run_id="d1")
    assert sorted((r["_dag_id"], r["_run_id"], r["key"], r["value"]) for r in table_rows(path)) == [
        ("daily", "d1", "a", 1), ("daily", "d1", "b", 3), ("daily", "d2", "c", 4), ("hourly", "d1", "z", 9)]
    history = deltalake.DeltaTable(str(path)).history()
    assert len(history) == 4 and {h.get("flinkchain.run_id") for h in history} == {"d1", "d2"}
    batch("daily", [], path).execute_local(run_id="d2")  # a retry with no output: the run's rows go
    assert sorted(r["key"] for r in table_rows(path)) == ["a", "b", "z"]


def test_batch_runs_with_merge_keys_upsert(tmp_path):
    path = tmp_path / "t"
    batch("daily", [("a", 1), ("b", 2), ("a", 5)], path, merge_keys="key").execute_local(run_id="d1")
    batch("daily", [("a", 1), ("b", 2), ("a", 5)], path, merge_keys="key").execute_local(run_id="d1")
    batch("daily", [("b", 7), ("c", 3)], path, merge_keys="key").execute_local(run_id="d2")
    assert sorted((r["key"], r["value"]) for r in table_rows(path)) == [("a", 5), ("b", 7), ("c", 3)]
    with pytest.raises(Exception, match=r"sink 'totals'.*has no column '_run_id', which keys a batch run's rows"):
        batch("daily", [("d", 1)], path).execute_local(run_id="d3")


@pytest.mark.spark
def test_stream_runs_on_spark_publish_the_same_tables(spark, tmp_path):
    """execute() (Spark): the subtasks stage into the run, the commit publishes one Delta commit;
    a batch run retried on Spark replaces its rows."""
    records = make_records(n=120, seed=29)
    log, ckpt, wpath, tpath = str(tmp_path / "log"), str(tmp_path / "ckpt"), tmp_path / "w", tmp_path / "t"
    for k, part in enumerate(slices(records, 2)):
        append(log, "p0", part)
        pipeline("spark", log, ckpt, str(wpath), str(tpath)).execute(spark=spark, run_id=f"r{k}")
    pipeline("spark", log, ckpt, str(wpath), str(tpath)).execute(spark=spark, run_id="drain", drain=True)
    check_tables(tmp_path, wpath, tpath, records)
    assert deltalake.DeltaTable(str(wpath)).version() <= 2
    batch("daily", [("a", 1), ("b", 2)], tmp_path / "b").execute(spark=spark, run_id="d1")
    batch("daily", [("a", 5)], tmp_path / "b").execute(spark=spark, run_id="d1")  # the retry replaces
    assert [(r["key"], r["value"]) for r in table_rows(tmp_path / "b")] == [("a", 5)]


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
