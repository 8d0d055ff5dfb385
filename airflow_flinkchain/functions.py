"""User function classes, named as in PyFlink's DataStream API.

Plain callables are accepted wherever a function class is; a class adds
`open(runtime_context)` / `close()` hooks, called once per parallel subtask.

Examples:
    >>> class Double(MapFunction):
    ...     def map(self, value):
    ...         return value * 2
    >>> Double().map(21)
    42
"""

from __future__ import annotations

from typing import Any, Hashable, Iterable, Optional

from airflow_flinkchain.state import ValueState, ValueStateDescriptor  # noqa: F401  (re-exported)
# ErrorPolicy: the values of `on_error`, importable with the function classes.
from airflow_flinkchain.graph.model import DEAD_LETTER_TAG_ID, ErrorPolicy  # noqa: F401


class OutputTag:
    """Names a side output. `output_type` optionally declares its schema (its
    exchange edge is then plain Parquet columns, checked like a stream's); a PyFlink
    TypeInformation (also as PyFlink's `type_info=`) coerces its records as a stream's.

    Examples:
        >>> OutputTag("late") == OutputTag("late")
        True
        >>> OutputTag("late", output_type={"id": "int64", "delay": "int64"}).tag_id
        'late'
    """

    __slots__ = ("tag_id", "output_type")

    def __init__(self, tag_id: str, output_type: Any = None, type_info: Any = None):
        if not isinstance(tag_id, str) or not tag_id:
            raise ValueError(f"OutputTag needs a non-empty string id, got {tag_id!r}")
        if output_type is not None and type_info is not None:
            raise ValueError(f"OutputTag {tag_id!r}: give output_type or PyFlink's type_info, not both")
        self.tag_id = tag_id
        self.output_type = output_type if output_type is not None else type_info

    def __eq__(self, other: object) -> bool:
        return isinstance(other, OutputTag) and other.tag_id == self.tag_id

    def __hash__(self) -> int:
        return hash(("OutputTag", self.tag_id))

    def __repr__(self) -> str:
        return f"OutputTag({self.tag_id!r})"

    def __reduce__(self):
        return (OutputTag, (self.tag_id, self.output_type))


class RuntimeContext:
    """What `open()` receives: which operator and subtask this is, and state.

    Examples:
        >>> class Numbered(MapFunction):
        ...     def open(self, runtime_context):
        ...         self.subtask = runtime_context.get_index_of_this_subtask()
        ...     def map(self, value):
        ...         return (self.subtask, value)
    """

    operator_name: str
    chain_name: str
    run_id: str

    def get_index_of_this_subtask(self) -> int:  # pragma: no cover - interface
        """This parallel subtask's index, from 0."""
        raise NotImplementedError

    def get_number_of_parallel_subtasks(self) -> int:  # pragma: no cover - interface
        """The operator's parallelism."""
        raise NotImplementedError

    # Keyed state (operators after `key_by`): each call returns the state the descriptor
    # declares, read and written for the key of the record (or timer) being processed.
    # Take them in open(); a descriptor with enable_time_to_live(StateTtlConfig) expires
    # entries by processing time, with Flink's update types and visibility.
    def get_state(self, state_descriptor: ValueStateDescriptor) -> ValueState:  # pragma: no cover
        """A ValueState: `value()`, `update(v)`, `clear()`."""
        raise NotImplementedError

    def get_list_state(self, state_descriptor: Any) -> Any:  # pragma: no cover
        """A ListState (ListStateDescriptor): `get()`, `add(v)`, `add_all(vs)`, `update(vs)`, `clear()`."""
        raise NotImplementedError

    def get_map_state(self, state_descriptor: Any) -> Any:  # pragma: no cover
        """A MapState (MapStateDescriptor): `get(k)`, `put(k, v)`, `contains(k)`, `remove(k)`, `items()`, ..."""
        raise NotImplementedError

    def get_reducing_state(self, state_descriptor: Any) -> Any:  # pragma: no cover
        """A ReducingState (ReducingStateDescriptor): `add(v)` reduces into `get()`."""
        raise NotImplementedError

    def get_aggregating_state(self, state_descriptor: Any) -> Any:  # pragma: no cover
        """An AggregatingState (AggregatingStateDescriptor): `add(v)` into the AggregateFunction's
        accumulator, `get()` its result."""
        raise NotImplementedError


