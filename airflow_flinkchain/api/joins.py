"""Joins of two streams (Java Flink's JoinedStreams, CoGroupedStreams, KeyedStream.IntervalJoin,
with PyFlink-style snake_case names).

Window join and co-group, `a.join(b)` / `a.co_group(b)` then `.where(key_selector1)
.equal_to(key_selector2).window(assigner)[.trigger(t)][.allowed_lateness(ms)].apply(fn)`, are
built as Flink builds them: each input is tagged by a map ("Input1Tagger", "Input2Tagger",
with its input's parallelism), the tagged streams are unioned, keyed by the key of their
input and windowed; the window function ("Window Join" / "Window CoGroup") splits each fired
window by input. A join emits `join(first, second)` for every pair of a key's records in one
window (nothing for a key present on one side only); a co-group calls `co_group(first,
second)` for every key and window with records on either side. Results are stamped with the
window's `max_timestamp()`.

The interval join, `a.key_by(k1).interval_join(b.key_by(k2)).between(lower, upper)
.process(ProcessJoinFunction)`, emits every pair of records with one key and
`a.ts + lower <= b.ts <= a.ts + upper`, stamped with the larger timestamp (operator
"Interval Join").

Examples:
    >>> from airflow_flinkchain import StreamPipeline
    >>> from airflow_flinkchain.window import TumblingEventTimeWindows
    >>> p = StreamPipeline("doc")
    >>> orders = p.from_collection([("a", 10), ("b", 20)]).name("orders")
    >>> payments = p.from_collection([("a", "paid")]).name("payments")
    >>> joined = (orders.join(payments).where(lambda o: o[0]).equal_to(lambda p: p[0])
    ...           .window(TumblingEventTimeWindows.of(1000)).apply(lambda o, p: (o[0], o[1], p[1])))
    >>> _ = joined.collect("out")
    >>> [c.name for c in p.plan().chains]
    ['orders -> Input1Tagger', 'payments -> Input2Tagger', 'Window Join -> out']
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional

from airflow_flinkchain.api.connected import add_two_input
from airflow_flinkchain.api.validation import check_function, declared_tags
from airflow_flinkchain.api.windowed import check_window_assigner
from airflow_flinkchain.common import to_millis
from airflow_flinkchain.functions import CoGroupFunction, JoinFunction, OutputTag, ProcessJoinFunction
from airflow_flinkchain.graph.errors import PlanningError
from airflow_flinkchain.api.join_functions import (
    CoGroupWindowFunction,
    Input1Tagger,
    Input2Tagger,
    IntervalJoinSpec,
    JoinCoGroupFunction,
    UnionKeySelector,
)
from airflow_flinkchain.graph.model import OperatorKind, TwoInputSpec
from airflow_flinkchain.graph.transformations import OperatorTransformation, Transformation
from airflow_flinkchain.window import Trigger, WindowAssigner

if TYPE_CHECKING:  # pragma: no cover
    from airflow_flinkchain.api.datastream import DataStream, KeyedStream


def _check_other(this: "DataStream", other: Any, method: str) -> None:
    from airflow_flinkchain.api.datastream import DataStream

    if not isinstance(other, DataStream) or other._pipeline is not this._pipeline:
        raise PlanningError(f"{method}() needs a stream of the same pipeline {this._pipeline.name!r}, got {other!r}")


def _parallelism_of(t: Transformation) -> Optional[int]:
    """The parallelism a stream's records are produced with (None: the pipeline default);
    a virtual transformation (partition, union, side output) has its first input's, as in Flink."""
    while not isinstance(t, OperatorTransformation):
        t = t.inputs[0]
    return 1 if t.non_parallel else t.parallelism


def _tagged(stream: "DataStream", tagger: Any, name: str) -> "DataStream":
    """`stream.map(tagger)` with the stream's own parallelism (Flink's Input1Tagger / Input2Tagger),
    so it chains with the operator before it."""
    from airflow_flinkchain.api.datastream import DataStream

    if stream._key_selector() is not None:  # a KeyedStream: tag its input, the union is keyed anew
        stream = DataStream(stream._pipeline, stream._t.inputs[0])
    tagged = stream.map(tagger).name(name)
    tagged._t.parallelism = _parallelism_of(stream._t)
    return tagged


