"""A damaged checkpoint area: every file a run reads (the pointer, a manifest, a chain
document, an operator snapshot, a shared key-group file) missing or unreadable fails the run
naming the file, the operator or key group, and the way out; `flinkchain checkpoints` lists,
verifies and restores."""

from __future__ import annotations

import glob
import json
import os

import pytest

from airflow_flinkchain.cli import main
from airflow_flinkchain.runtime.exchange.checkpoints import CheckpointFileError
from airflow_flinkchain.runtime.pipeline_run import ChainRunError
from tests.streamruns.cases import build
from tests.streamruns.partitioned_log import append

WAY_OUT = r"restore an earlier checkpoint \(`flinkchain checkpoints .*--restore N.*deleting checkpoint_dir"


@pytest.fixture
def area(tmp_path):
    """A log and a checkpoint_dir after two runs (r1, r2) of a keyed reduce: chk-000001 and
    chk-000002 (built afresh: the manifests name the shared files by absolute path)."""
    log, ckpt = str(tmp_path / "log"), str(tmp_path / "ckpt")
    outputs = []
    for run_id, records in (("r1", [("a", 1, 0), ("b", 2, 0)]), ("r2", [("a", 3, 0), ("c", 4, 0)])):
        append(log, "p0", records)
        outputs.append(sorted(next_run(log, ckpt, run_id).output("rolling")))
    return log, ckpt, outputs


def next_run(log: str, ckpt: str, run_id: str = "r3"):
    return build("p", log, ckpt, sinks=("rolling",)).execute_local(run_id=run_id)


def one(pattern: str) -> str:
    [path] = glob.glob(pattern)
    return path


