"""All path handling of exchange data, attempts, sinks and metrics.

Paths go through `pyarrow.fs`, so the exchange root may be a local path or a
URI (`file:///shared/x`, `hdfs://...`, `s3://...`; whatever
`pyarrow.fs.FileSystem.from_uri` supports). Nothing else in the runtime builds
paths by hand.

Layout under the exchange root (one run of one DAG):

    {root}/{dag_id}/{run_id}/
        _plan/plan.pkl                                      the serialized JobGraph (Airflow setup task)
        {edge_id}/channel={k}/part-{subtask:05d}.parquet     committed exchange datasets
        _collect/{name}/part-{subtask:05d}.parquet          committed collect(name) sinks
        _metrics/{chain_id}.json                            chain metrics (also on failure)
        _attempts/{chain_id}/{attempt_id}/                  a running attempt's outputs:
            edges/{edge_id}/channel={k}/part-*.parquet
            collect/{name}/part-*.parquet
            stage/{node_key}/part-*.parquet                 staged SQL-sink rows
        _trash/                                             replaced datasets, deleted at once

Every id becomes a segment through `path_names.path_segment`: ids that would
be read as paths ('', '.', '..', 'a/b') are refused, unsafe characters
(Airflow run ids contain ':' and '+') are replaced and a short hash of the
original appended, long ids shortened with that hash. The Airflow tasks use
this class too, so both sides compute the same paths.

Commit protocol: an attempt writes only under its attempt directory (file
sinks: a hidden sibling of the target). When all subtasks succeeded, the
driver renames each staged dataset onto its final path; an existing dataset
(from an earlier attempt or run with the same id) is first renamed away into
the trash and then deleted: a dataset is replaced, never appended to, and a
final path only ever holds one attempt's complete output.
"""

from __future__ import annotations

import json
import os
import uuid
from typing import Optional

import pyarrow.fs as pafs

from airflow_flinkchain.path_names import path_segment
from airflow_flinkchain.runtime.exchange import storage

PLAN_DIR, PLAN_FILE = "_plan", "plan.pkl"


def part_name(subtask: int, ext: str = "parquet") -> str:
    return f"part-{subtask:05d}.{ext}"


def channel_dir_name(channel: int) -> str:
    return f"channel={channel}"


class Location:
    """A filesystem and a path on it; picklable (the filesystem is rebuilt lazily)."""

    def __init__(self, uri: str):
        if "://" not in uri:
            uri = os.path.abspath(uri)
        self.uri = uri.rstrip("/") if uri != "/" else uri
        self._fs: Optional[pafs.FileSystem] = None
        self._path: Optional[str] = None

    def _resolve(self) -> None:
        if self._fs is None:
            self._fs, self._path = storage.filesystem(self.uri)

    @property
    def fs(self) -> pafs.FileSystem:
        self._resolve()
        return self._fs

    @property
    def path(self) -> str:
        self._resolve()
        return self._path

    @property
    def is_local(self) -> bool:
        return isinstance(self.fs, pafs.LocalFileSystem)

    @property
    def is_object_store(self) -> bool:
        """No atomic rename here: commits are conditional writes of manifests."""
        return storage.is_object_store(self.uri)

    def join(self, *parts: str) -> "Location":
        return Location("/".join([self.uri, *parts]))

    def sibling(self, name: str) -> "Location":
        parent = self.uri.rsplit("/", 1)[0]
        return Location(parent + "/" + name)

    def parent(self) -> "Location":
        return Location(self.uri.rsplit("/", 1)[0])

    @property
    def name(self) -> str:
        return self.uri.rsplit("/", 1)[-1]

    def exists(self) -> bool:
        return self.fs.get_file_info(self.path).type != pafs.FileType.NotFound

    def makedirs(self) -> None:
        self.fs.create_dir(self.path, recursive=True)

    def delete(self) -> None:
        info = self.fs.get_file_info(self.path)
        if info.type == pafs.FileType.Directory:
            self.fs.delete_dir(self.path)
        elif info.type == pafs.FileType.File:
            self.fs.delete_file(self.path)

    def list_files(self, recursive: bool = True) -> list[str]:
        """Paths (on `fs`) of the files below, sorted; [] when missing. Hidden and
        underscore-prefixed names are skipped, as Spark and Hive do."""
        if not self.exists():
            return []
        infos = self.fs.get_file_info(pafs.FileSelector(self.path, recursive=recursive))
        out = []
        for info in infos:
            rel = info.path[len(self.path):].lstrip("/")
            if info.type == pafs.FileType.File and not any(p.startswith((".", "_")) for p in rel.split("/")):
                out.append(info.path)
        if self.is_object_store:
            published = published_files(self)
            if published is not None:
                out = [p for p in out if p in published]
        return sorted(out)

    def open_output(self):
        self.fs.create_dir(self.path.rsplit("/", 1)[0], recursive=True)
        return self.fs.open_output_stream(self.path)

    def write_bytes(self, data: bytes) -> None:
        """Write via a temporary sibling and a rename, so readers never see half a file (on an
        object store one PUT is already all or nothing)."""
        if self.is_object_store:
            with self.fs.open_output_stream(self.path) as out:
                out.write(data)
            return
        tmp = self.sibling(f".{self.name}.{uuid.uuid4().hex}.tmp")
        with tmp.open_output() as out:
            out.write(data)
        if self.exists():
            self.delete()
        self.fs.move(tmp.path, self.path)

    def read_bytes(self) -> bytes:
        with self.fs.open_input_stream(self.path) as f:
            return f.read()

    def write_text(self, text: str) -> None:
        self.write_bytes(text.encode())

    def read_text(self) -> str:
        return self.read_bytes().decode()

    def __repr__(self) -> str:
        return f"Location({self.uri!r})"

    def __getstate__(self):
        return {"uri": self.uri}

    def __setstate__(self, state):
        self.uri = state["uri"]
        self._fs = None
        self._path = None


