"""Source descriptors: plain data recorded at parse time (no I/O, no Spark here).

The runtime turns a descriptor into the subtask's input split (see runtime/)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, eq=False)
class Source:
    """Base of every source. `parallel=False` makes the source a non-parallel
    operator (parallelism 1), as Flink's `from_collection` is."""

    parallel = True

    def describe(self) -> str:
        return type(self).__name__


@dataclass(frozen=True, eq=False)
class CollectionSource(Source):
    items: tuple = field(default=())
    parallel = False

    def describe(self) -> str:
        return f"collection of {len(self.items)} records"
