"""Stream runs: each run of a streaming pipeline with a `checkpoint_dir` continues the
stream where the last committed run stopped (docs/stream-runs.md).

Three steps, the same for `execute()`, `execute_local()` and the Airflow tasks:
* `begin_stream_run` (once per run, driver): roll forward the publication of the
  latest checkpoint, drop the staging of runs that never committed, record the run;
* per chain attempt, a `ChainStreamStep` (built by the runner): what to restore,
  the source ranges to read, where the subtasks stage snapshots and file sinks,
  and the chain's staged commit (a rename, replacing an earlier attempt);
* `commit_stream_run` (once per run, after every chain): the run's staging becomes
  the next checkpoint directory and `_latest.json` is replaced - the commit point -,
  then the file sinks' parts are published under names holding the run's sequence
  number (idempotent, finished by the next begin if interrupted).
"""

from __future__ import annotations

import datetime
import json
import uuid
from dataclasses import asdict, dataclass, fields
from typing import Optional

from airflow_flinkchain.graph.model import OperatorKind
from airflow_flinkchain.io.sinks import FileSink
from airflow_flinkchain.runtime.connectors.checkpoint_publication import (current_sinks, publish_sinks,
                                                                          published_name)
from airflow_flinkchain.runtime.connectors.published import check_publishable, publisher_of, write_descriptor
from airflow_flinkchain.runtime.connectors.unbounded import confirm_committed, plan_stream_source, stream_scope
from airflow_flinkchain.runtime.exchange.checkpoints import (CHAIN_DOC, MANIFEST, RUN_DOC, CheckpointArea,
                                                             SubtaskCheckpointFiles, chain_dir, chain_dir_name, digest,
                                                             new_stream_id, operator_file, published_part_name,
                                                             sink_dir, stream_id_of, write_json)
from airflow_flinkchain.runtime.exchange.checkpoint_check import all_files, verify_checkpoint
from airflow_flinkchain.runtime.exchange.layout import Location, move, replace_tree

#: checkpoints kept: the latest and the one it was built on (a re-run of the latest restarts there)
HISTORY = 100


class StreamRunError(RuntimeError):
    """A stream run that must not go on (concurrent run, missing chain, unrestored state)."""


