"""The one interface between connector descriptors (`io/`) and the runtime.

A descriptor says *what* to read or write (plain data, importable at DAG parse
time). Its runtime counterpart, registered here by descriptor type, does the
reading and writing, split as Flink splits a connector:

* `SourceReader` (Flink's Source + SourceReader): created on the driver for one
  chain attempt, shipped to the subtasks; `input_dataframe()` may give Spark the
  partitions to read (one per subtask), `read()` yields subtask k's records (as
  `core.splits.SourceSplits` when it reads several splits one after another).
* `SinkConnector` (Flink's Sink: writer + committer): created on the driver for
  one chain attempt; `create_writer()` gives each subtask its `SinkWriter`
  (`runtime.core.interfaces`), `commit()` makes what the subtasks staged visible
  once all of them succeeded, `discard()` drops it when the attempt failed.

A new connector (incremental file source, Kafka, ...) is a descriptor class in
`io/` and a factory registered with `register_source` / `register_sink`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterable, Iterator, Optional

from airflow_flinkchain.runtime.core.interfaces import SinkWriter
from airflow_flinkchain.runtime.exchange.layout import Attempt, ExchangeArea


@dataclass
class ConnectorContext:
    """What the driver knows about one source or sink operator of one chain attempt."""

    name: str  # operator name
    key: str  # operator key
    label: str  # "source 'name'" / "sink 'name'", for errors
    path: Optional[str]  # the descriptor's path with its templates rendered (file connectors)
    area: ExchangeArea
    attempt: Attempt
    parallelism: int = 1  # of the operator
    read_schema: Any = None  # a source's schema read from its files when the run started (inferred_types)


class SourceReader:
    """Reads one source for every subtask of a chain attempt (picklable)."""

    #: read() yields bare values only (no StreamRecord / Watermark): the chain skips their dispatch
    plain_values = False

    def input_dataframe(self, spark: Any, parallelism: int) -> Any:
        """A DataFrame with `parallelism` partitions whose Arrow batches `read()` turns
        into records; None: the subtasks get no Spark input and read by themselves."""
        return None

    def read(self, subtask: int, batches: Iterator[Any]) -> Iterable[Any]:
        """The records of subtask `subtask` (`batches`: its partition of input_dataframe())."""
        raise NotImplementedError

    #: Optional `read_batches(subtask, batches)`: the same records as Arrow batches of dict
    #: records, given to a chain whose source feeds batch operators only (columnar sources),
    #: with a `core.batches.SplitStart` before each split when it reads several.

    def for_parallelism(self, parallelism: int) -> "SourceReader":
        """The reader the chain's `parallelism` subtasks use (default: this one)."""
        return self


class SinkConnector:
    """Writes one sink for every subtask of a chain attempt and commits it (picklable)."""

    kind = "sink"
    #: committed before the attempt's datasets are renamed into place: the commit that can
    #: fail for outside reasons (a database) goes first, so nothing else became visible
    commits_first = False

    def create_writer(self, subtask: int) -> SinkWriter:
        raise NotImplementedError

    def commit(self, run_id: str, records: int) -> dict:
        """Make the staged output visible; the output entry of the metrics document."""
        raise NotImplementedError

    def discard(self) -> None:
        """Drop what a failed attempt staged outside the attempt directory."""


class TypeRegistry:
    """Implementations by descriptor type: `register(type)` is a decorator, `get(descriptor)`
    finds the one of its type or of the nearest base type (a subclass of a descriptor uses its
    connector), or None."""

    def __init__(self) -> None:
        self._by_type: dict[type, Callable] = {}

    def register(self, descriptor_type: type) -> Callable:
        def register(implementation):
            self._by_type[descriptor_type] = implementation
            return implementation
        return register

    def get(self, descriptor: Any) -> Optional[Callable]:
        for cls in type(descriptor).__mro__:
            if cls in self._by_type:
                return self._by_type[cls]
        return None


_SOURCES = TypeRegistry()  # factory(descriptor, ctx) -> SourceReader
_SINKS = TypeRegistry()  # factory(descriptor, ctx) -> SinkConnector


def register_source(descriptor_type: type) -> Callable:
    """Class decorator / function: `factory(descriptor, ctx) -> SourceReader` for a descriptor type."""
    return _SOURCES.register(descriptor_type)


def register_sink(descriptor_type: type) -> Callable:
    """Class decorator / function: `factory(descriptor, ctx) -> SinkConnector` for a descriptor type."""
    return _SINKS.register(descriptor_type)


def _lookup(registry: TypeRegistry, descriptor: Any, what: str, label: str) -> Callable:
    factory = registry.get(descriptor)
    if factory is None:
        raise TypeError(f"{label}: unsupported {what} descriptor {descriptor!r}; register its connector with "
                        f"airflow_flinkchain.runtime.connectors.register_{what}")
    return factory


def source_reader(descriptor: Any, ctx: ConnectorContext) -> SourceReader:
    return _lookup(_SOURCES, descriptor, "source", ctx.label)(descriptor, ctx)


def sink_connector(descriptor: Any, ctx: ConnectorContext) -> SinkConnector:
    return _lookup(_SINKS, descriptor, "sink", ctx.label)(descriptor, ctx)
