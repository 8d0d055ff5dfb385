"""The stream-run guarantee: N slices over N runs plus a drain run give the outputs of one
STREAMING run over the whole input (multisets of (value, timestamp))."""

from __future__ import annotations

import pytest

from airflow_flinkchain import StreamPipeline
from airflow_flinkchain.common import Duration, Watermark, WatermarkGenerator, WatermarkStrategy
from tests.conformance_cases import WithTimestamp, as_multiset, event_time_of, first_field, sum_values, window_assigner
from tests.streamruns.cases import SINKS, build, collected, differences, make_records, reference, slices
from tests.streamruns.partitioned_log import PartitionedLog, append


def run_sliced(tmp_path, records: list, n: int, parallelism_of=lambda k: 2, drain_parallelism: int = 2,
               sinks: tuple = SINKS) -> list:
    log, ckpt = str(tmp_path / "log"), str(tmp_path / "ckpt")
    results = []
    for k, part in enumerate(slices(records, n)):
        append(log, "p0", part)
        p = build("sliced", log, ckpt, parallelism=parallelism_of(k), sinks=sinks)
        results.append(p.execute_local(run_id=f"run-{k}"))
    p = build("sliced", log, ckpt, parallelism=drain_parallelism, sinks=sinks)
    results.append(p.execute_local(run_id="drain", drain=True))
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


#: records registering timers behind the watermark (500 ms bound): a's at 50 (bucket timer 799,
#: debounce timer 950, both behind the watermark 999) and b's at 120; in one run they fire at the
#: next watermark that advances, after the next record (which deletes a's debounce timer)
LATE_REGISTRATIONS = [("a", 0, 1000), ("b", 1, 1200), ("a", 2, 1500), ("a", 3, 50), ("b", 4, 120),
                      ("a", 5, 2000), ("b", 6, 2600), ("a", 7, 4000)]
TIMER_SINKS = ("tumbling", "sliding", "session", "bucket", "debounce")


def test_one_record_per_run_fires_timers_as_one_run(tmp_path):
    """Every timer case fed one record per run: a run starts at the watermark the last one
    reached without firing again what the restored watermark already covers (Flink's valve
    forwards only advancing watermarks), so a timer registered behind the watermark fires
    where it fires in one run."""
    want = reference(tmp_path, LATE_REGISTRATIONS, TIMER_SINKS)
    results = run_sliced(tmp_path, LATE_REGISTRATIONS, len(LATE_REGISTRATIONS), sinks=TIMER_SINKS)
    assert differences(collected(results, TIMER_SINKS), want) == []
    assert (("a", 799, 4), 799) in want["bucket"] and (("a", 950, 3), 950) not in want["debounce"]


def test_parallelism_changed_between_runs(tmp_path):
    records = make_records(seed=11)
    want = reference(tmp_path, records)
    results = run_sliced(tmp_path, records, 4, parallelism_of=lambda k: (1, 3, 2, 4)[k], drain_parallelism=3)
    assert differences(collected(results), want) == []


def test_state_backend_switched_between_runs(tmp_path):
    """Heap, then RocksDB, then heap again (with a parallelism change): the snapshot format
    is the same for both backends, so the runs still form one stream."""
    from airflow_flinkchain.state_backend import EmbeddedRocksDBStateBackend, HashMapStateBackend

    records = make_records(seed=5)
    want = reference(tmp_path, records)
    log, ckpt = str(tmp_path / "log"), str(tmp_path / "ckpt")
    backends = [HashMapStateBackend(), EmbeddedRocksDBStateBackend(), EmbeddedRocksDBStateBackend(), HashMapStateBackend()]
    results = []
    for k, part in enumerate(slices(records, 3)):
        append(log, "p0", part)
        p = build("switch", log, ckpt, parallelism=(2, 2, 3)[k]).set_state_backend(backends[k])
        results.append(p.execute_local(run_id=f"run-{k}"))
    p = build("switch", log, ckpt, parallelism=2).set_state_backend(backends[3])
    results.append(p.execute_local(run_id="drain", drain=True))
    assert differences(collected(results), want) == []
    assert sum(len(results[-1].output(s)) for s in ("tumbling", "session", "bucket", "debounce")) > 0


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


