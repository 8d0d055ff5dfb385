"""Issue 6 on a real local Spark run:
* records that do not fit a declared output_type (typed exchange edge, Parquet
  file sink, SQL sink): a clear error naming the field and the operator/sink,
  never silent truncation or nulls, nothing committed;
* corrupt exchange data (truncated, foreign, missing or extra Parquet file under
  the exchange root): the downstream chain fails with a clear error naming the
  dataset and the file, nothing silently dropped;
* concurrency: two runs of one pipeline and two pipelines at once on the same
  exchange root and run store do not interfere."""

from __future__ import annotations

import os
import shutil
from concurrent.futures import ThreadPoolExecutor

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_flinkchain import StreamPipeline
from airflow_flinkchain.functions import OutputTag
from airflow_flinkchain.io import ParquetSink, SqlSink
from airflow_flinkchain.runtime.exchange.layout import ExchangeArea
from airflow_flinkchain.runtime.spark.local import execute_pipeline
from airflow_flinkchain.runtime.spark.job import ChainRunError, run_chain
from airflow_flinkchain.store import RunStore

from .helpers import multiset, table_exists, tree

pytestmark = pytest.mark.spark
TYPE = {"id": "int64 not null", "name": "string"}
GOOD = [{"id": i, "name": f"n{i}"} for i in range(10)]

BAD_RECORDS = [
    ("float_truncated", {"id": 1.5, "name": "a"}, ["field 'id' expects int64", "1.5"]),
    ("string_in_int", {"id": "7", "name": "a"}, ["field 'id' expects int64", "'7'"]),
    ("none_in_not_null", {"id": None, "name": "a"}, ["field 'id' expects int64 not null", "None"]),
    ("overflow", {"id": 2 ** 70, "name": "a"}, ["field 'id' expects int64"]),
    ("missing_field", {"id": 1}, ["missing field(s) ['name']"]),
    ("extra_field", {"id": 1, "name": "a", "debug": True}, ["undeclared field(s) ['debug']"]),
    ("not_a_dict", (1, "a"), ["is a tuple, not a dict"]),
    # as many keys as declared, one of them wrong: caught by the per-column lookup, not the key count
    ("renamed_field", {"id": 1, "nmae": "a"}, ["missing field(s) ['name']", "undeclared field(s) ['nmae']"]),
]


def typed_pipeline(tmp, bad, where):
    p = StreamPipeline(f"typed_{where}", parallelism=2)
    s = p.from_collection(GOOD[:5] + [bad] + GOOD[5:]).name("numbers")
    if where == "edge":
        s.map(lambda r: r, output_type=TYPE).name("typed").rebalance().map(lambda r: r).name("after") \
            .collect("out")
    elif where == "file":
        s.rebalance().map(lambda r: r).name("m").sink_to(ParquetSink(str(tmp / "out"), output_type=TYPE),
                                                          name="files")
    else:
        s.rebalance().map(lambda r: r).name("m").sink_to(
            SqlSink("typed", url=f"sqlite:///{tmp / 'db.sqlite'}", output_type=TYPE), name="table")
    return p


# Every case runs on the typed edge; the sinks share the same checks, so they get a few.
SINK_CASES = ("float_truncated", "none_in_not_null", "extra_field", "renamed_field")
OUTPUT_TYPE_CASES = [
    pytest.param(where, *c, id=f"{where}-{c[0]}")
    for where in ("edge", "file", "sql")
    for c in BAD_RECORDS
    if where == "edge" or c[0] in SINK_CASES
]


