"""DeltaSource against real Delta tables (delta-rs): N stream runs with versions appended
between them plus a drain equal one STREAMING run over the whole table, also when each run's
first attempt is SIGKILLed at a random record and retried."""

from __future__ import annotations

import random
import subprocess
import sys
from pathlib import Path

import deltalake
import pyarrow as pa

from airflow_flinkchain.io.sources import DeltaSource
from tests.conformance_cases import as_multiset
from tests.streamruns.cases import SINKS, FailOn, build, collected, differences, make_records, slices

REPO = Path(__file__).resolve().parents[2]


def as_tuple(row: dict) -> tuple:
    return (row["key"], row["value"], row["ts"])


def append_version(path: str, records: list) -> None:
    rows = [{"key": k, "value": v, "ts": ts} for k, v, ts in records]
    deltalake.write_deltalake(path, pa.Table.from_pylist(rows), mode="append")


def reference(path: str) -> dict:
    """One STREAMING run, without a checkpoint_dir, over every version of the table."""
    result = build("whole", None, source=DeltaSource(path), as_record=as_tuple).execute_local()
    return {s: as_multiset(result.output(s)) for s in SINKS}


def test_n_runs_with_versions_appended_between_and_a_drain_equal_one_streaming_run(tmp_path):
    path, ckpt = str(tmp_path / "bronze"), str(tmp_path / "ckpt")
    results = []
    for k, part in enumerate(slices(make_records(seed=23), 4)):
        append_version(path, part)
        results.append(build("p", None, ckpt, source=DeltaSource(path), as_record=as_tuple).execute_local(
            run_id=f"r{k}", drain=k == 3))
        assert results[-1].stream["sources"]["log"] == {"splits": {"versions": k + 1}}
    assert differences(collected(results), reference(path)) == []


KILL_SCRIPT = """
import sys
sys.path.insert(0, {repo!r})
from airflow_flinkchain.io.sources import DeltaSource
from tests.connectors.test_delta_source import as_tuple
from tests.streamruns.cases import FailOn, build
build("p", None, {ckpt!r}, fail=FailOn({marker!r}, {value!r}, kill=True), source=DeltaSource({path!r}),
      as_record=as_tuple).execute_local(run_id={run_id!r}, drain={drain!r})
"""


def test_runs_killed_at_random_points_and_retried_lose_and_duplicate_nothing(tmp_path):
    """Each run's first attempt is SIGKILLed (a process of its own) on a record chosen at
    random; the retry (same run id, or the drain) reads the same versions from the last
    committed checkpoint."""
    path, ckpt, marker = str(tmp_path / "bronze"), str(tmp_path / "ckpt"), tmp_path / "kill-now"
    rng = random.Random(9)
    fail = FailOn(str(marker), -1, kill=True)
    parts = slices(make_records(seed=29), 3)
    results = []
    for k, part in enumerate(parts):
        drain = k == len(parts) - 1
        append_version(path, part)
        marker.write_text("")
        script = KILL_SCRIPT.format(repo=str(REPO), ckpt=ckpt, marker=str(marker), value=rng.choice(part)[1],
                                    path=path, run_id=f"r{k}", drain=drain)
        proc = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, timeout=300)
        assert proc.returncode == -9, proc.stderr.decode()[-2000:]
        marker.unlink()
        results.append(build("p", None, ckpt, fail=fail, source=DeltaSource(path), as_record=as_tuple)
                       .execute_local(run_id=f"r{k}", drain=drain))
    assert differences(collected(results), reference(path)) == []


def test_a_source_read_failure_does_not_advise_on_error(tmp_path):
    """A source that cannot read its input (here a version that is no append) fails the run
    whatever the pipeline's on_error: the error says so, instead of advising on_error='skip'."""
    from airflow_flinkchain import StreamPipeline
    from airflow_flinkchain.runtime.core.errors import READ_INPUT

    path = str(tmp_path / "t")
    deltalake.write_deltalake(path, pa.table({"id": [1, 2, 3]}))
    deltalake.DeltaTable(path).delete("id = 2")
    p = StreamPipeline("reads", runtime_mode="streaming", on_error="skip", checkpoint_dir=str(tmp_path / "ckpt"))
    p.from_source(DeltaSource(path), name="orders").uid("orders").map(dict).name("row").uid("row").collect("out")
    try:
        p.execute_local()
    except Exception as exc:
        message = str(exc)
    else:
        raise AssertionError("the run did not fail")
    assert "version 1 is not an append" in message and f"during {READ_INPUT}" in message, message
    assert "set on_error" not in message and "on_error, which routes the records a function fails on, " \
                                             "does not apply" in message, message