@dataclass
class StreamRun:
    """One run of a stream: what every chain task of the run must agree on."""

    checkpoint_dir: str
    run_id: str
    drain: bool = False
    base: Optional[int] = None  # the checkpoint restored from
    seq: int = 1  # the run's number in the stream (sink part names)
    expected_latest: Optional[int] = None  # the latest checkpoint at begin; the commit requires it still is
    allow_non_restored_state: bool = False
    stream_id: str = ""  # the stream's identity (checkpoints.new_stream_id; "" for a stream begun without one)

    @property
    def area(self) -> CheckpointArea:
        return CheckpointArea(self.checkpoint_dir)

    @classmethod
    def open(cls, checkpoint_dir: str, run_id: str) -> "StreamRun":
        """The run as `begin_stream_run` recorded it (Airflow chain and commit tasks)."""
        doc = CheckpointArea(checkpoint_dir).run(run_id).join(RUN_DOC)
        if not doc.exists():
            raise StreamRunError(f"stream run {run_id!r} of {checkpoint_dir!r} was not begun (no {doc.uri}); the "
                                 "setup step calls begin_stream_run() first, or the run was discarded by a later run")
        recorded = CheckpointArea(checkpoint_dir).read_doc(doc, f"the record of stream run {run_id!r}")
        return cls(**{f.name: recorded[f.name] for f in fields(cls) if f.name in recorded})

    def verify_base(self) -> None:
        """Every file the run restores present with the size and SHA-256 its manifest records
        (CheckpointFileError naming the first that is not)."""
        if self.base is not None:
            verify_checkpoint(self.area, self.base)

    def base_manifest(self) -> Optional[dict]:
        if self.base is None:
            return None
        return self.area.manifest(self.base)


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def begin_stream_run(job, checkpoint_dir: str, run_id: str, drain: bool = False,
                     allow_non_restored_state: bool = False) -> StreamRun:
    """Start run `run_id` of the stream in `checkpoint_dir` (see the module docstring)."""
    if "{{" in checkpoint_dir or "{%" in checkpoint_dir:
        raise StreamRunError(f"pipeline {job.pipeline!r}: checkpoint_dir {checkpoint_dir!r} is a template; it must "
                             "be the same path in every run")
    if job.stream_graph.runtime_mode != "streaming":
        raise StreamRunError(f"pipeline {job.pipeline!r}: a checkpoint_dir needs runtime_mode='streaming'")
    check_publishable((n.function, f"sink {n.name!r}") for n in job.stream_graph.nodes
                      if n.kind is OperatorKind.SINK)
    area = CheckpointArea(checkpoint_dir)
    latest = area.read_latest()
    if latest is not None:
        verify_checkpoint(area, latest["checkpoint"])  # fail here, naming the file, rather than in a chain
        publish_sinks(area, latest["checkpoint"], current_sinks(job))  # roll forward an interrupted commit
        _confirm_sources(job, checkpoint_dir, area.manifest(latest["checkpoint"]))
    stream_id = stream_id_of(area.manifest(latest["checkpoint"])) if latest is not None else new_stream_id()
    history = dict(latest["history"]) if latest else {}
    if latest is not None and run_id == latest["run_id"]:
        _check_outputs_replaceable(area, latest, job)
        base, seq = latest["base"], latest["seq"]  # the latest run again: replaces its checkpoint and outputs
    elif run_id in history:
        raise StreamRunError(f"run {run_id!r} of pipeline {job.pipeline!r} committed checkpoint {history[run_id]}, "
                             f"but the latest is {latest['checkpoint']} (run {latest['run_id']!r}): re-running a run "
                             "that is not the latest would corrupt the stream's state; only the latest run can be "
                             "re-run")
    else:
        base, seq = (latest["checkpoint"], latest["seq"] + 1) if latest else (None, 1)
    for staged in _run_dirs(area):  # runs that never committed, and an earlier try of this one
        staged.delete()
    run = StreamRun(checkpoint_dir, run_id, bool(drain), base, seq,
                    latest["checkpoint"] if latest else None, bool(allow_non_restored_state), stream_id)
    _check_restored_state(job, run)
    write_json(area.run(run_id).join(RUN_DOC), {**asdict(run), "started_at": _now()})
    return run


def _check_outputs_replaceable(area: CheckpointArea, latest: dict, job) -> None:
    """A published sink (a Delta table) keeps what a committed run wrote: re-running that run
    would write its output a second time."""
    manifest = area.manifest(latest["checkpoint"])
    published = sorted(k for k, s in manifest["sinks"].items() if s.get("publish"))
    if published:
        raise StreamRunError(f"run {latest['run_id']!r} of pipeline {job.pipeline!r} committed checkpoint "
                             f"{latest['checkpoint']} and published it to {published}, which cannot take a "
                             "publication back; re-running it is refused: start a new run instead")


def _run_dirs(area: CheckpointArea) -> list[Location]:
    from pyarrow import fs as pafs

    runs = area.runs()
    if not runs.exists():
        return []
    return [Location(runs.uri + "/" + i.base_name)
            for i in runs.fs.get_file_info(pafs.FileSelector(runs.path)) if i.type == pafs.FileType.Directory]


def _check_restored_state(job, run: StreamRun) -> None:
    manifest = run.base_manifest()
    if manifest is None:
        return
    keys = {n.key for n in job.stream_graph.nodes}
    left = sorted(k for k, o in manifest["operators"].items() if o["stateful"] and k not in keys)
    if left and not run.allow_non_restored_state:
        raise StreamRunError(f"pipeline {job.pipeline!r}: checkpoint {run.base} holds state of operator(s) {left} "
                             "that the pipeline no longer has; give the operators their old uid, or pass "
                             "allow_non_restored_state=True to drop that state")


