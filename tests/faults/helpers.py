"""Shared helpers of the fault-injection suite: user functions that fail or record
their lifecycle across processes (files, since subtasks run in Spark's Python
workers), and multiset readers of every output kind."""

from __future__ import annotations

import json
import os
import sqlite3
from collections import Counter
from typing import Any, Optional

from airflow_flinkchain.functions import MapFunction


def freeze(value: Any) -> Any:
    if isinstance(value, dict):
        return tuple(sorted((k, freeze(v)) for k, v in value.items()))
    if isinstance(value, (list, tuple)):
        return tuple(freeze(v) for v in value)
    return value


def multiset(records) -> Counter:
    return Counter(freeze(r) for r in records)


class Probe(MapFunction):
    """Identity map that appends "open NAME" / "close NAME" to `{log_dir}/subtask-{k}.log`
    and raises in `fail_in` ("open" | "process" | "close") while the file `trigger`
    exists (process: only on the record whose "n" is `fail_on`)."""

    def __init__(self, name: str, log_dir: str, fail_in: Optional[str] = None, fail_on: int = 7,
                 trigger: Optional[str] = None):
        self.name, self.log_dir, self.fail_in, self.fail_on, self.trigger = name, log_dir, fail_in, fail_on, trigger
        self.k = -1

    def _armed(self, phase: str) -> bool:
        return self.fail_in == phase and (self.trigger is None or os.path.exists(self.trigger))

    def _log(self, event: str) -> None:
        with open(os.path.join(self.log_dir, f"subtask-{self.k}.log"), "a") as f:
            f.write(f"{event} {self.name}\n")

    def open(self, ctx) -> None:
        self.k = ctx.get_index_of_this_subtask()
        self._log("open")
        if self._armed("open"):
            raise RuntimeError(f"{self.name} cannot open")

    def map(self, value):
        if self._armed("process") and value["n"] == self.fail_on:
            raise ValueError(f"{self.name} rejects n={value['n']}")
        return value

    def close(self) -> None:
        self._log("close")
        if self._armed("close"):
            raise RuntimeError(f"{self.name} cannot close")


def events(log_dir: str) -> dict[int, list[str]]:
    out = {}
    for name in sorted(os.listdir(log_dir)):
        if name.startswith("subtask-"):
            out[int(name[len("subtask-"):-len(".log")])] = open(os.path.join(log_dir, name)).read().split("\n")[:-1]
    return out


def parquet_rows(path: str) -> Counter:
    import pyarrow.parquet as pq

    return multiset(pq.read_table(path).to_pylist())


def csv_rows(path: str) -> Counter:
    import csv

    rows = []
    for f in sorted(os.listdir(path)):
        if not f.startswith((".", "_")):
            rows.extend(csv.DictReader(open(os.path.join(path, f))))
    return multiset(rows)


def json_rows(path: str) -> Counter:
    return multiset(json.loads(line) for f in sorted(os.listdir(path)) if not f.startswith((".", "_"))
                    for line in open(os.path.join(path, f)) if line.strip())


def sql_rows(db_file: str, table: str, run_id: Optional[str] = None, run_column: str = "_run_id") -> Counter:
    con = sqlite3.connect(db_file)
    try:
        cur = con.execute(f"select * from {table}")
        names = [d[0] for d in cur.description]
        rows = [dict(zip(names, r)) for r in cur.fetchall()]
    finally:
        con.close()
    if run_id is not None:
        rows = [r for r in rows if r[run_column] == run_id]
    for r in rows:
        r.pop(run_column)
    return multiset(rows)


def table_exists(db_file: str, table: str) -> bool:
    if not os.path.exists(db_file):
        return False
    con = sqlite3.connect(db_file)
    try:
        return con.execute("select 1 from sqlite_master where type='table' and name=?", (table,)).fetchone() is not None
    finally:
        con.close()


def tree(path: str) -> list[str]:
    """Every file and directory below `path` (relative), hidden ones included."""
    out = []
    for root, dirs, files in os.walk(path):
        for name in dirs + files:
            out.append(os.path.relpath(os.path.join(root, name), path))
    return sorted(out)