class Function:
    """Base of every function class: lifecycle hooks, no-ops by default.

    Examples:
        >>> class Lookup(MapFunction):
        ...     def open(self, runtime_context):
        ...         self.table = {"a": 1}          # once per parallel subtask
        ...     def map(self, value):
        ...         return self.table.get(value)
        ...     def close(self):
        ...         self.table = None
        >>> f = Lookup(); f.open(None); f.map("a")
        1
    """

    def open(self, runtime_context: RuntimeContext) -> None:
        """Called once per parallel subtask before the first record (tail to head)."""

    def close(self) -> None:
        """Called once per parallel subtask after the last record (head to tail); also
        from dispose when the subtask failed after `open()`."""


class MapFunction(Function):
    """`map()`: one record out per record in.

    Examples:
        >>> class Double(MapFunction):
        ...     def map(self, value):
        ...         return value * 2
        >>> Double().map(21)
        42
    """

    def map(self, value: Any) -> Any:
        """The record to emit for `value`."""
        raise NotImplementedError


class FlatMapFunction(Function):
    """`flat_map()`: any number of records per record in.

    Examples:
        >>> class Words(FlatMapFunction):
        ...     def flat_map(self, value):
        ...         yield from value.split()
        >>> list(Words().flat_map("a b"))
        ['a', 'b']
    """

    def flat_map(self, value: Any) -> Optional[Iterable[Any]]:
        """The records to emit for `value`: returned as an iterable, yielded, or None for none."""
        raise NotImplementedError


class FilterFunction(Function):
    """`filter()`: keeps the records for which `filter` is true.

    Examples:
        >>> class Positive(FilterFunction):
        ...     def filter(self, value):
        ...         return value > 0
        >>> Positive().filter(-1)
        False
    """

    def filter(self, value: Any) -> bool:
        """True to keep `value`."""
        raise NotImplementedError


class ReduceFunction(Function):
    """`reduce()` after `key_by`: combines the records of one key.

    Examples:
        >>> class Sum(ReduceFunction):
        ...     def reduce(self, value1, value2):
        ...         return value1 + value2
        >>> Sum().reduce(1, 2)
        3
    """

    def reduce(self, value1: Any, value2: Any) -> Any:
        """`value1` (the result so far) combined with `value2` (the next record of the key)."""
        raise NotImplementedError


class OutputSelector(Function):
    """For `split()`: the output names a record goes to. A `names` attribute declares
    every name `select` can return.

    Examples:
        >>> class BySize(OutputSelector):
        ...     names = ["big", "small"]
        ...     def select(self, value):
        ...         return ["big"] if value > 100 else ["small"]
        >>> BySize().select(500)
        ['big']
    """

    def select(self, value: Any) -> Iterable[str]:
        """The names of the outputs `value` goes to (none, one or several)."""
        raise NotImplementedError


class KeySelector(Function):
    """For `key_by()` and `partition_custom()`: the key of a record. Keys that are
    equal in Python (`1`, `1.0`, `Decimal(1)`) are one key.

    Examples:
        >>> class ByCustomer(KeySelector):
        ...     def get_key(self, value):
        ...         return value["customer"]
        >>> ByCustomer().get_key({"customer": "a"})
        'a'
    """

    def get_key(self, value: Any) -> Hashable:
        """The key of `value`."""
        raise NotImplementedError


class Partitioner(Function):
    """For `partition_custom()`: the channel of a key.

    Examples:
        >>> class Modulo(Partitioner):
        ...     def partition(self, key, num_partitions):
        ...         return key % num_partitions
        >>> Modulo().partition(7, 4)
        3
    """

    def partition(self, key: Any, num_partitions: int) -> int:
        """The downstream subtask, in `range(num_partitions)`, of records with `key`."""
        raise NotImplementedError


