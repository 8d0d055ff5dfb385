"""Pipelines over timestamped records for the keyed-operator tests, run in process."""

from __future__ import annotations

from typing import Any, Iterable, Optional

from airflow_flinkchain import StreamPipeline
from airflow_flinkchain.runtime.core.elements import StreamRecord, Watermark
from airflow_flinkchain.testing import TestingSource


def elements(records: Iterable[tuple[Any, Optional[int]]], out_of_orderness: Optional[int] = None) -> list:
    """(value, timestamp) pairs as source elements; with `out_of_orderness` D, a watermark
    max_ts - D - 1 follows each record that advances it (Flink's bounded out-of-orderness,
    emitted after every record)."""
    out: list = []
    high = None
    for value, ts in records:
        out.append(value if ts is None else StreamRecord(value, ts))
        if out_of_orderness is not None and ts is not None:
            if high is None or ts - out_of_orderness - 1 > high:
                high = ts - out_of_orderness - 1
                out.append(Watermark(high))
    return out


def pipeline(mode: str, records, out_of_orderness: Optional[int] = None, parallelism: int = 1):
    """(pipeline, source stream) in runtime `mode`."""
    p = StreamPipeline(f"keyed_{mode}", parallelism=parallelism, runtime_mode=mode)
    return p, p.from_source(TestingSource(elements(records, out_of_orderness)), name="src")


def with_timestamps(value, ctx):
    """A ProcessFunction making each record's timestamp visible: (value, timestamp)."""
    yield (value, ctx.timestamp())


def collect_stamped(stream, name: str = "out"):
    return stream.process(with_timestamps).name(f"stamp_{name}").collect(name)
