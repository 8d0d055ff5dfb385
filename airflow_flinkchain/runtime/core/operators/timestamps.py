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
combines channels (`start_split`): a record in order within its split is never late. A
source subtask without a split, or reading a piece of a file another subtask began, marks
its output idle so that it does not hold the watermark downstream back (`read_splits`).

Batches (`process_batch`, when the assigner reads one field: planner/vectorized.py): an integer
column without nulls stamps the batch's `_ts` at once, and the built-in bounded generators'
watermark after every record is computed for the whole batch (a running maximum of the
timestamps, less the delay, less 1, passed on where it advances, as per record); an edge
writer taking `write_watermarked_batch` stores them in bulk. Anything else goes per record.

Idleness (`with_idleness`): the generator's `mark_idle`/`mark_active` go out as
watermark statuses. Deterministic stand-in for the idle timeout: a subtask that gets
no record at all is idle from its start, so the downstream WatermarkValve leaves its
channel out while the others advance.
"""

from __future__ import annotations

import time
from typing import Any, Callable

import numpy as np
import pyarrow as pa

from airflow_flinkchain.common import AscendingTimestampsWatermarks, BoundedOutOfOrdernessWatermarks
from airflow_flinkchain.common import Watermark as GeneratedWatermark
from airflow_flinkchain.common import WatermarkOutput
from airflow_flinkchain.runtime.core.elements import MAX_WATERMARK_TS, MIN_WATERMARK_TS, Watermark, WatermarkStatus
from airflow_flinkchain.runtime.core.errors import ChainExecutionError
from airflow_flinkchain.runtime.core.metrics import TIMING_SAMPLE_EVERY
from airflow_flinkchain.runtime.core.operators.base import StreamOperator
from airflow_flinkchain.runtime.core.outputs import RecordWriterOutput
from airflow_flinkchain.runtime.core.record_types import TS_COLUMN


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
        self._ends_idle = False  # `read_splits`: the output ends idle, not with the MAX watermark
        self._idle_output = False  # `read_splits` marked the output idle (no split)
        from airflow_flinkchain.planner.vectorized import vectorized_timestamps
        self.ts_field = vectorized_timestamps(self.node)
        self.takes_batches = self.ts_field is not None
        self._batch_paths: Any = None
        self.batch_records = 0  # records passed in whole batches, and their time (seconds)
        self.batch_time = self.batch_child_time = 0.0

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

    def read_splits(self, layout) -> None:
        """The subtask's `core.splits.SplitLayout`, before its first record. A subtask without a
        split finished at once in Flink (its MAX watermark reaches the valves downstream first):
        its output is idle from the start. A subtask whose only split goes on from the subtask
        before it (a piece of a file, read after that subtask's piece) is idle until the valves
        downstream start reading it, and then active (its watermark counts once it reaches
        theirs); one whose last split goes on in the next subtask ends idle (`process_watermark`)."""
        if not self.progressive:
            return
        if layout.count == 0:
            self._ends_idle = self._idle_output = True
            self.output.emit_watermark_status(WatermarkStatus.IDLE)
            return
        if layout.count == 1 and layout.continues:
            self.output.emit_watermark_status(WatermarkStatus.IDLE)
            self.output.emit_watermark_status(WatermarkStatus.ACTIVE)
        self._ends_idle = layout.continued

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

    # ---- whole batches ----
    def process_batch(self, batch: pa.RecordBatch) -> None:
        if self._batch_paths is None:
            self._batch_paths = self._build_batch_paths()
        stamped, per_record = self._batch_paths
        t0 = time.perf_counter()
        n = batch.num_rows
        col = batch.column(self.ts_field) if self.ts_field in batch.schema.names else None
        if col is None or not pa.types.is_integer(col.type) or col.null_count or (
                pa.types.is_uint64(col.type) and n and col.to_numpy().max() >= 2**62):
            per_record(batch)  # per record: a missing field, nulls, other types
            return
        ts = col.to_numpy(zero_copy_only=False).astype(np.int64, copy=False)
        if n and (ts.min() < -2**62 or ts.max() > 2**62):
            per_record(batch)  # int64 arithmetic below could differ from Python's
            return
        ts_array = pa.array(ts, pa.int64())
        if TS_COLUMN in batch.schema.names:
            batch = batch.set_column(batch.schema.get_field_index(TS_COLUMN), TS_COLUMN, ts_array)
        else:
            batch = batch.append_column(TS_COLUMN, ts_array)
        m = self.metrics
        counted = m.records_in
        stamped(batch, ts)
        if m.records_in == counted:  # passed as a batch (the per-record fallback counts each record itself)
            m.records_in += n
            m.records_out += n
            self.batch_records += n
            self.batch_time += time.perf_counter() - t0 - self.batch_child_time
        self.batch_child_time = 0.0

    def _build_batch_paths(self):
        """(stamped(batch, ts), per_record(batch)) for this subtask's generator and output."""
        per_record = rows_emitter_of(self)
        emit = batch_emitter_of(self)
        if emit is not None and self.chained_targets:
            emit = self._timed_apart(emit)
        generator, wm_output = self.generator, self.wm_output
        if generator is None:  # BATCH mode: no watermark until the end
            return (lambda batch, ts: emit(batch) if emit is not None else None), per_record
        if type(generator) not in _BOUNDED_GENERATORS:
            return (lambda batch, ts: per_record(batch)), per_record
        lag = generator.out_of_orderness + 1
        if not self.per_record:  # auto_watermark_interval 0: the generator only sees the records
            def seen(batch: pa.RecordBatch, ts: np.ndarray) -> None:
                if len(ts):
                    generator.max_timestamp = max(generator.max_timestamp, int(ts.max()))
                if emit is not None:
                    emit(batch)
            return seen, per_record
        bulk = self._bulk_writer()
        op = self

        def watermarked(batch: pa.RecordBatch, ts: np.ndarray) -> None:
            if lag > 2**61:
                per_record(batch)
                return
            top = np.maximum.accumulate(np.concatenate([[generator.max_timestamp], ts]))
            wm = top[1:] - lag
            before = np.maximum(wm_output.current, top[:-1] - lag)  # the watermark emitted before each row
            after = np.flatnonzero(wm > before)  # rows after which it advances
            if bulk is None:
                if len(after):
                    per_record(batch.drop_columns([TS_COLUMN]))  # interleaved watermarks: per record
                    return
                if emit is not None:
                    emit(batch)
            else:
                bulk(batch, after, wm[after])
            generator.max_timestamp = int(top[-1])
            if len(after):
                wm_output.current = op.current_watermark = int(wm[after[-1]])

        return watermarked, per_record

    def _timed_apart(self, emit: Callable) -> Callable:
        """`emit` whose time (in the chained operators it feeds) is not this operator's own:
        a batch's time here is its stamping, its watermarks and its writing to the edges."""
        clock, op = time.perf_counter, self

        def emit_apart(batch: pa.RecordBatch) -> None:
            t0 = clock()
            try:
                emit(batch)
            finally:
                op.batch_child_time += clock() - t0

        return emit_apart

    def finish_metrics(self):
        m = self.metrics
        if self.batch_records:  # the samples (if any) stand for the records that came one by one
            m.records_in -= self.batch_records
            super().finish_metrics()
            m.records_in += self.batch_records
            m.time_ms += self.batch_time * 1000.0
            self.batch_records, self.batch_time = 0, 0.0
            return m
        return super().finish_metrics()

    def _bulk_writer(self):
        """callable(batch, after, watermarks) writing the batch and its watermarks to the one edge
        this operator's output is, when its writer stores them in bulk; else None."""
        out = self.output
        if type(out) is not RecordWriterOutput or out.output_tag is not None:
            return None
        rw = out.record_writer
        write = getattr(rw.channel_sink, "write_watermarked_batch", None)
        sel = rw.selector
        key_field = sel if type(sel) is int else getattr(sel, "key_field", None)
        if write is None or key_field is None:
            return None
        from airflow_flinkchain.runtime.core.batches import batch_channels
        channels_of = batch_channels(rw)
        per_record = rows_emitter_of(self)
        fail = out.fail

        def bulk(batch: pa.RecordBatch, after: np.ndarray, watermarks: np.ndarray) -> None:
            channels = channels_of(batch)
            if channels is None:  # keys grouped per record
                per_record(batch.drop_columns([TS_COLUMN]))
                return
            try:
                write(channels, batch, after, watermarks)
            except Exception as exc:
                fail(exc, f"<a batch of {batch.num_rows} rows>")

        return bulk

    def process_watermark(self, watermark: Watermark) -> None:
        # only the end of input passes; this operator's generator makes the stream's watermarks
        if watermark.timestamp >= MAX_WATERMARK_TS and self.current_watermark < MAX_WATERMARK_TS:
            if self._ends_idle:  # no split, or the last goes on in the next subtask (`read_splits`)
                if not self.wm_output.idle and not self._idle_output:
                    self.output.emit_watermark_status(WatermarkStatus.IDLE)
                self._idle_output = True  # the MAX below is ignored downstream: the next subtask goes on
                self.wm_output.current = self.current_watermark = MAX_WATERMARK_TS
                self.output.emit_watermark(watermark)
                return
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


def rows_emitter_of(op: TimestampsAndWatermarksOperator) -> Callable:
    """The per-record path for a batch: its rows through the operator's own record handler,
    every TIMING_SAMPLE_EVERY-th (the first included) through its timed wiring, as a chain's
    input is."""
    from airflow_flinkchain.runtime.core.batches import rows_emitter
    fast, timed, every = op.handler(False), op.handler(True), TIMING_SAMPLE_EVERY
    n = 0

    def handle(value: Any) -> None:
        nonlocal n
        n += 1
        if (n - 1) % every:
            fast(value)
        else:
            timed(value)

    return rows_emitter(handle, op.cell)


def batch_emitter_of(op: TimestampsAndWatermarksOperator):
    from airflow_flinkchain.runtime.core.batches import batch_emitter
    return batch_emitter(op.output, None, False, op.cell)
