"""Stream runs of an incremental SQL source: which ids a run reads, without waiting for
writers, so that every row is read exactly once even when its transaction commits late.

An id is taken from the column's sequence when a row is inserted, but the row is visible
only once its transaction commits: a transaction that took id 3 may commit after another
that took id 4. A run therefore reads every visible id above the committed position and
keeps, in the checkpoint, the gaps below the highest id read (ids not visible yet) and the
ids read above the lowest gap. A later run reads what has become visible in those gaps and
skips the ids already read. A gap is retired (it can no longer fill: its transaction rolled
back, or its id was never used) when

* every transaction that was in progress when the gap was seen has ended, on the databases
  whose transactions in progress a run can list: PostgreSQL (`pg_locks`,
  `pg_prepared_xacts`), MySQL/MariaDB (`information_schema.innodb_trx`, which needs the
  PROCESS privilege; read fresh, see `_innodb_in_progress`) and SQLite (one writer at a time); not on a replica. A transaction that took an id at or below the maximum a run saw had
  taken it before that run read the maximum, so it is one of those listed right after;
* or `SqlSource(settle=...)` seconds have passed since it was seen (default
  `DEFAULT_SETTLE_SECONDS` where transactions cannot be listed, no limit elsewhere): a row
  committed into it later is never read (logged);
* or more than `MAX_OPEN_GAPS` gaps are open: the lowest ones (logged).

Positions: {"value": every id at or below is done, "emitted": [[first, last], ...] ids read
above it, "holds": [{"upto", "since", "waiting"}]}: the gaps at or below `upto` wait for
the transactions `waiting` (None: cannot be listed) or until `since` + settle.
"""

from __future__ import annotations

import decimal
import logging
import time
from typing import Any, Iterator, Optional

log = logging.getLogger(__name__)

#: seconds a gap stays open where transactions in progress cannot be listed and `settle` is None
DEFAULT_SETTLE_SECONDS = 300.0
#: gaps kept open at most (the lowest beyond it are retired): bounds the checkpoint
MAX_OPEN_GAPS = 1000
#: holds kept at most (the oldest is dropped: its gaps then wait for the next one's transactions)
MAX_HOLDS = 8
#: id ranges per read query
_RANGES_PER_QUERY = 50

_PG_IN_PROGRESS = """
select l.virtualtransaction from pg_locks l join pg_stat_activity a on a.pid = l.pid
where l.locktype = 'virtualxid' and l.mode = 'ExclusiveLock' and l.granted
  and l.pid <> pg_backend_pid() and a.datname = current_database()
  and a.backend_type not in ('autovacuum worker', 'walsender')
union all select 'prepared ' || gid from pg_prepared_xacts where database = current_database()
"""
_MYSQL_IN_PROGRESS = """
select trx_mysql_thread_id, concat(trx_mysql_thread_id, '@', trx_started) from information_schema.innodb_trx
where trx_mysql_thread_id <> connection_id()
"""
#: innodb_trx reads until one shows the canary transaction (sql_settle._innodb_in_progress)
FRESH_LIST_ATTEMPTS = 40
FRESH_LIST_WAIT = 0.12

Ranges = list  # [[first, last], ...] inclusive, sorted, disjoint; first None: from the lowest id


def plan_rows(source: Any, url: str, positions: dict, label: str) -> tuple[list, dict]:
    """([("rows", above, upto), ...] the id ranges (above, upto] this run reads, in order;
    the positions to commit with the run)."""
    import sqlalchemy as sa

    col, query, params = source.incremental_column, source.query, dict(source.params)
    done = positions.get("value")
    emitted: Ranges = [list(r) for r in positions.get("emitted") or []]
    holds = [dict(h) for h in positions.get("holds") or []]
    engine = sa.create_engine(url, isolation_level="AUTOCOMMIT")
    try:
        with engine.connect() as conn:
            where, bind = ("", {}) if done is None else (f" where {col} > :_done", {"_done": done})
            hi = _integer(conn.execute(sa.text(f"select max({col}) from ({query}) q{where}"),
                                       {**params, **bind}).scalar(), col, label)
            running = _in_progress(conn)  # after the maximum: see the module doc
            now = time.time()
            settle = source.settle
            if settle is None and running is None:
                settle = DEFAULT_SETTLE_SECONDS
            holds, released, by_time = _release(holds, running, settle, now)
            final: Ranges = []  # released gaps: what is visible in them now is all they will hold
            if released is not None:
                final = _complement(emitted, done, released)
                if by_time and final:
                    log.warning("%s: gaps in %s retired after settle=%s s while transactions that were in progress "
                                "may still run (a row they commit there later is not read): %s", label, col, settle,
                                final[:20])
                done, emitted = _advance(released if done is None else max(done, released),
                                         _above(emitted, released))
            top = max((v for v in (hi, done, emitted[-1][1] if emitted else None) if v is not None), default=None)
            if top is None or (done is not None and top <= done):
                return _reads(final), _positions(done, emitted, holds)
            scan = _complement(emitted, done, top)
            if running == []:  # nothing in progress: every gap at or below the maximum is final
                return _reads(_merge(final + scan)), _positions(top, [], [])
            islands = _islands(conn, query, params, col, scan)
    finally:
        engine.dispose()
    reads = list(islands)
    if len(islands) > MAX_OPEN_GAPS:  # more: the lowest ones are read as ranges and retired
        floor = islands[-MAX_OPEN_GAPS][0] - 1
        reads = _clip(scan, floor) + islands[-MAX_OPEN_GAPS:]
        log.info("%s: ids of %s at or below %s read as they are (more than %d gaps above them)",
                 label, col, floor, MAX_OPEN_GAPS)
        done, emitted = floor, _above(emitted, floor)
    emitted = _merge(emitted + reads)
    done, emitted = _advance(done, emitted)
    gaps = _complement(emitted, done, top)
    if len(gaps) > MAX_OPEN_GAPS:  # the lowest are retired: read as they are now, then done
        floor = gaps[-MAX_OPEN_GAPS][0] - 1
        log.warning("%s: more than %d gaps in %s open; those at or below %s are retired: a row committed there "
                    "later is not read", label, MAX_OPEN_GAPS, col, floor)
        final += _clip(gaps, floor)
        done, emitted = _advance(floor, _above(emitted, floor))
        gaps = _complement(emitted, done, top)
    reads = _merge(final + reads)
    if not gaps:
        return _reads(reads), _positions(top, [], [])
    if not holds or gaps[-1][1] > holds[-1]["upto"]:
        holds.append({"upto": max(v for v in (hi, gaps[-1][1]) if v is not None), "since": now, "waiting": running})
    return _reads(reads), _positions(done, emitted, _needed(holds, gaps))


