"""Sinks own their destination; names that become paths are refused or made safe.
All at plan time, without Spark."""

from __future__ import annotations

import pytest

from airflow_flinkchain import PlanningError, StreamPipeline
from airflow_flinkchain.io.sinks import CollectSink, CsvSink, JsonLinesSink, ParquetSink, SqlSink
from airflow_flinkchain.path_names import MAX_SEGMENT_LENGTH, UnsafeNameError, path_segment


def inc(x):
    return x + 1


def two_sinks(first, second):
    p = StreamPipeline("t")
    s = p.from_collection([1, 2])
    first(s.map(inc).name("m1"))
    second(s.map(inc).name("m2"))
    return p


def sink(descriptor, name):
    return lambda s: s.sink_to(descriptor, name=name)


def test_two_collects_with_one_name_are_refused_naming_both():
    p = two_sinks(lambda s: s.collect("out"), lambda s: s.collect("out"))
    with pytest.raises(PlanningError, match=r"sinks 'out' and 'out' both collect\('out'\).*own destination"):
        p.plan()


@pytest.mark.parametrize("a, b", [
    ("/data/out", "/data/out"),
    ("/data/out", "/data/out/"),
    ("/data/out", "/data/./out"),
    ("/data/out", "file:///data/out"),
    ("s3a://bucket/out", "s3a://bucket/out/"),
    ("/data/out/{{ run_key }}", "/data/out/{{ run_key }}"),
])
def test_two_file_sinks_on_one_directory_are_refused(a, b):
    p = two_sinks(sink(ParquetSink(a), "first"), sink(JsonLinesSink(b), "second"))
    with pytest.raises(PlanningError, match="sinks 'first' and 'second' both write the directory") as err:
        p.plan()
    assert err.value.operator == "second"


@pytest.mark.parametrize("outer, inner", [
    ("/data/out", "/data/out/rejects"),
    ("/data/out/", "/data/out/a/b"),
    ("s3a://bucket/out", "s3a://bucket/out/x"),
])
def test_a_file_sink_inside_another_is_refused(outer, inner):
    for a, b in ((outer, inner), (inner, outer)):
        p = two_sinks(sink(ParquetSink(a), "first"), sink(CsvSink(b), "second"))
        with pytest.raises(PlanningError, match="sinks 'first' and 'second' write nested directories"):
            p.plan()


@pytest.mark.parametrize("a, b", [
    ("/data/out", "/data/out2"),
    ("/data/out", "/data/ou"),
    ("s3a://bucket/out", "s3a://other/out"),
    ("/data/{{ ds }}/a", "/data/{{ ds }}/b"),
])
def test_distinct_file_sinks_plan(a, b):
    two_sinks(sink(ParquetSink(a), "first"), sink(ParquetSink(b), "second")).plan()


def test_two_sql_sinks_on_one_table_are_refused():
    url = "sqlite:////tmp/x.db"
    p = two_sinks(sink(SqlSink("orders", url=url), "first"), sink(SqlSink("orders", url=url), "second"))
    with pytest.raises(PlanningError, match="sinks 'first' and 'second' both write table 'orders'"):
        p.plan()
    p = two_sinks(sink(SqlSink("orders", conn_id="db"), "first"), sink(SqlSink("orders", conn_id="db"), "second"))
    with pytest.raises(PlanningError, match="both write table 'orders'"):
        p.plan()


def test_sql_sinks_on_other_tables_databases_or_keys_plan():
    url = "sqlite:////tmp/x.db"
    for a, b in ((SqlSink("a", url=url), SqlSink("b", url=url)),
                 (SqlSink("a", url=url), SqlSink("a", url="sqlite:////tmp/y.db")),
                 (SqlSink("a", url=url), SqlSink("a", url=url, run_id_column="_run_b"))):
        two_sinks(sink(a, "first"), sink(b, "second")).plan()


@pytest.mark.parametrize("name", ["", ".", "..", "a/../..", "/etc", "a\\b"])
def test_collect_names_that_are_paths_are_refused(name):
    p = StreamPipeline("t")
    p.from_collection([1]).map(inc).name("m").sink_to(CollectSink(name), name="keep")
    with pytest.raises(PlanningError, match="sink 'keep': collect\\(\\) name") as err:
        p.plan()
    assert err.value.operator == "keep"


@pytest.mark.parametrize("uid", [".", ".."])
def test_uids_naming_a_directory_are_refused(uid):
    p = StreamPipeline("t")
    p.from_collection([1]).map(inc).name("parse").uid(uid).collect("out")
    with pytest.raises(PlanningError, match=r"operator 'parse': uid .*current or the parent directory") as err:
        p.plan()
    assert err.value.operator == "parse"


def test_uids_with_separators_become_safe_keys():
    p = StreamPipeline("t")
    p.from_collection([1]).map(inc).name("m").uid("a/../..").collect("out")
    assert [n.key for n in p.stream_graph().nodes] == ["collection_source", "a", "out"]


def test_long_names_and_uids_get_short_stable_distinct_keys():
    def build():
        p = StreamPipeline("t")
        s = p.from_collection([1])
        s.map(inc).name("n" * 300 + "1").collect("a")
        s.map(inc).name("n" * 300 + "2").collect("b")
        s.map(inc).name("m").uid("u" * 300).collect("c")
        return p.plan()

    job = build()
    keys = [n.key for n in job.stream_graph.nodes]
    assert all(len(k) <= MAX_SEGMENT_LENGTH for k in keys)
    assert len(set(keys)) == len(keys)
    assert keys == [n.key for n in build().stream_graph.nodes]  # stable across parses
    for chain in job.chains:
        assert len(path_segment(chain.id)) <= MAX_SEGMENT_LENGTH
    for edge in job.edges:  # two long keys joined: still one short segment
        assert len(path_segment(edge.id)) <= MAX_SEGMENT_LENGTH


@pytest.mark.parametrize("name", ["", ".", "..", "a/../..", "/abs", "a\0b", None])
def test_path_segment_refuses_names_that_are_paths(name):
    with pytest.raises(UnsafeNameError, match="run id"):
        path_segment(name, "run id")


def test_path_segment_keeps_safe_names_and_hashes_the_rest():
    assert path_segment("scheduled__2026-01-02") == "scheduled__2026-01-02"
    assert path_segment("a:b") != path_segment("a_b") and ":" not in path_segment("a:b")
    long = path_segment("x" * 1000)
    assert len(long) <= MAX_SEGMENT_LENGTH and long != path_segment("x" * 999)
    assert path_segment("café") == path_segment("café") != "café"


@pytest.mark.parametrize("path", ["/", ".", "..", "a/..", "/data/..", "file:///", "s3a://bucket", "hdfs:///"])
def test_file_sinks_on_a_root_current_or_parent_directory_are_refused(path):
    """Each run replaces a file sink's directory as a whole: '.' would be the working directory."""
    p = StreamPipeline("t")
    p.from_collection([1]).map(inc).name("m").sink_to(ParquetSink(path), name="write")
    with pytest.raises(PlanningError, match="sink 'write': path .* is a root, current or parent directory") as err:
        p.plan()
    assert err.value.operator == "write"
