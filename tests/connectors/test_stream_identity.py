"""Stream identity in every exactly-once sink (docs/stream-runs.md, "Stream identity"): a
stream started afresh (checkpoint_dir deleted, its checkpoint ids 1, 2, ... again) publishes
its output, and the commit records an earlier stream of the same pipeline name left in the
target suppress nothing; a repeated publication of the same stream and checkpoint still
writes nothing; nothing an earlier stream published is replaced. A checkpoint_dir written
before streams had an identity goes on with the commit records it has."""

from __future__ import annotations

import json
import os
import shutil
import socket
import uuid
from collections import Counter

import pytest
import sqlalchemy as sa

from airflow_flinkchain import StreamPipeline
from airflow_flinkchain.io.sinks import DeltaSink, IcebergSink, JsonLinesSink, SqlSink
from airflow_flinkchain.runtime.connectors.published import Publication, publisher_of
from airflow_flinkchain.runtime.exchange.checkpoints import CheckpointArea
from airflow_flinkchain.runtime.stream_run import publish_sinks
from tests.connectors.kill_runs import as_row
from tests.connectors.nats_server import unavailable
from tests.streamruns.partitioned_log import PartitionedLog, append

POSTGRES = "postgresql+psycopg2://postgres@127.0.0.1:5432/test"
KINDS = ["sqlite", "postgres", "delta", "iceberg", "files"]


class Target:
    """One sink kind's target: the sink descriptor and the rows it holds."""

    def __init__(self, kind: str, tmp_path):
        self.kind, self.tmp = kind, tmp_path
        self.name = f"ident_{uuid.uuid4().hex[:8]}"
        if kind == "sqlite":
            self.url = f"sqlite:///{tmp_path / 'shop.db'}"
        elif kind == "postgres":
            try:
                socket.create_connection(("127.0.0.1", 5432), timeout=2).close()
            except OSError:
                unavailable("no PostgreSQL at 127.0.0.1:5432 (database `test`)")
            self.url = POSTGRES
        elif kind == "iceberg":
            (tmp_path / "warehouse").mkdir(exist_ok=True)
            self.catalog = {"name": "test", "type": "sql", "uri": f"sqlite:///{tmp_path / 'catalog.db'}",
                            "warehouse": f"file://{tmp_path / 'warehouse'}"}

    def sink(self):
        if self.kind in ("sqlite", "postgres"):
            return SqlSink(self.name, url=self.url)
        if self.kind == "delta":
            return DeltaSink(str(self.tmp / self.name))
        if self.kind == "iceberg":
            return IcebergSink(f"shop.{self.name}", catalog=self.catalog)
        return JsonLinesSink(str(self.tmp / self.name))

    def rows(self) -> Counter:
        if self.kind in ("sqlite", "postgres"):
            engine = sa.create_engine(self.url)
            try:
                with engine.connect() as conn:
                    if not sa.inspect(conn).has_table(self.name):
                        return Counter()
                    return Counter((r.key, r.value, r.ts) for r in conn.execute(sa.text(f"select * from {self.name}")))
            finally:
                engine.dispose()
        if self.kind == "delta":
            import deltalake

            return Counter((r["key"], r["value"], r["ts"])
                           for r in deltalake.DeltaTable(str(self.tmp / self.name)).to_pyarrow_table().to_pylist())
        if self.kind == "iceberg":
            from pyiceberg.catalog import load_catalog

            table = load_catalog("test", **{k: v for k, v in self.catalog.items() if k != "name"}).load_table(
                f"shop.{self.name}")
            return Counter((r["key"], r["value"], r["ts"]) for r in table.scan().to_arrow().to_pylist())
        return Counter((r["key"], r["value"], r["ts"]) for f in self.files().values()
                       for r in map(json.loads, f.decode().splitlines()))

    def files(self) -> dict:
        """File sinks: {name: content} of the published parts."""
        d = self.tmp / self.name
        return {n: (d / n).read_bytes() for n in sorted(os.listdir(d))} if self.kind == "files" and d.exists() else {}

    def drop(self) -> None:
        if self.kind == "postgres":
            engine = sa.create_engine(self.url)
            with engine.begin() as conn:
                conn.execute(sa.text(f"drop table if exists {self.name}"))
                for commits in ("flinkchain_stream_commits", "flinkchain_commits"):
                    if sa.inspect(conn).has_table(commits):
                        conn.execute(sa.text(f"delete from {commits} where pipeline = :p"), {"p": self.name})
            engine.dispose()


@pytest.fixture(params=KINDS)
def target(request, tmp_path):
    if request.param == "delta":
        pytest.importorskip("deltalake")
    if request.param == "iceberg":
        pytest.importorskip("pyiceberg")
    t = Target(request.param, tmp_path)
    yield t
    t.drop()


def pipeline(target: Target, log: str, ckpt: str) -> StreamPipeline:
    """The log's records as rows into the target, one record one row (pipeline name = the
    target's name: every stream of these tests shares it)."""
    p = StreamPipeline(target.name, runtime_mode="streaming", checkpoint_dir=ckpt)
    p.from_source(PartitionedLog(directory=log), name="log").uid("log").map(as_row).name("row") \
        .sink_to(target.sink(), name="out")
    return p


def records(tag: str, n: int) -> list:
    return [(f"{tag}{i % 7}", i, 1000 * i) for i in range(n)]


def run_slices(target: Target, log: str, ckpt: str, slices: list, prefix: str) -> None:
    for k, part in enumerate(slices):
        append(log, "p0", part)
        pipeline(target, log, ckpt).execute_local(run_id=f"{prefix}{k}")


