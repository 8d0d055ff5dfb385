"""Where the time of a chain attempt goes: named marks in wall-clock time (seconds since
the epoch, so marks taken in the Airflow task, the driver and the Python workers line up).

A chain's metrics document carries them as `timings` (see `runtime.spark.entry`):
`{"driver": {mark: t}, "subtasks": [{mark: t}, ...]}`. The fixed-cost benchmark
(benchmarks/bench_stream_fixed_cost.py) turns them into durations per phase.
"""

from __future__ import annotations

import os
import time
from typing import Optional

_BOOT_TIME: Optional[float] = None


def process_start_time(pid: Optional[int] = None) -> Optional[float]:
    """When process `pid` (default: this one) started, from /proc; None where there is no /proc."""
    global _BOOT_TIME
    try:
        if _BOOT_TIME is None:
            with open("/proc/stat") as f:
                _BOOT_TIME = next(float(line.split()[1]) for line in f if line.startswith("btime "))
        with open(f"/proc/{pid or os.getpid()}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return _BOOT_TIME + int(fields[19]) / os.sysconf("SC_CLK_TCK")  # field 22: starttime in ticks
    except (OSError, ValueError, IndexError, StopIteration):
        return None


class Marks:
    """Named points in time of one process; `mark(name)` keeps the first time of a name."""

    def __init__(self, **known: Optional[float]):
        self.marks: dict[str, float] = {k: round(v, 3) for k, v in known.items() if v is not None}

    def mark(self, name: str) -> float:
        now = time.time()
        self.marks.setdefault(name, round(now, 3))
        return now

    def to_dict(self) -> dict[str, float]:
        return dict(self.marks)


def durations(marks: dict, order: list[tuple[str, str, str]]) -> dict[str, float]:
    """{phase: seconds} for each (phase, from mark, to mark) of `order` whose marks are both present."""
    return {phase: round(marks[b] - marks[a], 3) for phase, a, b in order if a in marks and b in marks}
