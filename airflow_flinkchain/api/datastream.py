"""DataStream, KeyedStream, SplitStream and DataStreamSink (PyFlink names).

Every method records a transformation on the pipeline and returns a new
stream; operator settings (`name`, `uid`, `set_parallelism`, ...) apply to
the operator that produced the stream and return the same stream.

>>> from airflow_flinkchain import StreamPipeline
>>> p = StreamPipeline("doc")
>>> s = p.from_collection([1, 2, 3]).map(lambda x: x * 2).name("double")
>>> _ = s.filter(lambda x: x > 2).collect("out")
>>> [c.name for c in p.plan().chains]
['Collection Source -> double -> Filter -> out']
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Iterable, Optional

from airflow_flinkchain.api.validation import (
    check_dead_letter_policy,
    check_function,
    check_on_error,
    check_parallelism,
    declared_tags,
    tag_id,
)
from airflow_flinkchain.functions import DEAD_LETTER_TAG
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

    def name(self, name: str):
        if not isinstance(name, str) or not name.strip():
            raise PlanningError(f"name() needs a non-empty string, got {name!r}")
        self._op("name").name = name
        return self

    def uid(self, uid: str):
        if not isinstance(uid, str) or not uid.strip():
            raise PlanningError(f"operator {self._op('uid').name!r}: uid() needs a non-empty string, got {uid!r}")
        self._op("uid").uid = uid
        return self

    def set_parallelism(self, parallelism: int):
        op = self._op("set_parallelism")
        check_parallelism(parallelism, "parallelism", op.name)
        if op.non_parallel and parallelism != 1:
            raise PlanningError(
                f"operator {op.name!r} is a non-parallel source: its parallelism must be 1, got "
                f"{parallelism}. Use a parallel source (from_source) or rebalance() after it.",
                operator=op.name,
            )
        op.parallelism = parallelism
        return self

    def set_max_parallelism(self, max_parallelism: int):
        op = self._op("set_max_parallelism")
        op.max_parallelism = check_parallelism(max_parallelism, "max parallelism", op.name)
        return self

    def start_new_chain(self):
        self._op("start_new_chain").chaining_strategy = ChainingStrategy.HEAD
        return self

    def disable_chaining(self):
        self._op("disable_chaining").chaining_strategy = ChainingStrategy.NEVER
        return self

    def slot_sharing_group(self, group: str):
        op = self._op("slot_sharing_group")
        if not isinstance(group, str) or not group:
            raise PlanningError(f"operator {op.name!r}: slot_sharing_group() needs a name, got {group!r}")
        op.slot_sharing_group = group
        return self

    def set_spark_settings(self, **settings: Any):
        """Per-operator Spark settings (e.g. executor_memory) for its chain's task."""
        self._op("set_spark_settings").settings.update(settings)
        return self

    def on_error(self, policy: str):
        """"fail" (default), "dead_letter" or "skip" for records the function fails on."""
        op = self._op("on_error")
        op.on_error = check_on_error(policy, op.name)
        return self


