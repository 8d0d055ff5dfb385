"""Pipelines of the object-store tests, every location a parameter (local or s3://)."""

from __future__ import annotations

import json

from airflow_flinkchain import StreamPipeline
from airflow_flinkchain.io import JsonLinesSink, JsonLinesSource
from airflow_flinkchain.runtime.exchange.layout import Location

ORDERS = [{"customer": f"c{i % 4}", "amount": i} for i in range(40)]


def write_orders(folder: str, rows=ORDERS, files: int = 2) -> None:
    """`rows` as JSON lines split over `files` files of `folder`."""
    for f in range(files):
        part = rows[f::files]
        Location(folder).join(f"orders-{f}.json").write_text("".join(json.dumps(r) + "\n" for r in part))


def totals_pipeline(source: str, sink: str, **settings) -> StreamPipeline:
    """JSON lines -> map -> key_by -> reduce -> JSON lines (two chains, a HASH exchange)."""
    p = StreamPipeline("s3_totals", parallelism=2, runtime_mode="batch", **settings)
    (p.from_source(JsonLinesSource(source), name="orders")
     .map(lambda r: (r["customer"], r["amount"])).name("pair")
     .key_by(lambda t: t[0])
     .reduce(lambda a, b: (a[0], a[1] + b[1])).name("total")
     .map(lambda t: {"customer": t[0], "total": t[1]}).name("row")
     .sink_to(JsonLinesSink(sink), name="out"))
    return p


def read_json_dir(folder: str) -> list:
    loc = Location(folder)
    return sorted((json.loads(line) for p in loc.list_files() for line in Location(
        loc.uri + p[len(loc.path):]).read_text().splitlines() if line), key=lambda r: json.dumps(r, sort_keys=True))


def as_tuple(r: dict) -> tuple:
    return (r["key"], r["value"], r["ts"])


def as_row(r: tuple) -> dict:
    return {"key": r[0], "value": r[1], "ts": r[2]}


def stream_pipeline(source: str, sink: str, ckpt: str, fail=None) -> StreamPipeline:
    """A monitored JSON lines directory -> event time -> tumbling-window sums -> JSON lines
    and a collect sink, stream runs in `ckpt`."""
    from tests.conformance_cases import first_field, sum_values, watermark_strategy, window_assigner

    p = StreamPipeline("s3_stream", runtime_mode="streaming", checkpoint_dir=ckpt)
    s = p.from_source(JsonLinesSource(source, monitor=True), name="events").uid("events").set_parallelism(1)
    s = s.map(as_tuple).name("tuple").set_parallelism(1)
    s = s.assign_timestamps_and_watermarks(watermark_strategy({"bounded": 500})).uid("wm").set_parallelism(1)
    if fail is not None:
        s = s.map(fail).name("fail").set_parallelism(1)
    w = s.key_by(first_field).window(window_assigner(["tumbling", 1000])).reduce(sum_values).uid("win")
    w = w.set_parallelism(2)
    w.map(as_row).name("row").set_parallelism(2).sink_to(JsonLinesSink(sink), name="windows")
    w.collect("windows")
    return p


EVENTS = [(f"k{i % 3}", i, 100 * i + (37 * i) % 400) for i in range(60)]


def write_events(folder: str, k: int, events: list) -> None:
    Location(folder).join(f"events-{k:03d}.json").write_text("".join(json.dumps(as_row(e)) + "\n" for e in events))


def tables_pipeline(source: str, ckpt: str, delta: str, catalog: dict) -> StreamPipeline:
    """The windows of `stream_pipeline` into a Delta table and an Iceberg table."""
    from airflow_flinkchain.io.sinks import DeltaSink, IcebergSink
    from tests.conformance_cases import first_field, sum_values, watermark_strategy, window_assigner

    p = StreamPipeline("s3_tables", runtime_mode="streaming", checkpoint_dir=ckpt)
    s = p.from_source(JsonLinesSource(source, monitor=True), name="events").uid("events").set_parallelism(1)
    s = s.map(as_tuple).name("tuple").set_parallelism(1)
    s = s.assign_timestamps_and_watermarks(watermark_strategy({"bounded": 500})).uid("wm").set_parallelism(1)
    w = s.key_by(first_field).window(window_assigner(["tumbling", 1000])).reduce(sum_values).uid("win")
    rows = w.set_parallelism(2).map(as_row).name("row").set_parallelism(2)
    rows.sink_to(DeltaSink(delta), name="delta")
    rows.sink_to(IcebergSink("shop.windows", catalog=catalog), name="iceberg")
    w.collect("windows")
    return p
