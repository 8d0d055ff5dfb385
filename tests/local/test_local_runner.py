"""execute_local(): the chain runtime in process (no Spark) - partitioners, side outputs,
split/select, dead letters, keyed operators, watermarks, lifecycle, errors, connectors."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_flinkchain import OutputTag, StreamPipeline
from airflow_flinkchain.functions import MapFunction, ProcessFunction
from airflow_flinkchain.io import CsvSource, JsonLinesSink, JsonLinesSource, ParquetSink, ParquetSource, SqlSink
from airflow_flinkchain.runtime.core.elements import StreamRecord, Watermark
from airflow_flinkchain.runtime.core.partitioners import channel_for_key, rescale_channels
from airflow_flinkchain.runtime.spark.job import ChainRunError
from airflow_flinkchain.testing import TestingSink, TestingSource

from tests.pipeline_functions import (EventTimeProbe, MainThenSide, Mutate, by_subtask, keyed_count_pipeline,
                                      partitioner_pipeline, side_output_pipeline)


def test_every_partitioner_with_parallelism_two_and_three():
    p, branches = partitioner_pipeline()
    res = p.execute_local()
    up_split = {0: [x for x in range(12) if x % 2 == 0], 1: [x for x in range(12) if x % 2 == 1]}
    out = {name: by_subtask(res.output(name)) for name in branches}
    assert out["forward"] == up_split
    assert out["global"] == {0: list(range(12))}
    assert sorted(out["broadcast"]) == [0, 1, 2] and all(v == list(range(12)) for v in out["broadcast"].values())
    assert all(channel_for_key(x % 5, 128, 3) == k for k, xs in out["hash"].items() for x in xs)
    assert out["custom"] == by_subtask([((x // 4) % 3, x) for x in range(12)])
    for name in ("rebalance", "shuffle", "rescale"):
        assert sorted(x for xs in out[name].values() for x in xs) == list(range(12)), name
    assert sorted(len(v) for v in out["rebalance"].values()) == [4, 4, 4]  # round robin per upstream subtask
    for k, xs in out["rescale"].items():  # rescale stays inside the upstream subtask's local group
        assert all(k in rescale_channels(x % 2, 2, 3) for x in xs)
    again = p.execute_local()  # deterministic
    assert again.outputs == res.outputs


def test_side_outputs_split_select_union():
    p = side_output_pipeline()
    res = p.execute_local()
    assert sorted(res.output("even")) == [0, 20, 40, 60, 80]
    assert sorted(res.output("odd_chained")) == [-9, -7, -5, -3, -1]
    assert sorted(res.output("odd_across")) == [1001, 1003, 1005, 1007, 1009]
    assert sorted(res.output("small")) == [("s", x) for x in range(5)]
    assert sorted(res.output("big")) == [("b", x) for x in range(5, 10)]
    assert sorted(res.output("union")) == [0, 1, 1, 2, 3, 3, 4, 5, 7, 9]
    (proc_metrics,) = res.operator_metrics("proc")
    assert proc_metrics["records_in"] == 10 and proc_metrics["side_outputs"] == {"odd": 5}


def test_dead_letters_and_skip_across_an_exchange():
    p = StreamPipeline("dead", parallelism=2)
    src = p.from_collection([1, 2, 0, 4, 0]).name("src")
    divided = src.rebalance().map(lambda x: 12 // x, on_error="dead_letter").name("divide")
    divided.collect("ok")
    divided.dead_letters().rebalance().map(lambda d: (d["record"], d["operator"], d["error_type"])) \
        .name("letters").set_parallelism(1).collect("dl")
    src.map(lambda x: 1 // x).name("skipper").on_error("skip").collect("skipped")
    res = p.execute_local()
    assert sorted(res.output("ok")) == [3, 6, 12]
    assert res.output("dl") == [(0, "divide", "ZeroDivisionError")] * 2
    assert res.output("skipped") == [1, 0, 0]
    assert sum(m["dead_lettered"] for m in res.operator_metrics("divide")) == 2
    assert sum(m["skipped"] for m in res.operator_metrics("skipper")) == 2


def test_keyed_reduce_and_state_across_hash_exchange():
    p = keyed_count_pipeline()
    res = p.execute_local()
    assert sorted(res.output("sums")) == [("a", 10), ("b", 7), ("c", 4)]
    assert sorted(res.output("counts")) == [("a", 1), ("a", 2), ("a", 3), ("b", 1), ("b", 2), ("c", 1)]
    per_subtask = {m["subtask"]: m["records_in"] for m in res.operator_metrics("sum")}
    assert sorted(per_subtask) == [0, 1] and sum(per_subtask.values()) == 6


def test_timestamps_and_watermarks_across_an_exchange():
    p = StreamPipeline("event_time", parallelism=2, runtime_mode="streaming")
    items = [StreamRecord(1, 10), StreamRecord(2, 12), Watermark(16), StreamRecord(3, 20), Watermark(30)]
    (p.from_source(TestingSource(items)).name("src").map(lambda x: x * 10).name("times10")
     .key_by(lambda x: 0).process(EventTimeProbe()).name("probe").collect("out"))
    out = p.execute_local().output("out")
    assert sorted(o for o in out if o[0] == "rec") == [("rec", 10, 10), ("rec", 20, 12), ("rec", 30, 20)]
    assert [o for o in out if o[0] == "timer"] == [("timer", 0, 15), ("timer", 0, 17), ("timer", 0, 25)]


def test_watermarks_pass_an_exchange_in_order():
    p = StreamPipeline("event_time_order", parallelism=1, runtime_mode="streaming")
    items = [StreamRecord(1, 10), StreamRecord(2, 12), Watermark(16), StreamRecord(3, 20), Watermark(30)]
    (p.from_source(TestingSource(items)).name("src").map(lambda x: x * 10).name("times10")
     .key_by(lambda x: 0).process(EventTimeProbe()).name("probe").collect("out"))
    # timer 15 fires on watermark 16, timers 17 and 25 on watermark 30: before the end of input
    assert p.execute_local().output("out") == [("rec", 10, 10), ("rec", 20, 12), ("timer", 0, 15),
                                               ("rec", 30, 20), ("timer", 0, 17), ("timer", 0, 25)]


@pytest.mark.parametrize("reuse", [False, True])
def test_object_reuse_on_off(reuse):
    p = StreamPipeline("reuse", parallelism=1)
    if reuse:
        p.set_object_reuse(True)
    proc = p.from_collection([{"n": 0}]).name("src").process(MainThenSide()).name("proc")
    proc.map(Mutate()).name("mutate").collect("main")
    proc.get_side_output(OutputTag("again")).map(lambda d: d).name("ident").collect("side")
    res = p.execute_local()
    assert res.output("main") == [{"n": 1}]
    assert res.output("side") == ([{"n": 1}] if reuse else [{"n": 0}])


class MutateAfterEmit(ProcessFunction):
    def process_element(self, value, ctx):
        yield value
        value["n"] = -1  # too late: the record already crossed the exchange


def test_records_are_serialized_when_they_cross_an_exchange():
    p = StreamPipeline("sent", parallelism=1)
    p.set_object_reuse(True)
    p.from_collection([{"n": 1}]).name("src").process(MutateAfterEmit()).name("proc") \
        .rebalance().map(lambda d: d).name("after").collect("out")
    assert p.execute_local().output("out") == [{"n": 1}]


class Recorded(MapFunction):
    """Appends lifecycle events to a file (each subtask runs its own copy of the function)."""

    def __init__(self, name, path):
        self.name, self.path = name, path

    def _log(self, event):
        with open(self.path, "a") as f:
            f.write(json.dumps([event, self.name, self.index]) + "\n")

    def open(self, ctx):
        self.index = ctx.get_index_of_this_subtask()
        self._log("open")

    def map(self, value):
        return value

    def close(self):
        self._log("close")


def test_lifecycle_order_chains_in_topological_order_subtasks_in_turn(tmp_path):
    log = str(tmp_path / "events.jsonl")
    p = StreamPipeline("lifecycle", parallelism=2)
    first = p.from_collection([1, 2, 3]).name("src").map(Recorded("a1", log)).name("a1") \
        .map(Recorded("a2", log)).name("a2")
    first.rebalance().map(Recorded("b1", log)).name("b1").set_parallelism(1).collect("out")
    p.execute_local()
    events = [tuple(json.loads(line)) for line in open(log)]
    assert events == [("open", "a2", 0), ("open", "a1", 0), ("close", "a1", 0), ("close", "a2", 0),
                      ("open", "a2", 1), ("open", "a1", 1), ("close", "a1", 1), ("close", "a2", 1),
                      ("open", "b1", 0), ("close", "b1", 0)]


def test_each_subtask_runs_its_own_copy_of_the_functions():
    class Counter(MapFunction):
        def __init__(self):
            self.seen = 0

        def map(self, value):
            self.seen += 1
            return self.seen

    counter = Counter()
    p = StreamPipeline("copies", parallelism=2)
    p.from_collection(range(6)).name("src").rebalance().map(counter).name("count").collect("out")
    assert sorted(p.execute_local().output("out")) == [1, 1, 2, 2, 3, 3]
    assert counter.seen == 0  # the DAG file's object is never called


def test_user_error_raises_chain_run_error_and_commits_nothing():
    p = StreamPipeline("boom", parallelism=1)
    sink = TestingSink("out")
    p.from_collection([1, 2, 0, 4]).name("src").map(lambda x: 10 // x).name("divide").sink_to(sink)
    with pytest.raises(ChainRunError, match=r"operator 'divide'.*ZeroDivisionError.*record: 0") as err:
        p.execute_local()
    doc = err.value.metrics
    assert doc["state"] == "failed" and "divide" in doc["error"]
    assert sink.records == []


def test_typed_edge_converts_records_and_names_a_bad_one():
    p = StreamPipeline("typed", parallelism=1)
    p.from_collection(range(3)).name("src") \
        .map(lambda x: {"id": x, "name": f"n{x}"}, output_type={"id": "int64", "name": "string"}).name("rows") \
        .rebalance().map(lambda r: (r["id"], r["name"])).name("ids").collect("ids")
    assert sorted(p.execute_local().output("ids")) == [(0, "n0"), (1, "n1"), (2, "n2")]

    bad = StreamPipeline("typed_bad", parallelism=1)
    bad.from_collection([1, 2.5]).name("src").map(lambda x: {"v": x}, output_type={"v": "int64"}).name("to_row") \
        .rebalance().map(lambda r: r).name("next").collect("out")
    with pytest.raises(ChainRunError, match=r"operator 'to_row'.*field 'v' expects int64 but got 2.5"):
        bad.execute_local()

    undeclared = StreamPipeline("typed_unparsable", parallelism=1)
    undeclared.from_collection([1]).name("src").map(lambda x: x, output_type={"v": "no_such_type"}).name("m") \
        .collect("out")
    with pytest.raises(ChainRunError, match=r"operator 'm'.*unknown type 'no_such_type'"):
        undeclared.execute_local()


def test_sql_sink_is_refused_with_its_name():
    p = StreamPipeline("sql", parallelism=1)
    p.from_collection([{"a": 1}]).name("src").sink_to(SqlSink("t", url="sqlite://"), name="to_table")
    with pytest.raises(ChainRunError, match=r"sink 'to_table'.*SqlSink.*execute\(\)"):
        p.execute_local()


def test_sql_source(tmp_path):
    import sqlalchemy as sa

    url = f"sqlite:///{tmp_path / 'db.sqlite'}"
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        conn.execute(sa.text("create table t (id integer, name text)"))
        conn.execute(sa.text("insert into t values (1, 'a'), (2, 'b')"))
    engine.dispose()
    from airflow_flinkchain.io import SqlSource

    p = StreamPipeline("sql_source", parallelism=2)
    p.from_source(SqlSource("select id, name from t order by id", url=url), name="rows") \
        .map(lambda r: r["name"] * r["id"]).name("repeat").collect("out")
    assert sorted(p.execute_local().output("out")) == ["a", "bb"]


def test_file_source_and_sinks_with_templated_paths(tmp_path):
    pq.write_table(pa.table({"id": [1, 2, 3, 4], "v": [1.5, 2.5, 3.5, 4.5]}), tmp_path / "in.parquet")
    (tmp_path / "csv").mkdir()
    (tmp_path / "csv" / "a.csv").write_text("id,name\n1,x\n2,y\n")
    (tmp_path / "csv" / "_SUCCESS").write_text("")
    p = StreamPipeline("files", parallelism=2)
    rows = p.from_source(ParquetSource(str(tmp_path / "in.parquet"), schema={"id": "int64", "v": "double"}),
                         name="read")
    out_type = {"id": "int64", "double": "double"}
    rows.map(lambda r: {"id": r["id"], "double": r["v"] * 2}).name("twice") \
        .sink_to(ParquetSink(str(tmp_path / "out" / "{{ ds_nodash }}"), output_type=out_type), name="write")
    rows.map(lambda r: r).name("ident").sink_to(JsonLinesSink(str(tmp_path / "json")), name="json")
    p.from_source(CsvSource(str(tmp_path / "csv")), name="csv").map(lambda r: (r["id"], r["name"])).name("t") \
        .collect("csv_rows")
    res = p.execute_local(context={"ds_nodash": "20240102"})
    written = pq.read_table(tmp_path / "out" / "20240102").to_pylist()
    assert sorted(r["id"] for r in written) == [1, 2, 3, 4] and {r["double"] for r in written} == {3.0, 5.0, 7.0, 9.0}
    assert sorted(f.name for f in (tmp_path / "out" / "20240102").iterdir()) == ["part-00000.parquet",
                                                                               "part-00001.parquet"]
    lines = [json.loads(line) for f in sorted((tmp_path / "json").iterdir()) for line in f.read_text().splitlines()]
    assert lines == [{"id": 1, "v": 1.5}, {"id": 2, "v": 2.5}, {"id": 3, "v": 3.5}, {"id": 4, "v": 4.5}]
    assert sorted(res.output("csv_rows")) == [(1, "x"), (2, "y")]
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no staging left behind
    read_in = {m["subtask"]: m["records_in"] for m in res.operator_metrics("read")}
    assert read_in == {0: 2, 1: 2}

    back = StreamPipeline("json_back", parallelism=1)
    back.from_source(JsonLinesSource(str(tmp_path / "json"), schema={"id": "int64", "v": "double"}), name="j") \
        .map(lambda r: r["v"]).name("v").collect("v")
    assert back.execute_local().output("v") == [1.5, 2.5, 3.5, 4.5]

    with pytest.raises(ChainRunError, match=r"source 'missing'.*does not exist"):
        bad = StreamPipeline("missing", parallelism=1)
        bad.from_source(ParquetSource(str(tmp_path / "nope")), name="missing").collect("out")
        bad.execute_local()


def test_testing_source_and_sink_with_both_runners_api():
    p = StreamPipeline("testing", parallelism=2)
    evens, odds = TestingSink(), TestingSink("odds")
    numbers = p.from_source(TestingSource(range(6)), name="numbers")
    numbers.filter(lambda x: x % 2 == 0).name("evens").sink_to(evens)
    numbers.filter(lambda x: x % 2 == 1).name("odds").sink_to(odds)
    res = p.execute_local()
    assert sorted(evens.records) == [0, 2, 4] and sorted(odds.records) == [1, 3, 5]
    assert res.output(evens.name) == evens.records and res.output("odds") == odds.records
    p.execute_local()  # a second run replaces the records
    assert sorted(evens.records) == [0, 2, 4]


def test_testing_docstrings():
    import doctest

    import airflow_flinkchain.testing as testing

    result = doctest.testmod(testing)
    assert result.failed == 0 and result.attempted > 0


def test_running_locally_imports_neither_spark_nor_airflow():
    code = textwrap.dedent("""
        import sys
        from airflow_flinkchain import StreamPipeline
        from airflow_flinkchain.testing import TestingSink, TestingSource
        p = StreamPipeline("no_spark", parallelism=2, runtime_mode="batch")
        out = TestingSink()
        p.from_source(TestingSource(range(4))).rebalance().map(lambda x: x + 1).key_by(lambda x: x % 2) \\
            .reduce(lambda a, b: a + b).sink_to(out)
        p.execute_local()
        assert sorted(out.records) == [4, 6], out.records
        loaded = [m for m in sys.modules if m.split(".")[0] in ("pyspark", "py4j", "airflow")]
        assert not loaded, loaded
        print("ok")
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr


def test_docs_testing_page_example():
    from pathlib import Path

    page = (Path(__file__).resolve().parents[2] / "docs" / "testing.md").read_text()
    code = page.split("```python\n", 1)[1].split("```", 1)[0].replace("from orders import build\n", "")
    namespace: dict = {}
    exec(compile(code, "docs/testing.md", "exec"), namespace)
    namespace["test_quantities_per_sku"]()
