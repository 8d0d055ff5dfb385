"""Which former snapshot files a subtask reads on restore."""

from __future__ import annotations

from airflow_flinkchain.runtime.exchange.checkpoints import SubtaskCheckpointFiles, operator_file
from airflow_flinkchain.runtime.exchange.layout import Location


def former_files(tmp_path, n: int) -> list[str]:
    base = Location(str(tmp_path / "chk"))
    writer = SubtaskCheckpointFiles(False, n, {}, base)
    for k in range(n):
        writer.write("op", k, {"watermark": k})
    return [operator_file(base, "op", k).uri for k in range(n)]


def watermarks(restored) -> tuple:
    snapshots, own = restored
    return sorted(s["watermark"] for s in snapshots), own and own["watermark"]


def test_keyed_subtasks_read_the_former_subtasks_whose_key_groups_overlap(tmp_path):
    files = former_files(tmp_path, 4)
    keyed = {"op": {"files": files, "max_parallelism": 128}}
    halves = SubtaskCheckpointFiles(False, 2, keyed, Location(str(tmp_path / "stage")))
    assert watermarks(halves.restore("op", 0)) == ([0, 1], None)  # key groups 0-63 were subtasks 0 and 1
    assert watermarks(halves.restore("op", 1)) == ([2, 3], None)
    thirds = SubtaskCheckpointFiles(False, 3, keyed, Location(str(tmp_path / "stage")))
    assert watermarks(thirds.restore("op", 1)) == ([1, 2], None)  # 43-85 overlaps 32-63 and 64-95
    same = SubtaskCheckpointFiles(False, 4, keyed, Location(str(tmp_path / "stage")))
    assert watermarks(same.restore("op", 2)) == ([2], 2)


def test_operator_state_is_read_from_the_own_subtask_unless_rescaled(tmp_path):
    files = former_files(tmp_path, 3)
    plain = {"op": {"files": files, "max_parallelism": None}}
    assert watermarks(SubtaskCheckpointFiles(False, 3, plain, Location(str(tmp_path))).restore("op", 1)) == ([1], 1)
    assert watermarks(SubtaskCheckpointFiles(False, 2, plain, Location(str(tmp_path))).restore("op", 1)) == (
        [0, 1, 2], None)
    assert SubtaskCheckpointFiles(False, 2, plain, Location(str(tmp_path))).restore("new", 0) == ([], None)


def test_an_unchanged_key_group_is_not_written_again(tmp_path):
    import os

    from tests.streamruns.cases import build
    from tests.streamruns.partitioned_log import append

    log, ckpt = str(tmp_path / "log"), str(tmp_path / "ckpt")

    def run(run_id, records):
        append(log, "p0", records)
        return build("p", log, ckpt, sinks=("rolling",)).execute_local(run_id=run_id).stream["operators"]["rolling"]

    first = run("r1", [("a", 1, 0), ("b", 2, 0), ("c", 3, 0)])
    assert first["written"] == first["bytes"] and len(first["shared"]) == 3
    second = run("r2", [("a", 4, 0)])
    assert second["written"] < second["bytes"]
    kept = set(first["shared"]) & set(second["shared"])
    assert len(kept) == 2  # b's and c's key groups: the same files
    a_before = (set(first["shared"]) - kept).pop()
    assert os.path.exists(Location(a_before).path)  # still referenced by the base checkpoint
    third = run("r3", [("a", 5, 0)])
    assert not os.path.exists(Location(a_before).path)  # referenced by no retained checkpoint
    assert all(os.path.exists(Location(uri).path) for uri in third["shared"] + second["shared"])
