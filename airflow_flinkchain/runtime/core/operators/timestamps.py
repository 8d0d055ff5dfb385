"""Flink's TimestampsAndWatermarksOperator: `assign_timestamps_and_watermarks(strategy)`.

Each record gets the timestamp the strategy's TimestampAssigner extracts (without an
assigner it keeps the one it has, as Flink's RecordTimestampAssigner) and goes on; then
the subtask's WatermarkGenerator sees it. Periodic emission is replaced by a
deterministic stand-in: in STREAMING mode with an auto-watermark interval > 0 the
generator's `on_periodic_emit` runs after every record, so each record is seen
downstream with the watermark the records before it left. BATCH mode (and an interval
of 0) emits no watermark until the end, as Flink's NoWatermarksGenerator there.
Watermarks from upstream are swallowed, except the final MAX watermark.

Splits: chained to a source whose subtask reads several splits (files, or pieces of
them) one after another, the watermark is generated per split as Flink's
`from_source(source, watermark_strategy)` does, and combined as a WatermarkValve
combines channels (`start_split`): a record in order within its split is never late.

Idleness (`with_idleness`): the generator's `mark_idle`/`mark_active` go out as
watermark statuses. Deterministic stand-in for the idle timeout: a subtask that gets
no record at all is idle from its start, so the downstream WatermarkValve leaves its
channel out while the others advance.
"""

from __future__ import annotations

from typing import Any, Callable

from airflow_flinkchain.common import AscendingTimestampsWatermarks, BoundedOutOfOrdernessWatermarks
from airflow_flinkchain.common import Watermark as GeneratedWatermark
from airflow_flinkchain.common import WatermarkOutput
from airflow_flinkchain.runtime.core.elements import MAX_WATERMARK_TS, MIN_WATERMARK_TS, Watermark, WatermarkStatus
from airflow_flinkchain.runtime.core.errors import ChainExecutionError
from airflow_flinkchain.runtime.core.operators.base import StreamOperator


#: Generators whose per-record watermark is computed inline (exact types: a subclass may differ).
_BOUNDED_GENERATORS = (BoundedOutOfOrdernessWatermarks, AscendingTimestampsWatermarks)


class _WatermarkEmitter(WatermarkOutput):
    """Flink's WatermarkEmitter: forwards only advancing watermarks; tracks idleness."""

    def __init__(self, operator: "TimestampsAndWatermarksOperator"):
        self._op = operator
        self.current = MIN_WATERMARK_TS
        self.idle = False

    def emit_watermark(self, watermark: GeneratedWatermark) -> None:
        ts = watermark.get_timestamp()
        if ts <= self.current:
            return
        self.current = ts
        self.mark_active()
        self._op.emit_generated_watermark(ts)

    def mark_idle(self) -> None:
        if not self.idle:
            self.idle = True
            self._op.output.emit_watermark_status(WatermarkStatus.IDLE)

    def mark_active(self) -> None:
        if self.idle:
            self.idle = False
            self._op.output.emit_watermark_status(WatermarkStatus.ACTIVE)


