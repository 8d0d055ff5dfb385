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
    exchange edge is then plain Parquet columns, checked like a stream's).

    Examples:
        >>> OutputTag("late") == OutputTag("late")
        True
        >>> OutputTag("late", output_type={"id": "int64", "delay": "int64"}).tag_id
        'late'
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


class CoMapFunction(Function):
    """Two maps, one per input of connected streams: `map1(value)` for the records
    of the first stream, `map2(value)` for those of the second.

    Examples:
        >>> class Tag(CoMapFunction):
        ...     def map1(self, value):
        ...         return ("order", value)
        ...     def map2(self, value):
        ...         return ("payment", value)
    """

    def map1(self, value: Any) -> Any:
        """The record out for a record of the first stream."""
        raise NotImplementedError

    def map2(self, value: Any) -> Any:
        """The record out for a record of the second stream."""
        raise NotImplementedError


class CoFlatMapFunction(Function):
    """Two flat_maps, one per input: `flat_map1(value)` / `flat_map2(value)` return
    or yield any number of records.

    Examples:
        >>> class Words(CoFlatMapFunction):
        ...     def flat_map1(self, value):
        ...         yield from value.split()
        ...     def flat_map2(self, value):
        ...         yield value
    """

    def flat_map1(self, value: Any) -> Optional[Iterable[Any]]:
        """The records out (returned or yielded) for a record of the first stream."""
        raise NotImplementedError

    def flat_map2(self, value: Any) -> Optional[Iterable[Any]]:
        """The records out (returned or yielded) for a record of the second stream."""
        raise NotImplementedError


class CoProcessFunction(Function):
    """A process function over two inputs (not keyed): `process_element1(value, ctx)`
    for the first stream, `process_element2(value, ctx)` for the second; `ctx` as
    ProcessFunction's (`timestamp()`, `output(tag, v)`, `timer_service().current_watermark()`;
    timers need keyed streams). The operator's watermark is the minimum of its inputs'.

    Examples:
        >>> class Merge(CoProcessFunction):
        ...     def process_element1(self, value, ctx):
        ...         yield ("left", value, ctx.timestamp())
        ...     def process_element2(self, value, ctx):
        ...         yield ("right", value, ctx.timestamp())
    """

    def process_element1(self, value: Any, ctx: "CoProcessFunction.Context") -> Optional[Iterable[Any]]:
        """A record of the first stream: return or yield records (`(OutputTag, v)` to a side output)."""
        raise NotImplementedError

    def process_element2(self, value: Any, ctx: "CoProcessFunction.Context") -> Optional[Iterable[Any]]:
        """A record of the second stream, as `process_element1`."""
        raise NotImplementedError

    class Context(ProcessFunction.Context):
        """`ProcessFunction.Context` plus `timer_service()` (current watermark and
        processing time; registering a timer needs keyed streams)."""

        def timer_service(self) -> Any:  # pragma: no cover
            raise NotImplementedError


class KeyedCoProcessFunction(Function):
    """A process function over two keyed inputs (`connect(...).key_by(k1, k2)`):
    records of both inputs with the same key share the keyed state and timers;
    `ctx.get_current_key()`, `ctx.timer_service()`, and `on_timer(ts, ctx)` as in
    KeyedProcessFunction. BATCH mode processes each key's records of both inputs
    together, in timestamp order, then fires the key's timers.

    Examples:
        >>> class LastPrice(KeyedCoProcessFunction):
        ...     def open(self, runtime_context):
        ...         self.price = runtime_context.get_state(ValueStateDescriptor("price"))
        ...     def process_element1(self, order, ctx):
        ...         yield order, self.price.value()
        ...     def process_element2(self, price, ctx):
        ...         self.price.update(price)
    """

    def process_element1(self, value: Any, ctx: "KeyedCoProcessFunction.Context") -> Optional[Iterable[Any]]:
        """A record of the first stream, its key the current key."""
        raise NotImplementedError

    def process_element2(self, value: Any, ctx: "KeyedCoProcessFunction.Context") -> Optional[Iterable[Any]]:
        """A record of the second stream, its key the current key."""
        raise NotImplementedError

    def on_timer(self, timestamp: int, ctx: "KeyedCoProcessFunction.OnTimerContext") -> Optional[Iterable[Any]]:
        """A timer of the current key fired; emit records as `process_element1`."""
        return None

    class Context(KeyedProcessFunction.Context):
        """As KeyedProcessFunction's."""

    class OnTimerContext(KeyedProcessFunction.OnTimerContext):
        """As KeyedProcessFunction's."""


