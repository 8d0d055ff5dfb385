"""Connectors section of `make bench` (`connectors`): each stream connector's records/s in one
stream run over `records` rows (1M), beside the file source.

Rows {k, v, ts} (int64; 1,000 keys). Each entry below is one pipeline run as a stream run
(a `checkpoint_dir`, `execute()` on Spark, parallelism P), timed from `execute()` to its
return, records/s of the rows:

  file_source    ParquetSource(dir, monitor=True) -> ParquetSink                      (the baseline)
  nats_source    NatsJetStreamSource (a bench stream, one JSON message per row, published
                 before the timing; output_type=ROW declared on the source) -> ParquetSink
  delta_source   DeltaSource (a Delta table written by `deltalake` before the timing) -> ParquetSink
  delta_sink     ParquetSource -> DeltaSink (append): the run's one Delta commit
  sql_sink       ParquetSource -> SqlSink on PostgreSQL (127.0.0.1:5432, database `test`): the
                 run's rows and its checkpoint record in one transaction
  postgres_cdc_source
                 PostgresCdcSource on a throwaway wal_level=logical cluster (benchmarks/pg_cluster.py)
                 -> ParquetSink: an untimed first run (the slot, the empty table's snapshot), then
                 the rows inserted in one transaction (untimed); the timed run reads those N
                 insert changes (op "c"), not a snapshot
  iceberg_sink   ParquetSource -> IcebergSink (pyiceberg SQL catalog on SQLite in the bench's
                 directory): the run's one appended snapshot

Every run's output is counted (rows in the Parquet output, the Delta table, the SQL table) and
must equal the input. A connector whose service is down is skipped with the reason in the
report. A new connector is one `Connector(...)` entry in CONNECTORS: `check` returns None or
why it cannot run, `prepare` loads the input (untimed), `source` or `sink` gives the pipeline's
end, `count` the records it wrote (for a source: None, the Parquet output is counted).
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import socket
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Callable, Optional
from urllib.parse import urlsplit

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

KEYS = 1000
ROW = {"k": "int64", "v": "int64", "ts": "int64"}
NATS_URL = os.environ.get("FLINKCHAIN_BENCH_NATS", "nats://127.0.0.1:4222")
POSTGRES_URL = os.environ.get("FLINKCHAIN_BENCH_POSTGRES", "postgresql+psycopg2://postgres@127.0.0.1:5432/test")
NATS_BATCH = 20_000


def rows_table(records: int) -> pa.Table:
    i = pa.array(range(records), pa.int64())
    return pa.table({"k": pc.remainder(i, KEYS), "v": pc.remainder(i, 7), "ts": i})


def port_open(url: str, default_port: int) -> Optional[str]:
    u = urlsplit(url)
    try:
        socket.create_connection((u.hostname, u.port or default_port), timeout=2).close()
        return None
    except OSError:
        return f"no service at {u.hostname}:{u.port or default_port}"


def missing_module(name: str) -> Optional[str]:
    try:
        __import__(name)
        return None
    except ImportError:
        return f"{name} is not installed"


@dataclass
class Ctx:
    """One connector run's places: its rows (a Parquet directory), checkpoint, output."""

    root: str
    records: int
    table: pa.Table
    parquet_dir: str
    name: str = ""
    #: unique per run: a SQL sink's commit records are keyed by pipeline and checkpoint id
    pipeline: str = ""
    spark: Any = None  # for a `prepare` that runs the pipeline (untimed)
    parallelism: int = 1
    state: dict = field(default_factory=dict)  # what `prepare` started, for `cleanup`

    def path(self, *parts: str) -> str:
        return os.path.join(self.root, self.name, *parts)


@dataclass
class Connector:
    name: str
    kind: str  # "source" or "sink"
    check: Callable[[], Optional[str]] = lambda: None
    prepare: Callable[[Ctx], Any] = lambda ctx: None
    source: Optional[Callable[[Ctx], Any]] = None  # a source's Source object
    sink: Optional[Callable[[Ctx], Any]] = None  # a sink's Sink object
    count: Optional[Callable[[Ctx], int]] = None  # records a sink wrote
    row: Optional[Callable[[Any], dict]] = None  # a source's record as a {k, v, ts} row (default to_row)
    output_type: Optional[dict] = None  # a source's records declared as ROW: no per-record map to rows
    cleanup: Callable[[Ctx], Any] = lambda ctx: None


