"""PostgreSQL change data capture at run time (psycopg2): the split of a `PostgresCdcSource`.

One split (id: the slot's name). Its position is `{"lsn": L, "owner": O}`: every transaction
whose commit record lies below LSN L was read (`None`: none after the slot's snapshot); O
names the stream that owns the slot (pipeline, source and checkpoint_dir), recorded in the
table `public.flinkchain_cdc_slots` beside the slot.
* First run (no committed position): `read_split` (re)creates the slot on a replication
  connection inside a REPEATABLE READ transaction (`SNAPSHOT 'use'`) and reads the tables in
  that snapshot: rows as op "r", consistent with the slot's start.
* Later runs: `discover` writes a non-transactional logical message and takes its LSN as
  the run's end E (a record boundary: no commit straddles it) once the WAL is flushed past
  it; `read_split` peeks the slot (which consumes nothing) up to E and keeps the
  transactions with start <= commit LSN < E.
* `committed` (after the run's checkpoint committed) advances the slot to the committed L;
  `discover` does it again if a run was stopped between its commit and the advance.
"""

from __future__ import annotations

import logging
import time
from typing import Any, Iterator, Optional

from airflow_flinkchain.io.database_urls import libpq_url, redact as _redact
from airflow_flinkchain.io.sources import PostgresCdcSource
from airflow_flinkchain.runtime.connectors.pg_values import SESSION_OPTIONS, TYPE_QUERY, PgValues
from airflow_flinkchain.runtime.connectors.pgoutput import Decoder, envelope, lsn_int, lsn_text
from airflow_flinkchain.runtime.connectors.unbounded import register_unbounded
from airflow_flinkchain.runtime.core.elements import StreamRecord

log = logging.getLogger(__name__)

OWNERS = "public.flinkchain_cdc_slots"
FLUSH_WAIT_S = 30
FETCH_ROWS = 2000
OWNER_COLUMNS = ("slot_name text primary key, owner text not null, start_lsn pg_lsn, "
                 "created_at timestamptz not null default now()")
SLOT_BUSY_WAIT_S = 60


def _psycopg2():
    try:
        import psycopg2
    except ImportError as exc:
        raise RuntimeError("PostgresCdcSource needs the psycopg2 package (pip install psycopg2-binary)") from exc
    return psycopg2