class _TwoStreams:
    """`a.join(b)` / `a.co_group(b)`: the two inputs, waiting for `where(key_selector1)`.
    Subclasses name their steps' classes (`Where`, `EqualTo`, `WithWindow`)."""

    _method = ""
    _name = ""
    Where: type
    EqualTo: type
    WithWindow: type

    def __init__(self, input1: "DataStream", input2: "DataStream"):
        _check_other(input1, input2, self._method)
        self._input1 = input1
        self._input2 = input2

    def where(self, key_selector1: Any) -> Any:
        """The key of the first input's records (a callable or a KeySelector)."""
        check_function(key_selector1, "get_key", f"{self._method}().where")
        return type(self).Where(self, key_selector1)


class _Where:
    def __init__(self, streams: _TwoStreams, key_selector1: Any):
        self._streams = streams
        self._key_selector1 = key_selector1

    def equal_to(self, key_selector2: Any) -> Any:
        """The key of the second input's records; records of both inputs with equal keys meet."""
        streams = self._streams
        check_function(key_selector2, "get_key", f"{streams._method}().equal_to")
        return type(streams).EqualTo(streams, self._key_selector1, key_selector2)


class _EqualTo:
    def __init__(self, streams: _TwoStreams, key_selector1: Any, key_selector2: Any):
        self._streams = streams
        self._key_selectors = (key_selector1, key_selector2)

    def window(self, assigner: WindowAssigner) -> Any:
        """The windows both inputs' records are assigned to (`airflow_flinkchain.window`)."""
        streams = self._streams
        check_window_assigner(assigner, f"{streams._method}().window")
        return type(streams).WithWindow(streams, self._key_selectors, assigner)


class _WithWindow:
    def __init__(self, streams: _TwoStreams, key_selectors: tuple, assigner: WindowAssigner):
        self._streams = streams
        self._key_selectors = key_selectors
        self._assigner = assigner
        self._trigger: Optional[Trigger] = None
        self._allowed_lateness = 0

    def trigger(self, trigger: Trigger) -> Any:
        """When a window fires (replaces the assigner's default trigger)."""
        if not isinstance(trigger, Trigger):
            raise PlanningError(f"{self._streams._method}().trigger() needs a Trigger (airflow_flinkchain.window), "
                                f"got {trigger!r}")
        self._trigger = trigger
        return self

    def allowed_lateness(self, time_ms: Any) -> Any:
        """Keep each window `time_ms` after its end: a late record fires it again; later ones are dropped."""
        millis = to_millis(time_ms, "allowed_lateness")
        if millis < 0:
            raise PlanningError(f"{self._streams._method}().allowed_lateness() must not be negative, got {millis}")
        self._allowed_lateness = millis
        return self

    def _apply(self, co_group_function: Any, output_type: Any) -> "DataStream":
        s = self._streams
        union = _tagged(s._input1, Input1Tagger(), "Input1Tagger").union(
            _tagged(s._input2, Input2Tagger(), "Input2Tagger"))
        windowed = union.key_by(UnionKeySelector(*self._key_selectors)).window(self._assigner)
        if self._trigger is not None:
            windowed.trigger(self._trigger)
        if self._allowed_lateness:
            windowed.allowed_lateness(self._allowed_lateness)
        return windowed.apply(CoGroupWindowFunction(co_group_function), output_type).name(s._name)