# ---- NATS JetStream -----------------------------------------------------------------------------

def _nats(ctx: Ctx, work) -> Any:
    import nats

    async def main():
        nc = await nats.connect(NATS_URL)
        try:
            return await work(nc)
        finally:
            await nc.close()

    return asyncio.run(main())


def _nats_stream(ctx: Ctx) -> str:
    return f"BENCH_{ctx.records}_{os.getpid()}"


def nats_prepare(ctx: Ctx) -> None:
    """A fresh stream with one JSON message per row (core publishes, flushed per batch; the
    stream's count is checked, so no message is missing)."""
    stream = _nats_stream(ctx)
    subject = f"bench.{stream.lower()}"
    rows = ctx.table.to_pylist()

    async def work(nc):
        js = nc.jetstream()
        try:
            await js.delete_stream(stream)
        except Exception:  # noqa: BLE001 - absent: nothing to delete
            pass
        await js.add_stream(name=stream, subjects=[subject])
        for lo in range(0, len(rows), NATS_BATCH):
            for r in rows[lo:lo + NATS_BATCH]:
                await nc.publish(subject, json.dumps(r, separators=(",", ":")).encode())
            await nc.flush(timeout=60)
        deadline = time.time() + 60
        while (await js.stream_info(stream)).state.messages < len(rows):
            if time.time() > deadline:
                raise RuntimeError(f"NATS stream {stream}: {(await js.stream_info(stream)).state.messages} of "
                                   f"{len(rows)} messages stored")
            await asyncio.sleep(0.2)

    _nats(ctx, work)


def nats_cleanup(ctx: Ctx) -> None:
    async def work(nc):
        await nc.jetstream().delete_stream(_nats_stream(ctx))

    _nats(ctx, work)


def nats_source(ctx: Ctx):
    from airflow_flinkchain.io.sources import NatsJetStreamSource

    return NatsJetStreamSource(servers=NATS_URL, stream=_nats_stream(ctx))


# ---- Delta Lake -------------------------------------------------------------------------------

def delta_prepare(ctx: Ctx) -> None:
    from deltalake import write_deltalake

    write_deltalake(ctx.path("table"), ctx.table)


def delta_source(ctx: Ctx):
    from airflow_flinkchain.io.sources import DeltaSource

    return DeltaSource(ctx.path("table"))


def delta_sink(ctx: Ctx):
    from airflow_flinkchain.io.sinks import DeltaSink

    return DeltaSink(ctx.path("sink_table"))


def delta_count(ctx: Ctx) -> int:
    from deltalake import DeltaTable

    from airflow_flinkchain.runtime.connectors.delta import pyarrow_dataset

    return pyarrow_dataset(DeltaTable(ctx.path("sink_table")), ctx.path("sink_table")).count_rows()


# ---- SQL ----------------------------------------------------------------------------------------

def _sql_table(ctx: Ctx) -> str:
    return f"bench_sink_{ctx.records}_{os.getpid()}"


def sql_sink(ctx: Ctx):
    from airflow_flinkchain.io.sinks import SqlSink

    return SqlSink(_sql_table(ctx), url=POSTGRES_URL)


def sql_count(ctx: Ctx) -> int:
    import sqlalchemy as sa

    engine = sa.create_engine(POSTGRES_URL)
    try:
        with engine.connect() as conn:
            return conn.execute(sa.text(f'SELECT count(*) FROM "{_sql_table(ctx)}"')).scalar()
    finally:
        engine.dispose()


def sql_cleanup(ctx: Ctx) -> None:
    """Drop the table and the pipeline's commit records (each bench pipeline's name is its own)."""
    import sqlalchemy as sa

    from airflow_flinkchain.runtime.connectors.sql import COMMITS_TABLE

    engine = sa.create_engine(POSTGRES_URL)
    try:
        with engine.begin() as conn:
            conn.execute(sa.text(f'DROP TABLE IF EXISTS "{_sql_table(ctx)}"'))
            if sa.inspect(conn).has_table(COMMITS_TABLE):
                conn.execute(sa.text(f'DELETE FROM "{COMMITS_TABLE}" WHERE pipeline = :p'), {"p": ctx.pipeline})
    finally:
        engine.dispose()


# ---- PostgreSQL CDC ----------------------------------------------------------------------------

CDC_TABLE = "public.bench_rows"