def move(src: Location, dst: Location) -> None:
    """Move a file or a directory. A rename on local and HDFS filesystems; on an object store
    (no rename of a prefix) each object is copied, the directory's `_`-prefixed files last
    (its manifest or markers, which readers check for completeness; the outermost last of
    all), then the source deleted."""
    if not src.is_object_store:
        src.fs.move(src.path, dst.path)
        return
    info = src.fs.get_file_info(src.path)
    if info.type == pafs.FileType.File:
        src.fs.copy_file(src.path, dst.path)
        src.fs.delete_file(src.path)
        return
    files = [i.path for i in src.fs.get_file_info(pafs.FileSelector(src.path, recursive=True))
             if i.type == pafs.FileType.File]
    # markers last, the outermost last of all (a checkpoint's manifest after its chains' documents)
    rel = sorted((p[len(src.path):].lstrip("/") for p in files),
                 key=lambda r: (any(s.startswith("_") for s in r.split("/")), -r.count("/"), r))
    for r in rel:
        src.fs.copy_file(src.join(r).path, dst.join(r).path)
    if not rel:
        dst.makedirs()
    src.delete()


def replace(staged: Location, final: Location, trash: Location) -> None:
    """Commit one dataset: rename `staged` onto `final`, replacing what is there; on an object
    store, a publication by manifest (`publish_by_manifest`)."""
    if final.is_object_store:
        publish_by_manifest(staged, final)
        return
    replace_tree(staged, final, trash)


def replace_tree(staged: Location, final: Location, trash: Location) -> None:
    """`staged` becomes `final` under the same names (a rename; on object stores a copy whose
    `_`-prefixed files, the completeness markers, come last), the old `final` to the trash."""
    if not staged.exists():
        staged.makedirs()  # an output that got no records is still an (empty) committed dataset
    final.parent().makedirs()
    if final.exists():
        old = trash.join(uuid.uuid4().hex)
        trash.makedirs()
        move(final, old)
        move(staged, final)
        old.delete()
        _drop_if_empty(trash)
    else:
        move(staged, final)


#: the commit point of a dataset on an object store: {"files": [paths relative to its directory]}
DATASET_MANIFEST = "_flinkchain_manifest.json"


def published_files(loc: Location) -> Optional[set]:
    """The paths (on `loc.fs`) of the committed files of the dataset at `loc` (or of the channel
    directory `loc` of one), per its manifest; None where no manifest was published."""
    for base in (loc, loc.parent()) if loc.name.startswith("channel=") else (loc,):
        try:
            doc = json.loads(base.join(DATASET_MANIFEST).read_bytes())
        except FileNotFoundError:
            continue
        return {base.path + "/" + rel for rel in doc["files"]}
    return None


