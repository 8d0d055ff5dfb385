"""Malformed and adversarial pipelines and inputs, tried as a new user would.

Each case ends in one of two ways: a clear error that names the culprit (operator,
sink, key selector or name) and says what to do, or the correct output. Never a
silent loss, an internal error (RecursionError, SyntaxError, KeyError, ...), or a
file touched outside the output root.
"""

from __future__ import annotations

import csv
import datetime
import decimal
import json
import math
import os
import sqlite3

import pytest

from airflow_flinkchain import StreamPipeline
from airflow_flinkchain.functions import FilterFunction, MapFunction, OutputTag, ProcessFunction
from airflow_flinkchain.graph.errors import PlanningError
from airflow_flinkchain.io import CsvSink, JsonLinesSink, ParquetSink, SqlSink

INTERNAL_ERRORS = (RecursionError, SyntaxError, KeyError, IndexError, AttributeError, NameError,
                   AssertionError, UnboundLocalError, ZeroDivisionError)
USER_ERRORS = (PlanningError, ValueError, TypeError)


def P(name: str = "adv", **settings) -> StreamPipeline:
    return StreamPipeline(name, **settings)


class Double(MapFunction):
    def map(self, value):
        return value * 2


class Even(FilterFunction):
    def filter(self, value):
        return value % 2 == 0


# ---- plan-time cases: (build, culprit fragments that the one-line error must contain) -------


def two_collects_same_name():
    p = P()
    src = p.from_collection([1, 2])
    src.map(int).name("a").collect("out")
    src.map(int).name("b").collect("out")
    return p.plan()


def two_file_sinks_same_path(tmp):
    p = P()
    src = p.from_collection([{"a": 1}])
    src.map(dict).name("a").sink_to(ParquetSink(str(tmp / "same")), name="first_files")
    src.map(dict).name("b").sink_to(ParquetSink(str(tmp / "same")), name="second_files")
    return p.plan()


def file_sink_inside_another(tmp):
    p = P()
    src = p.from_collection([{"a": 1}])
    src.map(dict).name("a").sink_to(ParquetSink(str(tmp / "outer")), name="outer_files")
    src.map(dict).name("b").sink_to(JsonLinesSink(str(tmp / "outer" / "inner")), name="inner_files")
    return p.plan()


def file_sink_same_path_spelled_differently(tmp):
    p = P()
    src = p.from_collection([{"a": 1}])
    src.map(dict).name("a").sink_to(ParquetSink(str(tmp / "x")), name="plain_files")
    src.map(dict).name("b").sink_to(ParquetSink(str(tmp / "y" / ".." / "x") + "/"), name="dotted_files")
    return p.plan()


def two_sql_sinks_same_table(tmp):
    p = P()
    url = f"sqlite:///{tmp / 'db.sqlite'}"
    src = p.from_collection([{"a": 1}])
    src.map(dict).name("a").sink_to(SqlSink("results", url=url), name="first_table")
    src.map(dict).name("b").sink_to(SqlSink("results", url=url), name="second_table")
    return p.plan()


def _uid(value):
    def build():
        p = P()
        p.from_collection([1]).map(int).name("parse").uid(value).collect("out")
        return p.plan()
    build.__name__ = f"uid_{value!r}"
    return build


def _collect_name(value):
    def build():
        p = P()
        p.from_collection([1]).map(int).name("parse").collect(value)
        return p.plan()
    build.__name__ = f"collect_{value!r}"
    return build


def function_class_not_instance_map():
    P().from_collection([1]).map(Double).name("double")


def function_class_not_instance_filter():
    P().from_collection([1]).filter(Even).name("even")


def reduce_without_key_by():
    P().from_collection([1]).map(int).name("parse").reduce(lambda a, b: a + b)


def split_and_side_output_on_one_operator():
    p = P()
    proc = p.from_collection([1]).process(lambda v, ctx: [v], output_tags=[OutputTag("odd")]).name("route")
    proc.get_side_output(OutputTag("odd")).collect("odd")
    proc.split(lambda v: ["a"]).select("a").collect("a")
    return p.plan()


def key_by_not_callable():
    P().from_collection([1]).key_by(42)


def parallelism_string():
    P().from_collection([1]).map(int).name("parse").set_parallelism("2")


def output_tag_empty():
    OutputTag("")


