"""PostgreSQL's `pgoutput` logical replication messages (protocol version 1) decoded into
Debezium-style change records. Column values arrive as PostgreSQL's text output and are
converted by type OID (`pg_values`, shared with the snapshot)."""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Any, Iterator, Optional

from airflow_flinkchain.runtime.connectors.pg_values import PgValues

#: the value of an unchanged TOASTed column that the message does not carry (Debezium's marker)
UNAVAILABLE = "__debezium_unavailable_value"
_PG_EPOCH_MS = 946_684_800_000  # 2000-01-01 in Unix milliseconds

@dataclass
class Relation:
    schema: str
    name: str
    columns: list  # [(name, type oid)]
    converters: list = field(default_factory=list)  # per column: text -> value

    @property
    def table(self) -> str:
        return f"{self.schema}.{self.name}"


@dataclass
class Change:
    """One row change of a committed transaction."""

    op: str  # "c" | "u" | "d"
    table: str
    before: Optional[dict]
    after: Optional[dict]
    lsn: int
    txid: int
    commit_lsn: int  # the commit record's LSN (positions compare this)
    ts_ms: int


class TruncateError(RuntimeError):
    pass


class Reader:
    def __init__(self, data: bytes):
        self.data, self.pos = data, 0

    def take(self, fmt: str) -> Any:
        value = struct.unpack_from("!" + fmt, self.data, self.pos)
        self.pos += struct.calcsize("!" + fmt)
        return value[0] if len(value) == 1 else value

    def string(self) -> str:
        end = self.data.index(b"\0", self.pos)
        s = self.data[self.pos:end].decode("utf-8")
        self.pos = end + 1
        return s

    def tuple(self, rel: Relation) -> list:
        n = self.take("h")
        values = []
        for i in range(n):
            kind = bytes(self.data[self.pos:self.pos + 1])
            self.pos += 1
            if kind == b"n":
                values.append(None)
            elif kind == b"u":
                values.append(UNAVAILABLE)
            elif kind == b"t":
                size = self.take("i")
                text = bytes(self.data[self.pos:self.pos + size]).decode("utf-8")
                self.pos += size
                values.append(rel.converters[i](text))
            else:
                raise ValueError(f"pgoutput: unknown tuple data kind {kind!r}")
        return values


class Decoder:
    """Feed `(lsn, data)` rows of `pg_logical_slot_peek_binary_changes` in order; yields the
    `Change`s of each transaction at its commit (nothing of an uncommitted tail)."""

    def __init__(self, where: str, values: PgValues):
        self.where, self.values = where, values
        self.relations: dict[int, Relation] = {}
        self.pending: list = []
        self.xid = 0

    def feed(self, lsn: int, data: bytes) -> Iterator[Change]:
        r = Reader(bytes(data))
        kind = r.take("c")
        if kind == b"B":
            _final_lsn, _ts, self.xid = r.take("qqI")
            self.pending = []
        elif kind == b"R":
            relid = r.take("I")
            schema, name = r.string(), r.string()
            r.take("b")  # replica identity setting
            columns = []
            for _ in range(r.take("h")):
                r.take("b")
                col = r.string()
                type_oid, _typmod = r.take("Ii")
                columns.append((col, type_oid))
            self.relations[relid] = Relation(schema or "public", name, columns,
                                             self.values.converters(oid for _, oid in columns))
        elif kind in (b"I", b"U", b"D"):
            rel = self.relations[r.take("I")]
            self.pending.append(self._change(kind, rel, r, lsn))
        elif kind == b"T":
            n = r.take("I")
            r.take("b")
            names = [self.relations[r.take("I")].table for _ in range(n)]
            raise TruncateError(f"{self.where}: table(s) {names} were truncated (transaction {self.xid}); a "
                                "truncate is not a row change this source can express: reset the pipeline (drop "
                                "the slot and clear its checkpoint_dir) to read the tables afresh, or remove "
                                "'truncate' from the publication (ALTER PUBLICATION ... SET (publish = 'insert, "
                                "update, delete'))")
        elif kind == b"C":
            _flags, commit_lsn, _end_lsn, ts = r.take("bqqq")
            ts_ms = _PG_EPOCH_MS + ts // 1000
            for change in self.pending:
                change.commit_lsn, change.ts_ms = commit_lsn, ts_ms
                yield change
            self.pending = []
        # 'O' (origin), 'Y' (type) and 'M' (message) carry no row change

    def _change(self, kind: bytes, rel: Relation, r: Reader, lsn: int) -> Change:
        names = [c[0] for c in rel.columns]
        before = after = None
        if kind == b"I":
            r.take("c")  # 'N'
            after = dict(zip(names, r.tuple(rel)))
            op = "c"
        elif kind == b"U":
            tag = r.take("c")
            if tag in (b"K", b"O"):  # old key (key changed) or old row (REPLICA IDENTITY FULL)
                before = dict(zip(names, r.tuple(rel)))
                tag = r.take("c")
            after = dict(zip(names, r.tuple(rel)))
            if before is not None:  # unchanged TOASTed values are in the old row with FULL
                after = {k: (before[k] if v == UNAVAILABLE and before[k] != UNAVAILABLE else v)
                         for k, v in after.items()}
            op = "u"
        else:
            r.take("c")  # 'K' or 'O'
            before = dict(zip(names, r.tuple(rel)))
            op = "d"
        return Change(op, rel.table, before, after, lsn, self.xid, 0, 0)


def envelope(op: str, table: str, before: Optional[dict], after: Optional[dict], lsn: Optional[int],
             txid: Optional[int], ts_ms: int) -> dict:
    return {"op": op, "before": before, "after": after,
            "source": {"table": table, "lsn": lsn, "txid": txid, "ts_ms": ts_ms}}


def lsn_int(text: str) -> int:
    hi, lo = text.split("/")
    return (int(hi, 16) << 32) | int(lo, 16)


def lsn_text(value: int) -> str:
    return f"{value >> 32:X}/{value & 0xFFFFFFFF:X}"
