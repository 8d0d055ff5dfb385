"""Connectors without a declared type keep every field (schema widened over the whole
output, conflicts refused naming the field); JSON lines are standard JSON; a database
refusing a SQL sink's rows names the sink and table; from_collection ships its records as
data, not inside the plan."""

from __future__ import annotations

import base64
import datetime
import decimal
import json
import os

import pyarrow.csv as pcsv
import pyarrow.parquet as pq
import pytest
import sqlalchemy as sa

from airflow_flinkchain import StreamPipeline
from airflow_flinkchain.io import CsvSink, JsonLinesSink, ParquetSink, SqlSink
from airflow_flinkchain.runtime.core.serialize import dumps_plan
from airflow_flinkchain.runtime.spark.job import ChainRunError
from airflow_flinkchain.runtime.spark.plan_file import dump_plan, load_plan

pytestmark = pytest.mark.spark

# Record 0 lacks "tag"; "score" is an int in one record and a float in another.
MIXED = [{"id": 0, "score": 1}, {"id": 1, "tag": "x", "score": 2.5}, {"id": 2}, {"id": 3, "tag": "y"}]


def _parts(path, fmt):
    return [os.path.join(path, f) for f in sorted(os.listdir(path)) if not f.startswith(".")]


def _sink_pipeline(name, sink, records=MIXED, parallelism=1):
    p = StreamPipeline(name, parallelism=parallelism)
    p.from_collection(records).name("src").rebalance().map(lambda r: dict(r)).name("copy") \
        .sink_to(sink, name="out")
    return p


@pytest.mark.parametrize("parallelism", [1, 2])
def test_untyped_parquet_sink_keeps_every_field(spark, tmp_path, parallelism):
    out = str(tmp_path / "pq")
    _sink_pipeline("widen_pq", ParquetSink(out), parallelism=parallelism).execute(spark=spark)
    parts = _parts(out, "parquet")
    schemas = {str(pq.read_schema(f)) for f in parts}
    assert len(schemas) == 1, schemas  # every part file has the whole output's schema
    rows = sorted((r for f in parts for r in pq.read_table(f).to_pylist()), key=lambda r: r["id"])
    assert rows == [{"id": 0, "score": 1.0, "tag": None}, {"id": 1, "score": 2.5, "tag": "x"},
                    {"id": 2, "score": None, "tag": None}, {"id": 3, "score": None, "tag": "y"}]


@pytest.mark.parametrize("parallelism", [1, 2])
def test_untyped_csv_sink_keeps_every_field(spark, tmp_path, parallelism):
    out = str(tmp_path / "csv")
    _sink_pipeline("widen_csv", CsvSink(out), parallelism=parallelism).execute(spark=spark)
    parts = [f for f in _parts(out, "csv") if os.path.getsize(f)]
    headers = {open(f).readline().strip() for f in parts}
    assert len(headers) == 1 and set(headers.pop().replace('"', "").split(",")) == {"id", "score", "tag"}
    rows = sorted((r for f in parts for r in pcsv.read_csv(f).to_pylist()), key=lambda r: r["id"])
    assert [(r["id"], r["tag"] or None) for r in rows] == [(0, None), (1, "x"), (2, None), (3, "y")]  # CSV: null = empty


@pytest.mark.parametrize("parallelism", [1, 2])
def test_untyped_file_sink_refuses_conflicting_types_naming_the_field(spark, tmp_path, parallelism):
    records = [{"id": i, "code": i if i % 2 == 0 else f"c{i}"} for i in range(6)]
    with pytest.raises(ChainRunError) as err:
        _sink_pipeline("conflict", ParquetSink(str(tmp_path / "pq")), records, parallelism).execute(spark=spark)
    assert "sink 'out'" in str(err.value) and "'code'" in str(err.value), str(err.value)
    assert not os.path.exists(tmp_path / "pq")  # nothing committed


def test_json_lines_are_standard_json_with_documented_encodings(spark, tmp_path):
    out = str(tmp_path / "json")
    record = {"at": datetime.datetime(2024, 1, 2, 3, 4, 5), "day": datetime.date(2024, 1, 2),
              "amount": decimal.Decimal("12.30"), "raw": b"\x00\xff", "tags": {"b", "a"}, "pair": (1, 2)}
    _sink_pipeline("json_std", JsonLinesSink(out), [record]).execute(spark=spark)
    lines = [line for f in _parts(out, "json") for line in open(f)]
    assert len(lines) == 1
    assert json.loads(lines[0]) == {"at": "2024-01-02T03:04:05", "day": "2024-01-02", "amount": "12.30",
                                    "raw": base64.b64encode(b"\x00\xff").decode(), "tags": ["a", "b"],
                                    "pair": [1, 2]}


@pytest.mark.parametrize("value", [float("nan"), float("inf"), object()], ids=["nan", "inf", "object"])
def test_json_lines_refuse_values_without_json_form_naming_the_field(spark, tmp_path, value):
    records = [{"id": 1, "nested": {"v": value}}]
    with pytest.raises(ChainRunError) as err:
        _sink_pipeline("json_bad", JsonLinesSink(str(tmp_path / "json")), records).execute(spark=spark)
    assert "sink 'out'" in str(err.value) and "'nested.v'" in str(err.value), str(err.value)


