"""A PostgreSQL cluster with wal_level=logical for the CDC tests, started by the tests
(initdb + pg_ctl from Debian's server packages, or $FLINKCHAIN_PG_BIN) on a free local port
in a temporary directory, as the `postgres` user when run as root, and stopped at the end.
Without the binaries the tests skip naming what is missing; in CI (CI=true) they fail."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import uuid
from pathlib import Path

import pytest

from airflow_flinkchain.functions import KeyedProcessFunction
from airflow_flinkchain.state import ValueStateDescriptor

from tests.connectors.nats_server import unavailable

PG_BIN = Path(os.environ.get("FLINKCHAIN_PG_BIN", "/usr/lib/postgresql/15/bin"))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LogicalCluster:
    def __init__(self, root: Path, port: int, user: str):
        self.root, self.port, self.user = root, port, user
        self.data = root / "data"

    def _run(self, *argv: str) -> None:
        cmd = [str(PG_BIN / argv[0]), *argv[1:]]
        if os.geteuid() == 0:  # initdb refuses root
            cmd = ["runuser", "-u", self.user, "--", *cmd]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        if proc.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)} failed: {proc.stdout[-2000:]} {proc.stderr[-2000:]}")

    def start(self) -> "LogicalCluster":
        self._run("initdb", "-D", str(self.data), "-U", "postgres", "--auth=trust", "-E", "UTF8")
        with open(self.data / "postgresql.conf", "a") as conf:
            conf.write(f"\nport = {self.port}\nlisten_addresses = '127.0.0.1'\nunix_socket_directories = '{self.root}'\n"
                       "wal_level = logical\nmax_replication_slots = 20\nmax_wal_senders = 20\nfsync = off\n")
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.root / "log"), "-w", "-t", "60", "start")
        return self

    def stop(self) -> None:
        self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop")

    def url(self, db: str = "postgres", user: str = "postgres") -> str:
        return f"postgresql://{user}@127.0.0.1:{self.port}/{db}"

    def execute(self, db: str, *statements: str, user: str = "postgres") -> list:
        import psycopg2

        conn = psycopg2.connect(self.url(db, user))
        conn.autocommit = True
        try:
            out = []
            with conn.cursor() as cur:
                for sql in statements:
                    cur.execute(sql)
                    out = cur.fetchall() if cur.description else out
            return out
        finally:
            conn.close()

    def new_database(self) -> str:
        name = "t" + uuid.uuid4().hex[:10]
        self.execute("postgres", f"create database {name}")
        return name


@pytest.fixture(scope="session")
def pg_cluster():
    missing = [b for b in ("initdb", "pg_ctl", "postgres") if not (PG_BIN / b).exists()]
    if missing:
        unavailable(f"PostgreSQL server binaries {missing} not found in {PG_BIN} (apt-get install "
                    "postgresql-15, or set FLINKCHAIN_PG_BIN)")
    try:
        import psycopg2  # noqa: F401
    except ImportError:
        unavailable("psycopg2 is not installed (pip install -r requirements.txt)")
    user = "postgres"
    if os.geteuid() == 0 and shutil.which("runuser") is None:
        unavailable("running as root without runuser to start PostgreSQL as another user")
    root = Path(tempfile.mkdtemp(prefix="flinkchain-pg-"))
    if os.geteuid() == 0:
        shutil.chown(root, user)
    cluster = LogicalCluster(root, _free_port(), user)
    cluster.start()
    try:
        yield cluster
    finally:
        try:
            cluster.stop()
        finally:
            shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def pg_db(pg_cluster):
    """A fresh database of the test cluster, with a table `public.orders(id int primary key, ...)`."""
    db = pg_cluster.new_database()
    pg_cluster.execute(db, "create table orders (id int primary key, item text, qty int, price numeric(10,2))")
    yield db
    for (slot,) in pg_cluster.execute(db, f"select slot_name from pg_replication_slots where database = '{db}'"):
        pg_cluster.execute(db, f"select pg_drop_replication_slot('{slot}')")
    pg_cluster.execute("postgres", f"drop database {db} with (force)")


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
