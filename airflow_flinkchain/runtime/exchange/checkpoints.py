"""All paths of a stream pipeline's `checkpoint_dir`, and the snapshot files of one subtask.

Layout (see docs/stream-runs.md):

    {checkpoint_dir}/
        _latest.json                                  the commit point: {"checkpoint": n, "dir", "run_id"}
        shared/{operator_key}/kg-{kg:05d}-{digest}.pkl  keyed state and timers of one key group, by content
        chk-{n:06d}/                                  one committed run (immutable)
            _manifest.json
            chains/{chain_id}/_chain.json             a chain's operators, source positions, sinks
            chains/{chain_id}/operators/{operator_key}/subtask-{k:05d}.pkl
            chains/{chain_id}/sinks/{sink_key}/part-*  staged sink output, moved away when published
        _runs/{run_id}/                               a run in progress
            _run.json                                 base checkpoint, drain, ...
            chains/{chain_id}/...                     a chain's committed attempt, as in chk-*/chains/
            _attempts/{chain_id}/{attempt_id}/...     a running chain attempt

Ids become segments through `path_names.path_segment`, as in the exchange area.
"""

from __future__ import annotations

import hashlib
import json
import re
import uuid
from typing import Any, Optional

from airflow_flinkchain.path_names import path_segment
from airflow_flinkchain.runtime.core.elements import MIN_WATERMARK_TS
from airflow_flinkchain.runtime.core.serialize import dumps_plan, loads_plan
from airflow_flinkchain.runtime.exchange.layout import Location
from airflow_flinkchain.runtime.state.key_groups import compute_key_group_range_for_operator_index

LATEST, MANIFEST, RUN_DOC, CHAIN_DOC = "_latest.json", "_manifest.json", "_run.json", "_chain.json"


class CheckpointFileError(RuntimeError):
    """A file of the checkpoint area is missing or cannot be read: the message names the file,
    what it holds (operator, key group) and the way out."""


def new_stream_id() -> str:
    """The identity of a new stream, taken when its first run begins and kept in every
    checkpoint's manifest (`stream_id`): the commit records of its published sinks hold it,
    so a stream started afresh (checkpoint_dir deleted) never matches an earlier one's."""
    return uuid.uuid4().hex


def stream_id_of(manifest: Optional[dict]) -> str:
    """The stream identity a checkpoint's manifest records; "" for a checkpoint written before
    streams had one (its sinks' commit records keep the form they had: pipeline and sink)."""
    return (manifest or {}).get("stream_id") or ""


def digest(data: bytes) -> dict:
    """What a manifest records of one file: {"size", "sha256"}."""
    return {"size": len(data), "sha256": hashlib.sha256(data).hexdigest()}


def way_out(checkpoint_dir: str) -> str:
    return (f"restore an earlier checkpoint (`flinkchain checkpoints {checkpoint_dir}` lists them and "
            f"verifies one with --verify; --restore N makes chk-N the latest) or reset the stream by deleting "
            f"checkpoint_dir {checkpoint_dir} (the next run then reads every source from the beginning)")


def missing_file(loc: Location, what: str, checkpoint_dir: str) -> CheckpointFileError:
    return CheckpointFileError(f"{what} {loc.uri} is missing: {way_out(checkpoint_dir)}")


def read_checkpoint_file(loc: Location, what: str, checkpoint_dir: str, decode: Any = None) -> Any:
    """The content of one file of the checkpoint area (JSON unless `decode` is given), or a
    CheckpointFileError naming it, `what` it holds and the way out."""
    try:
        data = loc.read_bytes()
    except FileNotFoundError:
        raise missing_file(loc, what, checkpoint_dir) from None
    except OSError as exc:
        raise CheckpointFileError(f"{what} {loc.uri} cannot be read ({exc}): {way_out(checkpoint_dir)}") from exc
    try:
        return decode(data) if decode is not None else json.loads(data)
    except Exception as exc:
        raise CheckpointFileError(f"{what} {loc.uri} is damaged ({type(exc).__name__}: {exc}): "
                                  f"{way_out(checkpoint_dir)}") from exc


