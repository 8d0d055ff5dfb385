"""Sources of stream runs (monitored files, incremental SQL, an UnboundedSource with
partitions, bounded sources read once) and operator evolution between runs."""

from __future__ import annotations

import json
import os
import sqlite3

import pytest

from airflow_flinkchain import StreamPipeline
from airflow_flinkchain.io.sources import JsonLinesSource, SqlSource
from airflow_flinkchain.planner import PlanningError
from airflow_flinkchain.runtime.pipeline_run import ChainRunError
from airflow_flinkchain.runtime.stream_run import StreamRunError
from tests.conformance_cases import first_field, sum_values
from tests.streamruns.cases import build
from tests.streamruns.partitioned_log import PartitionedLog, append


def write_lines(path, rows):
    with open(path, "w") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")


def file_pipeline(directory, ckpt):
    p = StreamPipeline("files", runtime_mode="streaming", checkpoint_dir=ckpt)
    p.from_source(JsonLinesSource(directory, monitor=True), name="clicks").uid("clicks").map(
        lambda r: r["id"]).collect("out")
    return p


def test_monitored_directory_reads_each_new_file_once_in_order(tmp_path):
    d, ckpt = tmp_path / "in", str(tmp_path / "ckpt")
    d.mkdir()
    write_lines(d / "b.json", [{"id": 2}, {"id": 3}])
    write_lines(d / "a.json", [{"id": 1}])
    write_lines(d / "_c.json", [{"id": 99}])  # in progress: skipped
    write_lines(d / ".d.json", [{"id": 98}])
    first = file_pipeline(str(d), ckpt).execute_local(run_id="r1")
    assert first.output("out") == [1, 2, 3]  # stable order: by path
    assert file_pipeline(str(d), ckpt).execute_local(run_id="r2").output("out") == []
    os.rename(d / "_c.json", d / "c.json")  # completed: read now
    (d / "sub").mkdir()
    write_lines(d / "sub" / "e.json", [{"id": 5}])
    old = d / "0-late.json"  # a late file with an old name and time: no age cut-off
    write_lines(old, [{"id": 0}])
    os.utime(old, (1, 1))
    third = file_pipeline(str(d), ckpt).execute_local(run_id="r3")
    assert third.output("out") == [0, 99, 5]
    assert third.stream["sources"]["clicks"]["files"]


def test_a_file_changed_after_being_read_fails_naming_it(tmp_path):
    d, ckpt = tmp_path / "in", str(tmp_path / "ckpt")
    d.mkdir()
    write_lines(d / "a.json", [{"id": 1}])
    file_pipeline(str(d), ckpt).execute_local(run_id="r1")
    write_lines(d / "a.json", [{"id": 1}, {"id": 2}])
    with pytest.raises(ChainRunError, match=r"a\.json.*changed after an earlier run read it"):
        file_pipeline(str(d), ckpt).execute_local(run_id="r2")


def test_sql_source_reads_rows_above_the_last_value(tmp_path):
    db = tmp_path / "t.db"
    con = sqlite3.connect(db)
    con.execute("create table clicks (id integer primary key, user text)")
    con.executemany("insert into clicks values (?, ?)", [(1, "a"), (2, "b")])
    con.commit()
    url, ckpt = f"sqlite:///{db}", str(tmp_path / "ckpt")

    def run(run_id):
        p = StreamPipeline("sql", runtime_mode="streaming", checkpoint_dir=ckpt)
        p.from_source(SqlSource("select id, user from clicks", url=url, incremental_column="id"),
                      name="clicks").map(lambda r: (r["id"], r["user"])).collect("out")
        return p.execute_local(run_id=run_id).output("out")

    assert run("r1") == [(1, "a"), (2, "b")]
    assert run("r2") == []
    con.executemany("insert into clicks values (?, ?)", [(4, "d"), (3, "c")])
    con.commit()
    assert run("r3") == [(3, "c"), (4, "d")]