def test_a_reset_stream_publishes_and_stale_commit_records_suppress_nothing(target, tmp_path):
    """Stream 1 publishes 2 runs; checkpoint_dir is deleted (the reset the docs give); stream 2,
    same pipeline name and target, reads a new log in 3 runs (checkpoint ids 1..3, two of them
    recorded by stream 1): every row of both streams is in the target."""
    ckpt = str(tmp_path / "ckpt")
    first, second = records("a", 30), records("b", 90)
    run_slices(target, str(tmp_path / "log1"), ckpt, [first[:10], first[10:]], "s1-")
    assert target.rows() == Counter(tuple(as_row(r).values()) for r in first)
    published_by_first = target.files()
    shutil.rmtree(ckpt)
    run_slices(target, str(tmp_path / "log2"), ckpt, [second[:30], second[30:60], second[60:]], "s2-")
    assert target.rows() == Counter(tuple(as_row(r).values()) for r in first + second)
    if target.kind == "files":  # nothing stream 1 published was replaced
        assert {n: c for n, c in target.files().items() if n in published_by_first} == published_by_first
        assert len(target.files()) == len(published_by_first) + 3


def test_a_repeated_publication_of_the_same_stream_and_checkpoint_writes_nothing(target, tmp_path):
    """The staged output of a committed checkpoint handed to the sink a second time (a commit
    step retried after the external commit) writes nothing: exactly once is kept per stream."""
    log, ckpt = str(tmp_path / "log"), str(tmp_path / "ckpt")
    append(log, "p0", records("a", 20))
    pipeline(target, log, ckpt).execute_local(run_id="r0")
    before = target.rows()
    assert sum(before.values()) == 20
    if target.kind == "files":  # renamed onto the checkpoint's names: the staged parts are gone
        files = target.files()
        assert publish_sinks(CheckpointArea(ckpt), 1) == []
        assert target.files() == files
        return
    manifest = CheckpointArea(ckpt).manifest(1)
    descriptor = target.sink()
    done = publisher_of(descriptor)(descriptor, [as_row(r) for r in records("a", 20)],
                                    Publication(manifest["pipeline"], "out", 1, "sink 'out'", "r0",
                                                manifest["stream_id"]))
    assert done["records"] == 0
    assert target.rows() == before


def test_a_stream_without_an_identity_goes_on_with_its_commit_records(target, tmp_path, monkeypatch):
    """A checkpoint_dir written before streams had an identity (no `stream_id` in its manifests):
    its identity is "" and its commit records keep their earlier form (SQL `flinkchain_commits`
    keyed by pipeline, sink, checkpoint; app id `flinkchain/{pipeline}/{sink}`; part files
    `part-{seq:06d}-{k:05d}`), so its published checkpoints are still found and its next runs
    publish."""
    import airflow_flinkchain.runtime.stream_run as stream_run

    log, ckpt = str(tmp_path / "log"), str(tmp_path / "ckpt")
    monkeypatch.setattr(stream_run, "new_stream_id", lambda: "")  # the first run as the earlier version began it
    append(log, "p0", records("a", 10))
    pipeline(target, log, ckpt).execute_local(run_id="r0")
    monkeypatch.undo()
    manifest_path = os.path.join(ckpt, "chk-000001", "_manifest.json")
    manifest = json.load(open(manifest_path))
    for key in ("stream_id", "files", "history"):  # what the earlier version did not write
        del manifest[key]
    with open(manifest_path, "w") as f:
        json.dump(manifest, f)
    append(log, "p0", records("b", 10))
    pipeline(target, log, ckpt).execute_local(run_id="r1")
    assert target.rows() == Counter(tuple(as_row(r).values()) for r in records("a", 10) + records("b", 10))
    assert json.load(open(os.path.join(ckpt, "chk-000002", "_manifest.json")))["stream_id"] == ""
    if target.kind == "files":
        assert sorted(target.files()) == ["part-000001-00000.json", "part-000002-00000.json"]
        return
    descriptor = target.sink()
    for n in (1, 2):  # the legacy records of both checkpoints are found: nothing written again
        done = publisher_of(descriptor)(descriptor, [as_row(r) for r in records("a", 10)],
                                        Publication(target.name, "out", n, "sink 'out'", f"r{n - 1}", ""))
        assert done["records"] == 0
    if target.kind in ("sqlite", "postgres"):
        engine = sa.create_engine(target.url)
        with engine.connect() as conn:
            recorded = sorted(c for (c,) in conn.execute(sa.text(
                "select checkpoint from flinkchain_commits where pipeline = :p"), {"p": target.name}))
        engine.dispose()
        assert recorded == [1, 2]
    if target.kind == "delta":
        import deltalake

        table = deltalake.DeltaTable(str(tmp_path / target.name))
        assert table.transaction_version(f"flinkchain/{target.name}/out") == 2


def test_a_run_after_a_restore_publishes_under_a_new_checkpoint_id(target, tmp_path):
    """`--restore 1` drops chk-000002, which the sink recorded as published: the next run
    commits chk-000003, so its output (r1's input read again, and what arrived since) is
    published, not taken for chk-000002's."""
    from airflow_flinkchain.cli import main

    log, ckpt = str(tmp_path / "log"), str(tmp_path / "ckpt")
    run_slices(target, log, ckpt, [records("a", 5), records("b", 5)], "r")
    assert main(["checkpoints", ckpt, "--restore", "1"]) == 0
    append(log, "p0", records("c", 5))
    pipeline(target, log, ckpt).execute_local(run_id="r2")
    assert json.load(open(os.path.join(ckpt, "_latest.json")))["checkpoint"] == 3
    want = Counter(tuple(as_row(r).values()) for r in records("a", 5) + records("b", 5) + records("c", 5))
    if target.kind != "files":  # a table keeps what chk-000002 published: r1's rows are there twice
        want.update(tuple(as_row(r).values()) for r in records("b", 5))
    assert target.rows() == want
