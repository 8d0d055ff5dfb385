"""Shared helpers of the `make bench` harness: run statistics, machine facts, timing."""

from __future__ import annotations

import datetime
import os
import platform
import statistics
import sys
import time
from typing import Callable

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def summarize(samples: list) -> dict:
    """Median, min and max of a list of numbers (the samples kept too)."""
    return {"median": statistics.median(samples), "min": min(samples), "max": max(samples),
            "samples": [round(s, 6) for s in samples]}


def throughput(records: int, seconds: dict) -> dict:
    """records/s of a seconds summary: median from the median time, min from the max time."""
    return {"median": records / seconds["median"], "min": records / seconds["max"],
            "max": records / seconds["min"]}


def timed(fn: Callable[[], object]) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def tree_cpu_seconds() -> float:
    """CPU seconds (user + system) used so far by this process and every descendant (the Spark
    JVM and its Python workers; exited ones as their parents' children times), from /proc.
    Unlike wall time, barely moved by other load on the machine."""
    children: dict = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
        except OSError:  # gone meanwhile
            continue
        children.setdefault(int(fields[1]), []).append((int(entry), fields))
    ticks, todo = 0, [os.getpid()]
    while todo:
        for pid, fields in children.get(todo.pop(), ()):
            ticks += sum(int(f) for f in fields[11:15])  # utime, stime, cutime, cstime
            todo.append(pid)
    return ticks / os.sysconf("SC_CLK_TCK") + sum(os.times()[:4])


def timed_cpu(fn: Callable[[], object]) -> tuple[float, float]:
    """(wall seconds, CPU seconds of this process tree) of one call."""
    c, t = tree_cpu_seconds(), time.perf_counter()
    fn()
    return time.perf_counter() - t, tree_cpu_seconds() - c


def proc_bytes(path: str, field: str) -> int:
    """A `Field:  N kB` line of a /proc file (meminfo, self/status) in bytes; 0 if absent."""
    try:
        with open(path) as fh:
            for line in fh:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def memory_bytes() -> int:
    return proc_bytes("/proc/meminfo", "MemTotal")


def machine_info() -> dict:
    """Cores, memory, load average, versions, date: what the numbers were measured on."""
    versions = {"python": sys.version.split()[0]}
    for mod in ("pyspark", "airflow", "pyarrow"):
        try:
            versions[mod] = __import__(mod).__version__
        except Exception:  # noqa: BLE001 - a missing optional module is a fact, not an error
            versions[mod] = None
    from airflow_flinkchain.runtime.core.copying import flat_immutable

    return {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        # object reuse off: is the record-copy check the C one (runtime/core/_flatcheck) or pure Python?
        "c_copy_check": flat_immutable is not None,
        "platform": platform.platform(),
        "machine": platform.machine(),
        "cpu_count": os.cpu_count(),
        "memory_bytes": memory_bytes(),
        "load_average_at_start": list(os.getloadavg()),
        "versions": versions,
    }
