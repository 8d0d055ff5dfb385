"""SqlSink's PostgreSQL COPY against the real PostgreSQL (127.0.0.1:5432, database `test`), with
psycopg2 and psycopg 3: every value type stores what an INSERT of the same rows stores (NULLs,
text with tabs, newlines, backslashes and `\\N`, unicode, timestamps, decimals, bytes, special
floats); values COPY would store differently go through INSERT; a refused COPY leaves neither
rows nor the commit record; a repeated publication writes nothing."""

from __future__ import annotations

import datetime
import decimal
import socket
import uuid

import pytest
import sqlalchemy as sa

from airflow_flinkchain.runtime.connectors.sql import CommitRecord, commit_table
from airflow_flinkchain.runtime.connectors.sql_copy import RowColumns, copy_text
from tests.connectors.nats_server import unavailable

URLS = {"psycopg2": "postgresql+psycopg2://postgres@127.0.0.1:5432/test",
        "psycopg": "postgresql+psycopg://postgres@127.0.0.1:5432/test"}

ROWS = [
    {"id": 1, "name": "plain", "amount": 1.5, "price": decimal.Decimal("10.50"), "ok": True,
     "at": datetime.datetime(2024, 2, 29, 23, 59, 59, 999999), "day": datetime.date(2024, 1, 1),
     "blob": b"\x00\x01\\\t\n", "note": None},
    {"id": -(2 ** 63), "name": "tab\there\nnew\rline \\ back\\slash \\N", "amount": float("inf"),
     "price": decimal.Decimal("-0.000001"), "ok": False, "at": datetime.datetime(1970, 1, 1),
     "day": datetime.date(1, 1, 1), "blob": b"", "note": "\\N"},
    {"id": 2 ** 63 - 1, "name": "unicode: Grüße, 東京, 🚀", "amount": float("-inf"), "price": None, "ok": None,
     "at": None, "day": None, "blob": None, "note": ""},
    {"id": 0, "name": "", "amount": float("nan"), "price": decimal.Decimal("12345678901234567890.123456789"),
     "ok": True, "at": datetime.datetime(2038, 1, 19, 3, 14, 8, 1), "day": datetime.date(9999, 12, 31),
     "blob": bytes(range(256)), "note": "x"},
    {"id": 3, "name": "float forms", "amount": 0.1, "price": decimal.Decimal("1E+3"), "ok": False,
     "at": datetime.datetime(2000, 1, 1), "day": datetime.date(2000, 2, 29), "blob": b"b", "note": None},
    {"id": 4, "name": "tiny", "amount": 5e-324, "price": decimal.Decimal("0"), "ok": True,
     "at": datetime.datetime(2000, 1, 1), "day": datetime.date(2000, 2, 29), "blob": b"b", "note": None},
    {"id": 5, "name": "huge", "amount": 1.7976931348623157e308, "price": decimal.Decimal("NaN"), "ok": True,
     "at": datetime.datetime(2000, 1, 1), "day": datetime.date(2000, 2, 29), "blob": b"b", "note": "y"},
]


@pytest.fixture(params=sorted(URLS))
def pg(request):
    """(url, a table name of the test's own); the table dropped afterwards."""
    try:
        socket.create_connection(("127.0.0.1", 5432), timeout=2).close()
    except OSError:
        unavailable("no PostgreSQL at 127.0.0.1:5432 (database `test`)")
    url, table = URLS[request.param], f"copy_{uuid.uuid4().hex[:8]}"
    yield url, table
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        for t in (table, table + "_ref"):
            conn.execute(sa.text(f'drop table if exists "{t}"'))
    engine.dispose()


def stored(url: str, table: str) -> list:
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            return [tuple(r) for r in conn.execute(sa.text(f'select * from "{table}" order by id'))]
    finally:
        engine.dispose()


def same(a: list, b: list) -> bool:
    def norm(v):
        return "nan" if isinstance(v, (float, decimal.Decimal)) and v != v else v  # NaN != NaN
    return [tuple(map(norm, r)) for r in a] == [tuple(map(norm, r)) for r in b]


def inserted_reference(url: str, table: str, rows: list, run_id: str) -> None:
    """The same rows INSERTed (SQLAlchemy executemany) into a table of the same columns."""
    engine = sa.create_engine(url)
    try:
        with engine.begin() as conn:
            ref = sa.Table(table + "_ref", sa.MetaData(), *(sa.Column(c.name, c.type) for c in sa.Table(
                table, sa.MetaData(), autoload_with=conn).columns))
            ref.create(conn)
            conn.execute(ref.insert(), [{**r, "_run_id": run_id, "_dag_id": "dag"} for r in rows])
    finally:
        engine.dispose()


