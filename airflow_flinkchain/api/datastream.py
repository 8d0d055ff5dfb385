"""DataStream (PyFlink names); KeyedStream, SplitStream and DataStreamSink live in their
own modules and are offered here too.

Every method records a transformation on the pipeline and returns a new
stream; operator settings (`name`, `uid`, `set_parallelism`, ...) apply to
the operator that produced the stream and return the same stream.

Examples:
    >>> from airflow_flinkchain import StreamPipeline
    >>> p = StreamPipeline("doc")
    >>> s = p.from_collection([1, 2, 3]).map(lambda x: x * 2).name("double")
    >>> _ = s.filter(lambda x: x > 2).collect("out")
    >>> [c.name for c in p.plan().chains]
    ['Collection Source -> double -> Filter -> out']
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Iterable, Optional

from airflow_flinkchain.api.batches import BatchOperators
from airflow_flinkchain.api.data_stream_sink import StreamSinks
from airflow_flinkchain.api.operator_settings import OperatorSettings
from airflow_flinkchain.api.partitioning import StreamPartitioning
from airflow_flinkchain.api.validation import (
    check_dead_letter_policy,
    check_function,
    check_on_error,
    declared_tags,
    tag_id,
    typed_fields,
)
from airflow_flinkchain.function_types import (
    FilterLike,
    FlatMapLike,
    KeySelectorLike,
    MapLike,
    OutputSelectorLike,
    ProcessLike,
)
from airflow_flinkchain.functions import DEAD_LETTER_TAG, OutputTag
from airflow_flinkchain.graph.errors import PlanningError, UnsupportedFeatureError
from airflow_flinkchain.graph.model import OperatorKind, Partitioner
from airflow_flinkchain.graph.transformations import (
    OperatorTransformation,
    PartitionTransformation,
    SelectTransformation,
    SideOutputTransformation,
    Transformation,
    UnionTransformation,
    virtual_label,
)
from airflow_flinkchain.common.typeinfo import TypeInformation

if TYPE_CHECKING:  # pragma: no cover
    from airflow_flinkchain.api.pipeline import StreamPipeline
    from airflow_flinkchain.api.connected import BroadcastConnectedStream, BroadcastStream, ConnectedStreams
    from airflow_flinkchain.api.joins import CoGroupedStreams, JoinedStreams
    from airflow_flinkchain.api.windowed import AllWindowedStream


#: KeyedStream methods a plain DataStream lacks (as in PyFlink): a clear error instead of a bare AttributeError.
_KEYED_ONLY = frozenset({"reduce", "window", "count_window", "interval_join"})


def _identity(value: Any) -> Any:
    return value


#: PyFlink DataStream methods this project does not offer, with what to use instead.
_PYFLINK_UNSUPPORTED = {
    "add_sink": "Use sink_to() with a sink of airflow_flinkchain.io.sinks or "
                "airflow_flinkchain.datastream.connectors.file_system.",
    "execute_and_collect": "Use collect(name) and execute().output(name).",
    "cache": "", "project": "Use map().", "force_non_parallel": "Use set_parallelism(1).",
    "set_buffer_timeout": "", "set_description": "Use name().", "set_uid_hash": "Use uid().",
    "get_execution_environment": "", "get_execution_config": "",
}


class DataStream(OperatorSettings, StreamPartitioning, BatchOperators, StreamSinks):
    """A stream of records; created by `StreamPipeline.from_*` and by operators.

    Each method records an operator and returns the new stream; nothing runs
    until the pipeline runs.

    Examples:
        >>> from airflow_flinkchain import StreamPipeline
        >>> p = StreamPipeline("doc")
        >>> words = p.from_collection(["a b", "c"]).flat_map(str.split).name("split_words")
        >>> _ = words.map(str.upper).name("upper").collect("out")
        >>> [c.name for c in p.plan().chains]
        ['Collection Source -> split_words -> upper -> out']
    """

    def __init__(self, pipeline: "StreamPipeline", transformation: Transformation):
        self._pipeline = pipeline
        self._t = transformation

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {virtual_label(self._t)!r} of pipeline {self._pipeline.name!r}>"

    @property
    def transformation(self) -> Transformation:
        """The recorded transformation behind this stream (Flink's `getTransformation`)."""
        return self._t

    def __getattr__(self, attr: str):
        if attr in _KEYED_ONLY:
            t = self._t
            what = f"operator {t.name!r}" if isinstance(t, OperatorTransformation) else virtual_label(t)
            raise AttributeError(
                f"{type(self).__name__} has no {attr}(): {attr}() applies to a KeyedStream, and the stream of "
                f"{what} is not keyed. Call key_by(key_selector) first: .key_by(...).{attr}(...)"
            )
        if attr in _PYFLINK_UNSUPPORTED:
            raise UnsupportedFeatureError(f"DataStream.{attr}()", _PYFLINK_UNSUPPORTED[attr])
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {attr!r}")

    # -- operators ---------------------------------------------------------
    def _key_selector(self) -> Optional[Callable[[Any], Any]]:
        return None

    def _add(self, kind: OperatorKind, default_name: str, fn: Any, **fields: Any) -> "DataStream":
        on_error = check_on_error(fields.pop("on_error", None), None)
        columnar = kind in (OperatorKind.MAP_BATCHES, OperatorKind.FILTER_BATCHES)
        fields.update(typed_fields(fields.pop("output_type", None), f"operator {default_name!r}", columnar))
        t = self._pipeline._add_operator(
            kind, default_name, (self._t,), function=fn, key_selector=self._key_selector(), on_error=on_error, **fields
        )
        return DataStream(self._pipeline, t)

    def map(self, func: MapLike, output_type: Any = None, on_error: Optional[str] = None) -> "DataStream":
        """One record out per record in: `func(value)` or a `MapFunction`'s `map`.
        `output_type` declares the records' schema; `on_error` the bad-record policy.

        Examples:
            >>> from airflow_flinkchain import StreamPipeline
            >>> p = StreamPipeline("doc")
            >>> _ = p.from_collection([1, 2]).map(lambda x: {"n": x}, output_type={"n": "int64"}).collect("out")
        """
        check_function(func, "map", "map")
        return self._add(OperatorKind.MAP, "Map", func, output_type=output_type, on_error=on_error)

    def flat_map(self, func: FlatMapLike, output_type: Any = None, on_error: Optional[str] = None) -> "DataStream":
        """Any number of records per record in: `func(value)` returns or yields them.

        Examples:
            >>> from airflow_flinkchain import StreamPipeline
            >>> p = StreamPipeline("doc")
            >>> _ = p.from_collection(["a b"]).flat_map(lambda line: line.split()).collect("words")
        """
        check_function(func, "flat_map", "flat_map")
        return self._add(OperatorKind.FLAT_MAP, "FlatMap", func, output_type=output_type, on_error=on_error)

    def filter(self, func: FilterLike, on_error: Optional[str] = None) -> "DataStream":
        """Keep the records for which `func(value)` is true (counted as `filtered` otherwise).

        Examples:
            >>> from airflow_flinkchain import StreamPipeline
            >>> p = StreamPipeline("doc")
            >>> _ = p.from_collection(range(10)).filter(lambda x: x % 2 == 0).collect("evens")
        """
        check_function(func, "filter", "filter")
        return self._add(OperatorKind.FILTER, "Filter", func, on_error=on_error)

    def process(
        self,
        func: ProcessLike,
        output_type: Any = None,
        on_error: Optional[str] = None,
        output_tags: Optional[Iterable[OutputTag]] = None,
    ) -> "DataStream":
        """ProcessFunction (or `fn(value, ctx)`); side outputs via `ctx.output(tag, v)`
        or `yield tag, v`. Declare tags (`output_tags=[...]` here or as a class
        attribute) to have get_side_output() of an unknown tag refused at plan time.
        After `key_by` it is a KeyedProcessFunction.

        Examples:
            >>> from airflow_flinkchain import OutputTag, StreamPipeline
            >>> late = OutputTag("late")
            >>> def flag(order, ctx):
            ...     if order["delay"] > 60:
            ...         ctx.output(late, order)
            ...     else:
            ...         yield order
            >>> p = StreamPipeline("doc")
            >>> flagged = p.from_collection([{"delay": 5}]).process(flag, output_tags=[late]).name("flag")
            >>> _ = flagged.collect("on_time")
            >>> _ = flagged.get_side_output(late).collect("late")
        """
        check_function(func, "process_element", "process")
        kind, name = (
            (OperatorKind.KEYED_PROCESS, "KeyedProcess") if self._key_selector() else (OperatorKind.PROCESS, "Process")
        )
        return self._add(
            kind, name, func, output_type=output_type, on_error=on_error,
            declared_output_tags=declared_tags(func, output_tags),
        )

    def assign_timestamps_and_watermarks(self, watermark_strategy: Any) -> "DataStream":
        """Give each record an event timestamp (the strategy's TimestampAssigner) and
        generate watermarks per subtask (its WatermarkGenerator). In STREAMING mode a
        watermark follows every record (none until the end with an auto-watermark
        interval of 0); in BATCH mode only the final one. Chains with its input.

        Examples:
            >>> from airflow_flinkchain import StreamPipeline
            >>> from airflow_flinkchain.common import Duration, WatermarkStrategy
            >>> p = StreamPipeline("doc")
            >>> strategy = WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_millis(500))
            >>> events = p.from_collection([("a", 100)]).assign_timestamps_and_watermarks(
            ...     strategy.with_timestamp_assigner(lambda event, ts: event[1]))
            >>> _ = events.collect("out")
            >>> [c.name for c in p.plan().chains]
            ['Collection Source -> Timestamps/Watermarks -> out']
        """
        from airflow_flinkchain.common import WatermarkStrategy

        if not isinstance(watermark_strategy, WatermarkStrategy):
            raise PlanningError(
                "assign_timestamps_and_watermarks() needs a WatermarkStrategy (airflow_flinkchain.common), "
                f"got {watermark_strategy!r}; e.g. WatermarkStrategy.for_monotonous_timestamps()"
                ".with_timestamp_assigner(...)")
        return self._add(OperatorKind.TIMESTAMPS_AND_WATERMARKS, "Timestamps/Watermarks", watermark_strategy)

    def window_all(self, window_assigner: Any) -> "AllWindowedStream":
        """Windows over the whole stream (not keyed): one window operator with parallelism 1
        (Flink keys every record by a constant). See `airflow_flinkchain.window` for assigners.

        Examples:
            >>> from airflow_flinkchain import StreamPipeline
            >>> from airflow_flinkchain.window import TumblingEventTimeWindows
            >>> p = StreamPipeline("doc")
            >>> w = p.from_collection([1, 2]).window_all(TumblingEventTimeWindows.of(1000))
            >>> _ = w.reduce(lambda a, b: a + b).collect("out")
        """
        from airflow_flinkchain.api.windowed import AllWindowedStream
        from airflow_flinkchain.graph.windows import null_key

        return AllWindowedStream(self.key_by(null_key), window_assigner)

    def key_by(self, key_selector: KeySelectorLike, key_type: Any = None) -> "KeyedStream":
        """Partition by key (HASH edge): records with one key reach one subtask, where
        keyed operators (reduce, keyed process, state) see one key at a time. `key_type`
        (PyFlink's key TypeInformation) is accepted: keys are Python values of any
        hashable type here, assigned to subtasks by their stable hash.

        Examples:
            >>> from airflow_flinkchain import StreamPipeline
            >>> p = StreamPipeline("doc")
            >>> totals = p.from_collection([("a", 1), ("a", 2)]).key_by(lambda r: r[0])
            >>> _ = totals.reduce(lambda a, b: (a[0], a[1] + b[1])).collect("totals")
            >>> [e.partitioner.value for e in p.plan().edges]
            ['HASH']
        """
        check_function(key_selector, "get_key", "key_by")
        if key_type is not None and not isinstance(key_type, TypeInformation):
            raise PlanningError(f"key_by(): key_type must be a PyFlink TypeInformation (Types.STRING(), ...), "
                                f"got {key_type!r}")
        selector = key_selector.get_key if hasattr(key_selector, "get_key") else key_selector
        t = self._pipeline._add_virtual(PartitionTransformation, (self._t,), partitioner=Partitioner.HASH,
                                        key_selector=selector)
        return KeyedStream(self._pipeline, t, selector)

    def union(self, *streams: "DataStream") -> "DataStream":
        """One stream of the records of this stream and `streams` (same pipeline).

        Examples:
            >>> from airflow_flinkchain import StreamPipeline
            >>> p = StreamPipeline("doc")
            >>> a, b = p.from_collection([1]).name("a"), p.from_collection([2]).name("b")
            >>> _ = a.union(b).map(str).collect("out")
            >>> [c.name for c in p.plan().chains]
            ['a', 'b', 'Map -> out']
        """
        for s in streams:
            if not isinstance(s, DataStream) or s._pipeline is not self._pipeline:
                raise PlanningError(
                    f"union() needs streams of the same pipeline {self._pipeline.name!r}, got {s!r}"
                )
        t = self._pipeline._add_virtual(UnionTransformation, (self._t, *(s._t for s in streams)))
        return DataStream(self._pipeline, t)

    def join(self, other_stream: "DataStream") -> "JoinedStreams":
        """A window join with `other_stream` (Java Flink's `join`): continue with
        `.where(key_selector1).equal_to(key_selector2).window(assigner).apply(JoinFunction)`;
        every pair of records with equal keys in one window is joined (api/joins.py).

        Examples:
            >>> from airflow_flinkchain import StreamPipeline
            >>> from airflow_flinkchain.window import TumblingEventTimeWindows
            >>> p = StreamPipeline("doc")
            >>> a, b = p.from_collection([("a", 1)]), p.from_collection([("a", 2)])
            >>> w = a.join(b).where(lambda r: r[0]).equal_to(lambda r: r[0]).window(TumblingEventTimeWindows.of(10))
            >>> _ = w.apply(lambda x, y: (x[0], x[1] + y[1])).collect("out")
        """
        from airflow_flinkchain.api.joins import JoinedStreams

        return JoinedStreams(self, other_stream)

    def co_group(self, other_stream: "DataStream") -> "CoGroupedStreams":
        """A window co-group with `other_stream` (Java Flink's `coGroup`): continue with
        `.where(key_selector1).equal_to(key_selector2).window(assigner).apply(CoGroupFunction)`,
        called per key and window with both inputs' records (api/joins.py).

        Examples:
            >>> from airflow_flinkchain import StreamPipeline
            >>> from airflow_flinkchain.window import TumblingEventTimeWindows
            >>> p = StreamPipeline("doc")
            >>> a, b = p.from_collection([("a", 1)]), p.from_collection([("b", 2)])
            >>> w = a.co_group(b).where(lambda r: r[0]).equal_to(lambda r: r[0]).window(TumblingEventTimeWindows.of(9))
            >>> _ = w.apply(lambda xs, ys: [(len(xs), len(ys))]).collect("out")
        """
        from airflow_flinkchain.api.joins import CoGroupedStreams

        return CoGroupedStreams(self, other_stream)

    # -- split / select and side outputs ------------------------------------
    def split(self, selector: OutputSelectorLike, names: Optional[Iterable[str]] = None) -> "SplitStream":
        """Route each record to the outputs named by `selector(record)`; pick them
        with select(). `names` declares every name the selector can return (a
        select() of another name then warns at plan time); an OutputSelector
        may declare them as a `names` attribute instead. An operator is split
        once, and not split when its side outputs are used (as in Flink).

        Examples:
            >>> from airflow_flinkchain import StreamPipeline
            >>> p = StreamPipeline("doc")
            >>> sizes = p.from_collection([5, 500]).map(int).split(
            ...     lambda x: ["big"] if x > 100 else ["small"], names=["big", "small"])
            >>> _ = sizes.select("big").collect("big")
        """
        check_function(selector, "select", "split")
        if isinstance(self._t, SelectTransformation):
            raise PlanningError(
                f"split() of a split: {virtual_label(self._t)} cannot be split again. Add a map() "
                "between the two splits, or use one selector returning every name."
            )
        op = self._op("split")
        if op.output_selector is not None:
            raise PlanningError(
                f"operator {op.name!r} is already split: split it once, with one selector returning every name",
                operator=op.name,
            )
        declared = names if names is not None else getattr(selector, "names", None)
        op.output_selector = selector
        op.selector_names = frozenset(declared) if declared is not None else None
        return SplitStream(self._pipeline, op)

    def select(self, *names: str) -> "DataStream":
        """Only the stream returned by `split()` has outputs to select: refused here."""
        raise PlanningError(
            f"select{names!r} without split(): only the stream returned by split(selector) has "
            "outputs to select. Call .split(selector).select(...)."
        )

    def get_side_output(self, tag: OutputTag | str) -> "DataStream":
        """The records a `process()` operator emitted with `ctx.output(tag, value)`
        (see `process` for an example). `DEAD_LETTER_TAG` gives `dead_letters()`.

        Examples:
            >>> from airflow_flinkchain import OutputTag, StreamPipeline
            >>> p = StreamPipeline("doc")
            >>> proc = p.from_collection([1]).process(lambda x, ctx: [x], output_tags=[OutputTag("odd")])
            >>> _ = proc.get_side_output(OutputTag("odd")).collect("odd")
        """
        tid = tag_id(tag)
        op = self._op("get_side_output")
        if tid == DEAD_LETTER_TAG.tag_id and not (
            op.declared_output_tags is not None and tid in op.declared_output_tags
        ):
            return self._dead_letter_stream(op)
        if op.kind not in (OperatorKind.PROCESS, OperatorKind.KEYED_PROCESS, OperatorKind.WINDOW,
                           OperatorKind.CO_PROCESS, OperatorKind.KEYED_CO_PROCESS, OperatorKind.BROADCAST_PROCESS,
                           OperatorKind.KEYED_BROADCAST_PROCESS, OperatorKind.INTERVAL_JOIN, OperatorKind.MAP_BATCHES):
            raise PlanningError(
                f"operator {op.name!r} ({op.kind.value}) cannot emit side outputs: only process(), map_batches() and window "
                f"operators can (ctx.output(tag, value), side_output_late_data). Use process() instead of "
                f"{op.kind.value}().",
                operator=op.name,
            )
        if op.declared_output_tags is not None and tid not in op.declared_output_tags:
            raise PlanningError(
                f"operator {op.name!r} never emits side output {tid!r}: its function declares only "
                f"{sorted(op.declared_output_tags)}. Add the tag to its output_tags, or fix the tag.",
                operator=op.name,
            )
        declared = getattr(tag, "output_type", None)
        if isinstance(declared, TypeInformation):  # PyFlink's way: a map to the tag's type after the side output
            t = self._pipeline._add_virtual(SideOutputTransformation, (op,), tag_id=tid)
            return DataStream(self._pipeline, t).map(_identity, output_type=declared)
        t = self._pipeline._add_virtual(SideOutputTransformation, (op,), tag_id=tid, output_type=declared)
        return DataStream(self._pipeline, t)

    def dead_letters(self) -> "DataStream":
        """The dead-letter side output of this operator (`on_error="dead_letter"`,
        its own or the pipeline's): one dict per record its function failed on,
        {"record", "operator", "error_type", "error"}. Same as
        `get_side_output(DEAD_LETTER_TAG)`.

        Examples:
            >>> from airflow_flinkchain import StreamPipeline
            >>> p = StreamPipeline("doc")
            >>> parsed = p.from_collection(["1", "x"]).map(int, on_error="dead_letter").name("parse")
            >>> _ = parsed.collect("numbers")
            >>> _ = parsed.dead_letters().collect("bad")
        """
        return self._dead_letter_stream(self._op("dead_letters"))

    def _dead_letter_stream(self, op: OperatorTransformation) -> "DataStream":
        check_dead_letter_policy(op, self._pipeline.settings.get("on_error"))
        t = self._pipeline._add_virtual(SideOutputTransformation, (op,), tag_id=DEAD_LETTER_TAG.tag_id)
        return DataStream(self._pipeline, t)

    def connect(self, other: "DataStream | BroadcastStream") -> "ConnectedStreams | BroadcastConnectedStream":
        """Pair this stream (input 1) with `other` (input 2) for a two-input operator:
        `ConnectedStreams` (map / flat_map / process / key_by), or with a BroadcastStream
        a `BroadcastConnectedStream` (process with broadcast state).

        Examples:
            >>> from airflow_flinkchain import StreamPipeline
            >>> p = StreamPipeline("doc")
            >>> connected = p.from_collection([1]).connect(p.from_collection(["a"]))
        """
        from airflow_flinkchain.api.connected import (BroadcastConnectedStream, BroadcastStream, ConnectedStreams,
                                                      check_same_pipeline)

        check_same_pipeline(self, other, "connect")
        if isinstance(other, BroadcastStream):
            return BroadcastConnectedStream(self, other)
        return ConnectedStreams(self, other)

    def _type_info(self) -> Any:
        """The PyFlink TypeInformation this stream's records were declared with, or None."""
        t = self._t
        while not isinstance(t, OperatorTransformation):
            if isinstance(t, SideOutputTransformation):
                return None  # a typed tag's records are coerced by the map get_side_output adds
            t = t.inputs[0]
        return t.type_info


# The streams a DataStream method returns; they subclass DataStream, so they are imported after it.
from airflow_flinkchain.api.data_stream_sink import DataStreamSink  # noqa: E402,F401  (offered here)
from airflow_flinkchain.api.keyed_stream import KeyedStream  # noqa: E402
from airflow_flinkchain.api.split_stream import SplitStream  # noqa: E402

__all__ = ["DataStream", "KeyedStream", "SplitStream", "DataStreamSink"]
