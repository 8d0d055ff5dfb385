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


@pytest.mark.parametrize("kind, pattern, message", [
    ("operator snapshot", "chk-000002/chains/rolling/operators/rolling/subtask-00000.pkl",
     r"the snapshot of operator 'rolling', subtask 0, .*subtask-00000\.pkl is damaged"),
    ("shared key group", "shared/rolling/kg-*.pkl", r"key group \d+ of operator 'rolling' \(shared file\) .*is damaged"),
])
def test_an_unreadable_snapshot_fails_the_chain_naming_it(area, kind, pattern, message):
    """Present but unreadable: found when the subtask restores it (the run's begin checks presence only)."""
    log, ckpt, _ = area
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
