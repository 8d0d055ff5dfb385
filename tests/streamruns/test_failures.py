"""Stream runs that fail, are killed, retried, re-run or run concurrently: the committed
outputs stay exactly once and equal to one STREAMING run over the whole input."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from airflow_flinkchain.runtime.exchange.checkpoints import chain_dir, sink_dir
from airflow_flinkchain.runtime.exchange.layout import Location
from airflow_flinkchain.runtime.pipeline_run import ChainRunError
from airflow_flinkchain.runtime.stream_run import StreamRun, StreamRunError, begin_stream_run, commit_stream_run
from tests.conformance_cases import as_multiset
from tests.streamruns.cases import FailOn, build, collected, differences, make_records, reference, slices
from tests.streamruns.partitioned_log import append

REPO = Path(__file__).resolve().parents[2]


def file_sink_rows(directory: Path) -> list:
    """The records of every published part file of a JSON-lines sink (tuples were written as lists)."""
    return [json.loads(line) for f in sorted(directory.glob("*.json")) for line in f.read_text().splitlines() if line]


def latest(ckpt: Path) -> dict:
    return json.loads((ckpt / "_latest.json").read_text())


@pytest.mark.parametrize("retry_run_id", ["r1", "r1-retry"])
def test_failed_run_is_retried_without_duplicates(tmp_path, retry_run_id):
    records = make_records(seed=3)
    want = reference(tmp_path, records)
    log, ckpt, out = str(tmp_path / "log"), tmp_path / "ckpt", tmp_path / "files"
    marker = tmp_path / "fail-now"
    parts = slices(records, 3)
    failing_value = parts[1][len(parts[1]) // 2][1]  # a record in the middle of the second slice

    def run(run_id, **kw):
        p = build("p", log, str(ckpt), fail=FailOn(str(marker), failing_value), file_sink=str(out))
        return p.execute_local(run_id=run_id, **kw)

    results = []
    append(log, "p0", parts[0])
    results.append(run("r0"))
    files_after_r0 = sorted(p.name for p in out.iterdir())
    append(log, "p0", parts[1])
    marker.write_text("")
    with pytest.raises(ChainRunError, match="injected failure"):
        run("r1")
    assert latest(ckpt)["checkpoint"] == 1  # nothing of the failed run committed
    assert sorted(p.name for p in out.iterdir()) == files_after_r0  # nor published
    marker.unlink()
    results.append(run(retry_run_id))
    append(log, "p0", parts[2])
    results.append(run("r2"))
    results.append(run("drain", drain=True))
    assert differences(collected(results), want) == []
    # the file sink holds every committed run's tumbling windows exactly once
    rows = [tuple(r) if isinstance(r, list) else r for r in file_sink_rows(out)]
    assert as_multiset(rows) == as_multiset([v for v, _ts in want["tumbling"].elements()])
    assert not (ckpt / "_runs").exists() or not any((ckpt / "_runs").iterdir())


KILL_SCRIPT = """
import sys
sys.path.insert(0, {repo!r})
from tests.streamruns.cases import FailOn, build
build("p", {log!r}, {ckpt!r}, fail=FailOn({marker!r}, {value!r}, kill=True), file_sink={out!r}).execute_local(
    run_id="r1")