class ChainStreamStep:
    """One chain attempt's part of a stream run."""

    def __init__(self, run: StreamRun, job, chain_id: str, attempt_id: Optional[str] = None):
        self.run = run
        self.job = job
        self.chain = job.chain(chain_id)
        self.stage = run.area.chain_attempt(run.run_id, chain_id, attempt_id or uuid.uuid4().hex[:12])
        if self.stage.exists():
            self.stage.delete()
        manifest = run.base_manifest() or {"operators": {}, "sources": {}}
        self.base_sources = manifest["sources"]
        base_dir = run.area.checkpoint(run.base) if run.base is not None else None
        self.restore_from: dict[str, list[str]] = {}
        g = job.stream_graph
        for nid in self.chain.node_ids:
            key = g.node(nid).key
            former = manifest["operators"].get(key)
            if former is not None:
                cdir = chain_dir(base_dir, former["chain"])
                self.restore_from[key] = {"files": [operator_file(cdir, key, k).uri
                                                    for k in range(former["parallelism"])],
                                          "max_parallelism": former.get("max_parallelism")}
        self.positions: dict[str, dict] = {}
        self.read: dict[str, object] = {}  # source key -> [[split, start, end]] read by this run
        self.sinks: dict[str, dict] = {}  # file sink key -> {"target", "format"}; published: {"target", "publish"}
        self.published: dict[str, object] = {}  # published sink key -> its descriptor

    def sink_overrides(self, overrides: dict) -> dict:
        """`overrides` with every file sink of the chain writing into the chain's staging, and
        every published sink staging there (`{"stage": uri}`: the runner's staged writers)."""
        g = self.job.stream_graph
        out = dict(overrides)
        for nid in self.chain.node_ids:
            node = g.node(nid)
            if node.kind is OperatorKind.SINK and publisher_of(node.function) is not None:
                self.sinks[node.key] = {"target": getattr(node.function, "path", None) or node.function.describe(),
                                        "publish": type(node.function).__name__}
                self.published[node.key] = node.function
                out[node.key] = {**(overrides.get(node.key) or {}), "stage": sink_dir(self.stage, node.key).uri}
            if node.kind is OperatorKind.SINK and isinstance(node.function, FileSink):
                target = (overrides.get(node.key) or {}).get("path", node.function.path)
                self.sinks[node.key] = {"target": Location(target).uri, "format": node.function.format}
                out[node.key] = {**(overrides.get(node.key) or {}), "path": sink_dir(self.stage, node.key).uri}
        return out

    def source_reader(self, head, path: Optional[str], label: str):
        """The head source's reader for this run (None: its ordinary reader reads it whole)."""
        reader, positions = plan_stream_source(head.function, path, self.base_sources.get(head.key),
                                               self.chain.parallelism, label,
                                               stream_scope(self.job.pipeline, head.key, self.run.checkpoint_dir))
        self.positions[head.key] = positions
        assigned = getattr(reader, "assignments", None)
        self.read[head.key] = ([list(r) for per_subtask in assigned for r in per_subtask] if assigned is not None
                               else "nothing" if reader is not None else "whole")
        return reader

    def subtask_checkpoint(self) -> SubtaskCheckpointFiles:
        return SubtaskCheckpointFiles(self.run.drain, self.chain.parallelism, self.restore_from, self.stage,
                                      self.run.area.shared())

    def commit(self, reports: list) -> dict:
        """Stage the chain's snapshot summary and rename the attempt onto the run's chain directory;
        the summary (also the `stream` entry of the chain's metrics document) holds per operator
        its watermark, whether it holds state and its snapshot size, per source the positions
        it reached and the ranges this run read."""
        operators: dict[str, dict] = {}
        files: dict[str, dict] = {}  # relative to the chain's directory (shared files: their URI) -> digest
        for r in sorted(reports, key=lambda r: r["subtask"]):
            for key, s in (r.get("snapshots") or {}).items():
                files.update(s.get("files") or {})
                o = operators.setdefault(key, {"chain": self.chain.id, "parallelism": self.chain.parallelism,
                                               "stateful": False, "watermark": None, "bytes": 0, "written": 0,
                                               "max_parallelism": s.get("max_parallelism"), "shared": []})
                o["stateful"] = o["stateful"] or s["stateful"]
                o["bytes"] += s["bytes"]
                o["written"] += s.get("written", s["bytes"])
                o["shared"] += s.get("shared", [])
                if s["watermark"] is not None:
                    o["watermark"] = s["watermark"] if o["watermark"] is None else min(o["watermark"], s["watermark"])
        for key, sink in self.sinks.items():
            sink["records"] = sum(int((r.get("written") or {}).get(key, 0)) for r in reports)
        for key, descriptor in self.published.items():
            write_descriptor(sink_dir(self.stage, key), descriptor)
        files.update(staged_sink_digests(self.stage))
        doc = {"chain": self.chain.id, "operators": operators, "sources": self.positions, "read": self.read,
               "sinks": self.sinks, "files": files}
        write_json(self.stage.join(CHAIN_DOC), doc)
        final = chain_dir(self.run.area.run(self.run.run_id), self.chain.id)
        replace_tree(self.stage, final, self.run.area.run(self.run.run_id).join("_trash"))
        return doc

    def staged_outputs(self, outputs: list) -> list:
        """The chain's `outputs` (metrics document) with no path for the file sinks it staged:
        their files are published by the run's commit (`published_sinks`), not where they are now."""
        return [{**o, "path": None, "staged": True} if o.get("sink") in self.sinks else o for o in outputs]

    def discard(self) -> None:
        if self.stage.exists():
            self.stage.delete()