def truncate(path: str) -> None:
    with open(path, "rb") as f:
        data = f.read()
    with open(path, "wb") as f:
        f.write(data[: len(data) // 2])


def flip_a_byte(path: str) -> None:
    """The same size, another content."""
    with open(path, "rb") as f:
        data = bytearray(f.read())
    data[len(data) // 2] ^= 0xFF
    with open(path, "wb") as f:
        f.write(bytes(data))


# the file, how it is damaged, what the error says
CASES = {
    "pointer truncated": ("_latest.json", truncate, r"the stream's pointer to its latest checkpoint .*_latest\.json is "
                                                     r"damaged \(JSONDecodeError"),
    "manifest missing": ("chk-000002/_manifest.json", os.remove,
                         r"the manifest of checkpoint chk-000002 .*chk-000002/_manifest\.json is missing"),
    "manifest truncated": ("chk-000002/_manifest.json", truncate,
                           r"the manifest of checkpoint chk-000002 .*_manifest\.json is damaged"),
    "chain document missing": ("chk-000002/chains/rolling/_chain.json", os.remove,
                               r"the document of chain 'rolling' in chk-000002 .*_chain\.json is missing"),
    "operator snapshot missing": ("chk-000002/chains/rolling/operators/rolling/subtask-00001.pkl", os.remove,
                                  r"the snapshot of operator 'rolling', subtask 1, in chk-000002, "
                                  r".*subtask-00001\.pkl is missing"),
    "shared key group missing": ("shared/rolling/kg-*.pkl", os.remove,
                                 r"key group \d+ of operator 'rolling' \(shared file of chk-000002\) .*kg-\d+-\w+\.pkl "
                                 r"is missing"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_missing_or_damaged_file_fails_the_run_before_any_chain(area, case):
    log, ckpt, _ = area
    pattern, damage, message = CASES[case]
    paths = glob.glob(os.path.join(ckpt, pattern))
    damage(paths[0])
    with pytest.raises(CheckpointFileError, match=message + ".*" + WAY_OUT):
        next_run(log, ckpt)


UNREADABLE = [
    ("operator snapshot", "chk-000002/chains/rolling/operators/rolling/subtask-00000.pkl",
     r"the snapshot of operator 'rolling', subtask 0, .*subtask-00000\.pkl is damaged"),
    ("shared key group", "shared/rolling/kg-*.pkl",
     r"key group \d+ of operator 'rolling' \(shared file.*\) .*is damaged"),
]


@pytest.mark.parametrize("kind, pattern, message", UNREADABLE)
@pytest.mark.parametrize("damage", [truncate, flip_a_byte])
def test_a_damaged_snapshot_fails_the_run_before_any_chain_naming_it(area, kind, pattern, message, damage):
    """The manifest holds each file's size and SHA-256: the begin (the Airflow setup task)
    reads them back before any chain runs."""
    log, ckpt, _ = area
    for path in glob.glob(os.path.join(ckpt, pattern)):
        damage(path)
    with pytest.raises(CheckpointFileError, match=message + r" \((\d+ bytes where the manifest says \d+|its SHA-256 "
                                                  r"differs from the manifest's)\).*" + WAY_OUT):
        next_run(log, ckpt)
    assert not os.path.exists(os.path.join(ckpt, "_runs", "r3"))  # not begun: no chain ran
    assert main(["checkpoints", ckpt, "--verify"]) == 1


@pytest.mark.parametrize("kind, pattern, message", UNREADABLE)
def test_a_checkpoint_without_digests_fails_the_chain_naming_an_unreadable_snapshot(area, kind, pattern, message):
    """A checkpoint committed before manifests held digests: the begin checks presence, the
    subtask restoring the file finds it unreadable."""
    log, ckpt, _ = area
    manifest = os.path.join(ckpt, "chk-000002", "_manifest.json")
    doc = json.load(open(manifest))
    del doc["files"]
    with open(manifest, "w") as f:
        json.dump(doc, f)
    for path in glob.glob(os.path.join(ckpt, pattern)):
        truncate(path)
    with pytest.raises(ChainRunError, match=message + ".*" + WAY_OUT):
        next_run(log, ckpt)
    assert main(["checkpoints", ckpt, "--verify"]) == 1


def test_checkpoints_command_lists_verifies_and_restores(area, capsys):
    log, ckpt, outputs = area
    assert main(["checkpoints", ckpt]) == 0
    listed = capsys.readouterr().out.splitlines()
    assert listed[0] == f"checkpoint_dir {ckpt}"
    assert [line.split("  ")[:3] for line in listed[1:3]] == [["chk-000001", "run r1", "seq 1"],
                                                              ["chk-000002", "run r2", "seq 2"]]
    assert listed[2].endswith("LATEST") and "base chk-000001" in listed[2]
    assert listed[3] == "committed runs: r1 -> chk-000001, r2 -> chk-000002"
    assert main(["checkpoints", ckpt, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["latest"]["checkpoint"] == 2
    assert main(["checkpoints", ckpt, "--verify"]) == 0
    assert capsys.readouterr().out.strip() == "chk-000002: every file read"

    truncate(os.path.join(ckpt, "chk-000002", "_manifest.json"))
    assert main(["checkpoints", ckpt]) == 0
    assert "chk-000002  DAMAGED: the manifest of checkpoint chk-000002" in capsys.readouterr().out
    assert main(["checkpoints", ckpt, "--verify", "2"]) == 1
    assert "_manifest.json is damaged" in capsys.readouterr().err
    # the way out: chk-000001 becomes the latest; the next run reads r2's input again
    assert main(["checkpoints", ckpt, "--restore", "1"]) == 0
    assert capsys.readouterr().out.splitlines() == ["chk-000001 is the latest checkpoint (run 'r1', seq 1)",
                                                    "deleted chk-000002"]
    assert sorted(next_run(log, ckpt, "r3").output("rolling")) == outputs[1]


def test_an_operator_uid_starting_with_an_underscore_is_found(tmp_path):
    """Hidden-file rules (names starting with '_' are skipped by readers of data directories)
    do not apply to the snapshot files a checkpoint lists."""
    from airflow_flinkchain import StreamPipeline
    from tests.conformance_cases import first_field, sum_values
    from tests.streamruns.partitioned_log import PartitionedLog

    log, ckpt = str(tmp_path / "log"), str(tmp_path / "ckpt")

    def run(run_id):
        p = StreamPipeline("u", runtime_mode="streaming", checkpoint_dir=ckpt)
        p.from_source(PartitionedLog(directory=log), name="log").uid("log").key_by(first_field) \
            .reduce(sum_values).uid("_sum").collect("out")
        return p.execute_local(run_id=run_id).output("out")

    append(log, "p0", [("a", 1, 0)])
    run("r1")
    append(log, "p0", [("a", 2, 0)])
    assert [r[1] for r in run("r2")] == [3]
    assert main(["checkpoints", ckpt, "--verify"]) == 0


@pytest.mark.parametrize("pointer", ["damaged", "intact"])
def test_restore_keeps_the_committed_runs_so_an_old_run_stays_refused(area, pointer, capsys):
    """--restore N rewrites the pointer but not the history: re-running r1 (committed, not the
    latest) or r2 (its checkpoint dropped by the restore) is still refused; a new run goes on."""
    from airflow_flinkchain.runtime.stream_run import StreamRunError

    log, ckpt, outputs = area
    if pointer == "damaged":
        truncate(os.path.join(ckpt, "_latest.json"))
        assert main(["checkpoints", ckpt, "--restore", "2"]) == 0
    else:
        assert main(["checkpoints", ckpt, "--restore", "1"]) == 0
    capsys.readouterr()
    history = json.load(open(os.path.join(ckpt, "_latest.json")))["history"]
    assert [run for run, _ in history] == ["r1", "r2"]
    for old in (["r1"] if pointer == "damaged" else ["r2"]):
        with pytest.raises(StreamRunError, match=f"run '{old}' of pipeline 'p' committed checkpoint .* only the "
                                                 "latest run can be re-run"):
            next_run(log, ckpt, old)
    assert main(["checkpoints", ckpt]) == 0
    next_run(log, ckpt, "r3")


def test_published_files_are_the_users_and_a_pending_part_is_checked(tmp_path):
    """Parts a run published may be deleted (retention): the next run goes on. A part still
    staged for a pending publication that is damaged fails the run naming the sink."""
    log, ckpt, out = str(tmp_path / "log"), str(tmp_path / "ckpt"), tmp_path / "files"
    append(log, "p0", [("a", 1, 100), ("a", 2, 2000)])
    build("p", log, ckpt, sinks=("tumbling",), file_sink=str(out)).execute_local(run_id="r1")
    for part in out.iterdir():
        part.unlink()
    append(log, "p0", [("a", 3, 3500)])
    build("p", log, ckpt, sinks=("tumbling",), file_sink=str(out)).execute_local(run_id="r2")
    # r2's part back in its checkpoint, as if killed before the publication, and damaged there
    latest = json.load(open(os.path.join(ckpt, "_latest.json")))
    manifest = json.load(open(os.path.join(ckpt, latest["dir"], "_manifest.json")))
    (key, sink), = manifest["sinks"].items()
    staged = os.path.join(ckpt, latest["dir"], "chains", sink["chain"], "sinks", key)
    os.makedirs(staged)
    for name in sink["files"]:
        os.rename(out / name, os.path.join(staged, name.replace(f"part-000002-{manifest['stream_id']}-", "part-")))
        truncate(os.path.join(staged, name.replace(f"part-000002-{manifest['stream_id']}-", "part-")))
    with pytest.raises(CheckpointFileError, match=rf"the staged output of sink '{key}' in chk-000002 .*is damaged"):
        build("p", log, ckpt, sinks=("tumbling",), file_sink=str(out)).execute_local(run_id="r3")