"""


def test_killed_run_is_retried_without_duplicates(tmp_path):
    """SIGKILL mid-way (nothing of the process runs after it): the retry restarts from the
    last committed checkpoint and the final outputs are those of one run."""
    records = make_records(seed=5)
    want = reference(tmp_path, records)
    log, ckpt, out = str(tmp_path / "log"), str(tmp_path / "ckpt"), tmp_path / "files"
    marker = tmp_path / "kill-now"
    parts = slices(records, 3)
    value = parts[1][len(parts[1]) // 3][1]
    fail = FailOn(str(marker), value, kill=True)
    results = []
    append(log, "p0", parts[0])
    results.append(build("p", log, ckpt, fail=fail, file_sink=str(out)).execute_local(run_id="r0"))
    append(log, "p0", parts[1])
    marker.write_text("")
    script = KILL_SCRIPT.format(repo=str(REPO), log=log, ckpt=ckpt, marker=str(marker), value=value, out=str(out))
    proc = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, timeout=300)
    assert proc.returncode == -9, proc.stderr.decode()[-2000:]
    assert (Path(ckpt) / "_runs").exists()  # the killed run's staging is left behind
    marker.unlink()
    results.append(build("p", log, ckpt, fail=fail, file_sink=str(out)).execute_local(run_id="r1"))
    append(log, "p0", parts[2])
    results.append(build("p", log, ckpt, fail=fail, file_sink=str(out)).execute_local(run_id="r2", drain=True))
    assert differences(collected(results), want) == []
    rows = [tuple(r) if isinstance(r, list) else r for r in file_sink_rows(out)]
    assert as_multiset(rows) == as_multiset([v for v, _ts in want["tumbling"].elements()])


def test_rerunning_the_latest_run_replaces_its_outputs(tmp_path):
    log, ckpt, out = str(tmp_path / "log"), tmp_path / "ckpt", tmp_path / "files"
    append(log, "p0", [("a", 1, 100), ("a", 2, 2000)])
    build("p", log, str(ckpt), sinks=("tumbling",), file_sink=str(out)).execute_local(run_id="r1")
    append(log, "p0", [("a", 3, 3500)])
    first = build("p", log, str(ckpt), sinks=("tumbling",), file_sink=str(out)).execute_local(run_id="r2")
    files = sorted(p.name for p in out.iterdir())
    again = build("p", log, str(ckpt), sinks=("tumbling",), file_sink=str(out)).execute_local(run_id="r2")
    assert first.output("tumbling") == again.output("tumbling") == [(("a", 2, 2000), 2999)]
    assert sorted(p.name for p in out.iterdir()) == files  # the same names: replaced, not added
    assert {f.split("-")[1] for f in files} == {"000001", "000002"}
    assert sorted(map(tuple, file_sink_rows(out))) == [("a", 1, 100), ("a", 2, 2000)]
    with pytest.raises(StreamRunError, match="only the latest run can be re-run"):
        build("p", log, str(ckpt), sinks=("tumbling",)).execute_local(run_id="r1")


def test_a_run_whose_base_moved_on_cannot_commit(tmp_path):
    """Two runs of one stream at once: the one that commits second is refused."""
    log, ckpt = str(tmp_path / "log"), str(tmp_path / "ckpt")
    append(log, "p0", [("a", 1, 100)])
    p = build("p", log, ckpt, sinks=("tumbling",))
    slow = begin_stream_run(p.plan(), ckpt, "slow")
    build("p", log, ckpt, sinks=("tumbling",)).execute_local(run_id="fast")
    with pytest.raises(StreamRunError, match="concurrent runs of one stream are refused"):
        commit_stream_run(p.plan(), slow)
    assert latest(Path(ckpt))["run_id"] == "fast"


def test_publication_interrupted_after_the_commit_point_is_finished_by_the_next_run(tmp_path):
    log, ckpt, out = str(tmp_path / "log"), tmp_path / "ckpt", tmp_path / "files"
    append(log, "p0", [("a", 1, 100), ("a", 2, 2000)])
    build("p", log, str(ckpt), sinks=("tumbling",), file_sink=str(out)).execute_local(run_id="r1")
    # as if killed between the pointer and the publication: the part is back in the checkpoint
    chk = ckpt / latest(ckpt)["dir"]
    manifest = json.loads((chk / "_manifest.json").read_text())
    (key, sink), = manifest["sinks"].items()
    staged = Path(sink_dir(chain_dir(Location(str(chk)), sink["chain"]), key).path)
    staged.mkdir(parents=True)
    for part in sorted(out.iterdir()):
        os.rename(part, staged / part.name.replace(f"part-000001-{manifest['stream_id']}-", "part-"))
    assert list(out.iterdir()) == []
    append(log, "p0", [("a", 3, 3500)])
    build("p", log, str(ckpt), sinks=("tumbling",), file_sink=str(out)).execute_local(run_id="r2")
    assert sorted(map(tuple, file_sink_rows(out))) == [("a", 1, 100), ("a", 2, 2000)]


def test_chain_tasks_open_the_run_that_begin_recorded(tmp_path):
    """What the Airflow chain and commit tasks do: StreamRun.open(checkpoint_dir, run_id)."""
    log, ckpt = str(tmp_path / "log"), str(tmp_path / "ckpt")
    append(log, "p0", [("a", 1, 100)])
    job = build("p", log, ckpt, sinks=("tumbling",)).plan()
    begun = begin_stream_run(job, ckpt, "r1", drain=True)
    assert StreamRun.open(ckpt, "r1") == begun
    with pytest.raises(StreamRunError, match="was not begun"):
        StreamRun.open(ckpt, "r2")


def test_a_commit_step_retried_after_an_interruption_finishes_the_commit(tmp_path):
    """The commit step killed after moving the run into place (before the pointer), or after
    the pointer: its retry finishes the same commit; nothing is committed twice."""
    log, ckpt, out = str(tmp_path / "log"), str(tmp_path / "ckpt"), tmp_path / "files"
    append(log, "p0", [("a", 1, 100), ("a", 2, 2000)])
    p = build("p", log, ckpt, sinks=("tumbling",), file_sink=str(out))
    p.execute_local(run_id="r1")
    job = p.plan()
    # interrupted after the move: the run's directory is checkpoint 2, the pointer still says 1
    run = begin_stream_run(job, ckpt, "r2")
    from airflow_flinkchain.runtime.local.runner import LocalChainRun, MemoryExchange
    from airflow_flinkchain.runtime.core.serialize import dumps_plan

    exchange, plan = MemoryExchange(), dumps_plan(job)
    for chain in job.chains:
        LocalChainRun(job, chain.id, "r2", plan, exchange, {}, run).run()
    staged = Path(ckpt) / "_runs" / "r2"
    (staged / "_manifest.json").write_text(json.dumps({"run_id": "r2", "base": 1, "checkpoint": 2, "seq": 2,
                                                        "sinks": {}, "operators": {}, "sources": {}}))
    os.rename(staged, Path(ckpt) / "chk-000002")
    assert latest(Path(ckpt))["checkpoint"] == 1
    manifest = commit_stream_run(job, run)
    assert manifest["checkpoint"] == 2 and latest(Path(ckpt))["run_id"] == "r2"
    # retried once more after the pointer: the same commit, nothing new
    assert commit_stream_run(job, run)["checkpoint"] == 2
    assert sorted(p.name for p in Path(ckpt).iterdir() if p.name.startswith("chk-")) == ["chk-000001", "chk-000002"]
