"""A source subtask without a split, or reading a piece of a file after another subtask's piece,
does not hold the watermark back downstream (docs/event-time.md, "Idle source subtasks"): over
one file (Parquet, JSON lines) read at parallelism 2 and 3, every record downstream of a keyed
exchange sees the watermark it sees at parallelism 1 (but the first record), and session
windows and late records are the same; in process here, on Spark in
tests/runtime/test_idle_subtasks_spark.py."""

from __future__ import annotations

import pytest

from airflow_flinkchain import StreamPipeline
from tests.eventtime.idle_cases import (add_branch, make_rows, outputs, stream_runs, watermark_differences,
                                        write)

FORMATS = ("parquet", "json")


def run_local(path: str, fmt: str, parallelism: int) -> tuple:
    p = StreamPipeline(f"idle_p{parallelism}", parallelism=parallelism)
    add_branch(p, path, fmt, parallelism, "b")
    return outputs(p.execute_local(), "b")


def assert_same_as_parallelism_1(got: tuple, reference: tuple, first: int) -> None:
    marks, sessions, late = got
    assert watermark_differences(marks, reference[0], first) == []
    assert late == reference[2] and reference[2], "some records are late at parallelism 1: the watermark matters"
    assert sessions == reference[1]


@pytest.mark.parametrize("parallelism", (2, 3))
@pytest.mark.parametrize("fmt", FORMATS)
def test_one_file_gives_parallelism_1s_watermarks(tmp_path, fmt, parallelism):
    path = tmp_path / f"one.{fmt}"
    write(path, make_rows(400, seed=3), fmt)
    reference = run_local(str(path), fmt, 1)
    assert_same_as_parallelism_1(run_local(str(path), fmt, parallelism), reference, first=0)


@pytest.mark.parametrize("parallelism", (3, 4))
def test_a_file_read_in_pieces_after_another_file_hands_its_watermark_on(tmp_path, parallelism):
    """Two files over the same time range: at 3 and 4 subtasks the second file is read in pieces
    by consecutive subtasks, after the first file, whose watermark ends higher than the second's
    start; the second's pieces go on from its own watermark, as one subtask reading it would."""
    d = tmp_path / "two"
    d.mkdir()
    write(d / "a.parquet", make_rows(300, seed=1), "parquet")
    write(d / "b.parquet", make_rows(300, seed=2, first_id=1000), "parquet")
    reference = run_local(str(d), "parquet", 1)
    assert_same_as_parallelism_1(run_local(str(d), "parquet", parallelism), reference, first=0)


@pytest.mark.parametrize("parallelism", (2, 3))
def test_fewer_text_files_than_subtasks(tmp_path, parallelism):
    """Text files are whole splits: one file at 2 or 3 subtasks leaves subtasks without a split."""
    path = tmp_path / "one.txt"
    write(path, make_rows(400, seed=5), "text")
    reference = run_local(str(path), "text", 1)
    assert_same_as_parallelism_1(run_local(str(path), "text", parallelism), reference, first=0)


@pytest.mark.parametrize("parallelism", (2, 3))
@pytest.mark.parametrize("fmt", FORMATS + ("log",))
def test_stream_runs_where_a_subtask_has_nothing_new(tmp_path, fmt, parallelism):
    """A monitored directory, one new file per run: one subtask reads it, the others have nothing
    new in any run. "log": an `UnboundedSource` with one split (a log partition): the other
    subtasks have no split."""
    def execute(p, run_id, drain):
        return p.execute_local(run_id=run_id, drain=drain)

    runs = {par: stream_runs(tmp_path / f"in{par}", str(tmp_path / f"ckpt{par}"), fmt, par, execute)
            for par in (1, parallelism)}
    assert_same_as_parallelism_1(runs[parallelism], runs[1], first=0)
