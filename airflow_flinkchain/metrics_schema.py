"""The per-operator counters and gauges of a chain run: what the runtime
measures, the run store keeps, the Airflow task summary combines and the Chains
tab shows.

Pure data (imports nothing of the package) so that every layer can read it.
The runtime's `OperatorMetrics` has one attribute per counter, the store one
column (a new counter needs a step in `store.migrations`), the metrics
document one key; `side_outputs` ({tag: records}) is kept apart as it is a
mapping, not a number.

A gauge is a value an operator has reached, not a count: an operator's value is
the lowest over its subtasks that have one (an operator is as far in event time
as its slowest subtask, as in Flink's web UI), None (left out of the task
summary, NULL in the store) when none has.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Optional


@dataclass(frozen=True)
class Counter:
    name: str  # attribute, column and JSON key
    label: str  # short label on the Chains tab
    description: str
    #: A record the operator took in and did not pass on (summed as "dropped").
    dropped: bool = False
    #: Kept with its fraction (a float column; time below a millisecond is not 0).
    fractional: bool = False


COUNTERS: tuple[Counter, ...] = (
    Counter("records_in", "in", "records in"),
    Counter("records_out", "out", "records out (main output)"),
    Counter("dead_lettered", "dead-letter", "records sent to the dead-letter output", dropped=True),
    Counter("skipped", "skipped", "bad records skipped", dropped=True),
    Counter("filtered", "filtered", "records filtered out", dropped=True),
    Counter("time_ms", "time", "operator time in milliseconds (sampled)", fractional=True),
)

#: Counter names in document order.
COUNTER_NAMES: tuple[str, ...] = tuple(c.name for c in COUNTERS)

#: Counters kept with their fraction (time).
FRACTIONAL_COUNTERS: tuple[str, ...] = tuple(c.name for c in COUNTERS if c.fractional)

#: Counters of records taken in and not passed on (filtered, skipped, dead-lettered).
DROPPED_COUNTERS: tuple[str, ...] = tuple(c.name for c in COUNTERS if c.dropped)


def as_json() -> list[dict]:
    """The counters for the UI (embedded in the Chains tab page)."""
    return [{"name": c.name, "label": c.label, "description": c.description, "dropped": c.dropped}
            for c in COUNTERS]


@dataclass(frozen=True)
class Gauge:
    name: str  # attribute, column and JSON key
    label: str  # short label on the Chains tab
    description: str


GAUGES: tuple[Gauge, ...] = (
    Gauge("watermark", "watermark",
          "event-time watermark (ms) the operator had reached before the end of its input "
          "(the MAX watermark that ends a bounded input is not counted); none: no watermark"),
)

#: Gauge names in document order.
GAUGE_NAMES: tuple[str, ...] = tuple(g.name for g in GAUGES)


def lowest(values: Iterable[Optional[int]]) -> Optional[int]:
    """A gauge over subtasks: the lowest value some subtask has, None if none has one."""
    present = [v for v in values if v is not None]
    return min(present) if present else None


def gauges_as_json() -> list[dict]:
    """The gauges for the UI (embedded in the Chains tab page)."""
    return [{"name": g.name, "label": g.label, "description": g.description} for g in GAUGES]
