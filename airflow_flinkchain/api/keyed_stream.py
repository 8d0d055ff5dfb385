"""KeyedStream (PyFlink's): the stream after `key_by`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Iterable, Optional

from airflow_flinkchain.api.aggregations import AggregationFunction
from airflow_flinkchain.api.datastream import DataStream
from airflow_flinkchain.api.validation import check_function
from airflow_flinkchain.function_types import OutputSelectorLike, ReduceLike
from airflow_flinkchain.graph.errors import PlanningError
from airflow_flinkchain.graph.model import OperatorKind, Partitioner
from airflow_flinkchain.graph.transformations import Transformation

if TYPE_CHECKING:  # pragma: no cover
    from airflow_flinkchain.api.joins import IntervalJoin
    from airflow_flinkchain.api.pipeline import StreamPipeline
    from airflow_flinkchain.api.split_stream import SplitStream
    from airflow_flinkchain.api.windowed import WindowedStream


class KeyedStream(DataStream):
    """After key_by: operators see one key at a time (reduce, keyed process, and
    map/filter/flat_map as keyed operators). Its partitioning cannot be changed.

    Examples:
        >>> from airflow_flinkchain import StreamPipeline
        >>> p = StreamPipeline("doc")
        >>> keyed = p.from_collection([("a", 1), ("b", 2), ("a", 3)]).key_by(lambda r: r[0])
        >>> _ = keyed.reduce(lambda x, y: (x[0], x[1] + y[1])).name("sum").collect("totals")
        >>> [c.name for c in p.plan().chains]
        ['Collection Source', 'sum -> totals']
    """

    def __init__(self, pipeline: "StreamPipeline", transformation: Transformation, key_selector: Callable[[Any], Any]):
        super().__init__(pipeline, transformation)
        self._selector = key_selector

    def _key_selector(self) -> Optional[Callable[[Any], Any]]:
        return self._selector

    def reduce(self, func: ReduceLike, on_error: Optional[str] = None) -> DataStream:
        """Combine the records of each key with `func(acc, value)`. BATCH mode emits one
        final result per key (stamped with the MAX watermark); STREAMING mode emits the
        rolling result after every record, stamped with that record's timestamp.

        Examples:
            >>> from airflow_flinkchain import StreamPipeline
            >>> p = StreamPipeline("doc")
            >>> counts = p.from_collection(["a", "b", "a"]).map(lambda w: (w, 1)).key_by(lambda t: t[0])
            >>> _ = counts.reduce(lambda a, b: (a[0], a[1] + b[1])).collect("counts")
            >>> sorted(p.execute_local().output("counts"))
            [('a', 2), ('b', 1)]
        """
        check_function(func, "reduce", "reduce")
        # PyFlink's reduce keeps the input's type (output_type=the original type info)
        return self._add(OperatorKind.REDUCE, "Keyed Reduce", func, on_error=on_error, output_type=self._type_info())

    def window(self, window_assigner: Any) -> "WindowedStream":
        """Windows per key: each record goes to the windows `window_assigner` gives it
        (`airflow_flinkchain.window`: tumbling, sliding, session, global), and each
        window of each key fires on its own trigger.

        Examples:
            >>> from airflow_flinkchain import StreamPipeline
            >>> from airflow_flinkchain.window import EventTimeSessionWindows
            >>> p = StreamPipeline("doc")
            >>> keyed = p.from_collection([("a", 1)]).key_by(lambda r: r[0])
            >>> _ = keyed.window(EventTimeSessionWindows.with_gap(500)).reduce(lambda a, b: a).collect("out")
        """
        from airflow_flinkchain.api.windowed import WindowedStream

        return WindowedStream(self, window_assigner)

    def count_window(self, size: int, slide: int = 0) -> "WindowedStream":
        """Windows of `size` records per key (sliding by `slide` records when given), fired
        by a CountTrigger (PyFlink's `count_window`).

        Examples:
            >>> from airflow_flinkchain import StreamPipeline
            >>> p = StreamPipeline("doc")
            >>> keyed = p.from_collection([1, 2, 3, 4]).key_by(lambda x: 0)
            >>> _ = keyed.count_window(2).reduce(lambda a, b: a + b).collect("pairs")
            >>> sorted(p.execute_local().output("pairs"))
            [3, 7]
        """
        from airflow_flinkchain.window import CountSlidingWindowAssigner, CountTumblingWindowAssigner

        if slide == 0:
            return self.window(CountTumblingWindowAssigner.of(size))
        return self.window(CountSlidingWindowAssigner.of(size, slide))

    def interval_join(self, other_stream: "KeyedStream") -> "IntervalJoin":
        """Join with the keyed `other_stream` within a time interval (Java Flink's
        `intervalJoin`): continue with `.between(lower, upper).process(ProcessJoinFunction)`;
        a record `a` of this stream meets every record `b` of its key with
        `a.ts + lower <= b.ts <= a.ts + upper` (api/joins.py). Records need timestamps.

        Examples:
            >>> from airflow_flinkchain import StreamPipeline
            >>> p = StreamPipeline("doc")
            >>> a = p.from_collection([("a", 1)]).key_by(lambda r: r[0])
            >>> b = p.from_collection([("a", 2)]).key_by(lambda r: r[0])
            >>> _ = a.interval_join(b).between(-5, 5).process(lambda x, y, ctx: [(x, y)]).collect("out")
        """
        from airflow_flinkchain.api.joins import IntervalJoin, _check_other

        _check_other(self, other_stream, "interval_join")
        if other_stream._key_selector() is None:
            raise PlanningError(f"interval_join() needs a KeyedStream as the other stream, got {other_stream!r}: "
                                "call key_by(key_selector) on it first: a.key_by(k1).interval_join(b.key_by(k2))")
        return IntervalJoin(self, other_stream)

    def _aggregate(self, kind: str, position: Any) -> DataStream:
        return self._add(OperatorKind.REDUCE, "Keyed Aggregation", AggregationFunction(kind, position),
                         output_type=self._type_info())

    def sum(self, position_to_sum: int | str = 0) -> DataStream:
        """Per key, the sum of a field (a position for tuples and lists, a name for dicts);
        the other fields are the key's first record's. Rolling in STREAMING mode, one
        result per key in BATCH mode (as `reduce`).

        Examples:
            >>> from airflow_flinkchain import StreamPipeline
            >>> p = StreamPipeline("doc")
            >>> s = p.from_collection([("a", 1), ("a", 2), ("b", 5)]).key_by(lambda r: r[0])
            >>> _ = s.sum(1).collect("out")
            >>> sorted(p.execute_local().output("out"))
            [('a', 3), ('b', 5)]
        """
        return self._aggregate("sum", position_to_sum)

    def min(self, position_to_min: int | str = 0) -> DataStream:
        """Per key, the minimum of a field; the other fields are the key's first record's
        (use `min_by` for the whole record with the minimum)."""
        return self._aggregate("min", position_to_min)

    def max(self, position_to_max: int | str = 0) -> DataStream:
        """Per key, the maximum of a field; the other fields are the key's first record's."""
        return self._aggregate("max", position_to_max)

    def min_by(self, position_to_min_by: int | str = 0) -> DataStream:
        """Per key, the record with the smallest field (the first of equal ones)."""
        return self._aggregate("min_by", position_to_min_by)

    def max_by(self, position_to_max_by: int | str = 0) -> DataStream:
        """Per key, the record with the largest field (the first of equal ones)."""
        return self._aggregate("max_by", position_to_max_by)

    def _partition(self, kind: Partitioner, **fields: Any) -> DataStream:
        raise PlanningError(
            f"cannot override the partitioning of a KeyedStream ({kind.value.lower()} after key_by()): "
            "records of one key must reach one subtask. Partition before key_by(), or after the keyed operator."
        )

    def split(self, selector: OutputSelectorLike, names: Optional[Iterable[str]] = None) -> "SplitStream":
        """Refused: split the keyed operator's output (e.g. after `reduce()`) instead."""
        raise PlanningError("split() of a KeyedStream: apply split() to an operator, e.g. after reduce()")

