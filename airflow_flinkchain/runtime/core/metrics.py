"""Per operator and subtask counters (Flink's numRecordsIn/Out, per output tag).

Cheap by construction, see `operators.base`: `records_in` is counted by each
operator (one integer add), main `records_out` of map/filter is derived
(in - filtered - dead_lettered - skipped) rather than counted, and `time_ms`
is extrapolated from a sample of records (every `TIMING_SAMPLE_EVERY`-th
head input goes through a timed copy of the chain, and so does every N-th record
emitted by a window firing or a timer, so the operators after a window are timed too) -
timing every record with perf_counter would cost more than the operators themselves.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Optional

from airflow_flinkchain.metrics_schema import COUNTER_NAMES, GAUGE_NAMES

#: Every N-th input record of a chain's head goes through the timed wiring (time_ms), and
#: every N-th record an operator emits outside its input records (window firings, timers).
TIMING_SAMPLE_EVERY = 1024


def utc_now_iso() -> str:
    """A chain attempt's start/end time: UTC, ISO 8601 with milliseconds (durations
    under a minute need the fraction)."""
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


@dataclass
class OperatorMetrics:
    """One attribute per counter of `metrics_schema.COUNTERS` (plain attributes:
    operators add to them per record), one per gauge of `metrics_schema.GAUGES`
    (set by the chain at the end of input), plus the per-tag side output counts."""

    node_id: int
    key: str
    name: str
    subtask: int
    records_in: int = 0
    records_out: int = 0
    side_outputs: dict = field(default_factory=dict)
    dead_lettered: int = 0
    skipped: int = 0
    filtered: int = 0
    time_ms: float = 0.0
    watermark: Optional[int] = None
    combined: dict = field(default_factory=dict)  # edge id -> [rows in, partial rows out] (core/combiner.py)

    def to_dict(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"node_id": self.node_id, "key": self.key, "name": self.name,
                               "subtask": self.subtask, "side_outputs": dict(self.side_outputs)}
        for name in COUNTER_NAMES:
            doc[name] = getattr(self, name)
        doc["time_ms"] = round(self.time_ms, 6)  # a sink's few fast appends take well under 1 µs
        for name in GAUGE_NAMES:
            doc[name] = getattr(self, name)
        if self.combined:
            doc["combined"] = {edge: list(counts) for edge, counts in self.combined.items()}
        return doc


@dataclass
class SubtaskMetrics:
    chain_id: str
    subtask: int
    operators: list = field(default_factory=list)  # OperatorMetrics, head first

    def operator(self, key: str) -> OperatorMetrics:
        for m in self.operators:
            if m.key == key or m.name == key:
                return m
        raise KeyError(key)

    def to_dict(self) -> list[dict[str, Any]]:
        """JSON-able: one dict per operator, head first (see OperatorMetrics.to_dict)."""
        return [m.to_dict() for m in self.operators]
