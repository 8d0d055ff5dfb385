"""A throwaway PostgreSQL cluster with wal_level=logical (initdb + pg_ctl from Debian's server
packages, or $FLINKCHAIN_PG_BIN) on a free local port in a temporary directory, run as the
`postgres` user when the caller is root. Used by the CDC tests' fixture and the connectors bench."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import uuid
from pathlib import Path
from typing import Optional

PG_BIN = Path(os.environ.get("FLINKCHAIN_PG_BIN", "/usr/lib/postgresql/15/bin"))
USER = "postgres"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def unavailable_reason() -> Optional[str]:
    """None, or why a cluster cannot be started here."""
    missing = [b for b in ("initdb", "pg_ctl", "postgres") if not (PG_BIN / b).exists()]
    if missing:
        return (f"PostgreSQL server binaries {missing} not found in {PG_BIN} (apt-get install "
                "postgresql-15, or set FLINKCHAIN_PG_BIN)")
    try:
        import psycopg2  # noqa: F401
    except ImportError:
        return "psycopg2 is not installed (pip install -r requirements.txt)"
    if os.geteuid() == 0 and shutil.which("runuser") is None:
        return "running as root without runuser to start PostgreSQL as another user"
    return None


class LogicalCluster:
    def __init__(self, root: Path, port: int, user: str = USER):
        self.root, self.port, self.user = root, port, user
        self.data = root / "data"

    @classmethod
    def create(cls) -> "LogicalCluster":
        """A started cluster in a new temporary directory; `destroy()` stops it and removes it."""
        root = Path(tempfile.mkdtemp(prefix="flinkchain-pg-"))
        if os.geteuid() == 0:
            shutil.chown(root, USER)
        cluster = cls(root, _free_port())
        try:
            return cluster.start()
        except BaseException:
            shutil.rmtree(root, ignore_errors=True)
            raise

    def destroy(self) -> None:
        try:
            self.stop()
        finally:
            shutil.rmtree(self.root, ignore_errors=True)

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

    def drop_database(self, db: str) -> None:
        """Drop `db` and its replication slots."""
        for (slot,) in self.execute(db, f"select slot_name from pg_replication_slots where database = '{db}'"):
            self.execute(db, f"select pg_drop_replication_slot('{slot}')")
        self.execute("postgres", f"drop database {db} with (force)")