def commit_stream_run(job, run: StreamRun) -> dict:
    """Commit the run: its staging becomes checkpoint n, `_latest.json` points at it (the
    commit point), then the file sinks are published. Returns the manifest. Done again
    after an interruption (a retried commit step), it finishes what the first try began."""
    area = run.area
    latest, version = area.read_latest_versioned()
    if (latest is not None and latest["checkpoint"] != run.expected_latest and latest["run_id"] == run.run_id
            and latest["base"] == run.base):  # committed already: finish the publication
        publish_sinks(area, latest["checkpoint"], current_sinks(job))
        return _confirm_sources(job, run.checkpoint_dir, area.manifest(latest["checkpoint"]))
    if (latest["checkpoint"] if latest else None) != run.expected_latest:
        raise StreamRunError(f"stream run {run.run_id!r}: checkpoint {latest and latest['checkpoint']} was committed "
                             f"by run {latest and latest['run_id']!r} while this run was going on; concurrent runs "
                             "of one stream are refused (Airflow: max_active_runs=1)")
    staged = area.run(run.run_id)
    # moved into place before an interruption (on an object store the staging may still be
    # partly there: its copy finished, its deletion did not)
    moved = _moved_but_not_pointed_at(area, run, latest)
    if moved is not None:
        return _confirm_sources(job, run.checkpoint_dir, _point_at(area, job, run, moved, latest, version))
    docs, files = {}, {}
    for chain in job.chains:
        doc = chain_dir(staged, chain.id).join(CHAIN_DOC)
        if not doc.exists():
            raise StreamRunError(f"stream run {run.run_id!r}: chain {chain.id!r} did not finish; the run cannot commit")
        data = doc.read_bytes()
        docs[chain.id] = area.read_doc(doc, f"the staged document of chain {chain.id!r}")
        files.update(_in_checkpoint(chain_dir_name(chain.id), docs[chain.id].get("files", {})))
        files[f"{chain_dir_name(chain.id)}/{CHAIN_DOC}"] = digest(data)
    n = _next_checkpoint_id(area, latest)
    manifest = {"pipeline": job.pipeline, "stream_id": run.stream_id, "run_id": run.run_id, "checkpoint": n,
                "base": run.base, "seq": run.seq, "drained": run.drain, "committed_at": _now(), "operators": {},
                "sources": {}, "sinks": {}, "chains": {}, "files": files,
                "history": _history_with(latest, run.run_id, n)}
    for chain_id, doc in docs.items():
        manifest["operators"].update(doc["operators"])
        manifest["sources"].update(doc["sources"])
        for key, sink in doc["sinks"].items():
            staged_parts = sink_dir(chain_dir(staged, chain_id), key)
            parts = sorted(p.rsplit("/", 1)[-1] for p in staged_parts.list_files()) if staged_parts.exists() else []
            manifest["sinks"][key] = {**sink, "chain": chain_id,
                                      "files": [published_part_name(run.seq, name, run.stream_id)
                                                for name in parts]}
        manifest["chains"][chain_id] = {"state_bytes": sum(o["bytes"] for o in doc["operators"].values())}
    for leftover in ("_attempts", "_trash"):
        if staged.join(leftover).exists():
            staged.join(leftover).delete()
    write_json(staged.join(MANIFEST), manifest)  # before the move: a moved run always has its manifest
    _claim(area, run, n)
    final = area.checkpoint(n)
    move(staged, final)  # on an object store a copy, the manifest last
    return _confirm_sources(job, run.checkpoint_dir, _point_at(area, job, run, n, latest, version))


