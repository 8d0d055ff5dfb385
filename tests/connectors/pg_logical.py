"""The CDC tests' PostgreSQL cluster with wal_level=logical (benchmarks/pg_cluster.py), started
once per session and stopped at the end. Without the binaries the tests skip naming what is
missing; in CI (CI=true) they fail."""

from __future__ import annotations

import os

import pytest

from airflow_flinkchain.functions import KeyedProcessFunction
from airflow_flinkchain.state import ValueStateDescriptor

from benchmarks.pg_cluster import LogicalCluster, unavailable_reason
from tests.connectors.nats_server import unavailable


@pytest.fixture(scope="session")
def pg_cluster():
    reason = unavailable_reason()
    if reason:
        unavailable(reason)
    cluster = LogicalCluster.create()
    try:
        yield cluster
    finally:
        cluster.destroy()


@pytest.fixture
def pg_db(pg_cluster):
    """A fresh database of the test cluster, with a table `public.orders(id int primary key, ...)`."""
    db = pg_cluster.new_database()
    pg_cluster.execute(db, "create table orders (id int primary key, item text, qty int, price numeric(10,2))")
    yield db
    pg_cluster.drop_database(db)


class KillOn:
    """map: SIGKILLs this process on the change whose row id is `row_id` while `marker` exists."""

    def __init__(self, marker: str, row_id: int):
        self.marker, self.row_id = marker, row_id

    def __call__(self, change: dict) -> dict:
        row = change["after"] or change["before"]
        if row["id"] == self.row_id and os.path.exists(self.marker):
            import signal

            os.kill(os.getpid(), signal.SIGKILL)
        return change


def canonical(change: dict) -> tuple:
    """A change as a hashable tuple (op, table, before, after); lsn, txid and time left out."""
    import json

    def row(r):
        return None if r is None else json.dumps(r, sort_keys=True, default=str)

    return change["op"], change["source"]["table"], row(change["before"]), row(change["after"])


def cdc_pipeline(source, checkpoint_dir=None, kill=None, name="cdc"):
    """source -> (kill) -> collect "changes" (canonical tuples), and a keyed latest-row state
    per id -> collect "latest" ((id, row or None), deletes as tombstones)."""
    from airflow_flinkchain import StreamPipeline

    p = StreamPipeline(name, runtime_mode="streaming", checkpoint_dir=checkpoint_dir)
    s = p.from_source(source, name="pg").uid("pg")
    if kill is not None:
        s = s.map(kill).name("kill").uid("kill")
    s.map(canonical).name("canonical").uid("canonical").collect("changes")
    s.key_by(lambda c: (c["after"] or c["before"])["id"]).process(LatestRow()).uid("latest").collect("latest")
    return p


def materialize(changes) -> dict:
    """{(table, after as json): count} of the rows that a list of canonical changes leaves."""
    import json

    rows = {}
    for op, table, before, after in changes:
        key = (table, json.loads(after or before)["id"])
        if op == "d":
            rows.pop(key, None)
        else:
            rows[key] = after
    return rows


class LatestRow(KeyedProcessFunction):
    """Each row's latest value in keyed state; emits (id, row) per change, (id, None) on delete."""

    def open(self, runtime_context):
        self.row = runtime_context.get_state(ValueStateDescriptor("row", None))

    def process_element(self, value, ctx):
        row = value["after"]
        if value["op"] == "d":
            self.row.clear()
        else:
            self.row.update(row)
        return [(ctx.get_current_key(), canonical(value)[3])]
