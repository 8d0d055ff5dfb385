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


def totals_pipeline(source: str, sink: str) -> StreamPipeline:
    """JSON lines -> map -> key_by -> reduce -> JSON lines (two chains, a HASH exchange)."""
    p = StreamPipeline("s3_totals", parallelism=2, runtime_mode="batch")
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