def _concurrent(run: StreamRun, what: str) -> StreamRunError:
    return StreamRunError(f"stream run {run.run_id!r} of the stream in {run.checkpoint_dir!r}: {what} by another run "
                          "while this run was going on; concurrent runs of one stream are refused (Airflow: "
                          "max_active_runs=1); this run committed nothing - start a new run")


def _claim(area: CheckpointArea, run: StreamRun, n: int) -> None:
    """Create checkpoint n's claim (if absent): of two runs about to write into chk-n, one is refused."""
    from airflow_flinkchain.runtime.exchange.conditional import CommitConflict, conditional_store

    claim = area.claim(n)
    store = conditional_store(claim)
    mine = json.dumps({"run_id": run.run_id, "base": run.base}).encode()
    try:
        store.create_if_absent(claim, mine)
    except CommitConflict:
        data, _ = store.read(claim)
        if data != mine:  # this run's own claim, from a try interrupted before its pointer
            raise _concurrent(run, f"checkpoint {area.checkpoint_name(n)} was claimed") from None


def _confirm_sources(job, checkpoint_dir: str, manifest: dict) -> dict:
    """Tell the sources the positions the committed checkpoint holds (a CDC slot advances)."""
    sources = {n.key: n.function for n in job.stream_graph.nodes if n.kind is OperatorKind.SOURCE}
    confirm_committed(sources, manifest["sources"],
                      {k: stream_scope(job.pipeline, k, checkpoint_dir) for k in sources})
    return manifest


def _moved_but_not_pointed_at(area: CheckpointArea, run: StreamRun, latest: Optional[dict]) -> Optional[int]:
    """A checkpoint this run moved into place before it was interrupted, if any."""
    for n in reversed(area.checkpoints()):
        if latest is not None and n <= latest["checkpoint"]:
            break
        doc = area.checkpoint(n).join(MANIFEST)
        if doc.exists():
            m = area.manifest(n)
            if m["run_id"] == run.run_id and m["base"] == run.base:
                return n
    return None


def _next_checkpoint_id(area: CheckpointArea, latest: Optional[dict]) -> int:
    """Above every checkpoint present and every one the stream committed: after `flinkchain
    checkpoints --restore N` the next run does not take the id of a dropped checkpoint, whose
    publication a sink recorded (it would find it "published already" and write nothing)."""
    committed = [c for _, c in (latest or {}).get("history", [])]
    return max(area.checkpoints() + committed + [0]) + 1


