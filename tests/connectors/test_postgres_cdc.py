"""PostgresCdcSource against a real PostgreSQL cluster with wal_level=logical, started by the
tests: a snapshot then inserts, updates and deletes over N stream runs and a drain equal one
STREAMING run over the final table, also when runs are SIGKILLed and retried; the slot
advances only after a commit; clear errors."""

from __future__ import annotations

import random
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from airflow_flinkchain.io.sources import PostgresCdcSource
from airflow_flinkchain.runtime.pipeline_run import ChainRunError
from tests.conformance_cases import as_multiset
from tests.connectors.nats_server import unavailable
from tests.connectors.pg_logical import (KillOn, canonical, cdc_pipeline, materialize, pg_cluster,  # noqa: F401
                                         pg_db)
from tests.streamruns.cases import differences

REPO = Path(__file__).resolve().parents[2]


def source_of(cluster, db, **kw) -> PostgresCdcSource:
    return PostgresCdcSource(cluster.url(db), ("public.orders",), slot_name=kw.pop("slot_name", "flinkchain"),
                             publication_name="flinkchain", **kw)


def change_batches(seed: int, n: int) -> list[list[str]]:
    """n batches of statements (one transaction each) inserting, updating and deleting orders."""
    rng, live, next_id, out = random.Random(seed), set(range(1, 11)), 11, []
    for _ in range(n):
        batch = []
        for _ in range(rng.randint(3, 8)):
            kind = rng.choice("iiud") if live else "i"
            if kind == "i":
                batch.append(f"insert into orders values ({next_id}, 'item{next_id}', {rng.randint(1, 9)}, "
                             f"{rng.randint(100, 999)}.25)")
                live.add(next_id)
                next_id += 1
            elif kind == "u":
                batch.append(f"update orders set qty = qty + {rng.randint(1, 5)} where id = {rng.choice(sorted(live))}")
            else:
                row = rng.choice(sorted(live))
                batch.append(f"delete from orders where id = {row}")
                live.discard(row)
        out.append(batch)
    return out


def seed_rows(cluster, db) -> None:
    cluster.execute(db, "alter table orders replica identity full", "insert into orders select i, 'item' || i, i, "
                        "i * 10.5 from generate_series(1, 10) i")


def apply(cluster, db, batch) -> None:
    cluster.execute(db, "begin", *batch, "commit")


def reference(cluster, db) -> dict:
    """One STREAMING run without a checkpoint_dir: the final table, as a snapshot."""
    result = cdc_pipeline(source_of(cluster, db)).execute_local()
    assert {c[0] for c in result.output("changes")} <= {"r"}
    return materialize(result.output("changes"))


def expected_latest(changes) -> Counter:
    import json

    return as_multiset([(json.loads(after or before)["id"], after) for _op, _t, before, after in changes])


def test_n_runs_with_changes_between_and_a_drain_equal_one_streaming_run(tmp_path, pg_cluster, pg_db):
    seed_rows(pg_cluster, pg_db)
    ckpt, results = str(tmp_path / "ckpt"), []
    batches = change_batches(seed=3, n=4)
    for k, batch in enumerate(batches + [None]):
        results.append(cdc_pipeline(source_of(pg_cluster, pg_db), ckpt).execute_local(
            run_id=f"run-{k}", drain=batch is None))
        if batch is not None:
            apply(pg_cluster, pg_db, batch)
            apply(pg_cluster, pg_db, [])  # an empty transaction: no change records
    changes = [c for r in results for c in r.output("changes")]
    ops = Counter(c[0] for c in changes)
    assert ops["r"] == 10 and ops["c"] > 0 and ops["u"] > 0 and ops["d"] > 0, ops
    assert [c[0] for c in results[0].output("changes")] == ["r"] * 10  # the first run: the snapshot only
    assert len(set(changes)) == len(changes)  # each change once (rows differ: qty or existence changes)
    assert materialize(changes) == reference(pg_cluster, pg_db)
    assert as_multiset([x for r in results for x in r.output("latest")]) == expected_latest(changes)
    for change in changes:  # REPLICA IDENTITY FULL: updates and deletes carry the whole old row
        if change[0] in "ud":
            assert change[2] is not None and '"item": "item' in change[2]
    last = results[-1].stream["sources"]["pg"]["splits"]["flinkchain"]["lsn"]
    confirmed = pg_cluster.execute(pg_db, "select confirmed_flush_lsn::text from pg_replication_slots")[0][0]
    hi, lo = confirmed.split("/")
    assert (int(hi, 16) << 32 | int(lo, 16)) == last  # advanced to the committed position