class JoinedStreams(_TwoStreams):
    """`a.join(b)`: an inner join of two streams per key and window (Flink's JoinedStreams):
    `.where(key_selector1).equal_to(key_selector2).window(assigner)`, optionally
    `.trigger(...)` and `.allowed_lateness(...)`, then `.apply(JoinFunction)`.

    Examples:
        >>> from airflow_flinkchain import StreamPipeline
        >>> from airflow_flinkchain.common import WatermarkStrategy
        >>> from airflow_flinkchain.window import TumblingEventTimeWindows
        >>> ts = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(lambda r, _: r[2])
        >>> p = StreamPipeline("doc", runtime_mode="batch")
        >>> a = p.from_collection([("a", 1, 5), ("a", 2, 7), ("b", 3, 8)]).assign_timestamps_and_watermarks(ts)
        >>> b = p.from_collection([("a", "x", 9), ("c", "y", 1)]).assign_timestamps_and_watermarks(ts)
        >>> w = a.join(b).where(lambda r: r[0]).equal_to(lambda r: r[0]).window(TumblingEventTimeWindows.of(10))
        >>> _ = w.apply(lambda l, r: (l[0], l[1], r[1])).collect("out")
        >>> sorted(p.execute_local().output("out"))
        [('a', 1, 'x'), ('a', 2, 'x')]
    """

    _method = "join"
    _name = "Window Join"

    class Where(_Where):
        """`a.join(b).where(k1)`: `equal_to(key_selector2)` next."""

    class EqualTo(_EqualTo):
        """`a.join(b).where(k1).equal_to(k2)`: `window(assigner)` next."""

    class WithWindow(_WithWindow):
        """A windowed join: optional `trigger(...)`, `allowed_lateness(...)`, then `apply(JoinFunction)`."""

        def apply(self, function: Any, output_type: Any = None) -> "DataStream":
            """`function.join(first, second)` (or `function(first, second)`) for every pair of
            records with equal keys in one window; the results are stamped with the window's
            `max_timestamp()`. Name the operator with `.name(...)` on the result.

            Examples:
                >>> from airflow_flinkchain import StreamPipeline
                >>> from airflow_flinkchain.functions import JoinFunction
                >>> from airflow_flinkchain.window import TumblingEventTimeWindows
                >>> class Pair(JoinFunction):
                ...     def join(self, first, second):
                ...         return first + second
                >>> p = StreamPipeline("doc")
                >>> a, b = p.from_collection([1, 2]), p.from_collection([10])
                >>> w = a.join(b).where(lambda x: 0).equal_to(lambda x: 0).window(TumblingEventTimeWindows.of(5))
                >>> _ = w.apply(Pair()).name("pairs").collect("out")
                >>> [c.name for c in p.plan().chains]
                ['Collection Source -> Input1Tagger', 'Collection Source -> Input2Tagger', 'pairs -> out']
            """
            if not isinstance(function, JoinFunction):
                check_function(function, "join", "join().apply")
            return self._apply(JoinCoGroupFunction(function), output_type)


class CoGroupedStreams(_TwoStreams):
    """`a.co_group(b)`: both inputs' records per key and window, handed together to a
    CoGroupFunction (Flink's CoGroupedStreams): `.where(key_selector1).equal_to(key_selector2)
    .window(assigner)`, optionally `.trigger(...)` and `.allowed_lateness(...)`, then
    `.apply(CoGroupFunction)`. Unlike a join, a key present on one side only is seen too.

    Examples:
        >>> from airflow_flinkchain import StreamPipeline
        >>> from airflow_flinkchain.common import WatermarkStrategy
        >>> from airflow_flinkchain.window import TumblingEventTimeWindows
        >>> ts = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(lambda r, _: r[2])
        >>> p = StreamPipeline("doc", runtime_mode="batch")
        >>> a = p.from_collection([("a", 1, 5), ("a", 2, 7), ("b", 3, 8)]).assign_timestamps_and_watermarks(ts)
        >>> b = p.from_collection([("a", "x", 9), ("c", "y", 1)]).assign_timestamps_and_watermarks(ts)
        >>> w = a.co_group(b).where(lambda r: r[0]).equal_to(lambda r: r[0]).window(TumblingEventTimeWindows.of(10))
        >>> _ = w.apply(lambda first, second: [(len(first), len(second))]).collect("out")
        >>> sorted(p.execute_local().output("out"))
        [(0, 1), (1, 0), (2, 1)]
    """

    _method = "co_group"
    _name = "Window CoGroup"

    class Where(_Where):
        """`a.co_group(b).where(k1)`: `equal_to(key_selector2)` next."""

    class EqualTo(_EqualTo):
        """`a.co_group(b).where(k1).equal_to(k2)`: `window(assigner)` next."""

    class WithWindow(_WithWindow):
        """A windowed co-group: optional `trigger(...)`, `allowed_lateness(...)`, then `apply(CoGroupFunction)`."""

        def apply(self, function: Any, output_type: Any = None) -> "DataStream":
            """`function.co_group(first, second)` (or `function(first, second)`) per key and
            fired window, with the lists of the first and the second input's records (one may
            be empty); it returns or yields the results, stamped with the window's
            `max_timestamp()`.

            Examples:
                >>> from airflow_flinkchain import StreamPipeline
                >>> from airflow_flinkchain.functions import CoGroupFunction
                >>> from airflow_flinkchain.window import TumblingEventTimeWindows
                >>> class Totals(CoGroupFunction):
                ...     def co_group(self, first, second):
                ...         yield sum(first) - sum(second)
                >>> p = StreamPipeline("doc")
                >>> a, b = p.from_collection([1, 2]), p.from_collection([10])
                >>> w = a.co_group(b).where(lambda x: 0).equal_to(lambda x: 0).window(TumblingEventTimeWindows.of(5))
                >>> _ = w.apply(Totals()).collect("out")
            """
            if not isinstance(function, CoGroupFunction):
                check_function(function, "co_group", "co_group().apply")
            return self._apply(function, output_type)