def _history_with(latest: Optional[dict], run_id: str, n: int) -> list:
    """The stream's committed runs [[run_id, checkpoint]] with run `run_id` committing n: in the
    pointer and in each manifest (`flinkchain checkpoints --restore` keeps it from there when
    the pointer is damaged, so an old run stays refused)."""
    history = dict(latest["history"]) if latest else {}
    history.pop(run_id, None)
    history[run_id] = n
    return [list(h) for h in list(history.items())[-HISTORY:]]


def _point_at(area: CheckpointArea, job, run: StreamRun, n: int, latest: Optional[dict],
              version: Optional[str]) -> dict:
    """The commit point (the pointer, replaced only if it is still the version read), then
    the publication and the retention."""
    from airflow_flinkchain.runtime.exchange.conditional import CommitConflict

    try:
        area.write_latest({"checkpoint": n, "dir": area.checkpoint_name(n), "run_id": run.run_id, "base": run.base,
                           "seq": run.seq, "history": _history_with(latest, run.run_id, n)}, version)
    except CommitConflict:
        raise _concurrent(run, "the stream's latest checkpoint was replaced") from None
    publish_sinks(area, n, current_sinks(job))
    for old in area.checkpoints():  # keep the latest and its base
        if old not in (n, run.base):
            area.checkpoint(old).delete()
            if area.claim(old).exists():
                area.claim(old).delete()
    _drop_unreferenced_shared_files(area, [n] + ([run.base] if run.base is not None else []))
    return area.manifest(n)


def _drop_unreferenced_shared_files(area: CheckpointArea, retained: list[int]) -> None:
    referenced = set()
    for n in retained:
        doc = area.checkpoint(n).join(MANIFEST)
        if doc.exists():
            for o in area.manifest(n)["operators"].values():
                referenced.update(Location(uri).path for uri in o.get("shared", ()))
    for path in area.shared().list_files():
        if path not in referenced:
            area.shared().fs.delete_file(path)


def staged_sink_digests(chain_base: Location) -> dict:
    """{path relative to the chain's directory: digest} of every staged sink file of a chain."""
    sinks = chain_base.join("sinks")
    out = {}
    for path in all_files(sinks):
        out["sinks" + path[len(sinks.path):]] = digest(Location(sinks.uri + path[len(sinks.path):]).read_bytes())
    return out


def _in_checkpoint(prefix: str, files: dict) -> dict:
    """A chain document's file digests keyed as the manifest keys them: relative to the
    checkpoint directory (shared files keep their URI)."""
    return {(name if name.startswith("/") or "://" in name else f"{prefix}/{name}"): d for name, d in files.items()}


def published_sinks(manifest: dict) -> dict:
    """Per file sink key of a committed run (its manifest): where its output was published,
    `{"path": the sink's directory, "files": the run's part files there, "records",
    "checkpoint", "seq"}`. What the commit step announces (asset events, lineage, run store)."""
    out = {}
    for key, sink in manifest["sinks"].items():
        target = Location(sink["target"])
        out[key] = {"path": target.uri, "files": [target.join(name).uri for name in sink.get("files", [])],
                    "records": int(sink.get("records") or 0), "chain": sink["chain"],
                    "checkpoint": manifest["checkpoint"], "seq": manifest["seq"]}
    return out


def stream_result(manifest: dict) -> dict:
    """What a runner's result says about the committed run."""
    return {**{k: manifest[k] for k in ("checkpoint", "seq", "run_id", "drained", "sources", "operators", "chains")},
            "sinks": published_sinks(manifest)}


__all__ = ["ChainStreamStep", "StreamRun", "StreamRunError", "begin_stream_run", "commit_stream_run",
           "publish_sinks", "published_name", "published_sinks", "stream_result"]
