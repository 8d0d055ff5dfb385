"""A Kafka-like partitioned log without a broker: one JSON-lines file per partition in a
directory, offsets are line numbers. An `UnboundedSource` as a user would write one."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass

from airflow_flinkchain.io.sources import UnboundedSource


@dataclass(frozen=True, eq=False)
class PartitionedLog(UnboundedSource):
    directory: str = ""

    def discover(self, positions: dict) -> dict:
        """The end offset of every partition present now."""
        ends = {}
        for name in sorted(os.listdir(self.directory)):
            if name.endswith(".log"):
                with open(os.path.join(self.directory, name)) as f:
                    ends[name[:-4]] = sum(1 for _ in f)
        return ends

    def read_split(self, split_id: str, start: int, end: int):
        with open(os.path.join(self.directory, split_id + ".log")) as f:
            for offset, line in enumerate(f):
                if offset >= end:
                    break
                if offset >= start:
                    yield tuple(json.loads(line))


def append(directory: str, partition: str, records) -> None:
    """Produce `records` to `partition` (created when new)."""
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, partition + ".log"), "a") as f:
        for r in records:
            f.write(json.dumps(list(r)) + "\n")
