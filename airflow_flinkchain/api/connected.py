"""ConnectedStreams, BroadcastStream and BroadcastConnectedStream (PyFlink names).

`a.connect(b)` pairs two streams for one two-input operator (Flink's
TwoInputTransformation): its records come from both, input 1 from `a`, input 2
from `b`, each through its own edge. A two-input operator always starts a chain.

Examples:
    >>> from airflow_flinkchain import StreamPipeline
    >>> from airflow_flinkchain.functions import CoMapFunction
    >>> class Tag(CoMapFunction):
    ...     def map1(self, value):
    ...         return ("a", value)
    ...     def map2(self, value):
    ...         return ("b", value)
    >>> p = StreamPipeline("doc")
    >>> a, b = p.from_collection([1]).name("a"), p.from_collection([2]).name("b")
    >>> _ = a.connect(b).map(Tag()).name("tag").collect("out")
    >>> [c.name for c in p.plan().chains]
    ['a', 'b', 'tag -> out']
    >>> sorted(p.execute_local().output("out"))
    [('a', 1), ('b', 2)]
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterable, Optional

from airflow_flinkchain.api.validation import check_on_error, declared_tags, typed_fields
from airflow_flinkchain.functions import OutputTag
from airflow_flinkchain.graph.errors import PlanningError
from airflow_flinkchain.graph.model import OperatorKind, Partitioner, TwoInputSpec
from airflow_flinkchain.graph.transformations import PartitionTransformation, Transformation
from airflow_flinkchain.state import MapStateDescriptor

if TYPE_CHECKING:  # pragma: no cover
    from airflow_flinkchain.api.datastream import DataStream


def check_co_function(fn: Any, methods: tuple[str, ...], what: str) -> Any:
    """A two-input function is an object with every one of `methods` (a class is refused)."""
    if isinstance(fn, type):
        raise PlanningError(f"{what}() got the function class {fn.__name__}, not an instance of it: pass "
                            f"{fn.__name__}()")
    missing = [m for m in methods if not callable(getattr(fn, m, None))]
    if missing:
        raise PlanningError(f"{what}() needs an object with {' and '.join(m + '()' for m in methods)} "
                            f"(one method per input), got {fn!r} without {', '.join(m + '()' for m in missing)}")
    return fn


def check_same_pipeline(first: "DataStream", other: Any, what: str) -> None:
    from airflow_flinkchain.api.datastream import DataStream

    if not isinstance(other, (DataStream, BroadcastStream)) or other._pipeline is not first._pipeline:
        raise PlanningError(f"{what}() needs a stream of the same pipeline {first._pipeline.name!r}, got {other!r}")


def add_two_input(first: "DataStream", second_t: Transformation, kind: OperatorKind, name: str, fn: Any,
                  spec: TwoInputSpec, key_selector: Any = None, output_type: Any = None,
                  on_error: Optional[str] = None, output_tags: Optional[Iterable[OutputTag]] = None
                  ) -> "DataStream":
    """Record one two-input operator reading `first` (input 1) and `second_t` (input 2)."""
    from airflow_flinkchain.api.datastream import DataStream

    t = first._pipeline._add_operator(
        kind, name, (first._t, second_t), function=fn, key_selector=key_selector, two_input=spec,
        **typed_fields(output_type, f"operator {name!r}"),
        on_error=check_on_error(on_error, None), declared_output_tags=declared_tags(fn, output_tags),
    )
    return DataStream(first._pipeline, t)


class ConnectedStreams:
    """Two streams for one two-input operator (`DataStream.connect`). Keyed with
    `key_by(key_selector1, key_selector2)`: records of both inputs with equal keys
    meet in one parallel instance and share its keyed state and timers.

    Examples:
        >>> from airflow_flinkchain import StreamPipeline
        >>> from airflow_flinkchain.functions import KeyedCoProcessFunction
        >>> from airflow_flinkchain.state import ValueStateDescriptor
        >>> class Enrich(KeyedCoProcessFunction):
        ...     def open(self, runtime_context):
        ...         self.name = runtime_context.get_state(ValueStateDescriptor("name"))
        ...     def process_element1(self, customer, ctx):
        ...         self.name.update(customer[1])
        ...     def process_element2(self, order, ctx):
        ...         yield order[1], self.name.value()
        >>> p = StreamPipeline("doc")
        >>> customers = p.from_collection([(1, "ann")]).name("customers")
        >>> orders = p.from_collection([(1, 9.5)]).name("orders")
        >>> keyed = customers.connect(orders).key_by(lambda c: c[0], lambda o: o[0])
        >>> _ = keyed.process(Enrich()).name("enrich").collect("out")
        >>> p.execute_local().output("out")
        [(9.5, 'ann')]
    """

    def __init__(self, first: "DataStream", second: "DataStream"):
        self.first_input = first
        self.second_input = second

    def __repr__(self) -> str:
        return f"<ConnectedStreams of {self.first_input!r} and {self.second_input!r}>"

    @property
    def _keyed(self) -> bool:
        return self.first_input._key_selector() is not None and self.second_input._key_selector() is not None

    def key_by(self, key_selector1: Any, key_selector2: Any) -> "ConnectedStreams":
        """Key both inputs: `key_selector1` for the first stream's records, `key_selector2`
        for the second's (HASH edges); `process` then takes a KeyedCoProcessFunction.

        Examples:
            >>> from airflow_flinkchain import StreamPipeline
            >>> p = StreamPipeline("doc")
            >>> a, b = p.from_collection([("k", 1)]), p.from_collection([("k", 2)])
            >>> keyed = a.connect(b).key_by(lambda r: r[0], lambda r: r[0])
        """
        return ConnectedStreams(self.first_input.key_by(key_selector1), self.second_input.key_by(key_selector2))

    def _key(self) -> Any:
        """Input 1's key selector on keyed connected streams (their functions then run in the
        record's key context, with keyed state), else None."""
        return self.first_input._key_selector() if self._keyed else None

    def _spec(self) -> TwoInputSpec:
        return TwoInputSpec(key_selector2=self.second_input._key_selector() if self._keyed else None)

    def map(self, func: Any, output_type: Any = None, on_error: Optional[str] = None) -> "DataStream":
        """A CoMapFunction: `map1(value)` per record of the first stream, `map2(value)`
        per record of the second; one record out per record in. On keyed connected
        streams the functions may use keyed state (shared by both inputs).

        Examples:
            >>> from airflow_flinkchain import StreamPipeline
            >>> from airflow_flinkchain.functions import CoMapFunction
            >>> class Both(CoMapFunction):
            ...     def map1(self, value):
            ...         return value
            ...     def map2(self, value):
            ...         return -value
            >>> p = StreamPipeline("doc")
            >>> _ = p.from_collection([1]).connect(p.from_collection([2])).map(Both()).collect("out")
        """
        check_co_function(func, ("map1", "map2"), "map")
        return add_two_input(self.first_input, self.second_input._t, OperatorKind.CO_MAP, "Co-Map", func,
                             self._spec(), key_selector=self._key(), output_type=output_type, on_error=on_error)

    def flat_map(self, func: Any, output_type: Any = None, on_error: Optional[str] = None) -> "DataStream":
        """A CoFlatMapFunction: `flat_map1(value)` / `flat_map2(value)` return or yield records.

        Examples:
            >>> from airflow_flinkchain import StreamPipeline
            >>> from airflow_flinkchain.functions import CoFlatMapFunction
            >>> class Split(CoFlatMapFunction):
            ...     def flat_map1(self, value):
            ...         yield from value.split()
            ...     def flat_map2(self, value):
            ...         yield value
            >>> p = StreamPipeline("doc")
            >>> _ = p.from_collection(["a b"]).connect(p.from_collection(["c"])).flat_map(Split()).collect("out")
        """
        check_co_function(func, ("flat_map1", "flat_map2"), "flat_map")
        return add_two_input(self.first_input, self.second_input._t, OperatorKind.CO_FLAT_MAP, "Co-Flat Map",
                             func, self._spec(), key_selector=self._key(), output_type=output_type,
                             on_error=on_error)

    def process(self, func: Any, output_type: Any = None, on_error: Optional[str] = None,
                output_tags: Optional[Iterable[OutputTag]] = None) -> "DataStream":
        """A CoProcessFunction, or on keyed connected streams (`key_by(k1, k2)`) a
        KeyedCoProcessFunction (`process_element1` / `process_element2`, `on_timer`).

        Examples:
            >>> from airflow_flinkchain import StreamPipeline
            >>> from airflow_flinkchain.functions import CoProcessFunction
            >>> class Merge(CoProcessFunction):
            ...     def process_element1(self, value, ctx):
            ...         yield value
            ...     def process_element2(self, value, ctx):
            ...         yield value
            >>> p = StreamPipeline("doc")
            >>> _ = p.from_collection([1]).connect(p.from_collection([2])).process(Merge()).collect("out")
        """
        check_co_function(func, ("process_element1", "process_element2"), "process")
        first = self.first_input
        if self._keyed:
            return add_two_input(first, self.second_input._t, OperatorKind.KEYED_CO_PROCESS, "Keyed Co-Process",
                                 func, self._spec(), key_selector=first._key_selector(), output_type=output_type,
                                 on_error=on_error, output_tags=output_tags)
        if first._key_selector() is not None or self.second_input._key_selector() is not None:
            raise PlanningError("process() on connected streams of which only one is keyed: key both with "
                                "connect(...).key_by(key_selector1, key_selector2), or neither")
        return add_two_input(first, self.second_input._t, OperatorKind.CO_PROCESS, "Co-Process", func,
                             self._spec(), output_type=output_type, on_error=on_error, output_tags=output_tags)