def test_change_records_carry_source_fields_and_commit_time(tmp_path, pg_cluster, pg_db):
    from airflow_flinkchain import StreamPipeline
    from tests.conformance_cases import WithTimestamp

    def run(run_id):
        p = StreamPipeline("stamps", runtime_mode="streaming", checkpoint_dir=str(tmp_path / "ckpt"))
        p.from_source(source_of(pg_cluster, pg_db), name="pg").uid("pg").process(WithTimestamp()).collect("stamped")
        return p.execute_local(run_id=run_id)

    pg_cluster.execute(pg_db, "insert into orders values (1, 'a', 1, 1.50)")
    first = run("r1")
    before = int(time.time() * 1000)
    apply(pg_cluster, pg_db, ["update orders set qty = 2 where id = 1", "delete from orders where id = 1"])
    after = int(time.time() * 1000)
    second = run("r2")
    ((r, r_ts),) = first.output("stamped")
    assert canonical(r) == ("r", "public.orders", None, '{"id": 1, "item": "a", "price": "1.50", "qty": 1}')
    assert r["source"]["ts_ms"] == r_ts and r["source"]["txid"] is None and r["source"]["lsn"] > 0
    (u, u_ts), (d, d_ts) = second.output("stamped")
    assert (u["op"], d["op"]) == ("u", "d") and u["source"]["txid"] == d["source"]["txid"]
    assert u["after"]["qty"] == 2 and u["before"] is None  # default REPLICA IDENTITY: no old row on update
    assert d["before"] == {"id": 1, "item": None, "qty": None, "price": None}  # ... and the key only on delete
    assert u_ts == d_ts == u["source"]["ts_ms"] and before - 1000 <= u_ts <= after + 1000
    assert u["source"]["table"] == "public.orders" and u["source"]["lsn"] < d["source"]["lsn"]


KILL_SCRIPT = """
import sys
sys.path.insert(0, {repo!r})
from airflow_flinkchain.io.sources import PostgresCdcSource
from tests.connectors.pg_logical import KillOn, cdc_pipeline
source = PostgresCdcSource({url!r}, ("public.orders",), slot_name="flinkchain", publication_name="flinkchain")
cdc_pipeline(source, {ckpt!r}, kill=KillOn({marker!r}, {row_id!r})).execute_local(run_id={run_id!r}, drain={drain!r})
"""


def test_runs_killed_at_random_points_and_retried_lose_and_duplicate_nothing(tmp_path, pg_cluster, pg_db):
    """Each run's first attempt is SIGKILLed (a process of its own) on a change chosen at
    random, the first run's in its snapshot (the slot exists, nothing committed); the retry
    (same run id, or the drain) reads from the last committed position."""
    seed_rows(pg_cluster, pg_db)
    ckpt, marker, rng = str(tmp_path / "ckpt"), tmp_path / "kill-now", random.Random(11)
    batches = change_batches(seed=8, n=3)
    kill_ids = [rng.randint(1, 10)]
    results = []
    for k in range(len(batches) + 1):
        drain = k == len(batches)
        marker.write_text("")
        script = KILL_SCRIPT.format(repo=str(REPO), url=pg_cluster.url(pg_db), ckpt=ckpt, marker=str(marker),
                                    row_id=kill_ids[k], run_id=f"r{k}", drain=drain)
        proc = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, timeout=300)
        assert proc.returncode == -9, proc.stderr.decode()[-2000:]
        marker.unlink()
        results.append(cdc_pipeline(source_of(pg_cluster, pg_db), ckpt, kill=KillOn(str(marker), -1)).execute_local(
            run_id=f"r{k}", drain=drain))
        if not drain:
            apply(pg_cluster, pg_db, batches[k])
            ids = [int(s.split("where id = ")[1]) if "where id" in s else int(s.split("(")[1].split(",")[0])
                   for s in batches[k]]
            kill_ids.append(rng.choice(ids))
    changes = [c for r in results for c in r.output("changes")]
    assert len(set(changes)) == len(changes)
    assert materialize(changes) == reference(pg_cluster, pg_db)
    assert as_multiset([x for r in results for x in r.output("latest")]) == expected_latest(changes)
    want = sum(len(b) for b in batches) + 10
    assert len(changes) == want, differences({"changes": as_multiset(changes)}, {"changes": Counter()})


