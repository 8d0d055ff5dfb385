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