def test_watermark_carries_over(tmp_path):
    """The next run starts at the watermark the last one reached: a record behind it is late
    in the next run too (dropped by the window), as in one continuous run."""
    log, ckpt = str(tmp_path / "log"), str(tmp_path / "ckpt")
    append(log, "p0", [("a", 1, 100), ("a", 2, 2000)])  # watermark 1499: window [0, 1000) fires
    first = build("p", log, ckpt, sinks=("tumbling",)).execute_local(run_id="r1")
    assert first.output("tumbling") == [(("a", 1, 100), 999)]
    append(log, "p0", [("a", 3, 300)])  # behind the carried-over watermark: late, dropped
    second = build("p", log, ckpt, sinks=("tumbling",)).execute_local(run_id="r2", drain=True)
    assert second.output("tumbling") == [(("a", 2, 2000), 2999)]


class EveryThirdRecord(WatermarkGenerator):
    """A punctuated generator with state: the watermark (max timestamp - 1) goes out on every
    third record only, so a generator that restarted each run would emit at other points."""

    def __init__(self):
        self.count, self.max_ts = 0, None

    def on_event(self, event, event_timestamp, output):
        self.count += 1
        self.max_ts = event_timestamp if self.max_ts is None else max(self.max_ts, event_timestamp)
        if self.count % 3 == 0:
            output.emit_watermark(Watermark(self.max_ts - 1))

    def on_periodic_emit(self, output):
        pass


def every_third(_context):
    return EveryThirdRecord()


def test_stateful_watermark_generator_resumes_across_runs(tmp_path):
    """Stronger than Flink, whose generators start afresh after a restore: with runs of two
    records each, a restarted count would never reach three and no window would fire
    before the drain."""
    records = [("a", i, 400 * i) for i in range(12)]
    strategy = WatermarkStrategy.for_generator(every_third).with_timestamp_assigner(event_time_of)

    def pipeline(log, ckpt=None):
        p = StreamPipeline("gen", runtime_mode="streaming", checkpoint_dir=ckpt)
        s = p.from_source(PartitionedLog(directory=log), name="log").uid("log")
        s = s.assign_timestamps_and_watermarks(strategy).uid("wm")
        w = s.key_by(first_field).window(window_assigner(["tumbling", 1000])).reduce(sum_values).uid("win")
        w.process(WithTimestamp()).collect("out")
        return p

    whole = str(tmp_path / "whole")
    append(whole, "p0", records)
    want = as_multiset(pipeline(whole).execute_local().output("out"))
    log, ckpt = str(tmp_path / "log"), str(tmp_path / "ckpt")
    outputs = []
    for k in range(6):
        append(log, "p0", records[2 * k:2 * k + 2])
        outputs.append(pipeline(log, ckpt).execute_local(run_id=f"r{k}").output("out"))
    assert sum(map(len, outputs)) > 0  # windows fired before the drain
    outputs.append(pipeline(log, ckpt).execute_local(run_id="drain", drain=True).output("out"))
    assert as_multiset([r for out in outputs for r in out]) == want


def test_downstream_valves_start_where_they_stopped(tmp_path):
    """Watermarks generated at parallelism 2: in the second run only partition p0 (subtask 0)
    gets records; the window downstream still sees subtask 1's watermark from the first run
    (re-emitted at the start), so the window fires in the second run as it would in one run."""
    log, ckpt = str(tmp_path / "log"), str(tmp_path / "ckpt")
    strategy = WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_millis(500)).with_timestamp_assigner(
        event_time_of)

    def run(run_id, **kw):
        p = StreamPipeline("valves", runtime_mode="streaming", checkpoint_dir=ckpt)
        s = p.from_source(PartitionedLog(directory=log), name="log").set_parallelism(2)
        s = s.assign_timestamps_and_watermarks(strategy).uid("wm").set_parallelism(2)
        w = s.key_by(first_field).window(window_assigner(["tumbling", 1000])).reduce(sum_values).uid("win")
        w.process(WithTimestamp()).collect("out")
        return p.execute_local(run_id=run_id, **kw).output("out")

    append(log, "p0", [("a", 1, 100)])
    append(log, "p1", [("b", 2, 5000)])
    assert run("r1") == []  # watermark min(-401, 4499)
    append(log, "p0", [("a", 3, 3000)])
    assert run("r2") == [(("a", 1, 100), 999)]  # min(2499, 4499): [0, 1000) fires
    assert sorted(run("r3", drain=True)) == [(("a", 3, 3000), 3999), (("b", 2, 5000), 5999)]
