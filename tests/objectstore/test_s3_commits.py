"""Commit points without rename, on the S3 server and locally: conditional creates and
replaces, and a dataset's publication by manifest (killed before its commit point, readers
keep the earlier version; two publications at once, one fails and leaves nothing)."""

from __future__ import annotations

import pytest

from airflow_flinkchain.runtime.exchange import conditional
from airflow_flinkchain.runtime.exchange.conditional import CommitConflict, conditional_store
from airflow_flinkchain.runtime.exchange.layout import DATASET_MANIFEST, Location, publish_by_manifest, replace

pytestmark = [pytest.mark.s3]


@pytest.fixture(params=["s3", "local"])
def root(request, tmp_path):
    if request.param == "local":
        return str(tmp_path)
    server = request.getfixturevalue("s3_server")
    return f"s3://{server.new_bucket()}"


def test_create_if_absent_and_replace_if_match(root):
    loc = Location(f"{root}/ckpt/_latest.json")
    store = conditional_store(loc)
    assert store.read(loc) == (None, None)
    v1 = store.create_if_absent(loc, b"one")
    with pytest.raises(CommitConflict):
        store.create_if_absent(loc, b"two")
    assert store.read(loc) == (b"one", v1)
    v2 = store.replace_if_match(loc, b"two", v1)
    with pytest.raises(CommitConflict):
        store.replace_if_match(loc, b"three", v1)  # a writer that read version 1
    assert store.read(loc) == (b"two", v2)


def _stage(root: str, name: str, content: str, parts: int = 2) -> Location:
    staged = Location(f"{root}/_attempts/{name}")
    for k in range(parts):
        staged.join("channel=0", f"part-{k:05d}.txt").write_text(f"{content}-{k}")
    return staged


def _read(final: Location) -> list:
    return [Location(final.uri.split("://")[0] + "://" + p if "://" in final.uri else p).read_text()
            for p in final.join("channel=0").list_files()]


def test_a_publication_killed_before_its_manifest_leaves_the_earlier_version(s3_server, monkeypatch):
    root = f"s3://{s3_server.new_bucket()}"
    final = Location(f"{root}/run/edge")
    replace(_stage(root, "a1", "v1"), final, final.sibling("_trash"))
    assert _read(final) == ["v1-0", "v1-1"]

    def killed(*args, **kwargs):
        raise KeyboardInterrupt("killed at the commit point")

    monkeypatch.setattr(conditional.S3ConditionalStore, "replace_if_match", killed)
    with pytest.raises(KeyboardInterrupt):
        replace(_stage(root, "a2", "v2"), final, final.sibling("_trash"))
    assert _read(final) == ["v1-0", "v1-1"]  # the copies of v2 are there, but not published
    monkeypatch.undo()
    replace(_stage(root, "a3", "v3", parts=1), final, final.sibling("_trash"))
    assert _read(final) == ["v3-0"]
    keys = [k for k in s3_server.keys(final.path.split("/", 1)[0]) if k.startswith("run/edge/") and not k.endswith("/")]
    assert len(keys) == 2 and "run/edge/" + DATASET_MANIFEST in keys  # earlier versions dropped


def test_two_publications_at_once_one_fails_and_leaves_nothing(s3_server, monkeypatch):
    root = f"s3://{s3_server.new_bucket()}"
    final = Location(f"{root}/run/out")
    real_read = conditional.S3ConditionalStore.read
    raced = []

    def read_then_lose_the_race(self, loc):
        got = real_read(self, loc)
        if not raced:  # the other attempt publishes between this one's read and its write
            raced.append(True)
            publish_by_manifest(_stage(root, "b", "winner"), final)
        return got

    monkeypatch.setattr(conditional.S3ConditionalStore, "read", read_then_lose_the_race)
    with pytest.raises(CommitConflict, match=r"dataset s3://.*/run/out was published by another attempt"):
        publish_by_manifest(_stage(root, "a", "loser"), final)
    monkeypatch.undo()
    assert _read(final) == ["winner-0", "winner-1"]
    keys = [k for k in s3_server.keys(final.path.split("/", 1)[0]) if k.startswith("run/out/") and not k.endswith("/")]
    assert len(keys) == 3  # the winner's two parts and the manifest: none of the loser's copies