class IntervalJoin:
    """`a.key_by(k1).interval_join(b.key_by(k2))` (Flink's KeyedStream.IntervalJoin):
    set the time bounds with `between(lower_bound, upper_bound)`.

    Examples:
        >>> from airflow_flinkchain import StreamPipeline
        >>> p = StreamPipeline("doc")
        >>> a = p.from_collection([("a", 1)]).key_by(lambda r: r[0])
        >>> b = p.from_collection([("a", 2)]).key_by(lambda r: r[0])
        >>> joined = a.interval_join(b).between(-100, 100)
    """

    def __init__(self, left: "KeyedStream", right: "KeyedStream"):
        self._left = left
        self._right = right

    def between(self, lower_bound: Any, upper_bound: Any) -> "IntervalJoined":
        """Join `a` with the `b` records of its key with `a.ts + lower_bound <= b.ts <=
        a.ts + upper_bound` (ms, a Duration or a Time; both bounds inclusive, see
        `lower_bound_exclusive` / `upper_bound_exclusive`); `lower_bound <= upper_bound`.

        Examples:
            >>> from airflow_flinkchain import StreamPipeline
            >>> from airflow_flinkchain.common import Duration
            >>> p = StreamPipeline("doc")
            >>> a = p.from_collection([("a", 1)]).key_by(lambda r: r[0])
            >>> b = p.from_collection([("a", 2)]).key_by(lambda r: r[0])
            >>> joined = a.interval_join(b).between(Duration.of_seconds(-1), Duration.of_millis(500))
        """
        lower = to_millis(lower_bound, "interval_join().between() lower_bound")
        upper = to_millis(upper_bound, "interval_join().between() upper_bound")
        if lower > upper:
            raise PlanningError(f"interval_join().between({lower}, {upper}): the lower bound must not be greater "
                                "than the upper bound (lower_bound <= upper_bound)")
        return IntervalJoined(self._left, self._right, lower, upper)