def publish_by_manifest(staged: Location, final: Location) -> None:
    """Commit one dataset on an object store without a rename: the staged files are copied into
    `final` under names carrying a fresh version token, then the manifest naming exactly them
    is written conditionally (the commit point: readers resolve it, `Location.list_files`), then
    the files of earlier versions and the staging are dropped. Killed before the manifest,
    readers still see the earlier version; a concurrent publication makes one of the two fail."""
    from airflow_flinkchain.runtime.exchange.conditional import CommitConflict, conditional_store

    manifest = final.join(DATASET_MANIFEST)
    store = conditional_store(manifest)
    _, version = store.read(manifest)
    token = uuid.uuid4().hex[:12]
    names = []
    for path in staged.list_files() if staged.exists() else []:
        rel = path[len(staged.path):].lstrip("/")
        folder, _, base = rel.rpartition("/")
        stem, dot, ext = base.partition(".")
        name = f"{folder + '/' if folder else ''}{stem}-{token}{dot}{ext}"
        staged.fs.copy_file(path, final.join(name).path)
        names.append(name)
    try:
        store.write(manifest, json.dumps({"files": sorted(names), "version": token}).encode(), version)
    except CommitConflict:
        for name in names:
            final.fs.delete_file(final.join(name).path)
        raise CommitConflict(f"dataset {final.uri} was published by another attempt at the same time; "
                             "this attempt's output was dropped: retry the task") from None
    keep = {final.join(n).path for n in names} | {manifest.path}
    for info in final.fs.get_file_info(pafs.FileSelector(final.path, recursive=True)):
        if info.type == pafs.FileType.File and info.path not in keep:
            final.fs.delete_file(info.path)
    if staged.exists():
        staged.delete()


def _drop_if_empty(loc: Location) -> None:
    try:
        if loc.exists() and not loc.fs.get_file_info(pafs.FileSelector(loc.path)):
            loc.fs.delete_dir(loc.path)
    except OSError:
        pass


class ExchangeArea:
    """Paths of one run of one DAG under the exchange root."""

    def __init__(self, root: str, dag_id: str, run_id: str):
        if not isinstance(root, str) or not root.strip():
            raise ValueError(f"the exchange root must be a non-empty path or URI, got {root!r}")
        self.root = Location(root)
        self.dag_id = dag_id
        self.run_id = run_id
        self.run = self.root.join(*self.run_segments(dag_id, run_id))

    @staticmethod
    def run_segments(dag_id: str, run_id: str) -> tuple[str, str]:
        """The run's directory below the root; UnsafeNameError for ids that are paths."""
        return path_segment(dag_id, "DAG id (the pipeline name when run locally)"), path_segment(run_id, "run id")

    def plan(self) -> Location:
        return self.run.join(PLAN_DIR, PLAN_FILE)

    def edge(self, edge_id: str) -> Location:
        return self.run.join(path_segment(edge_id))

    def collect(self, name: str) -> Location:
        return self.run.join("_collect", path_segment(name, "collect() name"))

    def metrics(self, chain_id: str) -> Location:
        return self.run.join("_metrics", path_segment(chain_id) + ".json")

    def trash(self) -> Location:
        return self.run.join("_trash")

    def attempts(self, chain_id: str) -> Location:
        return self.run.join("_attempts", path_segment(chain_id))

    def attempt(self, chain_id: str, attempt_id: str) -> "Attempt":
        return Attempt(self, chain_id, attempt_id)


class Attempt:
    """Where one attempt of one chain writes before it commits."""

    def __init__(self, area: ExchangeArea, chain_id: str, attempt_id: str):
        self.area = area
        self.chain_id = chain_id
        self.attempt_id = attempt_id
        self.dir = area.attempts(chain_id).join(path_segment(attempt_id))

    def edge(self, edge_id: str) -> Location:
        return self.dir.join("edges", path_segment(edge_id))

    def collect(self, name: str) -> Location:
        return self.dir.join("collect", path_segment(name))

    def stage(self, node_key: str) -> Location:
        return self.dir.join("stage", path_segment(node_key))

    def file_sink_stage(self, target: Location) -> Location:
        """A hidden sibling of a file sink's target, on the same filesystem, so the
        commit is a rename and Spark/Hive readers of the parent ignore it."""
        return target.sibling(f".{target.name}.flinkchain-{path_segment(self.attempt_id)}")

    def clear_stale(self) -> None:
        """Drop leftovers of earlier attempts of this chain (killed processes)."""
        self.area.attempts(self.chain_id).delete()

    def discard(self) -> None:
        self.dir.delete()
        _drop_if_empty(self.area.attempts(self.chain_id))
        _drop_if_empty(self.area.run.join("_attempts"))
