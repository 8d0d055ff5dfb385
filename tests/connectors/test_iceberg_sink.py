"""IcebergSink against real Iceberg tables (pyiceberg, SQL catalog on SQLite): in stream runs
N runs plus a drain equal one STREAMING run, one snapshot per run carrying (app id,
checkpoint id); a repeated publication writes nothing; runs SIGKILLed while running, after
the commit point before the snapshot's commit and after it, then retried, lose and duplicate
nothing; a schema conflict fails naming the sink and the field; batch runs replace their rows."""

from __future__ import annotations

import socket
import uuid
from collections import Counter

import pytest
import sqlalchemy as sa

from airflow_flinkchain import StreamPipeline
from airflow_flinkchain.io.sinks import IcebergSink
from airflow_flinkchain.runtime.stream_run import StreamRunError
from tests.connectors.kill_runs import as_row, runs_killed_and_retried, window_sums
from tests.connectors.nats_server import unavailable
from tests.streamruns.cases import make_records, slices
from tests.streamruns.partitioned_log import PartitionedLog, append

pyiceberg = pytest.importorskip("pyiceberg", reason="pyiceberg is not installed (pip install -r requirements.txt)")
TABLE = "shop.windows"
POSTGRES = "postgresql+psycopg2://postgres@127.0.0.1:5432/test"


def catalog_props(tmp_path, uri=None) -> dict:
    (tmp_path / "warehouse").mkdir(exist_ok=True)
    return {"name": "test", "type": "sql", "uri": uri or f"sqlite:///{tmp_path / 'catalog.db'}",
            "warehouse": f"file://{tmp_path / 'warehouse'}"}


@pytest.fixture(params=["sqlite", "postgres"])
def catalog(request, tmp_path):
    """A SQL catalog on SQLite, or on the real PostgreSQL (a catalog name of the test's own)."""
    if request.param == "sqlite":
        yield catalog_props(tmp_path)
        return
    try:
        socket.create_connection(("127.0.0.1", 5432), timeout=2).close()
    except OSError:
        unavailable("no PostgreSQL at 127.0.0.1:5432 (database `test`) for the Iceberg SQL catalog")
    props = {**catalog_props(tmp_path, POSTGRES), "name": f"test_{uuid.uuid4().hex[:8]}"}
    yield props
    engine = sa.create_engine(POSTGRES)
    with engine.begin() as conn:  # pyiceberg's catalog tables keep one row set per catalog name
        for t in ("iceberg_tables", "iceberg_namespace_properties"):
            conn.execute(sa.text(f"delete from {t} where catalog_name = :c"), {"c": props["name"]})
    engine.dispose()


def load_table(catalog: dict, table: str = TABLE):
    from pyiceberg.catalog import load_catalog

    return load_catalog(catalog["name"], **{k: v for k, v in catalog.items() if k != "name"}).load_table(table)



def pipeline(name: str, log: str, ckpt, catalog, fail=None) -> StreamPipeline:
    """Tumbling-window sums appended to the Iceberg table (catalog None: a collect sink only)."""
    return window_sums(name, log, ckpt, None if catalog is None else IcebergSink(TABLE, catalog=catalog), fail)


def table_rows(catalog: dict, table: str = TABLE) -> Counter:
    return Counter(tuple(sorted(r.items())) for r in load_table(catalog, table).scan().to_arrow().to_pylist())


def expected(tmp_path, records) -> Counter:
    log = str(tmp_path / "whole")
    append(log, "p0", records)
    return Counter(tuple(sorted(as_row(v).items()))
                   for v in pipeline("whole", log, None, None).execute_local().output("windows"))


@pytest.mark.parametrize("n", [1, 4])
def test_n_runs_and_a_drain_equal_one_streaming_run_one_snapshot_per_run(tmp_path, catalog, n):
    records = make_records(seed=43)
    log, ckpt = str(tmp_path / "log"), str(tmp_path / "ckpt")
    for k, part in enumerate(slices(records, n)):
        append(log, "p0", part)
        pipeline("ice", log, ckpt, catalog).execute_local(run_id=f"r{k}")
    pipeline("ice", log, ckpt, catalog).execute_local(run_id="drain", drain=True)
    assert table_rows(catalog) == expected(tmp_path, records)
    snapshots = load_table(catalog).snapshots()
    summaries = [s.summary.additional_properties for s in snapshots]
    assert all(s["flinkchain.app-id"].startswith("flinkchain/ice/") for s in summaries)
    checkpoints = [int(s["flinkchain.checkpoint"]) for s in summaries]
    assert checkpoints == sorted(set(checkpoints)) and len(checkpoints) <= n + 1  # one snapshot per run at most
    assert checkpoints[-1] == n + 1  # the drain's checkpoint wrote the last windows
    with pytest.raises(StreamRunError, match="re-running it is refused"):
        pipeline("ice", log, ckpt, catalog).execute_local(run_id="drain", drain=True)