class DataStream(_OperatorSettings):
    """A stream of records; created by StreamPipeline.from_* and by operators."""

    def __init__(self, pipeline: "StreamPipeline", transformation: Transformation):
        self._pipeline = pipeline
        self._t = transformation

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {virtual_label(self._t)!r} of pipeline {self._pipeline.name!r}>"

    @property
    def transformation(self) -> Transformation:
        return self._t

    # -- operators ---------------------------------------------------------
    def _key_selector(self) -> Optional[Callable[[Any], Any]]:
        return None

    def _add(self, kind: OperatorKind, default_name: str, fn: Any, **fields: Any) -> "DataStream":
        on_error = check_on_error(fields.pop("on_error", None), None)
        t = self._pipeline._add_operator(
            kind, default_name, (self._t,), function=fn, key_selector=self._key_selector(), on_error=on_error, **fields
        )
        return DataStream(self._pipeline, t)

    def map(self, func: Any, output_type: Any = None, on_error: Optional[str] = None) -> "DataStream":
        check_function(func, "map", "map")
        return self._add(OperatorKind.MAP, "Map", func, output_type=output_type, on_error=on_error)

    def flat_map(self, func: Any, output_type: Any = None, on_error: Optional[str] = None) -> "DataStream":
        check_function(func, "flat_map", "flat_map")
        return self._add(OperatorKind.FLAT_MAP, "FlatMap", func, output_type=output_type, on_error=on_error)

    def filter(self, func: Any, on_error: Optional[str] = None) -> "DataStream":
        check_function(func, "filter", "filter")
        return self._add(OperatorKind.FILTER, "Filter", func, on_error=on_error)

    def process(
        self,
        func: Any,
        output_type: Any = None,
        on_error: Optional[str] = None,
        output_tags: Optional[Iterable[Any]] = None,
    ) -> "DataStream":
        """ProcessFunction (or `fn(value, ctx)`); side outputs via `ctx.output(tag, v)`
        or `yield tag, v`. Declare tags (`output_tags=[...]` here or as a class
        attribute) to have get_side_output() of an unknown tag refused at plan time."""
        check_function(func, "process_element", "process")
        kind, name = (
            (OperatorKind.KEYED_PROCESS, "KeyedProcess") if self._key_selector() else (OperatorKind.PROCESS, "Process")
        )
        return self._add(
            kind, name, func, output_type=output_type, on_error=on_error,
            declared_output_tags=declared_tags(func, output_tags),
        )

    def key_by(self, key_selector: Any) -> "KeyedStream":
        check_function(key_selector, "get_key", "key_by")
        selector = key_selector.get_key if hasattr(key_selector, "get_key") else key_selector
        t = self._pipeline._add_virtual(PartitionTransformation, (self._t,), partitioner=Partitioner.HASH,
                                        key_selector=selector)
        return KeyedStream(self._pipeline, t, selector)

    def union(self, *streams: "DataStream") -> "DataStream":
        for s in streams:
            if not isinstance(s, DataStream) or s._pipeline is not self._pipeline:
                raise PlanningError(
                    f"union() needs streams of the same pipeline {self._pipeline.name!r}, got {s!r}"
                )
        t = self._pipeline._add_virtual(UnionTransformation, (self._t, *(s._t for s in streams)))
        return DataStream(self._pipeline, t)

    # -- split / select and side outputs ------------------------------------
    def split(self, selector: Any, names: Optional[Iterable[str]] = None) -> "SplitStream":
        """Route each record to the outputs named by `selector(record)`; pick them
        with select(). `names` declares every name the selector can return (a
        select() of another name then warns at plan time); an OutputSelector
        may declare them as a `names` attribute instead."""
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
        raise PlanningError(
            f"select{names!r} without split(): only the stream returned by split(selector) has "
            "outputs to select. Call .split(selector).select(...)."
        )

    def get_side_output(self, tag: Any) -> "DataStream":
        tid = tag_id(tag)
        op = self._op("get_side_output")
        if tid == DEAD_LETTER_TAG.tag_id and not (
            op.declared_output_tags is not None and tid in op.declared_output_tags
        ):
            return self._dead_letter_stream(op)
        if op.kind not in (OperatorKind.PROCESS, OperatorKind.KEYED_PROCESS):
            raise PlanningError(
                f"operator {op.name!r} ({op.kind.value}) cannot emit side outputs: only process() "
                f"operators can (ctx.output(tag, value)). Use process() instead of {op.kind.value}().",
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
        `get_side_output(DEAD_LETTER_TAG)`."""
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
        return self._partition(Partitioner.FORWARD)

    def rebalance(self) -> "DataStream":
        return self._partition(Partitioner.REBALANCE)

    def rescale(self) -> "DataStream":
        return self._partition(Partitioner.RESCALE)

    def shuffle(self) -> "DataStream":
        return self._partition(Partitioner.SHUFFLE)

    def broadcast(self) -> "DataStream":
        return self._partition(Partitioner.BROADCAST)

    def global_(self) -> "DataStream":
        return self._partition(Partitioner.GLOBAL)

    def partition_custom(self, partitioner: Any, key_selector: Any) -> "DataStream":
        """`partitioner(key, num_partitions) -> channel` (or a Partitioner class)."""
        check_function(partitioner, "partition", "partition_custom")
        check_function(key_selector, "get_key", "partition_custom")
        part = partitioner.partition if hasattr(partitioner, "partition") else partitioner
        key = key_selector.get_key if hasattr(key_selector, "get_key") else key_selector
        return self._partition(Partitioner.CUSTOM, key_selector=key, custom_partitioner=part)

    # -- sinks -------------------------------------------------------------
    def sink_to(self, sink: Sink, name: Optional[str] = None) -> "DataStreamSink":
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
        """Keep the records under `name` (for tests and examples); the sink is named `name`."""
        return self.sink_to(CollectSink(name), name=name)


class KeyedStream(DataStream):
    """After key_by: operators see one key at a time (reduce, keyed process)."""

    def __init__(self, pipeline: "StreamPipeline", transformation: Transformation, key_selector: Callable):
        super().__init__(pipeline, transformation)
        self._selector = key_selector

    def _key_selector(self) -> Optional[Callable[[Any], Any]]:
        return self._selector

    def reduce(self, func: Any, on_error: Optional[str] = None) -> DataStream:
        check_function(func, "reduce", "reduce")
        return self._add(OperatorKind.REDUCE, "Keyed Reduce", func, on_error=on_error)

    def _partition(self, kind: Partitioner, **fields: Any) -> DataStream:
        raise PlanningError(
            f"cannot override the partitioning of a KeyedStream ({kind.value.lower()} after key_by()): "
            "records of one key must reach one subtask. Partition before key_by(), or after the keyed operator."
        )

    def split(self, selector: Any, names: Optional[Iterable[str]] = None) -> "SplitStream":
        raise PlanningError("split() of a KeyedStream: apply split() to an operator, e.g. after reduce()")


class SplitStream(DataStream):
    """The stream of a split operator; `select(*names)` picks outputs. Using it
    directly (without select) gets every record, as in Flink."""

    def select(self, *names: str) -> DataStream:
        if not names or not all(isinstance(n, str) and n for n in names):
            raise PlanningError(f"select() needs one or more output names, got {names!r}")
        t = self._pipeline._add_virtual(SelectTransformation, (self._t,), names=tuple(names))
        return DataStream(self._pipeline, t)

    def get_side_output(self, tag: Any) -> DataStream:
        op = self._t
        raise PlanningError(
            f"get_side_output() on the split stream of {op.name!r}: side outputs are not split. "
            f"Call get_side_output() on {op.name!r}'s own stream (the one split() was called on).",
            operator=op.name,
        )

    def split(self, selector: Any, names: Optional[Iterable[str]] = None) -> "SplitStream":
        raise PlanningError(
            f"split() of a split: operator {self._t.name!r} is already split. Use one selector "
            "returning every name, or add a map() after select() and split that."
        )

    def name(self, name: str):
        raise _split_settings(self._t, "name")

    def uid(self, uid: str):
        raise _split_settings(self._t, "uid")

    def set_parallelism(self, parallelism: int):
        raise _split_settings(self._t, "set_parallelism")


class DataStreamSink(_OperatorSettings):
    """What sink_to()/collect() return: operator settings only, no stream methods."""

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