class CheckpointArea:
    """The paths under one `checkpoint_dir`."""

    def __init__(self, checkpoint_dir: str):
        if not isinstance(checkpoint_dir, str) or not checkpoint_dir:
            raise ValueError(f"checkpoint_dir must be a non-empty path string, got {checkpoint_dir!r}")
        self.root = Location(checkpoint_dir)

    @staticmethod
    def checkpoint_name(n: int) -> str:
        return f"chk-{n:06d}"

    def checkpoint(self, n: int) -> Location:
        return self.root.join(self.checkpoint_name(n))

    def latest(self) -> Location:
        return self.root.join(LATEST)

    def runs(self) -> Location:
        return self.root.join("_runs")

    def run(self, run_id: str) -> Location:
        return self.runs().join(path_segment(run_id, "run id"))

    def chain_attempt(self, run_id: str, chain_id: str, attempt_id: str) -> Location:
        return self.run(run_id).join("_attempts", path_segment(chain_id, "chain id"),
                                     path_segment(attempt_id, "attempt id"))

    def read_latest(self) -> Optional[dict]:
        """The pointer to the latest committed checkpoint; None before the first commit."""
        return self.read_latest_versioned()[0]

    def read_latest_versioned(self) -> tuple[Optional[dict], Optional[str]]:
        """(the pointer, its version for `write_latest`), (None, None) before the first commit."""
        from airflow_flinkchain.runtime.exchange.conditional import conditional_store

        loc = self.latest()
        try:
            data, token = conditional_store(loc).read(loc)
        except OSError as exc:
            raise CheckpointFileError(f"the stream's pointer to its latest checkpoint {loc.uri} cannot be read "
                                      f"({exc}): {way_out(self.root.uri)}") from exc
        if data is None:
            return None, None
        try:
            return json.loads(data), token
        except ValueError as exc:
            raise CheckpointFileError(f"the stream's pointer to its latest checkpoint {loc.uri} is damaged "
                                      f"({type(exc).__name__}: {exc}): {way_out(self.root.uri)}") from exc

    def read_doc(self, loc: Location, what: str) -> Any:
        """A JSON document of this area (manifest, chain document, run document)."""
        return read_checkpoint_file(loc, what, self.root.uri)

    def manifest(self, n: int) -> dict:
        return self.read_doc(self.checkpoint(n).join(MANIFEST), f"the manifest of checkpoint {self.checkpoint_name(n)}")

    def latest_version(self) -> Optional[str]:
        """The pointer's version as it is now, readable or not (an operator's restore replaces it)."""
        from airflow_flinkchain.runtime.exchange.conditional import conditional_store

        return conditional_store(self.latest()).read(self.latest())[1]

    def write_latest(self, doc: dict, token: Optional[str]) -> None:
        """Replace the pointer read as version `token` (None: there was none), the commit point:
        a conditional write (`conditional`), so of two runs committing at once one is refused
        (CommitConflict)."""
        from airflow_flinkchain.runtime.exchange.conditional import conditional_store

        final = self.latest()
        conditional_store(final).write(final, json.dumps(doc, indent=1).encode(), token)

    def claim(self, n: int) -> Location:
        """The object a run creates (if absent) before it moves its staging to checkpoint n: two
        runs never write into one checkpoint directory."""
        return self.root.join("_claims", self.checkpoint_name(n) + ".json")

    def shared(self) -> Location:
        """Key-group files referenced by the retained checkpoints (see SubtaskCheckpointFiles)."""
        return self.root.join("shared")

    def checkpoints(self) -> list[int]:
        """Ids of the checkpoint directories present, ascending."""
        from pyarrow import fs as pafs

        if not self.root.exists():
            return []
        ids = []
        for info in self.root.fs.get_file_info(pafs.FileSelector(self.root.path)):
            name = info.base_name
            if info.type == pafs.FileType.Directory and name.startswith("chk-") and name[4:].isdigit():
                ids.append(int(name[4:]))
        return sorted(ids)


def chain_dir(base: Location, chain_id: str) -> Location:
    """A chain's directory inside a checkpoint or a run's staging."""
    return base.join(chain_dir_name(chain_id))


def chain_dir_name(chain_id: str) -> str:
    """A chain's directory relative to its checkpoint (the manifest's `files` are keyed so)."""
    return "chains/" + path_segment(chain_id, "chain id")


