"""The upper value of an incremental SQL source's run, once no writer can still commit a
row at or below it (the high-water-mark gap of identity columns under concurrent writers).

A value is taken from a sequence when a row is inserted, but the row becomes visible when
its transaction commits: a transaction that took id 3 may commit after another that took
id 4. A run that read up to 4 and moved its position there would never read 3. So:

* PostgreSQL: the run takes `max(column)` and then lists the transactions in progress in
  the database (their virtual transaction ids, `pg_locks`); every id at or below that
  maximum was taken before it, so by one of those transactions or by one already finished.
  The run waits until each of them has ended (as `CREATE INDEX CONCURRENTLY` waits out
  older transactions), then reads `(last value, max]`: every row of that range that will
  ever commit is visible. A transaction still open after `PG_WAIT_SECONDS` fails the run,
  naming its backend; the run's retry starts again. Exact while the sequence hands out
  values in order (`CACHE 1`, the default of identity and serial columns).
* SQLite: one writer at a time, and a row's id is taken inside its write transaction, so
  committed ids only grow: `max(column)` is exact as it is.
* others (MySQL, ...): the run waits `settle` seconds after taking the maximum; a writer
  that took a lower value and commits within that time is read by this run, one that
  commits later is not read at all. Choose `settle` above the longest insert transaction.
"""

from __future__ import annotations

import time
from typing import Any

#: The longest a run waits for the transactions in progress on PostgreSQL.
PG_WAIT_SECONDS = 120.0
_POLL_SECONDS = 0.1

_IN_PROGRESS = """
select l.virtualtransaction, l.pid, a.state, a.xact_start
from pg_locks l join pg_stat_activity a on a.pid = l.pid
where l.locktype = 'virtualxid' and l.mode = 'ExclusiveLock' and l.granted
  and l.pid <> pg_backend_pid() and a.datname = current_database()
"""
_STILL = "select virtualtransaction from pg_locks where locktype = 'virtualxid' and virtualtransaction = any(:ids)"


def settled_high_value(url: str, query: str, params: dict, column: str, settle: float, label: str) -> Any:
    """The largest value of `column` in `query` whose range up to it is complete (see module doc)."""
    import sqlalchemy as sa

    engine = sa.create_engine(url, isolation_level="AUTOCOMMIT")
    try:
        with engine.connect() as conn:
            hi = conn.execute(sa.text(f"select max({column}) as hi from ({query}) q"), params or {}).scalar()
            if hi is None:
                return None
            if conn.dialect.name == "postgresql":
                _wait_for_transactions_in_progress(conn, label, column, hi)
            elif conn.dialect.name != "sqlite" and settle:
                time.sleep(float(settle))
        return hi
    finally:
        engine.dispose()


def _wait_for_transactions_in_progress(conn: Any, label: str, column: str, hi: Any) -> None:
    import sqlalchemy as sa

    running = {r.virtualtransaction: r for r in conn.execute(sa.text(_IN_PROGRESS))}
    deadline = time.monotonic() + PG_WAIT_SECONDS
    while running:
        still = set(conn.execute(sa.text(_STILL), {"ids": list(running)}).scalars())
        running = {k: v for k, v in running.items() if k in still}
        if not running:
            return
        if time.monotonic() > deadline:
            held = ", ".join(f"pid {r.pid} ({r.state or 'unknown state'}, transaction started {r.xact_start})"
                             for r in running.values())
            raise RuntimeError(
                f"{label}: transactions in progress when the run took {column} <= {hi!r} may still commit rows "
                f"in that range, and were still open after {PG_WAIT_SECONDS:.0f} s: {held}. Nothing was read; "
                "end those transactions (an idle session holding a transaction open) and run again")
        time.sleep(_POLL_SECONDS)

