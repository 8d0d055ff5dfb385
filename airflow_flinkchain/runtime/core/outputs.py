"""Flink's chain outputs: how a record leaves an operator.

Every Output has the Flink-shaped slow-path API - `collect(value)` (main
output), `collect_side(tag, value)` (side output; `tag` an OutputTag or tag
id) and `emit_watermark(wm)` - and, for the hot path, `main_emitter(timed)` /
`side_emitter(tag_id, timed)`: the fastest callable(value) delivering a
record of that output, or None when nothing consumes it. An output bound to a
side-output tag forwards only records of that tag, an untagged one only main
records, as in Flink. Records travel as bare values; their timestamp is in
the chain's TimestampCell (see elements.py).
"""

from __future__ import annotations

from typing import Any, Callable, Optional, Sequence

from airflow_flinkchain.graph.model import OperatorKind
from airflow_flinkchain.runtime.core import copying
from airflow_flinkchain.runtime.core.copying import IMMUTABLE_TYPES, copy_record
from airflow_flinkchain.runtime.core.elements import TimestampCell, Watermark, WatermarkStatus
from airflow_flinkchain.runtime.core.errors import ChainExecutionError
from airflow_flinkchain.runtime.core.record_writer import RecordWriter

Emitter = Callable[[Any], None]

# Producers whose main output is a record nobody else holds: the input they
# received (filter: already copied for it) or a freshly deserialized value (source).
_NO_COPY_PRODUCERS = frozenset({OperatorKind.SOURCE, OperatorKind.FILTER})


def _tag_id(tag: Any) -> str:
    return tag if isinstance(tag, str) else tag.tag_id


class Output:
    output_tag: Optional[str] = None

    def main_emitter(self, timed: bool = False) -> Optional[Emitter]:
        raise NotImplementedError

    def side_emitter(self, tag_id: str, timed: bool = False) -> Optional[Emitter]:
        raise NotImplementedError

    def emit_watermark(self, watermark: Watermark) -> None:
        raise NotImplementedError

    def emit_watermark_status(self, status: WatermarkStatus) -> None:
        """Flink's emitWatermarkStatus: an IDLE output does not hold downstream watermarks back."""

    def collect(self, value: Any) -> None:
        emit = self.main_emitter(False)
        if emit is not None:
            emit(value)

    def collect_side(self, tag: Any, value: Any) -> None:
        emit = self.side_emitter(_tag_id(tag), False)
        if emit is not None:
            emit(value)

    def close(self) -> None:
        pass


class ChainingOutput(Output):
    """Hands records to the next operator of the chain as they are (object reuse on)."""

    needs_copy = False

    def __init__(self, target, output_tag: Optional[str] = None):
        self.target = target  # a StreamOperator
        self.output_tag = output_tag

    def _handler(self, timed: bool) -> Emitter:
        return self.target.handler(timed)

    def main_emitter(self, timed: bool = False) -> Optional[Emitter]:
        return self._handler(timed) if self.output_tag is None else None

    def side_emitter(self, tag_id: str, timed: bool = False) -> Optional[Emitter]:
        return self._handler(timed) if self.output_tag == tag_id else None

    def emit_watermark(self, watermark: Watermark) -> None:
        self.target.process_watermark(watermark)

    def emit_watermark_status(self, status: WatermarkStatus) -> None:
        self.target.process_watermark_status(status)


class CopyingChainingOutput(ChainingOutput):
    """Object reuse off (default): the next operator gets its own copy, so it
    never sees a mutation made by a sibling branch or by the producer later.
    Skipped for immutable values, and after a source or filter, whose output
    is already private (a fresh value / the copy the filter received) - unless
    `shared`: that producer hands the same record to several chained outputs
    (fan-out, split), and all but the last of them must get their own copy."""

    def __init__(self, target, output_tag: Optional[str] = None, producer_kind: Any = None, shared: bool = False):
        super().__init__(target, output_tag)
        self.needs_copy = shared or producer_kind not in _NO_COPY_PRODUCERS

    def _handler(self, timed: bool) -> Emitter:
        handler = self.target.handler(timed)
        if not self.needs_copy:
            return handler
        immutable = IMMUTABLE_TYPES
        flat = copying.flat_immutable

        # the C check: a flat dict of scalars is copied without a Python call
        if flat is not None and copying.flat_refcount is not None:
            def copying_flat(value: Any) -> None:
                t = type(value)
                if t is dict and flat(value):
                    handler(value.copy())
                else:
                    handler(value if t in immutable else copy_record(value))

            return copying_flat

        def copying_any(value: Any) -> None:
            handler(value if type(value) in immutable else copy_record(value))

        return copying_any


class RecordWriterOutput(Output):
    """Leaves the chain: records go to the edge's RecordWriter (partitioner ->
    channel -> ChannelWriter); watermarks go to every channel."""

    def __init__(self, record_writer: RecordWriter, output_tag: Optional[str], cell: TimestampCell,
                 producer_name: str, chain_name: str, subtask: int):
        self.record_writer = record_writer
        self.output_tag = output_tag
        self.cell = cell
        self.producer_name = producer_name
        self.chain_name = chain_name
        self.subtask = subtask
        self._emitter: Optional[Emitter] = None
        self._broadcast_watermark = record_writer.broadcast_watermark

    def fail(self, exc: BaseException, value: Any) -> None:
        """A partitioner or writer failure: raise it naming the edge's producer."""
        raise ChainExecutionError(
            operator=self.producer_name, chain=self.chain_name, subtask=self.subtask,
            phase=f"write to edge {self.record_writer.edge_id!r}", record=value,
            has_record=True, cause=exc) from exc

    def _emit(self) -> Emitter:
        if self._emitter is None:
            write, fail = self.record_writer.emitter(self.cell), self.fail

            def emit(value: Any) -> None:
                try:
                    write(value)
                except Exception as exc:
                    fail(exc, value)

            self._emitter = emit
        return self._emitter

    def main_emitter(self, timed: bool = False) -> Optional[Emitter]:
        return self._emit() if self.output_tag is None else None

    def side_emitter(self, tag_id: str, timed: bool = False) -> Optional[Emitter]:
        return self._emit() if self.output_tag == tag_id else None

    def emit_watermark(self, watermark: Watermark) -> None:
        self._broadcast_watermark(watermark.timestamp)

    def emit_watermark_status(self, status: WatermarkStatus) -> None:
        self.record_writer.broadcast_watermark_status(status.idle)

    def close(self) -> None:
        self.record_writer.close()


