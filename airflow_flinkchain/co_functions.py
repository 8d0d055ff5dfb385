"""Functions of two inputs (connected streams, broadcast state, joins), named as in PyFlink's
`pyflink.datastream.functions` (and offered by `airflow_flinkchain.functions` too)."""

from __future__ import annotations

from typing import Any, Iterable, Optional

from airflow_flinkchain.functions import Function, KeyedProcessFunction, OutputTag, ProcessFunction
from airflow_flinkchain.state import ValueStateDescriptor  # noqa: F401  (the examples use it)


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