def test_a_repeated_publication_writes_nothing(tmp_path):
    from airflow_flinkchain.runtime.connectors.iceberg import publish_iceberg
    from airflow_flinkchain.runtime.connectors.published import (Publication, publish_staged, staged_writer,
                                                                write_descriptor)
    from airflow_flinkchain.runtime.exchange.layout import Location

    catalog = catalog_props(tmp_path)
    stage = Location(str(tmp_path / "stage"))
    w = staged_writer(stage, "k", 0, "sink 'k'")
    for r in ({"key": "a", "value": 1}, {"key": "b", "value": 2}):
        w.write(r)
    w.close()
    write_descriptor(stage, IcebergSink("lake.events", catalog=catalog))
    first = publish_staged(stage, Publication("p", "k", 7, "sink 'k'"))
    again = publish_staged(stage, Publication("p", "k", 7, "sink 'k'"))
    older = publish_staged(stage, Publication("p", "k", 6, "sink 'k'"))
    other_sink = publish_iceberg(IcebergSink("lake.events", catalog=catalog), [{"key": "a", "value": 1}],
                                 Publication("p", "k2", 7, "sink 'k2'"))
    assert first["records"] == 2 and again.get("already") and older.get("already")
    assert other_sink["records"] == 1  # another sink's app id: its own publication
    table = load_table(catalog, "lake.events")
    assert len(table.snapshots()) == 2
    assert table_rows(catalog, "lake.events") == Counter({(("key", "a"), ("value", 1)): 2,
                                                          (("key", "b"), ("value", 2)): 1})
    newer = publish_staged(stage, Publication("p", "k", 8, "sink 'k'"))
    assert newer["records"] == 2 and len(load_table(catalog, "lake.events").snapshots()) == 3


def test_a_schema_conflict_fails_naming_the_sink_the_field_and_the_fix(tmp_path):
    import pyarrow as pa
    from pyiceberg.catalog import load_catalog

    catalog = catalog_props(tmp_path)
    cat = load_catalog("test", **{k: v for k, v in catalog.items() if k != "name"})
    cat.create_namespace("shop")
    cat.create_table(TABLE, schema=pa.schema([("key", pa.string()), ("value", pa.int64()), ("ts", pa.string())]))
    log, ckpt = str(tmp_path / "log"), str(tmp_path / "ckpt")
    append(log, "p0", [("a", 1, 100), ("a", 2, 2000)])
    with pytest.raises(Exception, match=r"sink 'windows'.*field 'ts' does not fit column 'ts' \(large_string\) of "
                                        r"Iceberg table 'shop.windows'.*convert it before the sink"):
        pipeline("bad", log, ckpt, catalog).execute_local(run_id="r0", drain=True)
    p = StreamPipeline("extra", runtime_mode="streaming", checkpoint_dir=str(tmp_path / "ckpt2"))
    p.from_source(PartitionedLog(directory=log), name="log").map(lambda r: {**as_row(r), "note": "x"}).sink_to(
        IcebergSink(TABLE, catalog=catalog), name="out")
    with pytest.raises(Exception, match=r"sink 'out'.*field 'note' that Iceberg table 'shop.windows' has no column"
                                        r".*add the column"):
        p.execute_local(run_id="r0")
    from airflow_flinkchain.runtime.connectors.iceberg import arrow_records

    new = IcebergSink("shop.fresh", catalog=catalog)
    with pytest.raises(TypeError, match=r"sink 'x': field 'v' has values of different types.*give it one type"):
        arrow_records(new, [{"k": "a", "v": 1}, {"k": "b", "v": "one"}], None, "sink 'x'")
    with pytest.raises(TypeError, match=r"sink 'x': field 'v' is None in every record.*create the table first"):
        arrow_records(new, [{"k": "a", "v": None}], None, "sink 'x'")
    with pytest.raises(ValueError, match=r"'namespace.table'"):
        IcebergSink("windows", catalog=catalog)
    with pytest.raises(ValueError, match="needs catalog="):
        IcebergSink(TABLE)