def _fan_out(emitters: Sequence[Emitter], object_reuse: bool) -> Optional[Emitter]:
    emitters = tuple(emitters)
    if not emitters:
        return None
    if len(emitters) == 1:
        return emitters[0]
    if object_reuse:
        # Flink's CopyingBroadcastingOutputCollector: copies for all but the last.
        first, last = emitters[:-1], emitters[-1]
        immutable = IMMUTABLE_TYPES

        def broadcast_copying(value: Any) -> None:
            if type(value) in immutable:
                for e in first:
                    e(value)
            else:
                for e in first:
                    e(copy_record(value))
            last(value)

        return broadcast_copying

    def broadcast(value: Any) -> None:  # each CopyingChainingOutput copies for itself
        for e in emitters:
            e(value)

    return broadcast


class _MultiOutput(Output):
    """What every output with several downstream outputs shares: side outputs fan
    out to each output bound to the tag, watermarks and close reach all of them."""

    outputs: tuple[Output, ...]
    object_reuse: bool

    def side_emitter(self, tag_id: str, timed: bool = False) -> Optional[Emitter]:
        return _fan_out([e for o in self.outputs if (e := o.side_emitter(tag_id, timed)) is not None],
                        self.object_reuse)

    def emit_watermark(self, watermark: Watermark) -> None:
        for o in self.outputs:
            o.emit_watermark(watermark)

    def emit_watermark_status(self, status: WatermarkStatus) -> None:
        for o in self.outputs:
            o.emit_watermark_status(status)

    def close(self) -> None:
        for o in self.outputs:
            o.close()


class BroadcastingOutputCollector(_MultiOutput):
    """Several outputs of one operator (fan-out)."""

    def __init__(self, outputs: Sequence[Output], object_reuse: bool):
        self.outputs = tuple(outputs)
        self.object_reuse = object_reuse

    def main_emitter(self, timed: bool = False) -> Optional[Emitter]:
        return _fan_out([e for o in self.outputs if (e := o.main_emitter(timed)) is not None], self.object_reuse)



class DirectedOutput(_MultiOutput):
    """split/select: the node's OutputSelector names the outputs of each
    record; an output whose edge selects no names gets every record; a record
    reaches each output at most once. `on_selector_error(exc, value)` applies
    the producer's error policy."""

    def __init__(self, selector: Callable[[Any], Any], outputs: Sequence[tuple[Output, tuple[str, ...]]],
                 object_reuse: bool, on_selector_error: Callable[[BaseException, Any], None]):
        self.selector = selector
        self.selected = tuple(outputs)
        self.outputs = tuple(o for o, _ in outputs)
        self.object_reuse = object_reuse
        self.on_selector_error = on_selector_error

    def main_emitter(self, timed: bool = False) -> Optional[Emitter]:
        select_all: list[Emitter] = []
        by_name: dict[str, list[Emitter]] = {}
        for output, names in self.selected:
            e = output.main_emitter(timed)
            if e is None:
                continue
            if not names:
                select_all.append(e)
            for name in names:
                by_name.setdefault(name, []).append(e)
        if not select_all and not by_name:
            return None
        selector, on_error = self.selector, self.on_selector_error
        reuse, always = self.object_reuse, tuple(select_all)
        routes = {name: tuple(es) for name, es in by_name.items()}
        empty: tuple = ()

        def route(value: Any) -> None:
            try:
                names = selector(value)
                if type(names) is str:
                    names = (names,)
                targets = list(always)
                for name in names:
                    for e in routes.get(name, empty):
                        if e not in targets:
                            targets.append(e)
            except Exception as exc:
                on_error(exc, value)
                return
            if reuse and len(targets) > 1:
                for e in targets[:-1]:
                    e(copy_record(value))
                targets[-1](value)
            else:
                for e in targets:
                    e(value)

        return route



class TypeCoercingOutput(Output):
    """An operator declared with a PyFlink TypeInformation: its main records become what
    PyFlink's serializer of that type gives back (Rows, tuples, float32 floats, ...) before
    they go on; side outputs and watermarks pass unchanged."""

    def __init__(self, output: Output, type_info: Any):
        self.output = output
        self.output_tag = output.output_tag
        self._coerce = type_info.coerce

    def main_emitter(self, timed: bool = False) -> Optional[Emitter]:
        emit = self.output.main_emitter(timed)
        if emit is None:
            return None
        coerce = self._coerce

        def coercing(value: Any) -> None:
            emit(coerce(value))

        return coercing

    def side_emitter(self, tag_id: str, timed: bool = False) -> Optional[Emitter]:
        return self.output.side_emitter(tag_id, timed)

    def emit_watermark(self, watermark: Watermark) -> None:
        self.output.emit_watermark(watermark)

    def emit_watermark_status(self, status: WatermarkStatus) -> None:
        self.output.emit_watermark_status(status)

    def close(self) -> None:
        self.output.close()
