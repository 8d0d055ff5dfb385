"""Parallel STREAMING over several files or sources gives BATCH's results: records in order
within their file are never late, whatever the parallelism and the number of files a subtask
reads (per-split watermarks, `runtime.core.splits`), in process and on Spark.

Each file holds the same time range in event-time order, so a subtask reading two files one
after the other would make the second one's records late with one watermark per subtask."""

from __future__ import annotations

import random

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest

from airflow_flinkchain import Duration, OutputTag, StreamPipeline, WatermarkStrategy
from airflow_flinkchain.io import CsvSource, ParquetSource
from airflow_flinkchain.functions import KeyedProcessFunction
from airflow_flinkchain.state import MapStateDescriptor
from tests.conformance_cases import (Average, CountPerWindow, WithTimestamp, as_multiset, first_field, sum_values,
                                     window_assigner)

LATE = OutputTag("late")
WINDOWS = {"tumbling": ["tumbling", 500], "sliding": ["sliding", 1000, 500], "session": ["session", 300]}
SINKS = ("tumbling", "sliding", "session", "timers", "late")


def file_rows(f: int, n: int = 120) -> list[dict]:
    """One file: (k, v, ts) rising in event time, with pauses that close sessions."""
    rng = random.Random(f)
    t, rows = 0, []
    for i in range(n):
        t += rng.choice((10, 30, 60, 60, 400))
        rows.append({"k": "abc"[rng.randrange(3)], "v": f * 1000 + i, "ts": t})
    return rows


def write_files(directory, count: int, fmt: str = "parquet") -> list[str]:
    directory.mkdir()
    paths = []
    for f in range(count):
        table = pa.Table.from_pylist(file_rows(f))
        path = directory / f"part-{f}.{fmt}"
        if fmt == "csv":
            pacsv.write_csv(table, path)
        else:
            pq.write_table(table, path, row_group_size=50)
        paths.append(str(path))
    return paths


class BucketSums(KeyedProcessFunction):
    """Per key, the sum of each `size`-ms bucket, emitted by an event-time timer at the bucket's
    end: the same in BATCH and STREAMING unless a record arrives after its bucket's timer fired."""

    def __init__(self, size: int):
        self.size = size

    def open(self, runtime_context):
        self.sums = runtime_context.get_map_state(MapStateDescriptor("sums", None, None))

    def process_element(self, value, ctx):
        end = ctx.timestamp() // self.size * self.size + self.size - 1
        self.sums.put(end, (self.sums.get(end) or 0) + value[1])
        ctx.timer_service().register_event_time_timer(end)

    def on_timer(self, timestamp, ctx):
        total = self.sums.get(timestamp)
        self.sums.remove(timestamp)
        yield (ctx.get_current_key(), timestamp, total)


def event_time(row, _ts):
    return row["ts"]


def has_time(row) -> bool:
    return row["ts"] is not None


def as_tuple(row) -> tuple:
    return (row["k"], row["v"], row["ts"])


def build(mode: str, parallelism: int, sources: list) -> StreamPipeline:
    """`sources`: one source descriptor (a directory of files) or several, unioned."""
    p = StreamPipeline(f"parallel_{mode}", parallelism=parallelism, runtime_mode=mode)
    strategy = WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_millis(100)) \
        .with_timestamp_assigner(event_time)
    # a filter between source and assigner: still chained, the splits' order is kept
    streams = [p.from_source(s, name=f"src{i}").filter(has_time).assign_timestamps_and_watermarks(strategy)
               .map(as_tuple) for i, s in enumerate(sources)]
    events = streams[0].union(*streams[1:]) if len(streams) > 1 else streams[0]
    keyed = events.key_by(first_field)
    windowed = {}
    for name, spec in WINDOWS.items():
        windowed[name] = keyed.window(window_assigner(spec)).side_output_late_data(LATE)
    outs = {"tumbling": windowed["tumbling"].reduce(sum_values),
            "sliding": windowed["sliding"].aggregate(Average()),
            "session": windowed["session"].process(CountPerWindow()),
            "timers": keyed.process(BucketSums(700))}
    for name, out in outs.items():
        out.process(WithTimestamp()).collect(name)
    late = [outs[w].get_side_output(LATE) for w in WINDOWS]
    late[0].union(*late[1:]).process(WithTimestamp()).collect("late")
    return p


def outputs(result) -> dict:
    return {s: as_multiset(result.output(s)) for s in SINKS}


def descriptors(tmp_path, shape: str, count: int) -> list:
    if shape == "files":
        write_files(tmp_path / "in", count)
        return [ParquetSource(str(tmp_path / "in"))]
    if shape == "csv":
        write_files(tmp_path / "in", count, "csv")
        return [CsvSource(str(tmp_path / "in"))]
    return [ParquetSource(path) for path in write_files(tmp_path / "in", count)]  # "union": a source per file


def check(got: dict, want: dict) -> None:
    assert got["late"] == as_multiset([]) == want["late"]
    for sink in SINKS:
        assert got[sink] == want[sink], sink
    assert all(sum(want[s].values()) > 0 for s in SINKS if s != "late")


@pytest.mark.parametrize("shape", ["files", "union"])
@pytest.mark.parametrize("count", [2, 3, 4])
@pytest.mark.parametrize("parallelism", [2, 3])
def test_streaming_in_process_equals_batch(tmp_path, shape, count, parallelism):
    sources = descriptors(tmp_path, shape, count)
    want = outputs(build("batch", parallelism, sources).execute_local())
    check(outputs(build("streaming", parallelism, sources).execute_local()), want)


@pytest.mark.parametrize("shape,count,parallelism", [("files", 3, 2), ("files", 4, 3), ("csv", 3, 2),
                                                     ("union", 2, 3)])
def test_streaming_on_spark_equals_batch(spark, tmp_path, shape, count, parallelism):
    sources = descriptors(tmp_path, shape, count)
    want = outputs(build("batch", parallelism, sources).execute_local())
    check(outputs(build("streaming", parallelism, sources).execute(spark=spark)), want)


def test_one_watermark_per_subtask_would_make_records_late(tmp_path):
    """The case is not trivially met: the same files as one sequence of records (a collection
    read by one subtask) leave records late."""
    rows = [as_tuple(r) for f in range(3) for r in file_rows(f)]
    p = StreamPipeline("sequence", parallelism=2, runtime_mode="streaming")
    strategy = WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_millis(100)) \
        .with_timestamp_assigner(lambda r, _ts: r[2])
    windowed = p.from_collection(rows).assign_timestamps_and_watermarks(strategy).key_by(first_field) \
        .window(window_assigner(WINDOWS["tumbling"])).side_output_late_data(LATE)
    windowed.reduce(sum_values).get_side_output(LATE).collect("late")
    assert len(p.execute_local().output("late")) > 0