def test_a_run_stopped_between_commit_and_advance_doubles_nothing(tmp_path, pg_cluster, pg_db, monkeypatch):
    """The slot not advanced after a commit (the process stopped right after the commit
    point): the next run starts at the committed position, not at the slot's."""
    from airflow_flinkchain.runtime.connectors.postgres_cdc import PostgresCdcSplits

    def slot_lsn():
        return pg_cluster.execute(pg_db, "select confirmed_flush_lsn::text from pg_replication_slots")[0][0]

    seed_rows(pg_cluster, pg_db)
    ckpt = str(tmp_path / "ckpt")
    cdc_pipeline(source_of(pg_cluster, pg_db), ckpt).execute_local(run_id="r1")
    apply(pg_cluster, pg_db, ["update orders set qty = 100 where id = 1"])
    with monkeypatch.context() as m:  # the stop: no advance after r2's commit
        m.setattr(PostgresCdcSplits, "committed", lambda self, positions: None)
        held = slot_lsn()
        second = cdc_pipeline(source_of(pg_cluster, pg_db), ckpt).execute_local(run_id="r2")
        assert slot_lsn() == held
    apply(pg_cluster, pg_db, ["update orders set qty = 200 where id = 1"])
    with monkeypatch.context() as m:  # nor in discover: the read itself must skip what r2 read
        m.setattr(PostgresCdcSplits, "_advance", lambda self, conn, lsn: None)
        third = cdc_pipeline(source_of(pg_cluster, pg_db), ckpt).execute_local(run_id="r3")
    fourth = cdc_pipeline(source_of(pg_cluster, pg_db), ckpt).execute_local(run_id="r4")
    assert [c[0] for c in second.output("changes")] == ["u"] and '"qty": 100' in second.output("changes")[0][3]
    assert [c[0] for c in third.output("changes")] == ["u"] and '"qty": 200' in third.output("changes")[0][3]
    assert fourth.output("changes") == [] and slot_lsn() != held


def test_re_running_a_committed_run_is_refused_once_the_slot_released_its_changes(tmp_path, pg_cluster, pg_db):
    ckpt = str(tmp_path / "ckpt")
    cdc_pipeline(source_of(pg_cluster, pg_db), ckpt).execute_local(run_id="r1")
    pg_cluster.execute(pg_db, "insert into orders values (1, 'a', 1, 1)")
    second = cdc_pipeline(source_of(pg_cluster, pg_db), ckpt).execute_local(run_id="r2")
    assert [c[0] for c in second.output("changes")] == ["c"]
    with pytest.raises(ChainRunError, match=r"the slot released the changes up to .* start a new run instead"):
        cdc_pipeline(source_of(pg_cluster, pg_db), ckpt).execute_local(run_id="r2")
    pg_cluster.execute(pg_db, "insert into orders values (2, 'b', 1, 1)")
    third = cdc_pipeline(source_of(pg_cluster, pg_db), ckpt).execute_local(run_id="r3")
    assert [c[3] for c in third.output("changes")] == ['{"id": 2, "item": "b", "price": "1.00", "qty": 1}']