class BroadcastProcessFunction(Function):
    """The function of `stream.connect(rules.broadcast(descriptor)).process(...)`:
    `process_broadcast_element(value, ctx)` sees every broadcast record (in every
    parallel instance) and may write `ctx.get_broadcast_state(descriptor)`;
    `process_element(value, ctx)` sees the other stream's records and may only read it.
    The broadcast input is read in full before the other input.

    Examples:
        >>> from airflow_flinkchain.state import MapStateDescriptor
        >>> RULES = MapStateDescriptor("rules", None, None)
        >>> class Threshold(BroadcastProcessFunction):
        ...     def process_element(self, value, ctx):
        ...         limit = ctx.get_broadcast_state(RULES).get("limit")
        ...         if limit is None or value <= limit:
        ...             yield value
        ...     def process_broadcast_element(self, value, ctx):
        ...         ctx.get_broadcast_state(RULES).put("limit", value)
    """

    def process_element(self, value: Any, ctx: "BroadcastProcessFunction.ReadOnlyContext") -> Optional[Iterable[Any]]:
        """A record of the non-broadcast stream; `ctx.get_broadcast_state(d)` is read-only."""
        raise NotImplementedError

    def process_broadcast_element(self, value: Any,
                                  ctx: "BroadcastProcessFunction.Context") -> Optional[Iterable[Any]]:
        """A broadcast record (every parallel instance sees each); `ctx.get_broadcast_state(d)` is writable."""
        raise NotImplementedError

    class ReadOnlyContext(ProcessFunction.Context):
        """`process_element`'s ctx: `get_broadcast_state(descriptor)` is read-only."""

        def get_broadcast_state(self, state_descriptor: Any) -> Any:  # pragma: no cover
            raise NotImplementedError

    class Context(ReadOnlyContext):
        """`process_broadcast_element`'s ctx: `get_broadcast_state(descriptor)` is writable."""


class KeyedBroadcastProcessFunction(Function):
    """As BroadcastProcessFunction, with a keyed non-broadcast stream
    (`keyed.connect(broadcast_stream)`): `process_element` runs in the record's key
    context (keyed state, `ctx.get_current_key()`, `ctx.timer_service()`, `on_timer`);
    `process_broadcast_element` runs outside any key and may write the broadcast state.

    Examples:
        >>> from airflow_flinkchain.state import MapStateDescriptor
        >>> RULES = MapStateDescriptor("rules", None, None)
        >>> class PerKeyLimit(KeyedBroadcastProcessFunction):
        ...     def process_element(self, value, ctx):
        ...         if value[1] <= (ctx.get_broadcast_state(RULES).get(ctx.get_current_key()) or 0):
        ...             yield value
        ...     def process_broadcast_element(self, value, ctx):
        ...         ctx.get_broadcast_state(RULES).put(value[0], value[1])
    """

    def process_element(self, value: Any,
                        ctx: "KeyedBroadcastProcessFunction.ReadOnlyContext") -> Optional[Iterable[Any]]:
        """A record of the keyed stream, its key the current key; broadcast state read-only."""
        raise NotImplementedError

    def process_broadcast_element(self, value: Any,
                                  ctx: "KeyedBroadcastProcessFunction.Context") -> Optional[Iterable[Any]]:
        """A broadcast record, outside any key; broadcast state writable."""
        raise NotImplementedError

    def on_timer(self, timestamp: int,
                 ctx: "KeyedBroadcastProcessFunction.OnTimerContext") -> Optional[Iterable[Any]]:
        """A timer of the current key fired (broadcast state read-only)."""
        return None

    class ReadOnlyContext(KeyedProcessFunction.Context):
        """`process_element`'s ctx: keyed (current key, timers) and the broadcast state read-only."""

        def get_broadcast_state(self, state_descriptor: Any) -> Any:  # pragma: no cover
            raise NotImplementedError

    class Context(ProcessFunction.Context):
        """`process_broadcast_element`'s ctx: the broadcast state writable; no current key;
        `apply_to_keyed_state(descriptor, fn)` calls `fn(key, state)` for every key of this
        parallel instance that holds that keyed state."""

        def get_broadcast_state(self, state_descriptor: Any) -> Any:  # pragma: no cover
            raise NotImplementedError

        def apply_to_keyed_state(self, state_descriptor: Any, function: Any) -> None:  # pragma: no cover
            raise NotImplementedError

    class OnTimerContext(ReadOnlyContext):
        """`on_timer`'s ctx."""