def read_rows(url: str, query: str, params: dict, col: str, ranges: list) -> Iterator[dict]:
    """The rows of `query` whose `col` is in one of the (above, upto] `ranges` (ascending), in
    `col` order, over one connection."""
    import sqlalchemy as sa

    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            for start in range(0, len(ranges), _RANGES_PER_QUERY):
                where, bind = _predicate(col, [(a, b) for _split, a, b in ranges[start:start + _RANGES_PER_QUERY]])
                result = conn.execution_options(stream_results=True).execute(
                    sa.text(f"select * from ({query}) q where {where} order by {col}"), {**params, **bind})
                for row in result.mappings():
                    yield dict(row)
    finally:
        engine.dispose()


def _integer(value: Any, col: str, label: str) -> Optional[int]:
    if value is None:
        return None
    if isinstance(value, decimal.Decimal) and value == value.to_integral_value():
        return int(value)
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    raise TypeError(f"{label}: incremental_column {col!r} holds {type(value).__name__} values ({value!r}); it must "
                    "be an integer column whose values increase with every insert (an identity, serial or "
                    "AUTO_INCREMENT column)")


def _in_progress(conn: Any) -> Optional[list]:
    """The transactions in progress in the database, or None where they cannot be listed."""
    import sqlalchemy as sa

    dialect = conn.dialect.name
    if dialect == "sqlite":
        return []  # one writer at a time: a run sees every id a committed writer took
    sql = {"postgresql": _PG_IN_PROGRESS, "mysql": _MYSQL_IN_PROGRESS, "mariadb": _MYSQL_IN_PROGRESS}.get(dialect)
    if sql is None:
        return None
    try:
        # a replica: the writers are the primary's transactions, which it cannot list
        replica = "select pg_is_in_recovery()" if dialect == "postgresql" else "select @@global.read_only"
        if conn.execute(sa.text(replica)).scalar():
            log.warning("the database is a replica (read only): id gaps are kept open for `settle` seconds")
            return None
        if dialect == "postgresql":
            return sorted({str(v) for v in conn.execute(sa.text(sql)).scalars()})
        return _innodb_in_progress(conn)
    except sa.exc.DBAPIError as exc:  # e.g. no PROCESS privilege for innodb_trx
        log.warning("cannot list the transactions in progress (%s); id gaps are kept open for `settle` seconds",
                    str(getattr(exc, "orig", exc)).splitlines()[0])
        return None


def _innodb_in_progress(conn: Any) -> Optional[list]:
    """`information_schema.innodb_trx` as of now. InnoDB serves it from a cache refreshed only
    when it was not read for 0.1 s (any session's read counts), so a plain read may miss a
    transaction that began just before it. A canary transaction begun on a second connection
    after the maximum was read proves the list fresh: the first list that shows the canary
    holds every transaction begun before it. None when no fresh list comes within a few seconds."""
    import sqlalchemy as sa

    with conn.engine.connect() as canary:
        canary_id = canary.execute(sa.text("select connection_id()")).scalar()
        canary.exec_driver_sql("start transaction with consistent snapshot")
        try:
            for _ in range(FRESH_LIST_ATTEMPTS):
                time.sleep(FRESH_LIST_WAIT)
                rows = conn.execute(sa.text(_MYSQL_IN_PROGRESS)).all()
                if any(int(thread) == canary_id for thread, _ in rows):
                    return sorted({str(trx) for thread, trx in rows if int(thread) != canary_id})
        finally:
            canary.exec_driver_sql("rollback")
    log.warning("information_schema.innodb_trx showed no fresh list within %.1f s (other sessions read it "
                "continuously?); id gaps are kept open for `settle` seconds", FRESH_LIST_ATTEMPTS * FRESH_LIST_WAIT)
    return None


