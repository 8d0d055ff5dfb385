"""The checkpoints of a `checkpoint_dir` as an operator sees them (`flinkchain checkpoints`):
list them with their runs, verify one, make an earlier one the latest again.

A run verifies its base checkpoint when it begins (`verify_checkpoint`: the documents read,
and every file the manifest lists with its size and SHA-256 read back and compared), so a
damaged or incomplete checkpoint fails the run before any chain runs, naming the file and
what it holds. Checkpoints written before manifests held digests are checked for presence
(and, by `--verify`, read).
"""

from __future__ import annotations

import re
from typing import Optional

from airflow_flinkchain.path_names import path_segment
from airflow_flinkchain.runtime.core.serialize import loads_plan
from airflow_flinkchain.runtime.exchange.checkpoints import (CHAIN_DOC, RUN_DOC, CheckpointArea, CheckpointFileError,
                                                             chain_dir, chain_dir_name, digest, in_checkpoint,
                                                             missing_file, operator_file, operator_file_name,
                                                             published_part_name, published_part_seq,
                                                             read_checkpoint_file, stream_id_of, way_out)
from airflow_flinkchain.runtime.exchange.layout import Location

_KEY_GROUP = re.compile(r"kg-(\d+)-")


def verify_checkpoint(area: CheckpointArea, n: int, read_snapshots: bool = False) -> dict:
    """Check checkpoint n: its manifest and chain documents are read, every file its manifest
    lists a digest of (snapshots, shared key groups, chain documents, staged sink parts) has that
    size and SHA-256; the snapshot file of every operator subtask and every shared key-group file
    it references exists (and, with `read_snapshots`, is read). Raises CheckpointFileError naming
    the first bad file; returns the manifest."""
    root = area.root.uri
    name = area.checkpoint_name(n)
    manifest = area.manifest(n)
    chk = area.checkpoint(n)
    for chain_id in manifest["chains"]:
        area.read_doc(chain_dir(chk, chain_id).join(CHAIN_DOC), f"the document of chain {chain_id!r} in {name}")
    present = all_files(chk) | all_files(area.shared())
    _check_digests(area, n, manifest, present)
    for key, operator in sorted(manifest["operators"].items()):
        files = [(operator_file(chain_dir(chk, operator["chain"]), key, k),
                  f"the snapshot of operator {key!r}, subtask {k}, in {name},") for k in range(operator["parallelism"])]
        for uri in operator.get("shared", ()):
            group = _KEY_GROUP.search(uri.rsplit("/", 1)[-1])
            files.append((Location(uri), f"key group {int(group.group(1)) if group else '?'} of operator {key!r} "
                                         f"(shared file of {name})"))
        for loc, what in files:
            if read_snapshots:
                read_checkpoint_file(loc, what, root, loads_plan)
            elif loc.path not in present:
                raise missing_file(loc, what, root)
    return manifest


def _check_digests(area: CheckpointArea, n: int, manifest: dict, present: set) -> None:
    """Every file of the manifest's `files` present with its recorded size and SHA-256 (files a
    publication moved away already, staged sink parts, are not looked for)."""
    chk = area.checkpoint(n)
    what = _what_files_hold(area, n, manifest)
    directories = {p.rsplit("/", 1)[0] for p in present}  # those holding a file
    for rel, want in sorted(manifest.get("files", {}).items()):
        loc = in_checkpoint(chk, rel)
        described = what.get(rel, f"a file of {area.checkpoint_name(n)}")
        if loc.path not in present:
            if _published_already(chk, manifest, rel, directories):
                continue
            raise missing_file(loc, described, area.root.uri)
        got = digest(loc.read_bytes())
        if got != want:
            how = (f"{got['size']} bytes where the manifest says {want['size']}" if got["size"] != want["size"]
                   else "its SHA-256 differs from the manifest's")
            raise CheckpointFileError(f"{described} {loc.uri} is damaged ({how}): {way_out(area.root.uri)}")


def _published_already(chk: Location, manifest: dict, rel: str, directories: set) -> bool:
    """Whether a staged sink file missing from the checkpoint was published after the commit
    point: its sink's staging is gone (the publication finished and dropped it; what happens
    to published files afterwards is the user's), or, while a file sink's publication is
    under way, the part was moved onto its final name already."""
    for key, sink in manifest["sinks"].items():
        staging = f"{chain_dir_name(sink['chain'])}/sinks/{path_segment(key, 'sink key')}"
        if not rel.startswith(staging + "/"):
            continue
        if in_checkpoint(chk, staging).path not in directories:
            return True
        if sink.get("publish"):
            return False  # handed to the sink as a whole: all its staged files stay until it is done
        final = published_part_name(manifest["seq"], rel.rsplit("/", 1)[-1], stream_id_of(manifest))
        return Location(sink["target"]).join(final).exists()
    return False