PLAN_TIME = [
    (two_collects_same_name, ["collect('out')", "sinks 'out' and 'out'"]),
    (two_file_sinks_same_path, ["first_files", "second_files"]),
    (file_sink_inside_another, ["outer_files", "inner_files"]),
    (file_sink_same_path_spelled_differently, ["plain_files", "dotted_files"]),
    (two_sql_sinks_same_table, ["first_table", "second_table", "results"]),
    (_uid("."), ["'.'", "uid"]),
    (_uid(".."), ["'..'", "uid"]),
    (_uid(""), ["uid"]),
    (_collect_name(".."), ["'..'"]),
    (_collect_name("a/b"), ["'a/b'"]),
    (_collect_name(""), ["collect"]),
    (function_class_not_instance_map, ["Double", "Double()"]),
    (function_class_not_instance_filter, ["Even", "Even()"]),
    (reduce_without_key_by, ["reduce", "'parse'", "key_by"]),
    (split_and_side_output_on_one_operator, ["'route'", "split", "side output"]),
    (key_by_not_callable, ["key_by", "42"]),
    (parallelism_string, ["'parse'", "parallelism"]),
    (output_tag_empty, ["OutputTag"]),
]


@pytest.mark.parametrize("build,fragments", PLAN_TIME, ids=[c[0].__name__ for c in PLAN_TIME])
def test_plan_time(build, fragments, tmp_path):
    args = (tmp_path,) if build.__code__.co_argcount else ()
    with pytest.raises(Exception) as info:
        build(*args)
    # DataStream has no reduce(), as in PyFlink: its AttributeError names the operator and says key_by()
    expected = USER_ERRORS + ((AttributeError,) if build is reduce_without_key_by else ())
    assert isinstance(info.value, expected), repr(info.value)
    message = str(info.value)
    for fragment in fragments:
        assert fragment.lower() in message.lower(), f"{fragment!r} not in {message!r}"
    assert list(tmp_path.iterdir()) == []  # planning touches no file


@pytest.mark.parametrize("uid", ["a/../..", "/etc", "a\x00b", "..\\x", "ä ö/ü"])
def test_uids_that_look_like_paths_become_safe_keys(uid):
    """Flink allows any string as a uid (it maps state): such uids are kept, and the key
    that becomes a path is made safe with a stable hash instead."""
    p = P()
    p.from_collection([1]).map(int).name("parse").uid(uid).collect("out")
    key = p.stream_graph().nodes[1].key
    assert "/" not in key and "\\" not in key and "\x00" not in key and key not in (".", "..")


# ---- large and deep pipelines plan without internal errors ----------------------------------


def test_six_hundred_unions_plan():
    p = P()
    streams = [p.from_collection([i]).name(f"s{i}") for i in range(600)]
    merged = streams[0]
    for s in streams[1:]:
        merged = merged.union(s)
    merged.map(int).name("after").collect("out")
    assert len(p.plan().chains) >= 1


def test_long_run_of_partitionings_plans():
    p = P(parallelism=2)
    s = p.from_collection([1]).name("src")
    for i in range(400):
        s = (s.rebalance(), s.rescale(), s.shuffle())[i % 3]
    s.map(int).name("after").collect("out")
    plan = p.plan()
    assert plan.chains[-1].operator_names[-1] == "after" or any("after" in c.operator_names for c in plan.chains)


def test_two_thousand_operators_plan():
    p = P()
    s = p.from_collection([1]).name("src")
    for i in range(2000):
        s = s.map(lambda x: x + 1).name(f"m{i}")
    s.collect("out")
    assert sum(len(c.node_ids) for c in p.plan().chains) >= 2001


def test_long_operator_name_plans():
    p = P()
    p.from_collection([1]).map(int).name("n" * 1000).collect("out")
    assert p.plan()


def test_large_collection_keeps_plan_small(tmp_path):
    from airflow_flinkchain.runtime.exchange.layout import Location
    from airflow_flinkchain.runtime.spark.plan_file import ship_plan

    p = P()
    p.from_collection([{"n": i, "pad": "x" * 20} for i in range(300_000)]).map(dict).name("m").collect("out")
    assert len(ship_plan(p.plan(), Location(str(tmp_path / "data")))) < 100_000  # the records travel as data
    assert os.listdir(tmp_path / "data")


# ---- run-time cases (real Spark, one shared session) ---------------------------------------


def run(p, spark, tmp):
    return p.execute(spark=spark, exchange_root=str(tmp / "ex"), run_id="r1")