def in_checkpoint(chk: Location, name: str) -> Location:
    """A file of the manifest's `files`: relative to the checkpoint directory, or a shared
    file's URI."""
    return Location(name) if name.startswith("/") or "://" in name else chk.join(name)


def operator_file(chain_base: Location, operator_key: str, subtask: int) -> Location:
    return chain_base.join(operator_file_name(operator_key, subtask))


def operator_file_name(operator_key: str, subtask: int) -> str:
    """An operator subtask's snapshot file, relative to its chain's directory."""
    return f"operators/{path_segment(operator_key, 'operator key')}/subtask-{subtask:05d}.pkl"


def sink_dir(chain_base: Location, sink_key: str) -> Location:
    return chain_base.join("sinks", path_segment(sink_key, "sink key"))


def published_part_name(seq: int, staged_name: str, stream_id: str) -> str:
    """The final name of a staged file-sink part (`part-{k:05d}.{ext}`) published by run `seq`
    of stream `stream_id`: `part-{seq:06d}-{stream_id}-{k:05d}.{ext}`. The sequence number first:
    runs of a stream never overwrite each other's parts; the stream id: a stream started afresh
    (its seq 1 again) never overwrites an earlier stream's. A stream without an identity (begun
    before streams had one) keeps `part-{seq:06d}-{k:05d}.{ext}`."""
    rest = staged_name[len("part-"):] if staged_name.startswith("part-") else staged_name
    return f"part-{seq:06d}-{stream_id}-{rest}" if stream_id else f"part-{seq:06d}-{rest}"


def published_part_seq(name: str, stream_id: str) -> Optional[int]:
    """The run sequence number of a part file that stream `stream_id` published, or None for
    any other file (another stream's part included)."""
    pattern = rf"part-(\d{{6}})-{re.escape(stream_id)}-\d+\." if stream_id else r"part-(\d{6})-\d+\."
    match = re.fullmatch(pattern + r"[^-]*", name)
    return int(match.group(1)) if match else None


def holds_state(state: dict) -> bool:
    """Whether an operator's snapshot holds more than its watermark (for `allow_non_restored_state`)."""
    keyed = state.get("keyed_state") or {}
    timers = state.get("timers") or {}
    return bool(keyed.get("key_groups") or timers.get("key_groups") or state.get("generator") is not None
                or any((state.get("broadcast") or {}).values()))