@pytest.mark.parametrize("where", ["running", "before-snapshot-commit", "after-snapshot-commit"])
def test_runs_killed_and_retried_publish_exactly_once(tmp_path, where):
    records = make_records(seed=47)
    catalog, log, ckpt = catalog_props(tmp_path), str(tmp_path / "log"), str(tmp_path / "ckpt")
    runs_killed_and_retried(where, ("pyiceberg.table", "Table.append"), "tests.connectors.test_iceberg_sink",
                            pipeline, ("p", log, ckpt, catalog), log, ckpt, tmp_path / "kill-now", records)
    assert table_rows(catalog) == expected(tmp_path, records)


def batch(name: str, values: list, catalog: dict) -> StreamPipeline:
    p = StreamPipeline(name)
    p.from_collection([{"key": k, "value": v} for k, v in values]).sink_to(
        IcebergSink("shop.totals", catalog=catalog), name="totals")
    return p


def test_batch_runs_replace_their_rows(tmp_path, catalog):
    """A run, the same run retried (other output), another run, another DAG's run with the same
    run id: the table holds the retry's rows once and the other runs' rows."""
    batch("daily", [("a", 1), ("b", 2)], catalog).execute_local(run_id="d1")
    batch("daily", [("a", 1), ("b", 3)], catalog).execute_local(run_id="d1")
    batch("daily", [("c", 4)], catalog).execute_local(run_id="d2")
    batch("hourly", [("z", 9)], catalog).execute_local(run_id="d1")
    rows = sorted((r["_dag_id"], r["_run_id"], r["key"], r["value"])
                  for r in load_table(catalog, "shop.totals").scan().to_arrow().to_pylist())
    assert rows == [("daily", "d1", "a", 1), ("daily", "d1", "b", 3), ("daily", "d2", "c", 4),
                    ("hourly", "d1", "z", 9)]
    batch("daily", [], catalog).execute_local(run_id="d2")  # a retry with no output: the run's rows go
    assert sorted(r["key"] for r in load_table(catalog, "shop.totals").scan().to_arrow().to_pylist()) == \
        ["a", "b", "z"]


def test_the_asset_is_the_catalog_table_and_belongs_to_one_sink():
    from airflow_flinkchain.airflow.assets import asset_uri
    from airflow_flinkchain.airflow.lineage import dataset_name

    sink = IcebergSink("shop.windows", catalog={"name": "lake", "type": "sql", "uri": "sqlite:////c.db"})
    assert asset_uri(sink) == "iceberg://lake/shop/windows"
    assert dataset_name(asset_uri(sink)) == ("iceberg://lake", "shop.windows")
    p = StreamPipeline("two")
    s = p.from_collection([{"key": "a"}])
    s.sink_to(sink, name="one")
    s.sink_to(IcebergSink("shop.windows", catalog="lake"), name="other")
    with pytest.raises(Exception, match="'one' and 'other' both write the Iceberg table 'shop.windows' of catalog"):
        p.plan()


@pytest.mark.spark
def test_stream_and_batch_runs_on_spark(spark, tmp_path):
    """execute() (Spark): the subtasks stage, the commit publishes one snapshot per run; a
    batch run retried on Spark replaces its rows."""
    records = make_records(n=120, seed=53)
    catalog, log, ckpt = catalog_props(tmp_path), str(tmp_path / "log"), str(tmp_path / "ckpt")
    for k, part in enumerate(slices(records, 2)):
        append(log, "p0", part)
        pipeline("spark", log, ckpt, catalog).execute(spark=spark, run_id=f"r{k}")
    pipeline("spark", log, ckpt, catalog).execute(spark=spark, run_id="drain", drain=True)
    assert table_rows(catalog) == expected(tmp_path, records)
    assert len(load_table(catalog).snapshots()) <= 3
    batch("daily", [("a", 1), ("b", 2)], catalog).execute(spark=spark, run_id="d1")
    batch("daily", [("a", 5)], catalog).execute(spark=spark, run_id="d1")
    assert [(r["key"], r["value"]) for r in load_table(catalog, "shop.totals").scan().to_arrow().to_pylist()] == \
        [("a", 5)]