def cdc_check() -> Optional[str]:
    from benchmarks.pg_cluster import unavailable_reason

    return unavailable_reason()


def cdc_prepare(ctx: Ctx) -> None:
    """A cluster and database; one untimed run over the empty table (creates the slot and reads
    its empty snapshot), then the N rows inserted in one transaction, read by the timed run."""
    from benchmarks.pg_cluster import LogicalCluster

    cluster = ctx.state["cluster"] = LogicalCluster.create()
    db = ctx.state["db"] = cluster.new_database()
    cluster.execute(db, "create table bench_rows (ts bigint primary key, k bigint, v bigint)")
    cdc = next(c for c in CONNECTORS if c.name == "postgres_cdc_source")
    build(cdc, ctx, ctx.parallelism).execute(spark=ctx.spark, run_id=f"bench_snapshot_{uuid.uuid4().hex[:8]}",
                                             exchange_root=ctx.path("exchange"))
    cluster.execute(db, f"insert into bench_rows select i, i % {KEYS}, i % 7 from generate_series(0, "
                        f"{ctx.records - 1}) i")


def cdc_source(ctx: Ctx):
    from airflow_flinkchain.io.sources import PostgresCdcSource

    return PostgresCdcSource(ctx.state["cluster"].url(ctx.state["db"]), (CDC_TABLE,), slot_name="bench",
                             publication_name="bench")


def cdc_row(change: dict) -> dict:
    return to_row(change["after"])


def cdc_cleanup(ctx: Ctx) -> None:
    """Drop the database with its slot, stop and remove the cluster."""
    cluster = ctx.state.pop("cluster", None)
    if cluster is not None:
        try:
            if "db" in ctx.state:
                cluster.drop_database(ctx.state.pop("db"))
        finally:
            cluster.destroy()


# ---- Iceberg ------------------------------------------------------------------------------------

ICEBERG_TABLE = "bench.rows"


def _iceberg_catalog(ctx: Ctx) -> dict:
    return {"name": "bench", "type": "sql", "uri": f"sqlite:///{ctx.path('catalog.db')}",
            "warehouse": f"file://{ctx.path('warehouse')}"}


def iceberg_prepare(ctx: Ctx) -> None:
    os.makedirs(ctx.path("warehouse"), exist_ok=True)


def iceberg_sink(ctx: Ctx):
    from airflow_flinkchain.io.sinks import IcebergSink

    return IcebergSink(ICEBERG_TABLE, catalog=_iceberg_catalog(ctx))


def _load_iceberg(ctx: Ctx):
    from pyiceberg.catalog import load_catalog

    props = _iceberg_catalog(ctx)
    return load_catalog(props.pop("name"), **props)


def iceberg_count(ctx: Ctx) -> int:
    return _load_iceberg(ctx).load_table(ICEBERG_TABLE).scan().to_arrow().num_rows


def iceberg_cleanup(ctx: Ctx) -> None:
    """Drop the table and remove the catalog and warehouse."""
    try:
        if os.path.exists(ctx.path("catalog.db")):
            catalog = _load_iceberg(ctx)
            if catalog.table_exists(ICEBERG_TABLE):
                catalog.drop_table(ICEBERG_TABLE)
    finally:
        shutil.rmtree(ctx.path(), ignore_errors=True)


def file_source(ctx: Ctx):
    from airflow_flinkchain.io import ParquetSource

    return ParquetSource(ctx.parquet_dir, monitor=True)


CONNECTORS = (
    Connector("file_source", "source", source=file_source),
    Connector("nats_source", "source", check=lambda: missing_module("nats") or port_open(NATS_URL, 4222),
              prepare=nats_prepare, source=nats_source, cleanup=nats_cleanup, output_type=ROW),
    Connector("delta_source", "source", check=lambda: missing_module("deltalake"), prepare=delta_prepare,
              source=delta_source),
    Connector("delta_sink", "sink", check=lambda: missing_module("deltalake"), sink=delta_sink, count=delta_count),
    Connector("sql_sink", "sink", check=lambda: missing_module("psycopg2") or port_open(POSTGRES_URL, 5432),
              sink=sql_sink, count=sql_count, cleanup=sql_cleanup),
    Connector("postgres_cdc_source", "source", check=cdc_check, prepare=cdc_prepare, source=cdc_source,
              row=cdc_row, cleanup=cdc_cleanup),
    Connector("iceberg_sink", "sink", check=lambda: missing_module("pyiceberg"), prepare=iceberg_prepare,
              sink=iceberg_sink, count=iceberg_count, cleanup=iceberg_cleanup),
)


