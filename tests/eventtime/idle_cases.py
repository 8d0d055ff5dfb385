"""Pipelines and inputs of the idle-subtask tests: one file (or a few) read at parallelism 1, 2
and 3; downstream of a keyed exchange, the watermark each record sees
(`ctx.timer_service().current_watermark()`) and event-time session windows."""

from __future__ import annotations

import json
import random
from collections import Counter
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from airflow_flinkchain import OutputTag, StreamPipeline
from airflow_flinkchain.common import Duration, WatermarkStrategy
from airflow_flinkchain.functions import KeyedProcessFunction, ProcessWindowFunction
from airflow_flinkchain.io.sources import FileSource, TextLineFileSource
from airflow_flinkchain.window import EventTimeSessionWindows
from tests.streamruns.partitioned_log import PartitionedLog, append

LATE = OutputTag("late")


def make_rows(n: int, seed: int, first_id: int = 0, start: int = 0) -> list[dict]:
    """{"i", "k", "t"}: event time mostly rising from `start`, up to 300 ms out of order, so that
    with a 100 ms bound some records are late and sessions (gap 120 ms) split where the watermark is."""
    rng = random.Random(seed)
    t, rows = start, []
    for i in range(n):
        t += rng.choice((0, 40, 90, 150))
        rows.append({"i": first_id + i, "k": rng.choice("abc"), "t": max(start, t - rng.randint(0, 300))})
    return rows


def write(path, rows: list[dict], fmt: str) -> None:
    """`rows` into the file `path` as `fmt`; "log": appended to partition "p0" of the
    `PartitionedLog` in the directory `path.parent`."""
    if fmt == "log":
        append(str(path.parent), "p0", [(r["i"], r["k"], r["t"]) for r in rows])
    elif fmt == "parquet":
        pq.write_table(pa.Table.from_pylist(rows), str(path))
    elif fmt == "json":
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    else:  # text lines: "i,k,t"
        path.write_text("".join(f"{r['i']},{r['k']},{r['t']}\n" for r in rows))


def event_time(row: Any, _previous: Any) -> int:
    return row["t"]


def from_log(record: tuple) -> dict:
    i, k, t = record
    return {"i": i, "k": k, "t": t}


def parse_line(line: str) -> dict:
    i, k, t = line.split(",")
    return {"i": int(i), "k": k, "t": int(t)}


class SeenWatermark(KeyedProcessFunction):
    """`(i, watermark)`: the watermark in force when record i is processed."""

    def process_element(self, value, ctx):
        yield value["i"], ctx.timer_service().current_watermark()


class Session(ProcessWindowFunction):
    def process(self, key, context, elements):
        ids = sorted(r["i"] for r in elements)
        return [(key, context.window().start, context.window().end, tuple(ids))]


def add_branch(p: StreamPipeline, path: str, fmt: str, parallelism: int, name: str, monitor: bool = False) -> None:
    """Source (at `parallelism`) -> timestamps -> keyed: `{name}.marks`, `{name}.sessions`,
    `{name}.late`."""
    descriptor = {"text": lambda: TextLineFileSource(path), "log": lambda: PartitionedLog(directory=path)}.get(
        fmt, lambda: FileSource(path, fmt, monitor=monitor))()
    source = p.from_source(descriptor, name=f"{name}.src").uid(f"{name}.src").set_parallelism(parallelism)
    if fmt in ("text", "log"):
        source = source.map(parse_line if fmt == "text" else from_log).set_parallelism(parallelism)
    timed = source.assign_timestamps_and_watermarks(
        WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_millis(100)).with_timestamp_assigner(event_time)
    ).uid(f"{name}.ts").set_parallelism(parallelism)
    keyed = timed.key_by(lambda r: r["k"])
    keyed.process(SeenWatermark()).uid(f"{name}.wm").set_parallelism(parallelism).collect(f"{name}.marks")
    sessions = (keyed.window(EventTimeSessionWindows.with_gap(Duration.of_millis(120)))
                .side_output_late_data(LATE).process(Session()).uid(f"{name}.session").set_parallelism(parallelism))
    sessions.collect(f"{name}.sessions")
    sessions.get_side_output(LATE).map(lambda r: r["i"]).collect(f"{name}.late")


def outputs(result: Any, name: str) -> tuple[dict, Counter, list]:
    """({i: watermark}, sessions as a multiset, sorted late ids) of one branch."""
    marks = dict(result.output(f"{name}.marks"))
    return marks, Counter(result.output(f"{name}.sessions")), sorted(result.output(f"{name}.late"))


def watermark_differences(marks: dict, reference: dict, first: int) -> list:
    """Records (but the stream's first, `first`) whose watermark differs from the reference's."""
    assert marks.keys() == reference.keys()
    return [(i, reference[i], marks[i]) for i in sorted(reference) if i != first and marks[i] != reference[i]]


def stream_runs(directory, checkpoint_dir: str, fmt: str, parallelism: int, execute, files: int = 3) -> tuple:
    """Stream runs over a monitored directory (or a `PartitionedLog` with one partition: fmt
    "log"), each after one more file (more records) arrived; the last run drains: the branch's
    `outputs` over all runs."""
    marks: dict = {}
    sessions: Counter = Counter()
    late: list = []
    directory.mkdir()
    for k in range(files):
        write(directory / f"part-{k}.{fmt}", make_rows(150, seed=k, first_id=1000 * k, start=20_000 * k), fmt)
        p = StreamPipeline("idle_stream", parallelism=parallelism, runtime_mode="streaming",
                           checkpoint_dir=checkpoint_dir)
        add_branch(p, str(directory), fmt, parallelism, "b", monitor=True)
        m, s, l = outputs(execute(p, f"r{k}", k == files - 1), "b")
        marks.update(m)
        sessions += s
        late += l
    return marks, sessions, sorted(late)