def test_unbounded_source_partitions_spread_over_parallel_subtasks(tmp_path):
    log, ckpt = str(tmp_path / "log"), str(tmp_path / "ckpt")

    def run(run_id):
        p = StreamPipeline("log", runtime_mode="streaming", checkpoint_dir=ckpt)
        p.from_source(PartitionedLog(directory=log), name="log").set_parallelism(2).key_by(first_field).reduce(
            sum_values).uid("sum").collect("out")
        return p.execute_local(run_id=run_id)

    for part in ("p0", "p1", "p2"):
        append(log, part, [("k", 1, 0), ("k", 1, 0)])
    first = run("r1")
    assert first.stream["sources"]["log"] == {"splits": {"p0": 2, "p1": 2, "p2": 2}}
    assert max(r[1] for r in first.output("out")) == 6
    append(log, "p1", [("k", 10, 0)])
    append(log, "p3", [("k", 100, 0)])
    second = run("r2")
    assert sorted(r[1] for r in second.output("out")) == [16, 116]
    assert second.stream["sources"]["log"] == {"splits": {"p0": 2, "p1": 3, "p2": 2, "p3": 1}}
    # the same source outside stream runs: everything, once
    p = StreamPipeline("log-once", runtime_mode="streaming")
    p.from_source(PartitionedLog(directory=log), name="log").collect("out")
    assert len(p.execute_local().output("out")) == 8


def test_bounded_source_is_read_in_the_first_run_only(tmp_path):
    ckpt = str(tmp_path / "ckpt")

    def run(run_id):
        p = StreamPipeline("bounded", runtime_mode="streaming", checkpoint_dir=ckpt)
        p.from_collection([("a", 1, 0), ("a", 2, 0)]).key_by(first_field).reduce(sum_values).uid("sum").collect("out")
        return p.execute_local(run_id=run_id).output("out")

    assert run("r1") == [("a", 1, 0), ("a", 3, 0)]
    assert run("r2") == []


def test_checkpoint_dir_needs_streaming_and_no_template(tmp_path):
    with pytest.raises(PlanningError, match="runtime_mode='streaming'"):
        StreamPipeline("p", runtime_mode="batch", checkpoint_dir=str(tmp_path))
    assert StreamPipeline("p", checkpoint_dir=str(tmp_path)).runtime_mode == "streaming"  # the default
    with pytest.raises(PlanningError, match="is a template"):
        StreamPipeline("p", runtime_mode="streaming", checkpoint_dir=str(tmp_path / "{{ ds }}"))
    p = StreamPipeline("p", runtime_mode="streaming")
    p.from_collection([1]).collect("out")
    with pytest.raises(ValueError, match="drain=True needs a checkpoint_dir"):
        p.execute_local(drain=True)


def test_uid_evolution(tmp_path):
    """Removing a stateful operator fails the run unless allow_non_restored_state; the other
    operators keep their state; an added operator starts empty."""
    log, ckpt = str(tmp_path / "log"), str(tmp_path / "ckpt")
    append(log, "p0", [("a", 1, 100), ("b", 2, 200)])
    build("p", log, ckpt, sinks=("rolling", "dedup")).execute_local(run_id="r1")
    append(log, "p0", [("a", 3, 300)])
    with pytest.raises(StreamRunError, match=r"operator\(s\) \['dedup'\].*allow_non_restored_state=True"):
        build("p", log, ckpt, sinks=("rolling",)).execute_local(run_id="r2")
    second = build("p", log, ckpt, sinks=("rolling", "bucket"),
                   allow_non_restored_state=True).execute_local(run_id="r2", drain=True)
    assert second.output("rolling") == [(("a", 4, 300), 300)]  # the sum went on from run 1
    assert second.output("bucket") == [(("a", 799, 1), 799)]  # new: only run 2's record


def test_changing_max_parallelism_fails_naming_the_operator(tmp_path):
    ckpt = str(tmp_path / "ckpt")

    def run(run_id, max_parallelism):
        p = StreamPipeline("mp", runtime_mode="streaming", checkpoint_dir=ckpt)
        p.from_collection([("a", 1, 0)]).key_by(first_field).reduce(sum_values).uid("sum").name("sum").set_max_parallelism(
            max_parallelism).collect("out")
        return p.execute_local(run_id=run_id)

    run("r1", 128)
    with pytest.raises(ChainRunError, match=r"'sum'.*restore.*max parallelism"):
        run("r2", 64)


