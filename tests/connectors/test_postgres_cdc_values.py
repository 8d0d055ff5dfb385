"""PostgresCdcSource column values: one table with every common type; the same row gives the
same Python values read by the snapshot (op "r"), a streamed insert (op "c") and a streamed
update (op "u"): the mapping of docs/connectors-postgres-cdc.md."""

from __future__ import annotations

import datetime
import decimal

from airflow_flinkchain import StreamPipeline
from airflow_flinkchain.io.sources import PostgresCdcSource
from tests.connectors.pg_logical import pg_cluster  # noqa: F401

COLUMNS = """
    id int primary key, b bool, b2 bool, i2 int2, i4 int4, i8 int8, n numeric(14,4), f4 float4, f8 float8,
    t text, vc varchar(20), ch char(4), by bytea, d date, tm time, tz timetz, ts timestamp, tstz timestamptz,
    iv interval, u uuid, j json, jb jsonb, ai int[], ai2 int[][], at text[], e mood, em mood[], dom posint,
    dinf date"""

VALUES = """
    true, false, -32768, 2147483647, 9223372036854775807, 12345678.1234, 1.5, 0.1,
    'héllo "q" \\ b', 'v', 'ab', '\\x00ff10', '2024-02-29', '13:14:15.123456', '04:05:06+05:30',
    '2024-02-29 13:14:15.5', '2024-02-29 13:14:15.5+02', '1 year 2 mons 3 days 04:05:06.5',
    'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', '{"a": [1, 2.5, null], "b": "x"}', '{"a": [1, 2.5, null], "b": "x"}',
    '{1,NULL,3}', '{{1,2},{3,4}}', array['a b', 'c"d', null, 'NULL', '', 'x,y'], 'happy', '{sad,happy}', 7,
    'infinity'"""

EXPECTED = {
    "b": True, "b2": False, "i2": -32768, "i4": 2147483647, "i8": 9223372036854775807,
    "n": decimal.Decimal("12345678.1234"), "f4": 1.5, "f8": 0.1, "t": 'héllo "q" \\ b', "vc": "v", "ch": "ab  ",
    "by": b"\x00\xff\x10", "d": datetime.date(2024, 2, 29), "tm": datetime.time(13, 14, 15, 123456),
    "tz": datetime.time(4, 5, 6, tzinfo=datetime.timezone(datetime.timedelta(hours=5, minutes=30))),
    "ts": datetime.datetime(2024, 2, 29, 13, 14, 15, 500000),
    "tstz": datetime.datetime(2024, 2, 29, 11, 14, 15, 500000, tzinfo=datetime.timezone.utc),
    "iv": datetime.timedelta(days=365 + 60 + 3, hours=4, minutes=5, seconds=6.5),
    "u": "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11", "j": {"a": [1, 2.5, None], "b": "x"},
    "jb": {"a": [1, 2.5, None], "b": "x"}, "ai": [1, None, 3], "ai2": [[1, 2], [3, 4]],
    "at": ["a b", 'c"d', None, "NULL", "", "x,y"], "e": "happy", "em": ["sad", "happy"], "dom": 7,
    "dinf": "infinity",
}


def read(cluster, db, ckpt, run_id) -> list[dict]:
    p = StreamPipeline("cdc-values", runtime_mode="streaming", checkpoint_dir=ckpt)
    source = PostgresCdcSource(cluster.url(db), ("public.typed",), slot_name="typed", publication_name="typed")
    p.from_source(source, name="pg").uid("pg").collect("changes")
    return p.execute_local(run_id=run_id).output("changes")


def by_op_and_id(changes) -> dict:
    return {(c["op"], c["after"]["id"]): c["after"] for c in changes}


def test_snapshot_and_streamed_changes_give_the_same_typed_values(tmp_path, pg_cluster):
    db = pg_cluster.new_database()
    try:
        pg_cluster.execute(db, "set client_encoding = 'UTF8'", "create type mood as enum ('sad', 'happy')",
                           "create domain posint as int check (value > 0)", f"create table typed ({COLUMNS})",
                           f"insert into typed values (1, {VALUES})", "insert into typed (id) values (2)")
        ckpt = str(tmp_path / "ckpt")
        snapshot = by_op_and_id(read(pg_cluster, db, ckpt, "r1"))
        pg_cluster.execute(db, f"insert into typed values (3, {VALUES})", "insert into typed (id) values (4)",
                           "update typed set i4 = i4 where id in (1, 2)")
        streamed = by_op_and_id(read(pg_cluster, db, ckpt, "r2"))
        assert set(snapshot) == {("r", 1), ("r", 2)} and set(streamed) == {("c", 3), ("c", 4), ("u", 1), ("u", 2)}
        nulls = dict.fromkeys(EXPECTED)
        for key, want in [(("r", 1), EXPECTED), (("c", 3), EXPECTED), (("u", 1), EXPECTED), (("r", 2), nulls),
                          (("c", 4), nulls), (("u", 2), nulls)]:
            row = {k: v for k, v in {**snapshot, **streamed}[key].items() if k != "id"}
            assert row == want, (key, {k: (v, want[k]) for k, v in row.items() if v != want[k]})
            assert [type(v) for v in row.values()] == [type(v) for v in want.values()], key
    finally:
        pg_cluster.drop_database(db)