@register_unbounded(PostgresCdcSource)
class PostgresCdcSplits:
    def __init__(self, source: PostgresCdcSource):
        self.source = source
        self.split = source.slot_name
        at = f"connection {source.conn_id}" if source.conn_id else _redact(source.url)
        self.where = f"PostgresCdcSource({at}, slot {source.slot_name!r})"
        self.scope: Optional[str] = None  # the stream reading it (set by stream runs)

    # -- connections ---------------------------------------------------------------------
    def _url(self) -> str:
        """libpq's URL: `url`, or the one the chain task handed over for `conn_id` (a SQLAlchemy
        URL, its driver suffix dropped)."""
        from airflow_flinkchain.runtime.connectors.sql import resolve_url

        return libpq_url(resolve_url(self.source.url, self.source.conn_id, self.where))

    def _connect(self, replication: bool = False):
        psycopg2 = _psycopg2()
        kw = {"replication": "database"} if replication else {}
        try:
            conn = psycopg2.connect(self._url(), connect_timeout=10, options=SESSION_OPTIONS, **kw)
        except psycopg2.OperationalError as exc:
            text = str(exc).strip()
            if replication and "replication" in text:
                raise PermissionError(f"{self.where}: replication connection refused ({text}); allow it in "
                                      "pg_hba.conf (a 'host replication' line) and ALTER ROLE ... WITH "
                                      "REPLICATION") from None
            raise ConnectionError(f"{self.where}: cannot connect to PostgreSQL ({text}); is the server running "
                                  "and reachable at that URL?") from None
        conn.autocommit = True
        return conn

    def _query(self, conn, sql: str, params: Any = None) -> list:
        with conn.cursor() as cur:
            cur.execute(sql, params)
            return cur.fetchall() if cur.description else []

    def _values(self, conn) -> PgValues:
        """The value decoding of the snapshot and the changes, looking types up on `conn`."""
        return PgValues(lambda oids: self._query(conn, TYPE_QUERY.replace("%s", "%s::oid[]"), (oids,)))

    # -- checks and setup (driver) -------------------------------------------------------
    def _prepare(self, conn) -> None:
        level = self._query(conn, "show wal_level")[0][0]
        if level != "logical":
            raise RuntimeError(f"{self.where}: the server runs with wal_level={level}; logical replication needs "
                               "ALTER SYSTEM SET wal_level = logical and a server restart")
        user, repl = self._query(conn, "select current_user, rolreplication or rolsuper from pg_roles "
                                       "where rolname = current_user")[0]
        if not repl:
            raise PermissionError(f"{self.where}: role {user!r} may not use replication slots; "
                                  f"ALTER ROLE {user} WITH REPLICATION")
        for table in self.source.tables:
            schema, name = table.split(".")
            if not self._query(conn, "select 1 from pg_tables where schemaname = %s and tablename = %s",
                               (schema, name)):
                raise LookupError(f"{self.where}: table {table!r} does not exist in this database; create it "
                                  "or fix tables=")
        pub = self.source.publication_name
        exists = self._query(conn, "select 1 from pg_publication where pubname = %s", (pub,))
        published = {f"{s}.{t}" for s, t in self._query(
            conn, "select schemaname, tablename from pg_publication_tables where pubname = %s", (pub,))}
        missing = [t for t in self.source.tables if t not in published]
        if not missing:
            return
        tables = ", ".join(_ident(t) for t in missing)
        sql = (f"ALTER PUBLICATION {pub} ADD TABLE {tables}" if exists
               else f"CREATE PUBLICATION {pub} FOR TABLE {tables}")
        try:
            self._query(conn, sql)
        except _psycopg2().Error as exc:
            raise PermissionError(f"{self.where}: cannot {sql.split(' FOR')[0].split(' ADD')[0].lower()} for "
                                  f"{missing} ({str(exc).strip()}); run `{sql}` as the tables' owner") from None

    def _owner(self, conn) -> tuple:
        """(the stream owning the slot, the slot's start LSN), or (None, None)."""
        try:
            self._query(conn, f"create table if not exists {OWNERS} ({OWNER_COLUMNS})")
            rows = self._query(conn, f"select owner, start_lsn::text from {OWNERS} where slot_name = %s",
                               (self.split,))
        except _psycopg2().Error as exc:
            raise PermissionError(f"{self.where}: cannot keep the slot's owner in {OWNERS} ({str(exc).strip()}); "
                                  f"create it (CREATE TABLE {OWNERS} ({OWNER_COLUMNS})) and GRANT SELECT, INSERT, "
                                  "UPDATE, DELETE on it to this role, or GRANT CREATE ON SCHEMA public") from None
        if not rows:
            return None, None
        return rows[0][0], lsn_int(rows[0][1]) if rows[0][1] else None

    def _slot(self, conn) -> Optional[tuple]:
        rows = self._query(conn, "select plugin, database, confirmed_flush_lsn::text from pg_replication_slots "
                                 "where slot_name = %s", (self.split,))
        return rows[0] if rows else None

    def _wait_inactive(self, conn) -> None:
        """A killed reader's server process may hold the slot a moment longer."""
        deadline = time.monotonic() + SLOT_BUSY_WAIT_S
        while True:
            rows = self._query(conn, "select active_pid from pg_replication_slots where slot_name = %s and "
                                     "active_pid is not null", (self.split,))
            if not rows:
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"{self.where}: slot {self.split!r} is in use by server process {rows[0][0]} "
                                   f"for more than {SLOT_BUSY_WAIT_S}s; only this source may read it")
            time.sleep(0.2)

    def initial_position(self, split_id: str) -> Any:
        return None  # never read: the first run snapshots

    def discover(self, positions: dict) -> dict:
        committed = positions.get(self.split)
        conn = self._connect()
        try:
            self._prepare(conn)
            if self.scope is None:  # read once, outside stream runs: a snapshot without a slot
                return {self.split: {"lsn": None, "owner": None}}
            slot, (owner, start_lsn) = self._slot(conn), self._owner(conn)
            if slot is not None and owner != self.scope:
                raise PermissionError(
                    f"{self.where}: replication slot {self.split!r} belongs to "
                    f"{'another stream: ' + owner if owner else 'no flinkchain pipeline (created outside it)'}; "
                    "give this source another slot_name, or drop that slot (SELECT pg_drop_replication_slot"
                    f"('{self.split}')) if nothing else uses it")
            if committed is None:
                return {self.split: {"lsn": None, "owner": self.scope}}  # read_split (re)creates the slot
            if slot is None:
                raise LookupError(f"{self.where}: replication slot {self.split!r} is gone, so the changes after "
                                  "the committed position are lost to this pipeline; reset it (clear its "
                                  "checkpoint_dir) to snapshot the tables again")
            if slot[0] != "pgoutput" or slot[1] != conn.info.dbname:
                raise RuntimeError(f"{self.where}: slot {self.split!r} is a {slot[0]} slot of database {slot[1]!r}, "
                                   f"not a pgoutput slot of {conn.info.dbname!r}")
            base = committed.get("lsn") if committed.get("lsn") is not None else start_lsn
            if base is not None and lsn_int(slot[2]) > base:
                raise RuntimeError(f"{self.where}: the slot released the changes up to {slot[2]}, past this run's "
                                   f"start {lsn_text(base)}: a committed run is being re-run, and its changes are "
                                   "no longer in the slot; start a new run instead")
            self._advance(conn, committed.get("lsn"))
            end = lsn_int(self._query(conn, "select pg_logical_emit_message(false, 'flinkchain', '')::text")[0][0])
            deadline = time.monotonic() + FLUSH_WAIT_S
            while lsn_int(self._query(conn, "select pg_current_wal_flush_lsn()::text")[0][0]) < end:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"{self.where}: the WAL was not flushed to {lsn_text(end)} within "
                                       f"{FLUSH_WAIT_S}s")
                time.sleep(0.05)
            return {self.split: {"lsn": end, "owner": self.scope}}
        finally:
            conn.close()

    def _advance(self, conn, lsn: Optional[int]) -> None:
        slot = self._slot(conn)
        if lsn is None or slot is None or lsn_int(slot[2]) >= lsn:
            return
        self._wait_inactive(conn)
        self._query(conn, "select pg_replication_slot_advance(%s, %s::pg_lsn)", (self.split, lsn_text(lsn)))

    def committed(self, positions: dict) -> None:
        """After the checkpoint holding `positions` committed: release the WAL read."""
        position = positions.get(self.split)
        if not position or position.get("lsn") is None or position.get("owner") != self.scope:
            return
        conn = self._connect()
        try:
            self._advance(conn, position["lsn"])
        finally:
            conn.close()

    # -- reading (subtask) ---------------------------------------------------------------
    def read_split(self, split_id: str, start: Any, end: Any) -> Iterator[StreamRecord]:
        if start is None:
            yield from self._snapshot(end["owner"])
        else:
            yield from self._changes(start.get("lsn"), end["lsn"])

    def _snapshot(self, owner: Optional[str]) -> Iterator[StreamRecord]:
        if owner is None:
            conn = self._connect()
            self._query(conn, "begin isolation level repeatable read")
            lsn = None
        else:
            setup = self._connect()
            try:  # a slot of this stream without a committed position: a first run that did not commit
                if self._slot(setup) is not None:
                    self._wait_inactive(setup)
                    self._query(setup, "select pg_drop_replication_slot(%s)", (self.split,))
                self._query(setup, f"insert into {OWNERS} (slot_name, owner) values (%s, %s) on conflict "
                                   "(slot_name) do update set owner = excluded.owner, start_lsn = null, "
                                   "created_at = now()", (self.split, owner))
            finally:
                setup.close()
            conn = self._connect(replication=True)
            self._query(conn, "begin isolation level repeatable read")
            lsn = lsn_int(self._query(conn, f"CREATE_REPLICATION_SLOT {self.split} LOGICAL pgoutput "
                                            "(SNAPSHOT 'use')")[0][1])
            setup = self._connect()
            try:
                self._query(setup, f"update {OWNERS} set start_lsn = %s::pg_lsn where slot_name = %s",
                            (lsn_text(lsn), self.split))
            finally:
                setup.close()
        try:
            ts_ms = self._query(conn, "select (extract(epoch from now()) * 1000)::bigint")[0][0]
            for table in self.source.tables:
                yield from self._table_rows(conn, table, lsn, ts_ms)
            self._query(conn, "commit")
        finally:
            conn.close()

    def _table_rows(self, conn, table: str, lsn: Optional[int], ts_ms: int) -> Iterator[StreamRecord]:
        schema, name = table.split(".")
        columns = self._query(conn, "select a.attname, a.atttypid from pg_attribute a join pg_class c on "
                                    "c.oid = a.attrelid join pg_namespace n on n.oid = c.relnamespace where "
                                    "n.nspname = %s and c.relname = %s and a.attnum > 0 and not a.attisdropped "
                                    "order by a.attnum", (schema, name))
        names = [c for c, _ in columns]
        convert = self._values(conn).converters(oid for _, oid in columns)
        with conn.cursor() as cur:
            raw_text(cur, {oid for _, oid in columns})  # the text output, as pgoutput carries it
            cur.execute(f"select {', '.join(_quote(c) for c in names)} from {_ident(table)}")
            while True:
                rows = cur.fetchmany(FETCH_ROWS)
                if not rows:
                    break
                for row in rows:
                    after = {c: None if v is None else fn(v) for c, fn, v in zip(names, convert, row)}
                    yield StreamRecord(envelope("r", table, None, after, lsn, None, ts_ms), ts_ms)

    def _changes(self, start: Optional[int], end: int) -> Iterator[StreamRecord]:
        psycopg2 = _psycopg2()
        conn = self._connect()
        conn.autocommit = False
        wanted = set(self.source.tables)
        decoder = Decoder(self.where, self._values(conn))
        try:
            self._wait_inactive(conn)
            with conn.cursor(name="flinkchain_cdc") as cur:
                try:
                    cur.execute("select lsn::text, data from pg_logical_slot_peek_binary_changes(%s, %s::pg_lsn, "
                                "NULL, 'proto_version', '1', 'publication_names', %s)",
                                (self.split, lsn_text(end), self.source.publication_name))
                    rows = cur.fetchmany(FETCH_ROWS)
                except psycopg2.Error as exc:
                    raise RuntimeError(f"{self.where}: reading the slot failed: {str(exc).strip()}") from None
                while rows:
                    for lsn, data in rows:
                        for change in decoder.feed(lsn_int(lsn), data):
                            if change.commit_lsn >= end:
                                return
                            if (start is not None and change.commit_lsn < start) or change.table not in wanted:
                                continue
                            yield StreamRecord(envelope(change.op, change.table, change.before, change.after,
                                                        change.lsn, change.txid, change.ts_ms), change.ts_ms)
                    rows = cur.fetchmany(FETCH_ROWS)
        finally:
            conn.rollback()
            conn.close()


def raw_text(cursor, oids: set) -> None:
    """Values of these types as the server's text output on `cursor` (psycopg2 would convert them)."""
    from psycopg2.extensions import new_type, register_type

    if oids:
        register_type(new_type(tuple(oids), "FLINKCHAIN_TEXT", lambda value, _cur: value), cursor)


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _ident(table: str) -> str:
    return ".".join(_quote(p) for p in table.split("."))