def tree(path):
    return sorted(os.path.relpath(os.path.join(d, f), path) for d, _, fs in os.walk(path) for f in fs)


@pytest.mark.spark
def test_long_chains_give_right_output(spark, tmp_path):
    p = P()
    src = p.from_collection(list(range(20))).name("src")
    maps = src
    for i in range(1000):
        maps = maps.map(lambda x: x + 1).name(f"m{i}")
    maps.collect("maps")
    filters = src
    for i in range(100):
        filters = filters.filter(lambda x, i=i: x != i % 7).name(f"f{i}")
    filters.collect("filters")
    flats = src.filter(lambda x: x < 2).name("few")
    for i in range(50):
        flats = flats.flat_map(lambda x: [x]).name(f"fm{i}")
    flats.collect("flat_maps")
    procs = src
    for i in range(50):
        procs = procs.process(lambda v, ctx: [v + 1]).name(f"p{i}")
    procs.collect("processes")
    result = run(p, spark, tmp_path)
    assert sorted(result.output("maps")) == [x + 1000 for x in range(20)]
    assert sorted(result.output("filters")) == [x for x in range(20) if x >= 7]
    assert sorted(result.output("flat_maps")) == [0, 1]
    assert sorted(result.output("processes")) == [x + 50 for x in range(20)]


@pytest.mark.spark
def test_long_names_and_odd_run_keys_stay_inside_the_root(spark, tmp_path):
    p = P("n" * 300)
    p.from_collection([1, 2]).map(int).name("o" * 400).uid("u" * 400).collect("c" * 400)
    result = p.execute(spark=spark, exchange_root=str(tmp_path / "ex"), run_id="r" * 400)
    assert sorted(result.output("c" * 400)) == [1, 2]
    assert set(os.listdir(tmp_path)) == {"ex"}


@pytest.mark.spark
@pytest.mark.parametrize("pipeline,run_id", [("adv", ".."), ("adv", "."), ("adv", "a/../.."), ("adv", "/abs"),
                                             ("../escape", "r1")])
def test_bad_run_keys_are_refused_before_any_file_is_touched(spark, tmp_path, pipeline, run_id):
    (tmp_path / "keep.txt").write_text("committed")
    p = P(pipeline)
    p.from_collection([1]).map(int).name("parse").collect("out")
    with pytest.raises(USER_ERRORS) as info:
        p.execute(spark=spark, exchange_root=str(tmp_path / "ex"), run_id=run_id)
    assert repr(run_id if pipeline == "adv" else pipeline) in str(info.value)
    assert (tmp_path / "keep.txt").read_text() == "committed"
    assert not (tmp_path / "ex").exists() or tree(tmp_path / "ex") == []


@pytest.mark.spark
def test_untyped_sinks_widen_the_schema(spark, tmp_path):
    import pyarrow.parquet as pq

    records = [{"a": 1}, {"a": 2, "b": "x"}, {"c": 3.5}]
    p = P()
    src = p.from_collection(records).name("src")
    src.map(dict).name("to_parquet").sink_to(ParquetSink(str(tmp_path / "pq")), name="pq_files")
    src.map(dict).name("to_csv").sink_to(CsvSink(str(tmp_path / "csv")), name="csv_files")
    src.map(dict).name("to_sql").sink_to(SqlSink("wide", url=f"sqlite:///{tmp_path / 'db.sqlite'}"), name="sql_rows")
    run(p, spark, tmp_path)
    rows = pq.read_table(str(tmp_path / "pq")).to_pylist()
    assert sorted(map(json.dumps, rows)) == sorted(json.dumps({"a": r.get("a"), "b": r.get("b"), "c": r.get("c")})
                                                   for r in records)
    header = next(csv.reader(open(os.path.join(tmp_path / "csv", sorted(os.listdir(tmp_path / "csv"))[0]))))
    assert {"a", "b", "c"} <= set(header)
    with sqlite3.connect(tmp_path / "db.sqlite") as db:
        cols = {r[1] for r in db.execute("pragma table_info(wide)")}
        assert {"a", "b", "c"} <= cols
        assert db.execute("select count(*) from wide").fetchone()[0] == 3


