"""Pipelines and inputs of the stream-run tests: one watermarked stream from a partitioned
log (parallelism 1, so the arrival order is the log's) feeding every kind of stateful
operator, each into its own collect sink as `(value, timestamp)`."""

from __future__ import annotations

import os
import random
import signal
from typing import Any, Optional

from airflow_flinkchain import StreamPipeline
from airflow_flinkchain.functions import KeyedProcessFunction
from airflow_flinkchain.io.sinks import JsonLinesSink
from airflow_flinkchain.state import ValueStateDescriptor
from tests.conformance_cases import (Average, BucketTimers, CountPerWindow, DebounceTimers, WithTimestamp,
                                     as_multiset, first_field, sum_values, watermark_strategy, window_assigner)
from tests.streamruns.partitioned_log import PartitionedLog, append

SINKS = ("tumbling", "sliding", "session", "bucket", "debounce", "rolling", "dedup")


def make_records(n: int = 240, seed: int = 7) -> list[tuple]:
    """(key, value, event time): time mostly rising, up to 600 ms out of order, so that
    some records are late for a 500 ms bound and windows and sessions span slices."""
    rng = random.Random(seed)
    t, out = 0, []
    for i in range(n):
        t += rng.choice((0, 40, 90, 150, 400, 1300))
        out.append((rng.choice("abcde"), i, max(0, t - rng.randint(0, 600))))
    return out


def dedup_key(r: tuple) -> int:
    return r[1] % 41


class FirstPerKey(KeyedProcessFunction):
    """Dedup by ValueState: the first record of each key, once."""

    def open(self, runtime_context):
        self.seen = runtime_context.get_state(ValueStateDescriptor("seen", None))

    def process_element(self, value, ctx):
        if self.seen.value() is None:
            self.seen.update(True)
            return [value]
        return None


def stamp(stream: Any, name: str) -> None:
    stream.process(WithTimestamp()).name(f"{name}.stamp").collect(name)


class FailOn:
    """map: raises (or kills this process with SIGKILL) on the record with value `value`
    while the file `marker` exists: a run that fails mid-way."""

    def __init__(self, marker: str, value: int, kill: bool = False):
        self.marker, self.value, self.kill = marker, value, kill

    def __call__(self, record: tuple) -> tuple:
        if record[1] == self.value and os.path.exists(self.marker):
            if self.kill:
                os.kill(os.getpid(), signal.SIGKILL)
            raise RuntimeError(f"injected failure on {record!r}")
        return record


def build(name: str, log_dir: str, checkpoint_dir: Optional[str] = None, parallelism: int = 2,
          sinks: tuple = SINKS, fail: Optional[FailOn] = None, file_sink: Optional[str] = None,
          source: Any = None, as_record: Any = tuple, **kwargs: Any) -> StreamPipeline:
    """The pipeline over the log at `log_dir`; `parallelism`: of every keyed operator;
    `fail`: a FailOn before the dedup operator (in a chain downstream of the first);
    `file_sink`: the tumbling windows' results also go to JSON files there; `source`: an
    unbounded source read instead of the log, its records made tuples by `as_record`."""
    p = StreamPipeline(name, runtime_mode="streaming", checkpoint_dir=checkpoint_dir, **kwargs)
    if source is None:
        src = p.from_source(PartitionedLog(directory=log_dir), name="log").uid("log").set_parallelism(1)
    else:
        src = p.from_source(source, name="log").uid("log").set_parallelism(1)
        src = src.map(as_record).name("as-tuple").set_parallelism(1)
    s = src.assign_timestamps_and_watermarks(watermark_strategy({"bounded": 500})).uid("wm").set_parallelism(1)
    keyed = s.key_by(first_field)

    def keyed_op(stream: Any, uid: str) -> Any:
        return stream.uid(uid).name(uid).set_parallelism(parallelism)

    ops = {
        "tumbling": lambda: keyed.window(window_assigner(["tumbling", 1000])).reduce(sum_values),
        "sliding": lambda: keyed.window(window_assigner(["sliding", 1500, 500])).aggregate(Average()),
        "session": lambda: keyed.window(window_assigner(["session", 700])).process(CountPerWindow()),
        "bucket": lambda: keyed.process(BucketTimers(800)),
        "debounce": lambda: keyed.process(DebounceTimers(900)),
        "rolling": lambda: keyed.reduce(sum_values),
        "dedup": lambda: (s if fail is None else s.key_by(dedup_key).map(fail).name("fail").set_parallelism(
            parallelism)).key_by(dedup_key).process(FirstPerKey()),
    }
    for sink in sinks:
        out = keyed_op(ops[sink](), sink)
        if sink == "tumbling" and file_sink is not None:
            out.sink_to(JsonLinesSink(file_sink), name="tumbling-files")
        stamp(out, sink)
    return p


def reference(tmp_path, records: list, sinks: tuple = SINKS) -> dict:
    """One STREAMING run over the whole input, without a checkpoint_dir."""
    log = str(tmp_path / "whole")
    append(log, "p0", records)
    result = build("whole", log, sinks=sinks).execute_local()
    return {s: as_multiset(result.output(s)) for s in sinks}


def slices(records: list, n: int) -> list[list]:
    return [records[k * len(records) // n:(k + 1) * len(records) // n] for k in range(n)]


def collected(results: list, sinks: tuple = SINKS) -> dict:
    return {s: as_multiset([r for res in results for r in res.output(s)]) for s in sinks}


def differences(got: dict, want: dict) -> list[str]:
    out = []
    for sink in want:
        if got[sink] != want[sink]:
            out.append(f"{sink}: missing {sorted((want[sink] - got[sink]).elements(), key=repr)[:5]}, "
                       f"unexpected {sorted((got[sink] - want[sink]).elements(), key=repr)[:5]}")
    return out


class KillSparkSubmit:
    """map: SIGKILLs the SparkSubmit JVM above this Python worker on the record with value
    `value` while the file `marker` exists (removed first: the retry goes through)."""

    def __init__(self, marker: str, value: int):
        self.marker, self.value = marker, value

    def __call__(self, record: tuple) -> tuple:
        if record[1] == self.value and os.path.exists(self.marker):
            os.remove(self.marker)
            import psutil

            proc = psutil.Process(os.getpid())
            while proc is not None:
                if any("org.apache.spark.deploy.SparkSubmit" in part for part in proc.cmdline()):
                    os.kill(proc.pid, signal.SIGKILL)
                    return record
                proc = proc.parent()
            raise RuntimeError("no SparkSubmit process above this worker")
        return record
