"""User function classes, named as in PyFlink's DataStream API.

Plain callables are accepted wherever a function class is; a class adds
`open(runtime_context)` / `close()` hooks, called once per parallel subtask.

>>> class Double(MapFunction):
...     def map(self, value):
...         return value * 2
>>> Double().map(21)
42
"""

from __future__ import annotations

from typing import Any, Hashable, Iterable, Optional


class OutputTag:
    """Names a side output. `output_type` optionally declares its schema.

    >>> OutputTag("late") == OutputTag("late")
    True
    """

    __slots__ = ("tag_id", "output_type")

    def __init__(self, tag_id: str, output_type: Any = None):
        if not isinstance(tag_id, str) or not tag_id:
            raise ValueError(f"OutputTag needs a non-empty string id, got {tag_id!r}")
        self.tag_id = tag_id
        self.output_type = output_type

    def __eq__(self, other: object) -> bool:
        return isinstance(other, OutputTag) and other.tag_id == self.tag_id

    def __hash__(self) -> int:
        return hash(("OutputTag", self.tag_id))

    def __repr__(self) -> str:
        return f"OutputTag({self.tag_id!r})"

    def __reduce__(self):
        return (OutputTag, (self.tag_id, self.output_type))


class ValueStateDescriptor:
    """Declares a per-key value state (`runtime_context.get_state(descriptor)`)."""

    def __init__(self, name: str, value_type: Any = None):
        self.name = name
        self.value_type = value_type


class ValueState:
    """Interface of a per-key value; the runtime supplies the implementation."""

    def value(self) -> Any:  # pragma: no cover - interface
        raise NotImplementedError

    def update(self, value: Any) -> None:  # pragma: no cover - interface
        raise NotImplementedError

    def clear(self) -> None:  # pragma: no cover - interface
        raise NotImplementedError


class RuntimeContext:
    """What `open()` receives: which operator and subtask this is, and state."""

    operator_name: str
    chain_name: str
    run_id: str

    def get_index_of_this_subtask(self) -> int:  # pragma: no cover - interface
        raise NotImplementedError

    def get_number_of_parallel_subtasks(self) -> int:  # pragma: no cover - interface
        raise NotImplementedError

    def get_state(self, descriptor: ValueStateDescriptor) -> ValueState:  # pragma: no cover
        raise NotImplementedError


class Function:
    """Base of every function class: lifecycle hooks, no-ops by default."""

    def open(self, runtime_context: RuntimeContext) -> None:
        pass

    def close(self) -> None:
        pass


class MapFunction(Function):
    def map(self, value: Any) -> Any:
        raise NotImplementedError


class FlatMapFunction(Function):
    def flat_map(self, value: Any) -> Optional[Iterable[Any]]:
        raise NotImplementedError


class FilterFunction(Function):
    def filter(self, value: Any) -> bool:
        raise NotImplementedError


class ReduceFunction(Function):
    def reduce(self, value1: Any, value2: Any) -> Any:
        raise NotImplementedError


class OutputSelector(Function):
    """For `split()`: the output names a record goes to."""

    def select(self, value: Any) -> Iterable[str]:
        raise NotImplementedError


class KeySelector(Function):
    def get_key(self, value: Any) -> Hashable:
        raise NotImplementedError


class Partitioner(Function):
    """For `partition_custom()`: the channel of a key."""

    def partition(self, key: Any, num_partitions: int) -> int:
        raise NotImplementedError


class ProcessFunction(Function):
    """`process_element` may return/yield records, `yield tag, value` for a
    side output, or call `ctx.output(tag, value)`.

    `ctx.timestamp()` is the record's event timestamp (or None),
    `ctx.current_watermark()` the operator's current watermark."""

    def process_element(self, value: Any, ctx: "ProcessFunction.Context") -> Optional[Iterable[Any]]:
        raise NotImplementedError

    class Context:
        def output(self, output_tag: OutputTag, value: Any) -> None:  # pragma: no cover
            raise NotImplementedError

        def timestamp(self) -> Optional[int]:  # pragma: no cover
            raise NotImplementedError

        def current_watermark(self) -> int:  # pragma: no cover
            raise NotImplementedError


class KeyedProcessFunction(Function):
    """Like ProcessFunction, after `key_by`: `ctx.get_current_key()`, per-key
    state from `runtime_context.get_state(...)` taken in `open()`, and event-time
    timers (`ctx.timer_service().register_event_time_timer(ts)` → `on_timer`)."""

    def process_element(self, value: Any, ctx: "KeyedProcessFunction.Context") -> Optional[Iterable[Any]]:
        raise NotImplementedError

    def on_timer(self, timestamp: int, ctx: "KeyedProcessFunction.OnTimerContext") -> Optional[Iterable[Any]]:
        return None

    class Context(ProcessFunction.Context):
        def get_current_key(self) -> Any:  # pragma: no cover
            raise NotImplementedError

        def timer_service(self) -> Any:  # pragma: no cover
            raise NotImplementedError

    class OnTimerContext(Context):
        pass


#: Reserved side output of the dead-letter policy (`on_error="dead_letter"`):
#: records a user function failed on arrive here as dicts
#: {"record", "operator", "error_type", "error"}; sink it like any side output.
DEAD_LETTER_TAG = OutputTag("dead_letter")