@pytest.mark.parametrize("where,case,bad,fragments", OUTPUT_TYPE_CASES)
def test_record_not_fitting_output_type(spark, tmp_path, where, case, bad, fragments):
    p = typed_pipeline(tmp_path, bad, where)
    with pytest.raises(ChainRunError) as info:
        execute_pipeline(p, spark=spark, exchange_root=str(tmp_path / "ex"), run_id="r1")
    msg = str(info.value)
    who = {"edge": "operator 'typed' writing edge", "file": "sink 'files'", "sql": "sink 'table'"}[where]
    for fragment in [who, *fragments]:
        assert fragment in msg, f"{fragment!r} not in {msg!r}"
    area = ExchangeArea(str(tmp_path / "ex"), p.name, "r1")
    assert not area.collect("out").exists()
    assert [f for f in tree(str(tmp_path / "out")) if os.path.isfile(tmp_path / "out" / f)] == [] \
        if (tmp_path / "out").exists() else True
    assert not table_exists(str(tmp_path / "db.sqlite"), "typed")


def test_fitting_records_keep_their_types(spark, tmp_path):
    p = typed_pipeline(tmp_path, {"id": 99, "name": None}, "file")
    execute_pipeline(p, spark=spark, exchange_root=str(tmp_path / "ex"), run_id="r1")
    table = pq.read_table(str(tmp_path / "out"))
    assert table.schema.field("id").type == pa.int64()
    assert multiset(table.to_pylist()) == multiset(GOOD + [{"id": 99, "name": None}])


def _tagged_pipeline(late):
    tag = OutputTag("odd", output_type=TYPE)

    def route(r, ctx):
        if r["id"] % 2:
            ctx.output(tag, late if r["id"] == 5 else r)
        else:
            yield r

    p = StreamPipeline("typed_side", parallelism=2)
    routed = p.from_collection(GOOD).name("numbers").process(route, output_tags=[tag]).name("route")
    routed.collect("even")
    routed.get_side_output(tag).rebalance().map(lambda r: r).name("after").collect("odd")
    return p


def test_typed_side_output_crosses_chains_as_plain_parquet_columns(spark, tmp_path):
    p = _tagged_pipeline(GOOD[5])
    result = execute_pipeline(p, spark=spark, exchange_root=str(tmp_path / "ex"), run_id="r1", keep=True)
    assert multiset(result.output("odd")) == multiset(r for r in GOOD if r["id"] % 2)
    edge = next(e for e in p.plan().edges if e.output_tag == "odd")
    files = [os.path.join(d, f) for d, _, fs in os.walk(ExchangeArea(str(tmp_path / "ex"), p.name, "r1")
                                                     .edge(edge.id).path) for f in fs if f.endswith(".parquet")]
    assert files
    schema = pq.read_schema(files[0])
    assert schema.field("id").type == pa.int64() and schema.field("name").type == pa.string()


def test_side_output_record_not_fitting_its_tag_type_names_operator_and_field(spark, tmp_path):
    p = _tagged_pipeline({"id": 5.5, "name": "x"})
    with pytest.raises(ChainRunError) as info:
        execute_pipeline(p, spark=spark, exchange_root=str(tmp_path / "ex"), run_id="r1")
    for fragment in ("operator 'route' writing edge", "field 'id' expects int64", "5.5"):
        assert fragment in str(info.value), str(info.value)


# ---- corrupt exchange data ----------------------------------------------------------------------


def two_chains(name="corrupt"):
    p = StreamPipeline(name, parallelism=2)
    p.from_collection(range(40)).name("numbers").rebalance().map(lambda x: x * 10).name("times_ten") \
        .collect("out")
    return p


