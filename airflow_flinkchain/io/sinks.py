"""Sink descriptors: plain data recorded at parse time (no I/O, no Spark here)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, eq=False)
class Sink:
    def describe(self) -> str:
        return type(self).__name__


@dataclass(frozen=True, eq=False)
class CollectSink(Sink):
    """Keeps the records for `execute().output(name)` (tests, notebooks, examples)."""

    name: str

    def describe(self) -> str:
        return f"collect({self.name!r})"