def _what_files_hold(area: CheckpointArea, n: int, manifest: dict) -> dict:
    """{manifest `files` key: what the file holds} for the messages naming a damaged file."""
    name = area.checkpoint_name(n)
    out = {}
    for key, operator in manifest["operators"].items():
        for k in range(operator["parallelism"]):
            out[f"{chain_dir_name(operator['chain'])}/{operator_file_name(key, k)}"] = \
                f"the snapshot of operator {key!r}, subtask {k}, in {name},"
        for uri in operator.get("shared", ()):
            group = _KEY_GROUP.search(uri.rsplit("/", 1)[-1])
            out[uri] = f"key group {int(group.group(1)) if group else '?'} of operator {key!r} (shared file of {name})"
    for chain_id in manifest["chains"]:
        out[f"{chain_dir_name(chain_id)}/{CHAIN_DOC}"] = f"the document of chain {chain_id!r} in {name}"
    for key, sink in manifest["sinks"].items():
        prefix = f"{chain_dir_name(sink['chain'])}/sinks/{path_segment(key, 'sink key')}/"
        out.update({rel: f"the staged output of sink {key!r} in {name}" for rel in manifest.get("files", {})
                    if rel.startswith(prefix)})
    return out


def all_files(loc: Location) -> set:
    """Every file below `loc` (fs paths), '_' and '.' names too (an operator uid may start with '_')."""
    from pyarrow import fs as pafs

    if not loc.exists():
        return set()
    return {i.path for i in loc.fs.get_file_info(pafs.FileSelector(loc.path, recursive=True))
            if i.type == pafs.FileType.File}


def list_checkpoints(area: CheckpointArea) -> dict:
    """{"latest": the pointer or None, "checkpoints": [{"checkpoint", "run_id", "seq", "base",
    "stream_id", "drained", "committed_at", "latest", "error"}], "runs": runs in progress [{"run_id", "base"}],
    "history": [[run_id, checkpoint]]}: what `flinkchain checkpoints` prints."""
    try:
        latest: Optional[dict] = area.read_latest()
        pointer_error = None
    except CheckpointFileError as exc:
        latest, pointer_error = None, str(exc)
    rows = []
    for n in area.checkpoints():
        row = {"checkpoint": n, "latest": bool(latest and latest["checkpoint"] == n), "error": None}
        try:
            m = area.manifest(n)
            row.update({k: m.get(k) for k in ("run_id", "seq", "base", "drained", "committed_at")},
                       stream_id=stream_id_of(m))
        except CheckpointFileError as exc:
            row["error"] = str(exc)
        rows.append(row)
    runs = []
    if area.runs().exists():
        from pyarrow import fs as pafs

        for info in area.runs().fs.get_file_info(pafs.FileSelector(area.runs().path)):
            if info.type == pafs.FileType.Directory:
                doc = area.runs().join(info.base_name, RUN_DOC)
                try:
                    run = area.read_doc(doc, "the record of a run in progress")
                    runs.append({"run_id": run["run_id"], "base": run.get("base")})
                except CheckpointFileError:
                    runs.append({"run_id": info.base_name, "base": None})
    return {"latest": latest, "pointer_error": pointer_error, "checkpoints": rows, "runs": runs,
            "history": [list(h) for h in (latest or {}).get("history", [])]}


def restore_checkpoint(area: CheckpointArea, n: int) -> dict:
    """Make checkpoint n the latest again (after verifying it, snapshots read): the checkpoints
    after it are deleted, and the part files their runs published in n's file sinks (this
    stream's parts with sequence numbers above n's), since the next run reads their input
    again. The committed runs stay recorded (from the pointer, or the manifests when the pointer
    is damaged): re-running one of them stays refused. Returns {"pointer", "deleted":
    [checkpoint names and files]}."""
    manifest = verify_checkpoint(area, n, read_snapshots=True)
    history = committed_runs(area)
    history[manifest["run_id"]] = n
    deleted = []
    for later in area.checkpoints():
        if later > n:
            area.checkpoint(later).delete()
            if area.claim(later).exists():
                area.claim(later).delete()
            deleted.append(area.checkpoint_name(later))
    stream_id = stream_id_of(manifest)
    for sink in manifest["sinks"].values():
        if sink.get("publish"):
            continue  # a table: what later checkpoints published stays (their commit records with it)
        target = Location(sink["target"])
        for path in target.list_files(recursive=False):
            seq = published_part_seq(path.rsplit("/", 1)[-1], stream_id)
            if seq is not None and seq > manifest["seq"]:
                target.fs.delete_file(path)
                deleted.append(path)
    pointer = {"checkpoint": n, "dir": area.checkpoint_name(n), "run_id": manifest["run_id"],
               "base": manifest["base"], "seq": manifest["seq"], "history": [list(h) for h in history.items()]}
    area.write_latest(pointer, area.latest_version())
    return {"pointer": pointer, "deleted": deleted}


def committed_runs(area: CheckpointArea) -> dict:
    """{run_id: checkpoint} of every run the stream committed, as the pointer records them, or
    when it cannot be read, as the manifests present record them (each holds the history up to
    its own commit)."""
    try:
        latest = area.read_latest()
    except CheckpointFileError:
        latest = None
    if latest is not None:
        return {run_id: c for run_id, c in latest.get("history", [])}
    runs: dict = {}
    for n in area.checkpoints():
        try:
            m = area.manifest(n)
        except CheckpointFileError:
            continue
        runs.update({run_id: c for run_id, c in m.get("history", [[m["run_id"], n]])})
    return runs
