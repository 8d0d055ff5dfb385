"""Functions applied to windows, named as PyFlink's `pyflink.datastream.functions`.

`process`/`apply` return (or yield) the results; `context.output(tag, value)` emits to a side
output. Results carry the window's `max_timestamp()`.
"""

from __future__ import annotations

from typing import Any, Generic, Iterable, Optional, TypeVar

from airflow_flinkchain.functions import Function, OutputTag, ReduceFunction  # noqa: F401  (ReduceFunction re-exported)

# Type parameters, as PyFlink's: `class Count(ProcessWindowFunction[tuple, tuple, str, TimeWindow])`.
IN = TypeVar("IN")
OUT = TypeVar("OUT")
KEY = TypeVar("KEY")
W = TypeVar("W")
W2 = TypeVar("W2")


class AggregateFunction(Function):
    """Incremental aggregation with an accumulator (Flink's AggregateFunction)."""

    def create_accumulator(self) -> Any:
        raise NotImplementedError

    def add(self, value: Any, accumulator: Any) -> Any:
        raise NotImplementedError

    def get_result(self, accumulator: Any) -> Any:
        raise NotImplementedError

    def merge(self, acc_a: Any, acc_b: Any) -> Any:
        raise NotImplementedError


class KeyedStateStore:
    """Keyed state scoped by the runtime (per window or across windows of a key)."""

    def get_state(self, state_descriptor):  # pragma: no cover - interface
        raise NotImplementedError

    def get_list_state(self, state_descriptor):  # pragma: no cover - interface
        raise NotImplementedError

    def get_map_state(self, state_descriptor):  # pragma: no cover - interface
        raise NotImplementedError

    def get_reducing_state(self, state_descriptor):  # pragma: no cover - interface
        raise NotImplementedError

    def get_aggregating_state(self, state_descriptor):  # pragma: no cover - interface
        raise NotImplementedError


class _WindowContext(Generic[W2]):
    def window(self) -> Any:  # pragma: no cover - interface
        raise NotImplementedError

    def current_processing_time(self) -> int:  # pragma: no cover - interface
        raise NotImplementedError

    def current_watermark(self) -> int:  # pragma: no cover - interface
        raise NotImplementedError

    def window_state(self) -> KeyedStateStore:  # pragma: no cover - interface
        raise NotImplementedError

    def global_state(self) -> KeyedStateStore:  # pragma: no cover - interface
        raise NotImplementedError

    def output(self, output_tag: OutputTag, value: Any) -> None:  # pragma: no cover - interface
        raise NotImplementedError


class ProcessWindowFunction(Function, Generic[IN, OUT, KEY, W]):
    """`process(key, context, elements)` per window firing; `clear(context)` when the window is
    purged at its cleanup time (per-window state lives until then)."""

    class Context(_WindowContext[W2]):
        pass

    def process(self, key: Any, context: "ProcessWindowFunction.Context", elements: Iterable[Any]) -> Optional[Iterable[Any]]:
        raise NotImplementedError

    def clear(self, context: "ProcessWindowFunction.Context") -> None:
        pass


class ProcessAllWindowFunction(Function, Generic[IN, OUT, W]):
    """`process(context, elements)` for `window_all`."""

    class Context(_WindowContext[W2]):
        pass

    def process(self, context: "ProcessAllWindowFunction.Context", elements: Iterable[Any]) -> Optional[Iterable[Any]]:
        raise NotImplementedError

    def clear(self, context: "ProcessAllWindowFunction.Context") -> None:
        pass


class WindowFunction(Function, Generic[IN, OUT, KEY, W]):
    def apply(self, key: Any, window: Any, inputs: Iterable[Any]) -> Optional[Iterable[Any]]:
        raise NotImplementedError


class AllWindowFunction(Function, Generic[IN, OUT, W]):
    def apply(self, window: Any, inputs: Iterable[Any]) -> Optional[Iterable[Any]]:
        raise NotImplementedError
