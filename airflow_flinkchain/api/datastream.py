"""DataStream, KeyedStream, SplitStream and DataStreamSink (PyFlink names).

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

from typing import TYPE_CHECKING, Any, Callable, Iterable, Optional, Self

from airflow_flinkchain.api.aggregations import AggregationFunction
from airflow_flinkchain.api.validation import (
    check_dead_letter_policy,
    check_function,
    check_on_error,
    check_parallelism,
    declared_tags,
    tag_id,
)
from airflow_flinkchain.function_types import (
    FilterLike,
    FlatMapLike,
    KeySelectorLike,
    MapLike,
    OutputSelectorLike,
    PartitionerLike,
    ProcessLike,
    ReduceLike,
)
from airflow_flinkchain.common import to_output_type
from airflow_flinkchain.functions import DEAD_LETTER_TAG, OutputTag
from airflow_flinkchain.graph.errors import PlanningError
from airflow_flinkchain.graph.model import ChainingStrategy, OperatorKind, Partitioner
from airflow_flinkchain.graph.transformations import (
    OperatorTransformation,
    PartitionTransformation,
    SelectTransformation,
    SideOutputTransformation,
    Transformation,
    UnionTransformation,
    virtual_label,
)
from airflow_flinkchain.io.sinks import CollectSink, Sink

if TYPE_CHECKING:  # pragma: no cover
    from airflow_flinkchain.api.pipeline import StreamPipeline
    from airflow_flinkchain.api.connected import BroadcastConnectedStream, BroadcastStream, ConnectedStreams
    from airflow_flinkchain.api.joins import CoGroupedStreams, IntervalJoin, JoinedStreams
    from airflow_flinkchain.api.windowed import AllWindowedStream, WindowedStream


class _OperatorSettings:
    """Settings of the operator behind a stream or a sink (all return self)."""

    _pipeline: "StreamPipeline"
    _t: Transformation

    def _op(self, method: str) -> OperatorTransformation:
        if isinstance(self._t, OperatorTransformation):
            return self._t
        raise PlanningError(
            f"{method}() applies to an operator, but this stream is the result of "
            f"{virtual_label(self._t)}, which is not an operator. Call {method}() on the operator "
            "before it, or on the operator that consumes it."
        )

    def name(self, name: str) -> Self:
        """Name the operator (Flink's `name`): shown in chains, the UI and errors; without
        a `uid`, its slug is the operator's key and, for a chain head, the Airflow task id.

        Examples:
            >>> from airflow_flinkchain import StreamPipeline
            >>> p = StreamPipeline("doc")
            >>> _ = p.from_collection([1]).name("numbers").map(str).name("as_text").collect("out")
            >>> [c.name for c in p.plan().chains]
            ['numbers -> as_text -> out']
        """
        if not isinstance(name, str) or not name.strip():
            raise PlanningError(f"name() needs a non-empty string, got {name!r}")
        self._op("name").name = name
        return self

    def uid(self, uid: str) -> Self:
        """A stable id (Flink's `uid`): the operator's key, and its chain's task id when
        it heads a chain, kept while the pipeline around it changes.

        Examples:
            >>> from airflow_flinkchain import StreamPipeline
            >>> p = StreamPipeline("doc")
            >>> _ = p.from_collection([1]).uid("numbers-v1").collect("out")
            >>> [c.id for c in p.plan().chains]
            ['numbers-v1']
        """
        if not isinstance(uid, str) or not uid.strip():
            raise PlanningError(f"operator {self._op('uid').name!r}: uid() needs a non-empty string, got {uid!r}")
        self._op("uid").uid = uid
        return self

    def set_parallelism(self, parallelism: int) -> Self:
        """Parallel subtasks of this operator (default: the pipeline's). A change of
        parallelism between two operators ends a chain (REBALANCE edge).

        Examples:
            >>> from airflow_flinkchain import StreamPipeline
            >>> p = StreamPipeline("doc", parallelism=2)
            >>> _ = p.from_collection([1]).map(str).set_parallelism(4).collect("out")
            >>> [(c.name, c.parallelism) for c in p.plan().chains]
            [('Collection Source', 1), ('Map', 4), ('out', 2)]
        """
        op = self._op("set_parallelism")
        check_parallelism(parallelism, "parallelism", op.name)
        if op.non_parallel and parallelism != 1:
            raise PlanningError(
                (f"operator {op.name!r} is a non-parallel source: its parallelism must be 1, got "
                 f"{parallelism}. Use a parallel source (from_source) or rebalance() after it."
                 if op.kind is OperatorKind.SOURCE else
                 f"operator {op.name!r} is a window_all: its parallelism must be 1, got {parallelism}. "
                 "Use key_by(...).window(...) for parallel windows."),
                operator=op.name,
            )
        op.parallelism = parallelism
        return self

    def set_max_parallelism(self, max_parallelism: int) -> Self:
        """Number of key groups of a keyed operator (Flink's max parallelism).

        Examples:
            >>> from airflow_flinkchain import StreamPipeline
            >>> p = StreamPipeline("doc")
            >>> s = p.from_collection([1]).key_by(lambda x: x).reduce(max).set_max_parallelism(256)
        """
        op = self._op("set_max_parallelism")
        op.max_parallelism = check_parallelism(max_parallelism, "max parallelism", op.name)
        return self

    def start_new_chain(self) -> Self:
        """Start a new chain at this operator (Flink's HEAD chaining strategy).

        Examples:
            >>> from airflow_flinkchain import StreamPipeline
            >>> p = StreamPipeline("doc")
            >>> _ = p.from_collection([1]).map(str).start_new_chain().collect("out")
            >>> [c.name for c in p.plan().chains]
            ['Collection Source', 'Map -> out']
        """
        self._op("start_new_chain").chaining_strategy = ChainingStrategy.HEAD
        return self

    def disable_chaining(self) -> Self:
        """Keep this operator alone in its chain (Flink's NEVER chaining strategy).

        Examples:
            >>> from airflow_flinkchain import StreamPipeline
            >>> p = StreamPipeline("doc")
            >>> _ = p.from_collection([1]).map(str).disable_chaining().collect("out")
            >>> [c.name for c in p.plan().chains]
            ['Collection Source', 'Map', 'out']
        """
        self._op("disable_chaining").chaining_strategy = ChainingStrategy.NEVER
        return self

    def slot_sharing_group(self, group: str) -> Self:
        """Operators in different slot sharing groups never share a chain; operators
        without one inherit their inputs' group (or `"default"`).

        Examples:
            >>> from airflow_flinkchain import StreamPipeline
            >>> p = StreamPipeline("doc")
            >>> _ = p.from_collection([1]).map(str).slot_sharing_group("heavy").collect("out")
            >>> [c.name for c in p.plan().chains]
            ['Collection Source', 'Map -> out']
        """
        op = self._op("slot_sharing_group")
        if not isinstance(group, str) or not group:
            raise PlanningError(f"operator {op.name!r}: slot_sharing_group() needs a name, got {group!r}")
        op.slot_sharing_group = group
        return self

    def set_spark_settings(self, **settings: Any) -> Self:
        """Per-operator Spark settings (e.g. executor_memory) for its chain's task;
        they override the pipeline's, and a chain takes the largest memory request.

        Examples:
            >>> from airflow_flinkchain import StreamPipeline
            >>> p = StreamPipeline("doc")
            >>> s = p.from_collection([1]).map(str).set_spark_settings(executor_memory="8g")
        """
        self._op("set_spark_settings").settings.update(settings)
        return self

    def on_error(self, policy: str) -> Self:
        """What happens to a record the function fails on: `"fail"` (the default),
        `"dead_letter"` (to `dead_letters()`) or `"skip"`; overrides the pipeline's.

        Examples:
            >>> from airflow_flinkchain import StreamPipeline
            >>> p = StreamPipeline("doc")
            >>> parsed = p.from_collection(["1", "x"]).map(int).on_error("dead_letter")
            >>> _ = parsed.dead_letters().collect("bad")
        """
        op = self._op("on_error")
        op.on_error = check_on_error(policy, op.name)
        return self


#: KeyedStream methods a plain DataStream lacks (as in PyFlink): a clear error instead of a bare AttributeError.
_KEYED_ONLY = frozenset({"reduce", "window", "count_window", "interval_join"})


class DataStream(_OperatorSettings):
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
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {attr!r}")

    # -- operators ---------------------------------------------------------
    def _key_selector(self) -> Optional[Callable[[Any], Any]]:
        return None

    def _add(self, kind: OperatorKind, default_name: str, fn: Any, **fields: Any) -> "DataStream":
        on_error = check_on_error(fields.pop("on_error", None), None)
        if fields.get("output_type") is not None:
            fields["output_type"] = to_output_type(fields["output_type"])  # PyFlink's Types as well
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

    def map_batches(
        self,
        func: Any,
        batch_format: str = "pyarrow",
        batch_size: Optional[int] = None,
        output_type: Any = None,
        on_error: Optional[str] = None,
        output_tags: Optional[Iterable[OutputTag]] = None,
    ) -> "DataStream":
        """A vectorized map (Ray Data's `map_batches`, Flink's pandas UDFs): `func(batch)`
        gets many records as one `pyarrow.RecordBatch` (or `pandas.DataFrame` with
        `batch_format="pandas"`) and returns a batch, or yields several; a yielded
        `(OutputTag, batch)` goes to that side output. At most `batch_size` rows per call.
        `output_type` declares (and casts to) the output columns. Chains like map();
        see docs/vectorized.md for timestamps, dead letters and when to use it.

        Examples:
            >>> import pyarrow.compute as pc
            >>> from airflow_flinkchain import StreamPipeline
            >>> p = StreamPipeline("doc")
            >>> tripled = p.from_collection([{"x": 1}, {"x": 2}]).map_batches(
            ...     lambda b: b.set_column(0, "x", pc.multiply(b["x"], 3)))
            >>> _ = tripled.collect("out")
            >>> p.execute_local().output("out")
            [{'x': 3}, {'x': 6}]
        """
        from airflow_flinkchain.api.batches import batch_function

        spec, tags = batch_function(self, OperatorKind.MAP_BATCHES, func, batch_format, batch_size, output_tags)
        return self._add(OperatorKind.MAP_BATCHES, "MapBatches", spec, output_type=output_type, on_error=on_error,
                         declared_output_tags=tags)

    def filter_batches(
        self,
        func: Any,
        batch_format: str = "pyarrow",
        batch_size: Optional[int] = None,
        on_error: Optional[str] = None,
    ) -> "DataStream":
        """A vectorized filter: `func(batch)` returns a boolean mask (pyarrow, numpy or
        pandas, one entry per row); rows where it is true are kept (null: dropped).

        Examples:
            >>> import pyarrow.compute as pc
            >>> from airflow_flinkchain import StreamPipeline
            >>> p = StreamPipeline("doc")
            >>> evens = p.from_collection([{"x": 1}, {"x": 2}]).filter_batches(
            ...     lambda b: pc.equal(pc.bit_wise_and(b["x"], 1), 0))
            >>> _ = evens.collect("out")
            >>> p.execute_local().output("out")
            [{'x': 2}]
        """
        from airflow_flinkchain.api.batches import batch_function

        spec, _ = batch_function(self, OperatorKind.FILTER_BATCHES, func, batch_format, batch_size, None)
        return self._add(OperatorKind.FILTER_BATCHES, "FilterBatches", spec, on_error=on_error)

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

    def key_by(self, key_selector: KeySelectorLike) -> "KeyedStream":
        """Partition by key (HASH edge): records with one key reach one subtask, where
        keyed operators (reduce, keyed process, state) see one key at a time.

        Examples:
            >>> from airflow_flinkchain import StreamPipeline
            >>> p = StreamPipeline("doc")
            >>> totals = p.from_collection([("a", 1), ("a", 2)]).key_by(lambda r: r[0])
            >>> _ = totals.reduce(lambda a, b: (a[0], a[1] + b[1])).collect("totals")
            >>> [e.partitioner.value for e in p.plan().edges]
            ['HASH']
        """
        check_function(key_selector, "get_key", "key_by")
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
        t = self._pipeline._add_virtual(SideOutputTransformation, (op,), tag_id=tid,
                                        output_type=getattr(tag, "output_type", None))
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

    # -- partitioning ------------------------------------------------------
    def _partition(self, kind: Partitioner, **fields: Any) -> "DataStream":
        t = self._pipeline._add_virtual(PartitionTransformation, (self._t,), partitioner=kind, **fields)
        return DataStream(self._pipeline, t)

    def forward(self) -> "DataStream":
        """Send each record to the downstream subtask of the same index (equal parallelism only);
        the edge chains.

        Examples:
            >>> from airflow_flinkchain import StreamPipeline
            >>> p = StreamPipeline("doc", parallelism=2)
            >>> _ = p.from_collection([1]).forward().map(str).collect("out")
        """
        return self._partition(Partitioner.FORWARD)

    def rebalance(self) -> "DataStream":
        """Round robin over the downstream subtasks.

        Examples:
            >>> from airflow_flinkchain import StreamPipeline
            >>> p = StreamPipeline("doc", parallelism=2)
            >>> _ = p.from_collection([1]).rebalance().map(str).collect("out")
        """
        return self._partition(Partitioner.REBALANCE)

    def rescale(self) -> "DataStream":
        """Round robin within the downstream range this subtask feeds under Flink's POINTWISE
        distribution (2 → 3: subtask 0 feeds {0, 1}, subtask 1 feeds {2}).

        Examples:
            >>> from airflow_flinkchain import StreamPipeline
            >>> p = StreamPipeline("doc", parallelism=2)
            >>> _ = p.from_collection([1]).rescale().map(str).collect("out")
        """
        return self._partition(Partitioner.RESCALE)

    def shuffle(self) -> "DataStream":
        """A random downstream subtask per record (seeded per subtask: the same in every attempt).

        Examples:
            >>> from airflow_flinkchain import StreamPipeline
            >>> p = StreamPipeline("doc", parallelism=2)
            >>> _ = p.from_collection([1]).shuffle().map(str).collect("out")
        """
        return self._partition(Partitioner.SHUFFLE)

    def broadcast(self, *broadcast_state_descriptors: Any) -> "DataStream | BroadcastStream":
        """Every record to every downstream subtask. With MapStateDescriptors, a
        `BroadcastStream` instead: connect another stream to it
        (`stream.connect(broadcast_stream).process(...)`) to read its records as
        broadcast state.

        Examples:
            >>> from airflow_flinkchain import StreamPipeline
            >>> p = StreamPipeline("doc", parallelism=2)
            >>> _ = p.from_collection([1]).broadcast().map(str).collect("out")
        """
        if broadcast_state_descriptors:
            from airflow_flinkchain.api.connected import broadcast_stream

            return broadcast_stream(self, broadcast_state_descriptors)
        return self._partition(Partitioner.BROADCAST)

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

    def global_(self) -> "DataStream":
        """Every record to downstream subtask 0 (Flink's `global`).

        Examples:
            >>> from airflow_flinkchain import StreamPipeline
            >>> p = StreamPipeline("doc", parallelism=2)
            >>> _ = p.from_collection([1]).global_().map(str).collect("out")
        """
        return self._partition(Partitioner.GLOBAL)

    def partition_custom(self, partitioner: PartitionerLike, key_selector: KeySelectorLike) -> "DataStream":
        """`partitioner(key, num_partitions) -> channel` (or a Partitioner instance) on
        the key `key_selector(record)`.

        Examples:
            >>> from airflow_flinkchain import StreamPipeline
            >>> p = StreamPipeline("doc", parallelism=2)
            >>> s = p.from_collection(range(4)).partition_custom(lambda k, n: k % n, lambda x: x)
            >>> _ = s.map(str).collect("out")
        """
        check_function(partitioner, "partition", "partition_custom")
        check_function(key_selector, "get_key", "partition_custom")
        part = partitioner.partition if hasattr(partitioner, "partition") else partitioner
        key = key_selector.get_key if hasattr(key_selector, "get_key") else key_selector
        return self._partition(Partitioner.CUSTOM, key_selector=key, custom_partitioner=part)

    # -- sinks -------------------------------------------------------------
    def sink_to(self, sink: Sink, name: Optional[str] = None) -> "DataStreamSink":
        """Write the stream to a sink (`airflow_flinkchain.io.sinks`); named `name`, else
        `Sink: <Type>`. A sink's destination belongs to it alone.

        Examples:
            >>> from airflow_flinkchain import StreamPipeline
            >>> from airflow_flinkchain.io.sinks import ParquetSink
            >>> p = StreamPipeline("doc")
            >>> _ = p.from_collection([{"n": 1}]).sink_to(ParquetSink("/data/out/{{ run_key }}"), name="numbers")
        """
        if isinstance(sink, type) and issubclass(sink, Sink):
            raise PlanningError(f"sink_to() got the sink class {sink.__name__}, not an instance of it: pass "
                                f"{sink.__name__}(...) with its settings")
        if not isinstance(sink, Sink):
            raise PlanningError(f"sink_to() needs a Sink descriptor (see airflow_flinkchain.io.sinks), got {sink!r}")
        if name is None:
            name = sink.name if isinstance(sink, CollectSink) else f"Sink: {type(sink).__name__}"
        t = self._pipeline._add_operator(
            OperatorKind.SINK, name, (self._t,), function=sink,
            key_selector=self._key_selector(),
        )
        return DataStreamSink(self._pipeline, t)

    def collect(self, name: str) -> "DataStreamSink":
        """Keep the records under `name` (for tests and examples); the sink is named `name`,
        and `execute().output(name)` returns its records.

        Examples:
            >>> from airflow_flinkchain import StreamPipeline
            >>> p = StreamPipeline("doc")
            >>> sink = p.from_collection([1, 2]).collect("numbers")
            >>> [c.name for c in p.plan().chains]
            ['Collection Source -> numbers']
        """
        return self.sink_to(CollectSink(name), name=name)


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
            >>> sorted(p.execute_local().output("counts"))  # STREAMING (the default): rolling
            [('a', 1), ('a', 2), ('b', 1)]
            >>> _ = p.set_runtime_mode("batch")
            >>> sorted(p.execute_local().output("counts"))
            [('a', 2), ('b', 1)]
        """
        check_function(func, "reduce", "reduce")
        return self._add(OperatorKind.REDUCE, "Keyed Reduce", func, on_error=on_error)

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
        return self._add(OperatorKind.REDUCE, "Keyed Aggregation", AggregationFunction(kind, position))

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
            [('a', 1), ('a', 3), ('b', 5)]
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


class SplitStream(DataStream):
    """The stream of a split operator; `select(*names)` picks outputs. Using it
    directly (without select) gets every record, as in Flink.

    Examples:
        >>> from airflow_flinkchain import StreamPipeline
        >>> p = StreamPipeline("doc")
        >>> parity = p.from_collection(range(4)).map(int).split(lambda x: ["even" if x % 2 == 0 else "odd"])
        >>> _ = parity.select("even").collect("evens")
        >>> _ = parity.collect("all")
    """

    def select(self, *names: str) -> DataStream:
        """The records the selector routed to any of `names`.

        Examples:
            >>> from airflow_flinkchain import StreamPipeline
            >>> p = StreamPipeline("doc")
            >>> sizes = p.from_collection([5, 500]).map(int).split(lambda x: ["big" if x > 100 else "small"])
            >>> _ = sizes.select("big", "small").collect("both")
        """
        if not names or not all(isinstance(n, str) and n for n in names):
            raise PlanningError(f"select() needs one or more output names, got {names!r}")
        t = self._pipeline._add_virtual(SelectTransformation, (self._t,), names=tuple(names))
        return DataStream(self._pipeline, t)

    def get_side_output(self, tag: OutputTag | str) -> DataStream:
        """Refused: side outputs are not split; take them from the operator's own stream."""
        op = self._t
        raise PlanningError(
            f"get_side_output() on the split stream of {op.name!r}: side outputs are not split. "
            f"Call get_side_output() on {op.name!r}'s own stream (the one split() was called on).",
            operator=op.name,
        )

    def split(self, selector: OutputSelectorLike, names: Optional[Iterable[str]] = None) -> "SplitStream":
        """Refused: an operator is split once, with one selector returning every name."""
        raise PlanningError(
            f"split() of a split: operator {self._t.name!r} is already split. Use one selector "
            "returning every name, or add a map() after select() and split that."
        )

    def name(self, name: str) -> Self:
        """Refused: name the operator before `split()`."""
        raise _split_settings(self._t, "name")

    def uid(self, uid: str) -> Self:
        """Refused: set the uid of the operator before `split()`."""
        raise _split_settings(self._t, "uid")

    def set_parallelism(self, parallelism: int) -> Self:
        """Refused: set the parallelism of the operator before `split()`."""
        raise _split_settings(self._t, "set_parallelism")


class DataStreamSink(_OperatorSettings):
    """What sink_to()/collect() return: operator settings only, no stream methods.

    Examples:
        >>> from airflow_flinkchain import StreamPipeline
        >>> p = StreamPipeline("doc")
        >>> sink = p.from_collection([1]).collect("out").uid("out-v1").set_parallelism(1)
    """

    def __init__(self, pipeline: "StreamPipeline", transformation: OperatorTransformation):
        self._pipeline = pipeline
        self._t = transformation

    def __repr__(self) -> str:
        return f"<DataStreamSink {self._t.name!r} of pipeline {self._pipeline.name!r}>"

    def __getattr__(self, attr: str):
        if attr.startswith("_"):
            raise AttributeError(attr)
        if hasattr(DataStream, attr):
            raise PlanningError(
                f"sink {self._t.name!r} has no outputs, so it has no {attr}(): a sink ends its stream. "
                f"Call {attr}() on the stream before sink_to()/collect().",
                operator=self._t.name,
            )
        raise AttributeError(attr)


def _split_settings(op: Transformation, method: str) -> PlanningError:
    return PlanningError(
        f"{method}() on a split stream: call it on the operator before split(), "
        f"i.e. on {getattr(op, 'name', 'the operator')!r}'s stream"
    )