def test_untyped_sql_sink_creates_columns_for_every_field(spark, tmp_path):
    db = f"sqlite:///{tmp_path / 'db.sqlite'}"
    _sink_pipeline("widen_sql", SqlSink("t", url=db)).execute(spark=spark)
    engine = sa.create_engine(db)
    with engine.connect() as conn:
        rows = sorted(conn.execute(sa.text("SELECT id, tag, score FROM t")).all())
    engine.dispose()
    assert rows == [(0, None, 1.0), (1, "x", 2.5), (2, None, None), (3, "y", None)]


def test_sql_sink_refuses_conflicting_types_naming_the_field(spark, tmp_path):
    db = f"sqlite:///{tmp_path / 'db.sqlite'}"
    records = [{"id": 1, "code": 5}, {"id": 2, "code": "five"}]
    with pytest.raises(ChainRunError) as err:
        _sink_pipeline("conflict_sql", SqlSink("t", url=db), records).execute(spark=spark)
    assert "sink 'out'" in str(err.value) and "'code'" in str(err.value), str(err.value)


def test_sql_insert_refused_by_the_database_names_sink_and_table(spark, tmp_path):
    db = f"sqlite:///{tmp_path / 'db.sqlite'}"
    engine = sa.create_engine(db)
    with engine.begin() as conn:
        conn.execute(sa.text("CREATE TABLE scores (id INTEGER NOT NULL UNIQUE, _run_id TEXT)"))
    engine.dispose()
    records = [{"id": 1}, {"id": 1}]  # violates UNIQUE
    with pytest.raises(ChainRunError) as err:
        _sink_pipeline("refused_sql", SqlSink("scores", url=db, dag_id_column=None), records).execute(spark=spark)
    text = str(err.value)
    assert "sink 'out'" in text and "'scores'" in text and "constraints" in text, text


def test_from_collection_ships_records_as_data_not_in_the_plan(spark, tmp_path):
    records = [{"id": i, "name": f"n{i}", "values": [i, i + 1]} for i in range(200_000)]
    p = StreamPipeline("big_collection", parallelism=2)
    p.from_collection(records).name("src").filter(lambda r: r["id"] % 1000 == 0).name("sample").collect("out")
    job = p.plan()
    plan_path = str(tmp_path / "plan.pkl")
    dump_plan(job, plan_path)
    assert os.path.getsize(plan_path) < 100_000 < len(dumps_plan(job))  # the plan stays small
    shipped = load_plan(plan_path).stream_graph.node_by_key("src").function
    assert len(shipped.items) == len(records) and list(shipped.items)[:3] == records[:3]
    result = p.execute(spark=spark)
    assert sorted(r["id"] for r in result.output("out")) == list(range(0, 200_000, 1000))


def test_a_new_connector_plugs_in_by_descriptor_type(tmp_path):
    from dataclasses import dataclass

    from airflow_flinkchain.io.sources import Source
    from airflow_flinkchain.runtime.connectors import ConnectorContext, SourceReader, register_source, source_reader
    from airflow_flinkchain.runtime.exchange.layout import ExchangeArea

    @dataclass(frozen=True, eq=False)
    class CountingSource(Source):
        n: int = 0

    @dataclass(frozen=True, eq=False)
    class Unknown(Source):
        pass

    @register_source(CountingSource)
    class CountingReader(SourceReader):
        def __init__(self, descriptor, ctx):
            self.n = descriptor.n

        def read(self, subtask, batches):
            return range(self.n) if subtask == 0 else ()

    area = ExchangeArea(str(tmp_path), "d", "r")
    ctx = ConnectorContext("src", "src", "source 'src'", None, area, area.attempt("c", "1"))
    reader = source_reader(CountingSource(3), ctx)
    assert isinstance(reader, CountingReader) and list(reader.read(0, iter(()))) == [0, 1, 2]
    assert reader.input_dataframe(None, 2) is None  # no Spark input: subtasks read by themselves
    with pytest.raises(TypeError, match="source 'src': unsupported source descriptor.*register_source"):
        source_reader(Unknown(), ctx)


def test_sql_conn_id_url_is_taken_from_the_handed_over_environment(spark, tmp_path, monkeypatch):
    from airflow_flinkchain.io import SqlSource
    from airflow_flinkchain.runtime.connectors.sql import conn_url_env

    db = f"sqlite:///{tmp_path / 'db.sqlite'}"
    engine = sa.create_engine(db)
    with engine.begin() as conn:
        conn.execute(sa.text("CREATE TABLE src (id INTEGER)"))
        conn.execute(sa.text("INSERT INTO src VALUES (1), (2)"))
    monkeypatch.setenv(conn_url_env("warehouse"), db)
    p = StreamPipeline("conn_env", parallelism=1)
    p.from_source(SqlSource("SELECT id FROM src", conn_id="warehouse"), name="read") \
        .map(lambda r: {"id": r["id"] * 10}).name("times10").sink_to(SqlSink("dst", conn_id="warehouse"), name="out")
    p.execute(spark=spark)
    with engine.connect() as conn:
        assert sorted(conn.execute(sa.text("SELECT id FROM dst")).scalars()) == [10, 20]
    engine.dispose()