class SubtaskCheckpointFiles:
    """`core.interfaces.SubtaskCheckpoint` over files (picklable: shipped to the subtasks).
    `restore_from`: operator key -> {"files": the snapshot files of its former subtasks in
    subtask order, "max_parallelism": of its keyed state or None}; `stage`: the chain
    attempt's staging directory; `shared`: the checkpoint_dir's `shared/` directory.

    Keyed state and timers go to one file per key group under `shared/{operator_key}/`,
    named by a digest of its content (Flink's incremental checkpoints keep shared files
    the same way): a key group that did not change since an earlier run is not written
    again, only referenced. A keyed subtask reads the key groups of its own range only
    (Flink's KeyGroupRangeAssignment), from the former subtasks whose ranges overlap it;
    other state is read from the subtask's own former file when the parallelism is
    unchanged, from all former files otherwise."""

    def __init__(self, drain: bool, parallelism: int, restore_from: dict, stage: Location,
                 shared: Optional[Location] = None):
        self.drain = drain
        self.parallelism = parallelism
        self.restore_from = restore_from
        self.stage = stage
        self.shared = shared
        self._summary: dict = {}
        self._shared_digests: dict = {}  # operator key -> {shared file uri: digest}

    def restore(self, operator_key: str, subtask: int) -> tuple[list, Optional[dict]]:
        former = self.restore_from.get(operator_key)
        if not former or not former["files"]:
            return [], None
        files, max_parallelism = former["files"], former.get("max_parallelism")
        same = len(files) == self.parallelism
        mine = None
        if max_parallelism is not None:
            mine = compute_key_group_range_for_operator_index(max_parallelism, self.parallelism, subtask)
            wanted = [k for k in range(len(files)) if _overlap(
                compute_key_group_range_for_operator_index(max_parallelism, len(files), k), mine)]
        else:
            wanted = [subtask] if same else list(range(len(files)))
        snapshots = {k: self._read_snapshot(operator_key, k, files[k], mine) for k in wanted}
        return list(snapshots.values()), snapshots.get(subtask) if same else None

    def _read_snapshot(self, operator_key: str, subtask: int, uri: str, key_groups: Any) -> dict:
        snapshot = read_checkpoint_file(Location(uri), f"the snapshot of operator {operator_key!r}, subtask {subtask},",
                                        self.checkpoint_dir, loads_plan)
        return _with_key_groups(snapshot, key_groups, operator_key, self.checkpoint_dir)

    @property
    def checkpoint_dir(self) -> str:
        """The area's root (the parent of `shared/`), named by errors."""
        return self.shared.uri.rsplit("/", 1)[0] if self.shared is not None else self.stage.uri

    def write(self, operator_key: str, subtask: int, state: dict) -> None:
        stateful = holds_state(state)
        state, total, written, refs = self._share_key_groups(operator_key, state)
        data = dumps_plan(state)
        operator_file(self.stage, operator_key, subtask).write_bytes(data)
        files = {**self._shared_digests.pop(operator_key, {}),
                 operator_file_name(operator_key, subtask): digest(data)}
        wm = state.get("watermark", MIN_WATERMARK_TS)
        keyed = state.get("keyed_state")
        self._summary[operator_key] = {"stateful": stateful, "bytes": len(data) + total,
                                       "written": len(data) + written, "shared": refs, "files": files,
                                       "watermark": wm if wm > MIN_WATERMARK_TS else None,
                                       "max_parallelism": keyed["max_parallelism"] if keyed else None}

    def _share_key_groups(self, operator_key: str, state: dict) -> tuple[dict, int, int, list]:
        keyed, timers = state.get("keyed_state"), state.get("timers")
        if keyed is None or self.shared is None:
            return state, 0, 0, []
        timer_groups = (timers or {}).get("key_groups") or {}
        refs, total, written = {}, 0, 0
        directory = self.shared.join(path_segment(operator_key, "operator key"))
        for kg in sorted(set(keyed["key_groups"]) | set(timer_groups)):
            blob = dumps_plan({"state": keyed["key_groups"].get(kg), "timers": timer_groups.get(kg)})
            d = digest(blob)
            loc = directory.join(f"kg-{int(kg):05d}-{d['sha256'][:24]}.pkl")
            total += len(blob)
            self._shared_digests.setdefault(operator_key, {})[loc.uri] = d
            if not loc.exists():  # an unchanged key group is already there
                loc.write_bytes(blob)
                written += len(blob)
            refs[int(kg)] = loc.uri
        state = {**state, "keyed_state": {**keyed, "key_groups": {}}, "key_group_files": refs}
        if timers is not None:
            state["timers"] = {**timers, "key_groups": {}}
        return state, total, written, sorted(refs.values())

    def summary(self) -> dict:
        return dict(self._summary)


def _with_key_groups(snapshot: dict, key_groups: Any, operator_key: str, checkpoint_dir: str) -> dict:
    """A snapshot with the shared key-group files it references in `key_groups` (all when
    None) read back into its keyed state and timers: the backend's portable format."""
    refs = snapshot.pop("key_group_files", None)
    if not refs:
        return snapshot
    keyed, timers = snapshot["keyed_state"], snapshot.get("timers")
    for kg, uri in refs.items():
        if key_groups is not None and int(kg) not in key_groups:
            continue
        blob = read_checkpoint_file(Location(uri), f"key group {int(kg)} of operator {operator_key!r} (shared file)",
                                    checkpoint_dir, loads_plan)
        if blob["state"] is not None:
            keyed["key_groups"][int(kg)] = blob["state"]
        if blob["timers"] is not None and timers is not None:
            timers["key_groups"][int(kg)] = blob["timers"]
    return snapshot


def _overlap(a: Any, b: Any) -> bool:
    return a.start_key_group <= b.end_key_group and b.start_key_group <= a.end_key_group


def write_json(loc: Location, doc: Any) -> None:
    loc.write_text(json.dumps(doc, indent=1, default=str))