@pytest.mark.spark
def test_json_lines_are_standard_json(spark, tmp_path):
    record = {"when": datetime.datetime(2024, 1, 2, 3, 4, 5), "day": datetime.date(2024, 1, 2),
              "price": decimal.Decimal("1.10"), "raw": b"\x00\xff", "tags": {"b", "a"}}
    p = P()
    p.from_collection([record]).map(dict).name("m").sink_to(JsonLinesSink(str(tmp_path / "js")), name="json_files")
    run(p, spark, tmp_path)
    lines = [line for f in sorted(os.listdir(tmp_path / "js")) for line in open(tmp_path / "js" / f)]
    assert len(lines) == 1
    value = json.loads(lines[0], parse_constant=lambda c: pytest.fail(f"non-standard token {c}"))
    assert value["when"].startswith("2024-01-02T03:04:05") and value["day"] == "2024-01-02"
    assert value["price"] == "1.10" and sorted(value["tags"]) == ["a", "b"]


@pytest.mark.spark
def test_json_lines_nan_is_not_written_as_a_token(spark, tmp_path):
    p = P()
    p.from_collection([{"x": math.nan}]).map(dict).name("m").sink_to(JsonLinesSink(str(tmp_path / "js")),
                                                                      name="json_nan")
    try:
        run(p, spark, tmp_path)
    except Exception as exc:  # refusing is allowed: it must name the sink and the field
        assert "json_nan" in str(exc) and "'x'" in str(exc)
        return
    text = "".join(open(tmp_path / "js" / f).read() for f in os.listdir(tmp_path / "js"))
    assert "NaN" not in text
    json.loads(text.strip())


@pytest.mark.spark
def test_sql_constraint_failure_names_the_sink(spark, tmp_path):
    db = tmp_path / "db.sqlite"
    with sqlite3.connect(db) as conn:
        conn.execute("create table strict_t (a integer not null, _run_id text, _dag_id text)")
    p = P()
    p.from_collection([{"a": None}]).map(dict).name("m").sink_to(SqlSink("strict_t", url=f"sqlite:///{db}"),
                                                                  name="strict_rows")
    with pytest.raises(Exception) as info:
        run(p, spark, tmp_path)
    assert "strict_rows" in str(info.value) and "strict_t" in str(info.value)


@pytest.mark.spark
def test_equal_keys_of_different_types_form_one_group(spark, tmp_path):
    import numpy as np

    keys = [1, np.int64(1), decimal.Decimal(1), 1.0, 2, np.int32(2)]
    p = P(parallelism=2, runtime_mode="batch")  # one count per key
    p.from_collection([(k, 1) for k in keys]).name("src").key_by(lambda r: r[0]) \
        .reduce(lambda a, b: (a[0], a[1] + b[1])).name("count").map(lambda r: (int(r[0]), r[1])).name("out_map") \
        .collect("out")
    assert sorted(run(p, spark, tmp_path).output("out")) == [(1, 4), (2, 2)]


@pytest.mark.spark
@pytest.mark.parametrize("policy", ["skip", "dead_letter"])
def test_failing_key_selector_follows_on_error(spark, tmp_path, policy):
    p = P(on_error=policy, runtime_mode="batch")  # one count per key
    keyed = p.from_collection([{"k": 1}, {"nokey": 2}, {"k": 1}]).name("src").key_by(lambda r: r["k"])
    reduced = keyed.reduce(lambda a, b: {"k": a["k"], "n": a.get("n", 1) + b.get("n", 1)}).name("count")
    reduced.collect("out")
    result = run(p, spark, tmp_path)
    assert result.output("out") == [{"k": 1, "n": 2}]
    counters = [c for doc in result.metrics.values() for c in doc["operators"]]
    lost = sum(c.get("skipped", 0) + c.get("dead_lettered", 0) for c in counters)
    assert lost == 1


@pytest.mark.spark
def test_keyed_state_in_a_map_after_key_by(spark, tmp_path):
    from airflow_flinkchain.functions import ValueStateDescriptor

    class Count(MapFunction):
        def open(self, ctx):
            self.n = ctx.get_state(ValueStateDescriptor("n"))

        def map(self, value):
            self.n.update((self.n.value() or 0) + 1)
            return value, self.n.value()

    p = P(parallelism=2)
    p.from_collection(["a", "b", "a", "a"]).name("src").key_by(lambda v: v).map(Count()).name("count") \
        .collect("out")
    assert sorted(run(p, spark, tmp_path).output("out")) == [("a", 1), ("a", 2), ("a", 3), ("b", 1)]