def test_copy_stores_what_insert_stores_for_every_value_type(pg):
    url, table = pg
    assert commit_table(url, table, "_run_id", "run-1", ROWS, where="sink 'out'", dag_id_column="_dag_id",
                        dag_id="dag") == len(ROWS)
    engine = sa.create_engine(url)
    with engine.connect() as conn:  # the rows went through COPY: their columns all have a text form
        tbl = sa.Table(table, sa.MetaData(), autoload_with=conn)
    engine.dispose()
    assert copy_text(RowColumns.of(ROWS), tbl, {"_run_id": "run-1", "_dag_id": "dag"}) is not None
    inserted_reference(url, table, ROWS, "run-1")
    got, want = stored(url, table), stored(url, table + "_ref")
    assert len(got) == len(ROWS) and same(got, want)
    by_id = {r[0]: r for r in got}
    assert by_id[1][1:3] == ("plain", 1.5) and by_id[-(2 ** 63)][1] == ROWS[1]["name"]
    assert by_id[-(2 ** 63)][8] == "\\N" and by_id[2 ** 63 - 1][8] == "" and by_id[1][8] is None
    assert bytes(by_id[1][7]) == b"\x00\x01\\\t\n" and bytes(by_id[0][7]) == bytes(range(256))


def test_records_of_several_shapes_fill_missing_fields_with_null(pg):
    url, table = pg
    rows = [{"id": 1, "a": "x"}, {"id": 2, "b": 2.5}, {"id": 3, "a": None, "b": 3}]
    commit_table(url, table, "_run_id", "r", rows, where="sink 'out'", dag_id_column="_dag_id", dag_id="dag")
    assert [r[:3] for r in stored(url, table)] == [(1, "x", None), (2, None, 2.5), (3, None, 3.0)]


def test_values_copy_would_store_differently_are_inserted(pg):
    """A float into an existing integer column: INSERT rounds it (COPY would refuse the text); a
    timezone-aware datetime into a timestamp column: INSERT converts it to the session's zone."""
    url, table = pg
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        conn.execute(sa.text(f'create table "{table}" (id bigint, n integer, at timestamp, _run_id text)'))
        tbl = sa.Table(table, sa.MetaData(), autoload_with=conn)
    engine.dispose()
    aware = datetime.datetime(2024, 1, 1, 12, tzinfo=datetime.timezone(datetime.timedelta(hours=2)))
    rows = [{"id": 1, "n": 2.6, "at": None}, {"id": 2, "n": 3, "at": aware}]
    assert copy_text(RowColumns.of(rows[:1]), tbl, {"_run_id": "r"}) is None
    assert copy_text(RowColumns.of([{"id": 2, "n": 3, "at": aware}]), tbl, {"_run_id": "r"}) is None
    commit_table(url, table, "_run_id", "r", rows, where="sink 'out'", dag_id_column=None)
    got = stored(url, table)
    assert [r[:2] for r in got] == [(1, 3), (2, 3)]
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        conn.execute(sa.text(f'create table "{table}_ref" (at timestamp)'))
        conn.execute(sa.text(f'insert into "{table}_ref" (at) values (:at)'), {"at": aware})
        want = conn.execute(sa.text(f'select at from "{table}_ref"')).scalar()
    engine.dispose()
    assert got[1][2] == want


def test_a_refused_copy_writes_neither_the_rows_nor_the_commit_record(pg):
    url, table = pg
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        conn.execute(sa.text(f'create table "{table}" (id bigint primary key, name text not null, '
                             "_run_id text)"))
        conn.execute(sa.text(f"insert into \"{table}\" values (7, 'kept', 'earlier')"))
    engine.dispose()
    record = CommitRecord(f"s-{uuid.uuid4().hex[:6]}", "copy-test", "out", 3)
    rows = [{"id": i, "name": f"n{i}"} for i in range(100, 120)] + [{"id": 7, "name": "duplicate key"}]
    with pytest.raises(RuntimeError, match=rf"sink 'out': the database refused the rows for table '{table}'.*"
                                           "nothing of this run was written"):
        commit_table(url, table, "_run_id", "r", rows, where="sink 'out'", dag_id_column=None, commit_record=record)
    assert stored(url, table) == [(7, "kept", "earlier")]
    assert commit_table(url, table, "_run_id", "r", rows[:-1], where="sink 'out'", dag_id_column=None,
                        commit_record=record) == 20
    assert commit_table(url, table, "_run_id", "r", rows[:-1], where="sink 'out'", dag_id_column=None,
                        commit_record=record) == 0  # checkpoint 3 recorded: a repeated publication
    assert len(stored(url, table)) == 21
