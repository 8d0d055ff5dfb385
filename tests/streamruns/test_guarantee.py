"""The stream-run guarantee: N slices over N runs plus a drain run give the outputs of one
STREAMING run over the whole input (multisets of (value, timestamp))."""

from __future__ import annotations

import pytest

from tests.streamruns.cases import build, collected, differences, make_records, reference, slices
from tests.streamruns.partitioned_log import append


def run_sliced(tmp_path, records: list, n: int, parallelism_of=lambda k: 2, drain_parallelism: int = 2) -> list:
    log, ckpt = str(tmp_path / "log"), str(tmp_path / "ckpt")
    results = []
    for k, part in enumerate(slices(records, n)):
        append(log, "p0", part)
        results.append(build("sliced", log, ckpt, parallelism=parallelism_of(k)).execute_local(run_id=f"run-{k}"))
    results.append(build("sliced", log, ckpt, parallelism=drain_parallelism).execute_local(run_id="drain",
                                                                                          drain=True))
    return results


@pytest.mark.parametrize("n", [1, 3, 10])
def test_n_runs_and_drain_equal_one_streaming_run(tmp_path, n):
    records = make_records()
    want = reference(tmp_path, records)
    results = run_sliced(tmp_path, records, n)
    assert differences(collected(results), want) == []
    # not trivially equal: state, timers and windows really span runs
    assert sum(len(results[-1].output(s)) for s in ("tumbling", "session", "bucket", "debounce")) > 0
    assert all(sum(want[s].values()) > 0 for s in want)


def test_parallelism_changed_between_runs(tmp_path):
    records = make_records(seed=11)
    want = reference(tmp_path, records)
    results = run_sliced(tmp_path, records, 4, parallelism_of=lambda k: (1, 3, 2, 4)[k], drain_parallelism=3)
    assert differences(collected(results), want) == []


def test_without_drain_pending_windows_wait(tmp_path):
    """A run that is not drained ends without the MAX watermark: the last windows and timers
    are not fired; the drain fires them."""
    log, ckpt = str(tmp_path / "log"), str(tmp_path / "ckpt")
    append(log, "p0", [("a", 1, 100), ("a", 2, 200)])
    first = build("p", log, ckpt, sinks=("tumbling", "bucket")).execute_local(run_id="r1")
    assert first.output("tumbling") == [] and first.output("bucket") == []
    assert first.stream["operators"]["wm"]["watermark"] == 200 - 500 - 1
    drained = build("p", log, ckpt, sinks=("tumbling", "bucket")).execute_local(run_id="r2", drain=True)
    assert drained.output("tumbling") == [(("a", 3, 200), 999)]
    assert drained.output("bucket") == [(("a", 799, 2), 799)]


def test_watermark_generator_state_carries_over(tmp_path):
    """Stronger than Flink: the generator keeps its maximum timestamp, so a record that is
    late for the last run's watermark is late in the next run too (dropped by the window)."""
    log, ckpt = str(tmp_path / "log"), str(tmp_path / "ckpt")
    append(log, "p0", [("a", 1, 100), ("a", 2, 2000)])  # watermark 1499: window [0, 1000) fires
    first = build("p", log, ckpt, sinks=("tumbling",)).execute_local(run_id="r1")
    assert first.output("tumbling") == [(("a", 1, 100), 999)]
    append(log, "p0", [("a", 3, 300)])  # behind the carried-over watermark: late, dropped
    second = build("p", log, ckpt, sinks=("tumbling",)).execute_local(run_id="r2", drain=True)
    assert second.output("tumbling") == [(("a", 2, 2000), 2999)]