def to_row(r):
    return {"k": int(r["k"]), "v": int(r["v"]), "ts": int(r["ts"])}


def build(c: Connector, ctx: Ctx, parallelism: int):
    from airflow_flinkchain import StreamPipeline
    from airflow_flinkchain.io import ParquetSink

    p = StreamPipeline(ctx.pipeline, parallelism=parallelism, runtime_mode="streaming",
                       checkpoint_dir=ctx.path("checkpoint"))
    if c.kind == "source":
        s = p.from_source(c.source(ctx), name="src", output_type=c.output_type).uid("src")
        if c.name != "file_source" and c.output_type is None:  # JSON, Delta or CDC records: the same typed rows as the file source's
            s = s.map(c.row or to_row, output_type=ROW).name("row").uid("row")
        s.sink_to(ParquetSink(ctx.path("out"), output_type=ROW), name="sink")
    else:
        p.from_source(file_source(ctx), name="src", output_type=ROW).uid("src").sink_to(c.sink(ctx), name="sink")
    return p


def run_connectors(spark, tmp: str, records: int, parallelism: int, warmup: bool = True,
                   connectors=CONNECTORS) -> dict:
    root = os.path.join(tmp, "connectors")
    parquet_dir = os.path.join(root, "input")
    os.makedirs(parquet_dir, exist_ok=True)
    table = rows_table(records)
    half = records // 2  # two files, as the other sections' inputs
    pq.write_table(table.slice(0, half), os.path.join(parquet_dir, "part-0.parquet"))
    pq.write_table(table.slice(half), os.path.join(parquet_dir, "part-1.parquet"))
    report: dict = {"records": records, "parallelism": parallelism, "connectors": {},
                    "note": "one stream run each (checkpoint_dir, execute() on Spark); records/s of the rows; "
                            "input loading (NATS publishes, the Delta source's table, the CDC rows and its first "
                            "run) untimed; postgres_cdc_source reads N insert changes, not a snapshot"}
    if warmup:  # the first stream run's JVM and Python worker start-up: not measured
        ctx = Ctx(root, records, table, parquet_dir, name="warmup",
                  pipeline=f"bench_warmup_{uuid.uuid4().hex[:8]}")
        build(CONNECTORS[0], ctx, parallelism).execute(spark=spark, run_id="warmup",
                                                       exchange_root=ctx.path("exchange"))
    for c in connectors:
        reason = c.check()
        if reason:
            report["connectors"][c.name] = {"status": f"skipped: {reason}"}
            print(f"[bench] connectors: {c.name} skipped: {reason}", flush=True)
            continue
        ctx = Ctx(root, records, table, parquet_dir, name=c.name,
                  pipeline=f"bench_{c.name}_{uuid.uuid4().hex[:8]}", spark=spark, parallelism=parallelism)
        shutil.rmtree(ctx.path(), ignore_errors=True)
        os.makedirs(ctx.path())
        try:
            c.prepare(ctx)
            pipeline = build(c, ctx, parallelism)
            t = time.perf_counter()
            pipeline.execute(spark=spark, run_id=f"bench_{uuid.uuid4().hex[:8]}",
                             exchange_root=ctx.path("exchange"))
            seconds = time.perf_counter() - t
            written = c.count(ctx) if c.count else pq.read_table(ctx.path("out")).num_rows
        finally:
            c.cleanup(ctx)
        if written != records:
            raise AssertionError(f"connector {c.name}: {written} records written, expected {records}")
        report["connectors"][c.name] = {"status": "measured", "kind": c.kind, "seconds": seconds,
                                        "records_per_s": records / seconds, "records_written": written}
    base = report["connectors"].get("file_source", {}).get("records_per_s")
    if base:
        report["over_file_source"] = {n: d["records_per_s"] / base for n, d in report["connectors"].items()
                                      if "records_per_s" in d and n != "file_source"}
    return report


def summary_line(report: dict) -> str:
    parts = []
    for name, d in report["connectors"].items():
        parts.append(f"{name} {d['records_per_s']:,.0f}/s" if "records_per_s" in d else f"{name} {d['status']}")
    return f"connectors ({report['records']:,} records, one stream run each): " + ", ".join(parts)