def test_chain_metrics_say_what_the_run_read_and_holds(tmp_path):
    """Per chain and run (for the Chains tab): the ranges read, the positions reached, per
    operator its watermark, whether it holds state and its snapshot size."""
    log, ckpt = str(tmp_path / "log"), str(tmp_path / "ckpt")
    append(log, "p0", [("a", 1, 100), ("a", 2, 900)])
    first = build("p", log, ckpt, sinks=("tumbling",)).execute_local(run_id="r1")
    append(log, "p0", [("b", 3, 1600)])
    second = build("p", log, ckpt, sinks=("tumbling",)).execute_local(run_id="r2")
    source_chain = next(doc for doc in second.metrics.values() if "log" in doc["stream"]["read"])
    assert source_chain["stream"]["read"] == {"log": [["p0", 2, 3]]}
    assert source_chain["stream"]["sources"] == {"log": {"splits": {"p0": 3}}}
    window = next(doc["stream"]["operators"]["tumbling"] for doc in second.metrics.values()
                  if "tumbling" in doc["stream"]["operators"])
    assert window["watermark"] == 1600 - 501 and window["stateful"] and window["bytes"] > 0
    assert first.stream["operators"]["tumbling"]["watermark"] == 900 - 501


def test_sql_source_settle_is_seconds():
    assert SqlSource("select 1", url="sqlite://", incremental_column="id", settle=2.5).settle == 2.5
    for bad in (-1, "5s", True):
        with pytest.raises(ValueError, match="settle must be a number of seconds"):
            SqlSource("select 1", url="sqlite://", incremental_column="id", settle=bad)


def test_a_monitored_directory_read_in_one_run_is_the_stream_its_runs_read(tmp_path):
    """A monitored directory is one continuous stream: one run over all its files advances the
    watermark file after file as the stream runs over the same files do (the example DAG's
    sessions, whose timers fire when the watermark passes a gap, come out the same)."""
    import sys

    from tests.airflow.test_airflow_scheduler import REPO, one_streaming_run, sink_rows

    sys.path.insert(0, str(REPO / "dags"))
    import flinkchain_stream_runs as example

    slices = example.click_slices(n_slices=4, per_slice=40)
    want = one_streaming_run(example, slices, tmp_path)
    incoming, output, ckpt = str(tmp_path / "in"), str(tmp_path / "out"), str(tmp_path / "ck")
    for k, part in enumerate(slices):
        example.drop_slice(incoming, k, part)
        example.stream_runs_pipeline(incoming, output, ckpt, parallelism=2).execute_local(run_id=f"r{k}")
    example.stream_runs_pipeline(incoming, output, ckpt, parallelism=2).execute_local(run_id="drain", drain=True)
    got = sink_rows(output)
    assert got == want, (sorted((got - want).elements())[:5], sorted((want - got).elements())[:5])


def test_a_monitored_parquet_directory_feeds_a_vectorized_aggregation_as_its_per_record_twin(tmp_path):
    """A typed monitored Parquet source before a vectorized keyed sum reads its new files as
    Arrow batches; over stream runs and a drain the results equal the reduce twin's, which
    reads them as records."""
    from collections import Counter

    from airflow_flinkchain.io import ParquetSource
    from airflow_flinkchain.planner.vectorized import takes_batches
    from tests.vectorized.test_vectorized_aggregations_spark import ROW, twin_reduce, write_slice

    def runs(name, vectorized):
        data, held, ckpt = tmp_path / name / "in", tmp_path / name / "held", str(tmp_path / name / "ckpt")
        for k in range(3):
            write_slice(held, f"part-{k}.parquet", k, 90 + 10 * k)
        got = []
        for k in range(4):
            if k < 3:
                data.mkdir(parents=True, exist_ok=True)
                (held / f"part-{k}.parquet").rename(data / f"part-{k}.parquet")
            p = StreamPipeline(name, parallelism=2, runtime_mode="streaming", checkpoint_dir=ckpt)
            keyed = p.from_source(ParquetSource(str(data), monitor=True), name="src", output_type=ROW).uid(
                "src").key_by(lambda r: r["k"])
            (keyed.sum("v") if vectorized else keyed.reduce(twin_reduce("sum"))).uid("agg").name("agg").collect("out")
            assert takes_batches(next(n for n in p.plan().stream_graph.nodes if n.name == "agg")) == vectorized
            got += p.execute_local(run_id=f"r{k}", drain=k == 3).output("out")
        return Counter(tuple(sorted(r.items())) for r in got)

    want = runs("twin", False)
    assert sum(want.values()) == 300 and runs("vectorized", True) == want