def _release(holds: list, running: Optional[list], settle: Optional[float],
             now: float) -> tuple[list, Any, bool]:
    """(the holds still open, their waiting lists cut to what still runs; the highest `upto`
    released, or None; whether a hold was released by time while its transactions may still
    run). A later hold waits for every transaction an earlier one still waits for, and is
    younger: holds are released oldest first."""
    released, by_time = None, False
    for h in holds:
        if h["waiting"] is not None and running is not None:
            h["waiting"] = sorted(set(h["waiting"]) & set(running))
        if h["waiting"] is not None and not h["waiting"]:
            released = h["upto"] if released is None else max(released, h["upto"])
        elif settle is not None and now - h["since"] >= settle:
            released = h["upto"] if released is None else max(released, h["upto"])
            by_time = True
    if released is None:
        return holds, None, False
    return [h for h in holds if h["upto"] > released], released, by_time


def _needed(holds: list, gaps: Ranges) -> list:
    """The holds that govern a gap (a gap waits for the first hold at or above its last id),
    at most MAX_HOLDS: a dropped hold's gaps wait for the next hold (a superset, younger)."""
    kept, below = [], None
    for h in holds:
        if any((below is None or g[1] > below) and g[1] <= h["upto"] for g in gaps):
            kept.append(h)
        below = h["upto"]
    return kept[-MAX_HOLDS:]


def _positions(done: Any, emitted: Ranges, holds: list) -> dict:
    return {"value": done, "emitted": emitted, "holds": holds}


def _reads(ranges: Ranges) -> list:
    return [("rows", None if a is None else a - 1, b) for a, b in ranges]


def _merge(ranges: Ranges) -> Ranges:
    out: Ranges = []
    for a, b in sorted(ranges, key=lambda r: (r[0] is not None, r[0] if r[0] is not None else 0)):
        if out and (a is None or out[-1][1] >= a - 1):
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return out


def _advance(done: Any, emitted: Ranges) -> tuple[Any, Ranges]:
    """Moves `done` over the emitted ranges that touch it."""
    while emitted and (emitted[0][0] is None or (done is not None and emitted[0][0] <= done + 1)):
        done = emitted[0][1] if done is None else max(done, emitted[0][1])
        emitted = emitted[1:]
    return done, emitted


def _above(ranges: Ranges, floor: int) -> Ranges:
    return [[max(a, floor + 1) if a is not None else floor + 1, b] for a, b in ranges if b > floor]


def _clip(ranges: Ranges, upto: int) -> Ranges:
    return [[a, min(b, upto)] for a, b in ranges if a is None or a <= upto]


def _complement(emitted: Ranges, done: Any, top: int) -> Ranges:
    """The ids in (done, top] not in `emitted` (first None: from the lowest id, when done is None)."""
    out, nxt = [], None if done is None else done + 1  # the lowest id not covered yet
    for a, b in emitted:
        if a is not None and (nxt is None or a > nxt) and (nxt is None or nxt <= min(a - 1, top)):
            out.append([nxt, min(a - 1, top)])
        nxt = b + 1
    if nxt is None or nxt <= top:
        out.append([nxt, top])
    return out


def _predicate(col: str, ranges: list) -> tuple[str, dict]:
    parts, bind = [], {}
    for i, (above, upto) in enumerate(ranges):
        bind[f"_u{i}"] = upto
        if above is None:
            parts.append(f"{col} <= :_u{i}")
        else:
            bind[f"_a{i}"] = above
            parts.append(f"({col} > :_a{i} and {col} <= :_u{i})")
    return "(" + " or ".join(parts) + ")", bind


def _islands(conn: Any, query: str, params: dict, col: str, scan: Ranges) -> Ranges:
    """The runs of consecutive visible ids within `scan`, ascending; at most MAX_OPEN_GAPS + 1
    (the highest)."""
    import sqlalchemy as sa

    islands: Ranges = []
    for start in range(0, len(scan), _RANGES_PER_QUERY):
        chunk = [(None if a is None else a - 1, b) for a, b in scan[start:start + _RANGES_PER_QUERY]]
        where, bind = _predicate(col, chunk)
        rows = conn.execute(sa.text(
            f"select min(c) as lo, max(c) as hi from (select c, c - dense_rank() over (order by c) as g from "
            f"(select {col} as c from ({query}) q where {where}) s) t group by g order by lo desc"),
            {**params, **bind}).fetchmany(MAX_OPEN_GAPS + 1)
        islands.extend([int(r.lo), int(r.hi)] for r in rows)
    islands.sort()
    return islands[-(MAX_OPEN_GAPS + 1):]