def test_wal_level_replica_fails_naming_the_fix(tmp_path):
    import psycopg2

    url = "postgresql://postgres@127.0.0.1:5432/postgres"
    try:
        psycopg2.connect(url, connect_timeout=3).close()
    except psycopg2.Error:
        unavailable("no PostgreSQL at 127.0.0.1:5432 (wal_level=replica) to test the wal_level error against")
    p = cdc_pipeline(PostgresCdcSource(url, ("public.orders",)), str(tmp_path / "ckpt"))
    with pytest.raises(ChainRunError, match=r"source 'pg'.*wal_level=replica.*wal_level = logical"):
        p.execute_local(run_id="r1")


def test_bad_inputs_fail_naming_the_source_and_the_fix(tmp_path, pg_cluster, pg_db):
    def fails(source, pattern, ckpt="a"):
        with pytest.raises(ChainRunError, match=pattern):
            cdc_pipeline(source, str(tmp_path / ckpt)).execute_local(run_id="r1")

    fails(PostgresCdcSource(f"postgresql://postgres@127.0.0.1:1/{pg_db}", ("orders",)),
          r"source 'pg'.*PostgresCdcSource.*cannot connect to PostgreSQL")
    fails(PostgresCdcSource(pg_cluster.url(pg_db), ("public.nope",)), r"table 'public.nope' does not exist")
    pg_cluster.execute(pg_db, "create role reader login", "grant select on orders to reader")
    fails(PostgresCdcSource(pg_cluster.url(pg_db, "reader"), ("public.orders",)),
          r"role 'reader' may not use replication slots; ALTER ROLE reader WITH REPLICATION")
    pg_cluster.execute(pg_db, "select pg_create_logical_replication_slot('foreign_slot', 'pgoutput')")
    fails(PostgresCdcSource(pg_cluster.url(pg_db), ("public.orders",), slot_name="foreign_slot"),
          r"slot 'foreign_slot' belongs to no flinkchain pipeline")
    cdc_pipeline(source_of(pg_cluster, pg_db), str(tmp_path / "owner")).execute_local(run_id="r1")
    fails(source_of(pg_cluster, pg_db), r"slot 'flinkchain' belongs to another stream: pipeline 'cdc'", "other")
    pg_cluster.execute(pg_db, "select pg_drop_replication_slot('flinkchain')")
    with pytest.raises(ChainRunError, match=r"slot 'flinkchain' is gone.*clear its checkpoint_dir"):
        cdc_pipeline(source_of(pg_cluster, pg_db), str(tmp_path / "owner")).execute_local(run_id="r2")
    pg_cluster.execute(pg_db, "truncate orders")
    with pytest.raises(ValueError, match=r"tables must be distinct 'schema.table' names"):
        PostgresCdcSource(pg_cluster.url(pg_db), ())
    with pytest.raises(ValueError, match=r"slot_name must be lower-case"):
        PostgresCdcSource(pg_cluster.url(pg_db), ("orders",), slot_name="Bad-Name")


def test_a_truncate_fails_the_run_naming_it(tmp_path, pg_cluster, pg_db):
    ckpt = str(tmp_path / "ckpt")
    cdc_pipeline(source_of(pg_cluster, pg_db), ckpt).execute_local(run_id="r1")
    pg_cluster.execute(pg_db, "insert into orders values (1, 'a', 1, 1)", "truncate orders")
    with pytest.raises(ChainRunError, match=r"\['public.orders'\] were truncated"):
        cdc_pipeline(source_of(pg_cluster, pg_db), ckpt).execute_local(run_id="r2")


def test_stream_runs_on_spark_read_the_snapshot_then_the_changes(tmp_path, pg_cluster, pg_db):
    seed_rows(pg_cluster, pg_db)
    ckpt = str(tmp_path / "ckpt")
    first = cdc_pipeline(source_of(pg_cluster, pg_db), ckpt).execute(run_id="s1")
    apply(pg_cluster, pg_db, change_batches(seed=21, n=1)[0])
    second = cdc_pipeline(source_of(pg_cluster, pg_db), ckpt).execute(run_id="s2", drain=True)
    changes = list(first.output("changes")) + list(second.output("changes"))
    assert [c[0] for c in first.output("changes")] == ["r"] * 10
    assert materialize([tuple(c) for c in changes]) == reference(pg_cluster, pg_db)