class JoinFunction(Function):
    """`join(first, second)`: one result per pair of a window join
    (`a.join(b).where(...).equal_to(...).window(...).apply(...)`), `first` from `a`,
    `second` from `b`. A plain callable(first, second) works as well.

    Examples:
        >>> class Pair(JoinFunction):
        ...     def join(self, first, second):
        ...         return (first[0], first[1], second[1])
        >>> Pair().join(("a", 1), ("a", 2))
        ('a', 1, 2)
    """

    def join(self, first: Any, second: Any) -> Any:
        """The result for one pair of records with the same key in the same window."""
        raise NotImplementedError


class CoGroupFunction(Function):
    """`co_group(first, second)`: per key and window of a co-group
    (`a.co_group(b).where(...).equal_to(...).window(...).apply(...)`), the records of
    `a` and of `b` (either may be empty, not both); returns or yields the results.
    A plain callable(first, second) works as well.

    Examples:
        >>> class Counts(CoGroupFunction):
        ...     def co_group(self, first, second):
        ...         yield (len(list(first)), len(list(second)))
        >>> list(Counts().co_group([1, 2], []))
        [(2, 0)]
    """

    def co_group(self, first: Iterable[Any], second: Iterable[Any]) -> Optional[Iterable[Any]]:
        """The results for the records of one key and window of both inputs."""
        raise NotImplementedError


class ProcessJoinFunction(Function):
    """`process_element(left, right, ctx)`: one call per pair of an interval join
    (`a.key_by(k).interval_join(b.key_by(k)).between(lower, upper).process(...)`);
    returns or yields the results, stamped with the larger of the two timestamps.
    `ctx.get_left_timestamp()`, `ctx.get_right_timestamp()`, `ctx.get_timestamp()`
    (the result's), `ctx.output(tag, value)` for a side output.

    Examples:
        >>> class Pair(ProcessJoinFunction):
        ...     def process_element(self, left, right, ctx):
        ...         yield (left, right)
        >>> list(Pair().process_element("click", "view", None))
        [('click', 'view')]
    """

    def process_element(self, left: Any, right: Any, ctx: "ProcessJoinFunction.Context") -> Optional[Iterable[Any]]:
        """The results for one joined pair (`left` from the first input, `right` from the second)."""
        raise NotImplementedError

    class Context:
        """What `process_element` receives as `ctx`."""

        def get_left_timestamp(self) -> int:  # pragma: no cover
            """The timestamp of the left record, in ms."""
            raise NotImplementedError

        def get_right_timestamp(self) -> int:  # pragma: no cover
            """The timestamp of the right record, in ms."""
            raise NotImplementedError

        def get_timestamp(self) -> int:  # pragma: no cover
            """The timestamp of the joined result: the larger of the two."""
            raise NotImplementedError

        def output(self, output_tag: OutputTag, value: Any) -> None:  # pragma: no cover
            """Emit `value` to the side output `output_tag` (stamped as the result)."""
            raise NotImplementedError


#: Reserved side output of the dead-letter policy (`on_error="dead_letter"`):
#: records a user function failed on arrive here as dicts
#: {"record", "operator", "error_type", "error"}; sink it like any side output.
DEAD_LETTER_TAG = OutputTag(DEAD_LETTER_TAG_ID)

#: Window functions live in window_functions.py (which imports this module); PyFlink
#: offers them here too.
_WINDOW_FUNCTIONS = frozenset({"AggregateFunction", "ProcessWindowFunction", "ProcessAllWindowFunction",
                               "WindowFunction", "AllWindowFunction"})


def __getattr__(name: str):
    if name in _WINDOW_FUNCTIONS:
        from airflow_flinkchain import window_functions

        return getattr(window_functions, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