class BroadcastStream:
    """A stream broadcast with state descriptors (`DataStream.broadcast(descriptor, ...)`):
    connect another stream to it and process both with a (Keyed)BroadcastProcessFunction.

    Examples:
        >>> from airflow_flinkchain import StreamPipeline
        >>> from airflow_flinkchain.state import MapStateDescriptor
        >>> p = StreamPipeline("doc")
        >>> rules = p.from_collection([("max", 10)]).broadcast(MapStateDescriptor("rules", None, None))
    """

    def __init__(self, pipeline: Any, transformation: PartitionTransformation,
                 descriptors: tuple[MapStateDescriptor, ...]):
        self._pipeline = pipeline
        self._t = transformation
        self.broadcast_state_descriptors = descriptors

    def __repr__(self) -> str:
        names = ", ".join(d.get_name() for d in self.broadcast_state_descriptors)
        return f"<BroadcastStream with state {names} of pipeline {self._pipeline.name!r}>"


def broadcast_stream(stream: "DataStream", descriptors: tuple) -> BroadcastStream:
    """`stream.broadcast(*descriptors)`: a BROADCAST edge plus the broadcast state it feeds."""
    for d in descriptors:
        if not isinstance(d, MapStateDescriptor):
            raise PlanningError(f"broadcast() takes MapStateDescriptors (airflow_flinkchain.state) naming the "
                                f"broadcast state, got {d!r}")
    if stream._key_selector() is not None:
        raise PlanningError("broadcast(descriptor) of a KeyedStream: a broadcast stream is not keyed; "
                            "call broadcast(...) on the stream before key_by()")
    names = [d.get_name() for d in descriptors]
    if len(set(names)) != len(names):
        raise PlanningError(f"broadcast(): two state descriptors share a name ({names}); give each its own name")
    t = stream._pipeline._add_virtual(PartitionTransformation, (stream._t,), partitioner=Partitioner.BROADCAST)
    return BroadcastStream(stream._pipeline, t, tuple(descriptors))