class ProcessFunction(Function):
    """`process_element` may return/yield records, `yield tag, value` for a
    side output, or call `ctx.output(tag, value)`.

    `ctx.timestamp()` is the record's event timestamp (or None),
    `ctx.current_watermark()` the operator's current watermark.

    Examples:
        >>> late = OutputTag("late")
        >>> class FlagLate(ProcessFunction):
        ...     output_tags = [late]             # lets plan() refuse unknown tags
        ...     def process_element(self, value, ctx):
        ...         if value["delay"] > 60:
        ...             yield late, value        # or ctx.output(late, value)
        ...         else:
        ...             yield value
        >>> list(FlagLate().process_element({"delay": 90}, None))
        [(OutputTag('late'), {'delay': 90})]
    """

    def process_element(self, value: Any, ctx: "ProcessFunction.Context") -> Optional[Iterable[Any]]:
        """The records to emit for `value` (returned, yielded, or None); side outputs with
        `ctx.output(tag, v)` or `yield tag, v`."""
        raise NotImplementedError

    class Context:
        """What `process_element` receives as `ctx`."""

        def output(self, output_tag: OutputTag, value: Any) -> None:  # pragma: no cover
            """Emit `value` to the side output `output_tag`."""
            raise NotImplementedError

        def timestamp(self) -> Optional[int]:  # pragma: no cover
            """The record's event timestamp in ms, or None."""
            raise NotImplementedError

        def current_watermark(self) -> int:  # pragma: no cover
            """The operator's current event-time watermark in ms."""
            raise NotImplementedError


class KeyedProcessFunction(Function):
    """Like ProcessFunction, after `key_by`: `ctx.get_current_key()`, per-key
    state from `runtime_context.get_state(...)` (and the other kinds) taken in
    `open()`, and timers: `ctx.timer_service().register_event_time_timer(ts)`
    calls `on_timer(ts, ctx)` once the watermark reaches `ts` (one timer per key
    and time: registering it again does nothing); its outputs are stamped `ts`.
    STREAMING mode fires event-time timers as watermarks pass them and the rest
    at the end of input; BATCH mode processes each key's records in timestamp
    order, then fires that key's timers. Processing-time timers fire at the end
    of the input (STREAMING) or of the key (BATCH).

    Examples:
        >>> class CountPerKey(KeyedProcessFunction):
        ...     def open(self, runtime_context):
        ...         self.count = runtime_context.get_state(ValueStateDescriptor("count"))
        ...     def process_element(self, value, ctx):
        ...         n = (self.count.value() or 0) + 1
        ...         self.count.update(n)
        ...         yield ctx.get_current_key(), n
    """

    def process_element(self, value: Any, ctx: "KeyedProcessFunction.Context") -> Optional[Iterable[Any]]:
        """As `ProcessFunction.process_element`, for the current key."""
        raise NotImplementedError

    def on_timer(self, timestamp: int, ctx: "KeyedProcessFunction.OnTimerContext") -> Optional[Iterable[Any]]:
        """A timer registered for `timestamp` fired; emit records as `process_element`."""
        return None

    class Context(ProcessFunction.Context):
        """`ProcessFunction.Context` plus the current key and the timer service."""

        def get_current_key(self) -> Any:  # pragma: no cover
            """The key of the record (or timer) being processed."""
            raise NotImplementedError

        def timer_service(self) -> Any:  # pragma: no cover
            """The TimerService of the current key: `register_event_time_timer(ts)`,
            `delete_event_time_timer(ts)`, `register_processing_time_timer(ts)`,
            `delete_processing_time_timer(ts)`, `current_watermark()`,
            `current_processing_time()` (ms)."""
            raise NotImplementedError

    class OnTimerContext(Context):
        """What `on_timer` receives as `ctx`: `timestamp()` is the timer's time,
        `get_current_key()` the timer's key."""


#: Reserved side output of the dead-letter policy (`on_error="dead_letter"`):
#: records a user function failed on arrive here as dicts
#: {"record", "operator", "error_type", "error"}; sink it like any side output.
DEAD_LETTER_TAG = OutputTag(DEAD_LETTER_TAG_ID)

#: Window functions (window_functions.py) and the functions of two inputs (co_functions.py)
#: import this module; PyFlink offers them here too.
_ELSEWHERE = {
    **dict.fromkeys(("AggregateFunction", "ProcessWindowFunction", "ProcessAllWindowFunction", "WindowFunction",
                     "AllWindowFunction", "KeyedStateStore"), "window_functions"),
    **dict.fromkeys(("CoMapFunction", "CoFlatMapFunction", "CoProcessFunction", "KeyedCoProcessFunction",
                     "BroadcastProcessFunction", "KeyedBroadcastProcessFunction", "JoinFunction", "CoGroupFunction",
                     "ProcessJoinFunction"), "co_functions"),
}


def __getattr__(name: str):
    if name in _ELSEWHERE:
        import importlib

        return getattr(importlib.import_module(f"airflow_flinkchain.{_ELSEWHERE[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list:
    return sorted(set(globals()) | set(_ELSEWHERE))