class TimestampsAndWatermarksOperator(StreamOperator):
    fusable = False  # it sets the chain's timestamp cell per record

    def setup(self, runtime_context) -> None:
        super().setup(runtime_context)
        strategy = self.node.function
        self.assigner = strategy.get_timestamp_assigner()
        graph = self.scope.graph
        self.progressive = graph is not None and graph.runtime_mode == "streaming"
        self.per_record = self.progressive and graph.auto_watermark_interval > 0
        self.idleness = self.progressive and strategy.get_idle_timeout() is not None
        self.wm_output = _WatermarkEmitter(self)
        self.generator = None
        self._generator_calls: list = [None, None]
        self._restored_generator = None
        self._saw_records = False  # in an earlier stream run (idleness at the end of input)

    def open(self) -> None:
        super().open()
        if self.progressive:
            self._use_generator(self._restored_generator
                                or self.node.function.create_watermark_generator(self.runtime_context))

    def _use_generator(self, generator) -> None:
        self.generator = generator
        self._generator_calls[:] = [generator.on_event, generator.on_periodic_emit if self.per_record else None]

    def start_split(self, index: int, count: int) -> None:
        """Split `index` of the `count` this subtask's source reads one after another starts
        (`core.splits`). The subtask's watermark is the minimum over its splits, as Flink's
        per-split watermarks: held while a later split has not started (nothing is emitted), then
        the last split's own, from a fresh generator."""
        if self.generator is None or count < 2:
            return
        if index < count - 1:
            self.wm_output.current = MAX_WATERMARK_TS  # held: no generated watermark advances past it
            return
        fresh = self.node.function.create_watermark_generator(self.runtime_context)
        if type(fresh) is type(self.generator) and type(fresh) in _BOUNDED_GENERATORS:
            vars(self.generator).update(vars(fresh))  # the inlined per-record path holds this object
        else:
            self._use_generator(fresh)
        self.wm_output.current = self.current_watermark

    def emit_generated_watermark(self, timestamp: int) -> None:
        self.current_watermark = timestamp
        self.output.emit_watermark(Watermark(timestamp))

    def make_process(self, emit, side) -> Callable:
        emit = emit or (lambda _v: None)
        cell, metrics, err, cee = self.cell, self.metrics, self.error_handler(False), ChainExecutionError
        extract = self.assigner.extract_timestamp if self.assigner is not None else None
        generator, wm_output = self.generator, self.wm_output
        if self.per_record and type(generator) in _BOUNDED_GENERATORS:
            return self._bounded_process(emit, generator)
        calls = self._generator_calls  # [on_event, on_periodic_emit]: start_split may swap the generator
        min_ts = MIN_WATERMARK_TS

        def process(value: Any) -> None:
            metrics.records_in += 1
            previous = cell.value
            try:
                ts = extract(value, min_ts if previous is None else previous) if extract is not None else previous
                if ts is not None:
                    ts = int(ts)
            except cee:
                raise
            except Exception as exc:
                err(exc, value)
                return
            cell.value = ts
            try:
                metrics.records_out += 1
                emit(value)
            finally:
                cell.value = previous  # other branches of the chain keep the input's timestamp
            on_event, periodic = calls
            if on_event is not None:
                try:
                    on_event(value, min_ts if ts is None else ts, wm_output)
                    if periodic is not None:
                        periodic(wm_output)
                except cee:
                    raise
                except Exception as exc:
                    raise self.error("watermark generation", exc, value, True) from exc

        return process

    def _bounded_process(self, emit: Callable, generator: BoundedOutOfOrdernessWatermarks) -> Callable:
        """make_process for the built-in bounded-out-of-orderness generators emitting after every
        record: the generator's arithmetic inlined (same watermarks, no calls per record)."""
        cell, metrics, err, cee = self.cell, self.metrics, self.error_handler(False), ChainExecutionError
        extract = self.assigner.extract_timestamp if self.assigner is not None else None
        lag = generator.out_of_orderness + 1
        wm_output, emit_wm, wm_type = self.wm_output, self.output.emit_watermark, Watermark
        min_ts = MIN_WATERMARK_TS
        op = self

        # Same extract/emit steps as make_process's closure, inlined on purpose for the per-record path.
        def process(value: Any) -> None:
            metrics.records_in += 1
            previous = cell.value
            try:
                ts = extract(value, min_ts if previous is None else previous) if extract is not None else previous
                if ts is not None:
                    ts = int(ts)
            except cee:
                raise
            except Exception as exc:
                err(exc, value)
                return
            cell.value = ts
            try:
                metrics.records_out += 1
                emit(value)
            finally:
                cell.value = previous
            if ts is not None and ts > generator.max_timestamp:
                generator.max_timestamp = ts
                wm = ts - lag
                if wm > wm_output.current:
                    wm_output.current = op.current_watermark = wm
                    emit_wm(wm_type(wm))

        return process

    def process_watermark(self, watermark: Watermark) -> None:
        # only the end of input passes; this operator's generator makes the stream's watermarks
        if watermark.timestamp >= MAX_WATERMARK_TS and self.current_watermark < MAX_WATERMARK_TS:
            if self.idleness and self.metrics.records_in == 0 and not self._saw_records:
                # with_idleness: a subtask that never got a record was idle all along (Flink marks
                # it idle once its idle timeout passed); the downstream valve leaves it out from the start
                self.wm_output.mark_idle()
            self.wm_output.mark_active()  # as Flink: the final watermark of an idle output makes it active
            self.wm_output.current = MAX_WATERMARK_TS
            self.current_watermark = MAX_WATERMARK_TS
            self.output.emit_watermark(watermark)

    # ---- snapshot / restore (stream runs): the generator goes on where it stopped ----
    def snapshot_state(self) -> dict:
        return {**super().snapshot_state(), "generator": self.generator, "emitted": self.wm_output.current,
                "saw_records": self._saw_records or self.metrics.records_in > 0}

    def initialize_state(self, snapshots, own=None) -> None:
        super().initialize_state(snapshots, own)
        if own is not None:  # a generator belongs to its subtask; rescaled subtasks start a fresh one
            self._restored_generator = own.get("generator")
            self.wm_output.current = own.get("emitted", self.current_watermark)
            self._saw_records = bool(own.get("saw_records"))
        else:
            self.wm_output.current = self.current_watermark