class IntervalJoined:
    """An interval join with its bounds (Flink's IntervalJoined): optionally
    `lower_bound_exclusive()`, `upper_bound_exclusive()`, `side_output_left_late_data(tag)`,
    `side_output_right_late_data(tag)`; then `process(ProcessJoinFunction)`.

    Both inputs' records are buffered per key (by timestamp) until the watermark passes the
    last time they can still join; a record behind the operator's watermark (the minimum of
    both inputs') is late: dropped, or sent to the late-data side output of its input. In
    BATCH mode nothing is late.

    Examples:
        >>> from airflow_flinkchain import StreamPipeline
        >>> from airflow_flinkchain.common import WatermarkStrategy
        >>> p = StreamPipeline("doc")
        >>> ts = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(lambda r, _: r[1])
        >>> clicks = p.from_collection([("a", 100), ("a", 900)]).assign_timestamps_and_watermarks(ts)
        >>> views = p.from_collection([("a", 50)]).assign_timestamps_and_watermarks(ts)
        >>> joined = clicks.key_by(lambda r: r[0]).interval_join(views.key_by(lambda r: r[0]))
        >>> pairs = joined.between(-100, 0).process(lambda c, v, ctx: [(c[1], v[1], ctx.get_timestamp())])
        >>> _ = pairs.collect("out")
        >>> p.execute_local().output("out")
        [(100, 50, 100)]
    """

    def __init__(self, left: "KeyedStream", right: "KeyedStream", lower_bound: int, upper_bound: int):
        self._left = left
        self._right = right
        self._lower = lower_bound
        self._upper = upper_bound
        self._lower_inclusive = True
        self._upper_inclusive = True
        self._left_late: Optional[OutputTag] = None
        self._right_late: Optional[OutputTag] = None

    def lower_bound_exclusive(self) -> "IntervalJoined":
        """`a.ts + lower_bound < b.ts` instead of `<=`."""
        self._lower_inclusive = False
        return self

    def upper_bound_exclusive(self) -> "IntervalJoined":
        """`b.ts < a.ts + upper_bound` instead of `<=`."""
        self._upper_inclusive = False
        return self

    def side_output_left_late_data(self, output_tag: OutputTag) -> "IntervalJoined":
        """Send late records of the left (first) input to the side output `output_tag`."""
        if not isinstance(output_tag, OutputTag):
            raise PlanningError(f"side_output_left_late_data() needs an OutputTag, got {output_tag!r}")
        self._left_late = output_tag
        return self

    def side_output_right_late_data(self, output_tag: OutputTag) -> "IntervalJoined":
        """Send late records of the right (second) input to the side output `output_tag`."""
        if not isinstance(output_tag, OutputTag):
            raise PlanningError(f"side_output_right_late_data() needs an OutputTag, got {output_tag!r}")
        self._right_late = output_tag
        return self

    def process(self, process_join_function: Any, output_type: Any = None,
                output_tags: Optional[Any] = None) -> "DataStream":
        """`process_element(left, right, ctx)` (or `fn(left, right, ctx)`) for every pair;
        it returns or yields the results, stamped `max(left.ts, right.ts)`. Declare the side
        outputs it emits (`output_tags=[...]` or as a class attribute) to have unknown tags
        refused at plan time. The operator is named "Interval Join".

        Examples:
            >>> from airflow_flinkchain import StreamPipeline
            >>> from airflow_flinkchain.functions import ProcessJoinFunction
            >>> class Pair(ProcessJoinFunction):
            ...     def process_element(self, left, right, ctx):
            ...         yield (left[1], right[1], ctx.get_left_timestamp(), ctx.get_right_timestamp())
            >>> p = StreamPipeline("doc")
            >>> a = p.from_collection([("a", 1)]).key_by(lambda r: r[0])
            >>> b = p.from_collection([("a", 2)]).key_by(lambda r: r[0])
            >>> _ = a.interval_join(b).between(-10, 10).process(Pair()).collect("out")
            >>> [c.name for c in p.plan().chains]
            ['Collection Source', 'Collection Source', 'Interval Join -> out']
        """
        if not isinstance(process_join_function, ProcessJoinFunction):
            check_function(process_join_function, "process_element", "interval_join().process")
        lower = self._lower if self._lower_inclusive else self._lower + 1
        upper = self._upper if self._upper_inclusive else self._upper - 1
        if lower > upper:
            raise PlanningError(f"interval_join().between({self._lower}, {self._upper}) with exclusive bounds "
                                f"joins nothing (lower {lower} > upper {upper}): widen the bounds")
        spec = IntervalJoinSpec(lower, upper, process_join_function, self._left_late, self._right_late)
        declared = declared_tags(process_join_function, output_tags)
        if declared is not None:  # the late-data tags are the operator's own
            declared |= frozenset(t.tag_id for t in (self._left_late, self._right_late) if t is not None)
        left, right = self._left, self._right
        return add_two_input(left, right._t, OperatorKind.INTERVAL_JOIN, "Interval Join", spec,
                             TwoInputSpec(key_selector2=right._key_selector()), key_selector=left._key_selector(),
                             output_type=output_type, output_tags=declared)


__all__ = ["CoGroupedStreams", "IntervalJoin", "IntervalJoined", "JoinedStreams"]