class BroadcastConnectedStream:
    """A stream (input 1) connected to a BroadcastStream (input 2, `stream.connect(bs)`).
    Every parallel instance reads the whole broadcast input first, then its share of
    the other input.

    Examples:
        >>> from airflow_flinkchain import StreamPipeline
        >>> from airflow_flinkchain.functions import BroadcastProcessFunction
        >>> from airflow_flinkchain.state import MapStateDescriptor
        >>> LIMIT = MapStateDescriptor("limit", None, None)
        >>> class Cap(BroadcastProcessFunction):
        ...     def process_element(self, value, ctx):
        ...         yield min(value, ctx.get_broadcast_state(LIMIT).get("max"))
        ...     def process_broadcast_element(self, value, ctx):
        ...         ctx.get_broadcast_state(LIMIT).put("max", value)
        >>> p = StreamPipeline("doc", parallelism=2)
        >>> limits = p.from_collection([5]).broadcast(LIMIT)
        >>> _ = p.from_collection([3, 8]).connect(limits).process(Cap()).name("cap").collect("out")
        >>> sorted(p.execute_local().output("out"))
        [3, 5]
    """

    def __init__(self, non_broadcast: "DataStream", broadcast: BroadcastStream):
        self.non_broadcast_stream = non_broadcast
        self.broadcast_stream = broadcast

    def __repr__(self) -> str:
        return f"<BroadcastConnectedStream of {self.non_broadcast_stream!r} and {self.broadcast_stream!r}>"

    def process(self, func: Any, output_type: Any = None, on_error: Optional[str] = None,
                output_tags: Optional[Iterable[OutputTag]] = None) -> "DataStream":
        """A BroadcastProcessFunction, or a KeyedBroadcastProcessFunction when the
        non-broadcast stream is keyed (`process_element`, `process_broadcast_element`)."""
        check_co_function(func, ("process_element", "process_broadcast_element"), "process")
        first, bs = self.non_broadcast_stream, self.broadcast_stream
        spec = TwoInputSpec(broadcast_state_descriptors=bs.broadcast_state_descriptors)
        key = first._key_selector()
        from airflow_flinkchain.functions import BroadcastProcessFunction, KeyedBroadcastProcessFunction

        if key is not None and isinstance(func, BroadcastProcessFunction):
            raise PlanningError("process(): the non-broadcast stream is keyed, so the function must be a "
                                f"KeyedBroadcastProcessFunction, got a BroadcastProcessFunction {func!r}")
        if key is None and isinstance(func, KeyedBroadcastProcessFunction):
            raise PlanningError("process(): a KeyedBroadcastProcessFunction needs a keyed non-broadcast stream: "
                                "key_by(...) it before connect(broadcast_stream)")
        if key is not None:
            return add_two_input(first, bs._t, OperatorKind.KEYED_BROADCAST_PROCESS, "Keyed Co-Process-Broadcast",
                                 func, spec, key_selector=key, output_type=output_type, on_error=on_error,
                                 output_tags=output_tags)
        return add_two_input(first, bs._t, OperatorKind.BROADCAST_PROCESS, "Co-Process-Broadcast", func, spec,
                             output_type=output_type, on_error=on_error, output_tags=output_tags)


__all__ = ["BroadcastConnectedStream", "BroadcastStream", "ConnectedStreams"]
