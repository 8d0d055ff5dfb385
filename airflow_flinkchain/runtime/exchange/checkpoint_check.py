"""The checkpoints of a `checkpoint_dir` as an operator sees them (`flinkchain checkpoints`):
list them with their runs, verify one, make an earlier one the latest again.

A run verifies its base checkpoint when it begins (`verify_checkpoint`, the documents read
and the snapshot files present), so a damaged or incomplete checkpoint fails the run before
any chain runs, naming the file; `--verify` also reads every snapshot file.
"""

from __future__ import annotations

import re
from typing import Optional

from airflow_flinkchain.runtime.core.serialize import loads_plan
from airflow_flinkchain.runtime.exchange.checkpoints import (CHAIN_DOC, RUN_DOC, CheckpointArea, CheckpointFileError,
                                                             chain_dir, missing_file, operator_file,
                                                             read_checkpoint_file)
from airflow_flinkchain.runtime.exchange.layout import Location

_KEY_GROUP = re.compile(r"kg-(\d+)-")


def verify_checkpoint(area: CheckpointArea, n: int, read_snapshots: bool = False) -> dict:
    """Check checkpoint n: its manifest and chain documents are read, the snapshot file of every
    operator subtask and every shared key-group file it references exists (and, with
    `read_snapshots`, is read). Raises CheckpointFileError naming the first bad file; returns
    the manifest."""
    root = area.root.uri
    name = area.checkpoint_name(n)
    manifest = area.manifest(n)
    chk = area.checkpoint(n)
    for chain_id in manifest["chains"]:
        area.read_doc(chain_dir(chk, chain_id).join(CHAIN_DOC), f"the document of chain {chain_id!r} in {name}")
    present = _all_files(chk) | _all_files(area.shared())
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


def _all_files(loc: Location) -> set:
    """Every file below `loc` (fs paths), '_' and '.' names too (an operator uid may start with '_')."""
    from pyarrow import fs as pafs

    if not loc.exists():
        return set()
    return {i.path for i in loc.fs.get_file_info(pafs.FileSelector(loc.path, recursive=True))
            if i.type == pafs.FileType.File}


def list_checkpoints(area: CheckpointArea) -> dict:
    """{"latest": the pointer or None, "checkpoints": [{"checkpoint", "run_id", "seq", "base",
    "drained", "committed_at", "latest", "error"}], "runs": runs in progress [{"run_id", "base"}],
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
            row.update({k: m.get(k) for k in ("run_id", "seq", "base", "drained", "committed_at")})
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
    after it are deleted, and the part files their runs published in n's file sinks (sequence
    numbers above n's), since the next run reads their input again. Returns {"pointer",
    "deleted": [checkpoint names and files]}."""
    manifest = verify_checkpoint(area, n, read_snapshots=True)
    try:
        latest = area.read_latest()
    except CheckpointFileError:
        latest = None  # a damaged pointer is what is being replaced
    history = [h for h in (latest or {}).get("history", []) if h[1] <= n]
    if [manifest["run_id"], n] not in history:
        history.append([manifest["run_id"], n])
    deleted = []
    for later in area.checkpoints():
        if later > n:
            area.checkpoint(later).delete()
            if area.claim(later).exists():
                area.claim(later).delete()
            deleted.append(area.checkpoint_name(later))
    for sink in manifest["sinks"].values():
        target = Location(sink["target"])
        for path in target.list_files(recursive=False):
            seq = re.match(r"part-(\d{6})-", path.rsplit("/", 1)[-1])
            if seq and int(seq.group(1)) > manifest["seq"]:
                target.fs.delete_file(path)
                deleted.append(path)
    pointer = {"checkpoint": n, "dir": area.checkpoint_name(n), "run_id": manifest["run_id"],
               "base": manifest["base"], "seq": manifest["seq"], "history": history}
    area.write_latest(pointer, area.latest_version())
    return {"pointer": pointer, "deleted": deleted}
