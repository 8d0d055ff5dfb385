"""On Spark: a source subtask without a split, or reading a piece of a file after another subtask's
piece, does not hold the watermark back downstream (tests/eventtime/test_idle_subtasks.py runs the
same cases in process): every record downstream of a keyed exchange sees the watermark it sees at
parallelism 1 (but the first record); session windows and late records are the same."""

from __future__ import annotations

import pytest

from airflow_flinkchain import StreamPipeline
from tests.eventtime.idle_cases import (add_branch, make_rows, outputs, stream_runs, watermark_differences,
                                        write)

pytestmark = pytest.mark.spark

#: (branch, input, format, parallelism)
BRANCHES = [(f"{name}{par}", name, fmt, par)
            for name, fmt, pars in (("parquet", "parquet", (1, 2, 3)), ("json", "json", (1, 2, 3)),
                                    ("pieces", "parquet", (1, 3, 4)), ("text", "text", (1, 2, 3)))
            for par in pars]


@pytest.fixture(scope="module")
def plain_run(spark, tmp_path_factory):
    """Every branch in one pipeline, one Spark run."""
    d = tmp_path_factory.mktemp("idle_inputs")
    write(d / "one.parquet", make_rows(400, seed=3), "parquet")
    write(d / "one.json", make_rows(400, seed=3), "json")
    write(d / "one.txt", make_rows(400, seed=5), "text")
    (d / "two").mkdir()
    write(d / "two" / "a.parquet", make_rows(300, seed=1), "parquet")
    write(d / "two" / "b.parquet", make_rows(300, seed=2, first_id=1000), "parquet")
    paths = {"parquet": d / "one.parquet", "json": d / "one.json", "text": d / "one.txt", "pieces": d / "two"}
    p = StreamPipeline("idle_subtasks")
    for branch, name, fmt, par in BRANCHES:
        add_branch(p, str(paths[name]), fmt, par, branch)
    return p.execute(spark=spark, exchange_root=str(tmp_path_factory.mktemp("idle_exchange")))


@pytest.mark.parametrize("name,parallelism", [(b[1], b[3]) for b in BRANCHES if b[3] != 1])
def test_parallelism_p_gives_parallelism_1s_watermarks_on_spark(plain_run, name, parallelism):
    marks, sessions, late = outputs(plain_run, f"{name}{parallelism}")
    ref_marks, ref_sessions, ref_late = outputs(plain_run, f"{name}1")
    assert watermark_differences(marks, ref_marks, first=0) == []
    assert late == ref_late and ref_late
    assert sessions == ref_sessions


@pytest.mark.parametrize("fmt,parallelism", [("json", 2), ("parquet", 3)])
def test_stream_runs_where_a_subtask_has_nothing_new_on_spark(spark, tmp_path, fmt, parallelism):
    reference = stream_runs(tmp_path / "in1", str(tmp_path / "ckpt1"), fmt, 1,
                            lambda p, run_id, drain: p.execute_local(run_id=run_id, drain=drain))
    root = str(tmp_path / "exchange")
    marks, sessions, late = stream_runs(
        tmp_path / "in", str(tmp_path / "ckpt"), fmt, parallelism,
        lambda p, run_id, drain: p.execute(spark=spark, exchange_root=root, run_id=run_id, drain=drain))
    assert watermark_differences(marks, reference[0], first=0) == []
    assert late == reference[2] and reference[2]
    assert sessions == reference[1]