def _truncate(path):
    data = open(path, "rb").read()
    open(path, "wb").write(data[: len(data) // 2])


def _foreign(path):
    pq.write_table(pa.table({"payload": [b"x"], "ts": pa.array([None], pa.int64())}), path)


def _other_edge(path):
    """A real exchange file, but of channel 1 copied over channel 0's."""
    other = path.replace("channel=0", "channel=1")
    shutil.copy(other, path)


def _missing(path):
    os.remove(path)


def _extra(path):
    shutil.copy(path, path.replace("part-00000", "part-00007"))


CORRUPTIONS = [
    (_truncate, ["is not a readable Parquet file"]),
    (_foreign, ["was not written for this dataset/channel"]),
    (_other_edge, ["was not written for this dataset/channel", "channel=1"]),
    (_missing, ["has 0 part files, expected 1"]),
    (_extra, ["has 2 part files, expected 1"]),
]


@pytest.mark.parametrize("corrupt,fragments", CORRUPTIONS, ids=[c[0].__name__.strip("_") for c in CORRUPTIONS])
def test_corrupt_exchange_file_fails_downstream_clearly(spark, tmp_path, corrupt, fragments):
    p = two_chains()
    job = p.plan()
    root = str(tmp_path / "ex")
    up, down = job.chains
    run_chain(spark, job, up.id, "r1", root)
    (edge,) = up.out_edges
    area = ExchangeArea(root, p.name, "r1")
    part = os.path.join(area.edge(edge).path, "channel=0", "part-00000.parquet")
    assert os.path.exists(part)
    corrupt(part)
    with pytest.raises(ChainRunError) as info:
        run_chain(spark, job, down.id, "r1", root)
    msg = str(info.value)
    for fragment in [f"exchange dataset {edge!r}", "clear the upstream task", *fragments]:
        assert fragment in msg, f"{fragment!r} not in {msg!r}"
    assert not area.collect("out").exists()
    # clearing the upstream task rewrites the dataset; the downstream then gets every record
    run_chain(spark, job, up.id, "r1", root)
    run_chain(spark, job, down.id, "r1", root)
    from airflow_flinkchain.runtime.exchange.dataset import read_records

    assert sorted(read_records(area.collect("out"), "collect:out")) == [x * 10 for x in range(40)]


# ---- concurrency ------------------------------------------------------------------------------


def test_concurrent_runs_and_pipelines_share_root_and_store(spark, tmp_path):
    """Two runs of one pipeline and a second pipeline, all at once (threads sharing the
    SparkSession: concurrent Spark jobs), on one exchange root and one run store."""
    root = str(tmp_path / "ex")
    store = RunStore(f"sqlite:///{tmp_path / 'store.db'}")
    db = f"sqlite:///{tmp_path / 'shared.db'}"

    def pipeline(name, factor):
        p = StreamPipeline(name, parallelism=2, runtime_mode="batch")
        s = p.from_collection(range(200)).name("numbers").rebalance().map(lambda x: {"v": x * factor}).name("scale")
        s.key_by(lambda r: r["v"] % 7).reduce(lambda a, b: {"v": a["v"] + b["v"]}).name("sum").collect("sums")
        s.sink_to(ParquetSink(str(tmp_path / "out" / name / "{{ run_id }}")), name="files")
        s.sink_to(SqlSink("shared", url=db), name="table")
        return p

    jobs = [("alpha", 2, "run_1"), ("alpha", 2, "run_2"), ("beta", 3, "run_1")]

    def go(args):
        name, factor, run_id = args
        result = execute_pipeline(pipeline(name, factor), spark=spark, exchange_root=root, run_id=run_id)
        for doc in result.metrics.values():
            store.record_attempt(doc)
        return result

    with ThreadPoolExecutor(3) as pool:
        results = list(pool.map(go, jobs))
    for (name, factor, run_id), result in zip(jobs, results):
        values = [x * factor for x in range(200)]
        expected = [{"v": sum(v for v in values if v % 7 == k)} for k in range(7)]
        assert multiset(result.output("sums")) == multiset(expected), (name, run_id)
        assert multiset(pq.read_table(str(tmp_path / "out" / name / run_id)).to_pylist()) == \
            multiset({"v": v} for v in values)
        m = store.get_run_metrics(name, run_id)
        assert {o["name"]: o["records_in"] for c in m["chains"] for o in c["operators"]}["scale"] == 200
        assert not ExchangeArea(root, name, run_id).run.join("_attempts").exists()
    import sqlite3

    con = sqlite3.connect(str(tmp_path / "shared.db"))
    counts = con.execute("select _dag_id, _run_id, count(*) from shared group by _dag_id, _run_id").fetchall()
    con.close()
    # alpha and beta both write run id run_1 into one table: each keeps its own rows
    assert sorted(counts) == [("alpha", "run_1", 200), ("alpha", "run_2", 200), ("beta", "run_1", 200)]
