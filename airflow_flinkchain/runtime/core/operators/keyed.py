"""Keyed operators (after key_by): keyed state, timers, and the BATCH / STREAMING difference.

`KeyedOperator` is the base every keyed operator subclasses (keyed process, reduce, keyed
map / flat_map / filter, the window operator). It owns
- `state_backend`: the pipeline's keyed state backend (runtime/state/factory.py: heap or
  RocksDB; always heap in BATCH) over this subtask's key-group range, keyed by Python
  equality (keys.py) and assigning key groups as the HASH partitioner does; disposed last;
  `runtime_context.get_state(...)` etc. read it for the current key;
- `timer_service`: an InternalTimerService (runtime/core/timers.py) calling back
  `on_event_time(timer)` / `on_processing_time(timer)` with the timer's key set as current key;
  `user_timer_service` is what `ctx.timer_service()` returns (Flink's SimpleTimerService);
- the mode, `self.batch` (the graph's `runtime_mode`).

Subclasses implement `record_processor(emit, side) -> fn(value)`: process one record whose key
is already the current key, applying the on_error policy to failures of the user function.
They may override `on_event_time`, `on_processing_time` and `on_key_end(key)`.

STREAMING (Flink's default operators): every record sets its key, then is processed at once.
A watermark advances the timer service (event-time timers with timestamp <= watermark fire in
timestamp order, then the watermark goes downstream). The MAX watermark at the end of bounded
input fires every remaining event-time timer; then, as Java Flink quiesces an operator's
processing-time service before finishing it, pending processing-time timers are dropped
(processing time is not simulated during the run: they never fire).

BATCH (Flink's sort-based batch execution): the operator is its own sorting input. Records are
buffered per key in memory (Flink's sorter spills to disk; here a subtask's keyed input must fit
in its worker's memory; keys in first-seen order, so results are deterministic for a given input
order; Flink orders keys by their serialized bytes) and, at the end of input, replayed key by
key in timestamp order (stable: records without timestamps keep their arrival order). No
watermark reaches the operator's function before the end. When a key's records are done, its
event-time timers fire (as under the MAX watermark; `current_watermark()` is MAX meanwhile),
then its processing-time timers (a timer registered meanwhile is ignored, as Flink's
BatchExecutionInternalTimeService does), then `on_key_end(key)`; then the backend drops the key's state
(Flink's BatchExecutionKeyedStateBackend holds one key at a time). Nothing is ever late.

ReduceOperator: STREAMING emits the rolling result per record, stamped with the record's
timestamp (StreamGroupedReduceOperator); BATCH emits one final result per key at the key's end,
stamped MAX_WATERMARK (BatchGroupedReduceOperator). KeyedStream.sum/min/max/min_by/max_by are
reduces (api/aggregations.py).

A failing key selector is an error of the keyed operator, under its on_error policy.

Two-input keyed operators (two_input.py: keyed co-process, keyed broadcast process) build one
keyed handler per input with `_keyed_handler(timed, key_of, processor, input_number)`: both
inputs share the backend and timers; BATCH buffers each record with its input number, and
`process_key` replays a key's records of both inputs together.
"""

from __future__ import annotations

import time
from operator import itemgetter
from typing import Any, Callable, Optional

from airflow_flinkchain.graph.model import OperatorKind
from airflow_flinkchain.planner.vectorized import buffers_batches
from airflow_flinkchain.runtime.core.batches import rows_emitter
from airflow_flinkchain.runtime.core.elements import MAX_WATERMARK_TS, MIN_WATERMARK_TS, Watermark
from airflow_flinkchain.runtime.core.errors import ChainExecutionError
from airflow_flinkchain.runtime.core.keys import key_getter
from airflow_flinkchain.runtime.core.operators.base import (
    StreamOperator,
    adapt_function,
    filter_processor,
    flat_map_processor,
    map_processor,
)
from airflow_flinkchain.runtime.core.operators.key_batches import KeyBatches
from airflow_flinkchain.runtime.core.operators.process import ProcessContext, make_result_emitter, process_handler
from airflow_flinkchain.runtime.core.partitioners import key_group_for_key
from airflow_flinkchain.runtime.state.factory import create_keyed_state_backend
from airflow_flinkchain.runtime.state.key_groups import compute_key_group_range_for_operator_index
from airflow_flinkchain.runtime.core.timers import InternalTimerService, SimpleTimerService
from airflow_flinkchain.state import ValueStateDescriptor

_UNSET = object()

_KEYED_KINDS = frozenset({OperatorKind.MAP, OperatorKind.FLAT_MAP, OperatorKind.FILTER, OperatorKind.KEYED_PROCESS,
                          OperatorKind.REDUCE, OperatorKind.KEYED_CO_PROCESS, OperatorKind.KEYED_BROADCAST_PROCESS})


def key_error_channel(node, default_on_error: str) -> Optional[int]:
    """Where a HASH edge sends a record its key selector fails on: channel 0 when
    `node` recomputes the key under a dead_letter/skip policy (it then routes
    the record aside), None to fail at once (policy "fail"; sinks, unions)."""
    recomputes = node.key_selector is not None and node.kind in _KEYED_KINDS
    policy = node.on_error or default_on_error or "fail"
    return 0 if recomputes and policy != "fail" else None


def _timestamp_or_min(record: tuple) -> int:
    ts = record[0]
    return MIN_WATERMARK_TS if ts is None else ts


def sort_by_timestamp(records: list) -> None:
    """Stable sort of [(timestamp, value)] by timestamp; records without one (None) sort first.
    The common cases (all or none timestamped) stay at C speed."""
    if len(records) < 2:
        return
    untimed = list(map(itemgetter(0), records)).count(None)
    if untimed == 0:
        records.sort(key=itemgetter(0))
    elif untimed < len(records):
        records.sort(key=_timestamp_or_min)


class KeyedOperator(StreamOperator):
    """Base of keyed operators: state backend, timers, key context, BATCH per-key execution."""

    fusable = False  # the key context is set per record by the operator's own code

    def __init__(self, node, scope):
        super().__init__(node, scope)
        if node.key_selector is None:
            raise ValueError(f"operator {node.name!r} is keyed but has no key selector (use key_by())")
        self.key_selector = key_getter(adapt_function(node.key_selector, "get_key", node), node.name)
        mp = node.max_parallelism
        graph = scope.graph
        self.batch = graph is None or graph.runtime_mode != "streaming"
        self.state_backend = create_keyed_state_backend(
            getattr(graph, "state_backend", None),
            max_parallelism=mp,
            key_group_range=compute_key_group_range_for_operator_index(mp, scope.parallelism, scope.subtask),
            key_group_of=key_group_for_key, subtask=scope.subtask, operator_name=node.name, batch=self.batch,
        )
        self.timer_service = InternalTimerService(self.state_backend, self)
        self.user_timer_service = SimpleTimerService(self.timer_service, self)
        self._buffer: dict = {}  # BATCH: key -> [(timestamp, value)], keys in first-seen order
        # BATCH, keyed by a field: typed exchange batches are held whole (process_batch)
        key_field = buffers_batches(graph, node) if self.batch else None
        self._key_batches = KeyBatches(key_field or "")
        if key_field is not None:
            self.takes_batches = True
        self._processors: dict = {}
        self._timed_processor: Optional[Callable] = None
        self._replayed = 0  # BATCH: records replayed so far (timing samples)

    # ---- to implement ------------------------------------------------------
    def record_processor(self, emit: Optional[Callable], side: Callable[[str], Optional[Callable]]) -> Callable:
        """fn(value) processing one record of the current key (on_error applied inside)."""
        raise NotImplementedError

    def on_event_time(self, timer) -> None:
        """An event-time timer of `timer.key` (the current key) fired."""

    def on_processing_time(self, timer) -> None:
        """A processing-time timer of `timer.key` (the current key) fired."""

    def on_key_end(self, key: Any) -> None:
        """BATCH: every record and timer of `key` was processed; its state is dropped next."""

    # ---- records -----------------------------------------------------------
    def _processor(self, timed: bool) -> Callable:
        p = self._processors.get(timed)
        if p is None:
            out = self.output
            p = self._processors[timed] = self.record_processor(
                out.main_emitter(timed), lambda tag_id: out.side_emitter(tag_id, timed))
        return p

    def _build_handler(self, timed: bool) -> Callable[[Any], None]:
        h = self._keyed_handler(timed)
        # BATCH: buffering is not timed; the replay samples records through the timed wiring
        return self._timing(h) if timed and not self.batch else h

    def _keyed_handler(self, timed: bool, key_of: Optional[Callable] = None, inner: Optional[Callable] = None,
                       input_number: int = 0) -> Callable[[Any], None]:
        """fn(value): set the record's key, then process it (STREAMING) or buffer it for
        the key's replay (BATCH). A two-input operator passes each input's key selector
        and processor; its BATCH buffer entries carry the input number (1 or 2)."""
        metrics, err, cee = self.metrics, self.error_handler(False), ChainExecutionError
        key_of = key_of or self.key_selector
        if self.batch:
            buffer, cell, key_batches = self._buffer, self.cell, self._key_batches
            held = key_batches.batches

            def collect(value: Any) -> None:
                metrics.records_in += 1
                if held:
                    key_batches.release(buffer)  # rows held before it go first
                try:
                    key = key_of(value)
                except cee:
                    raise
                except Exception as exc:
                    err(exc, value)
                    return
                records = buffer.get(key)
                if records is None:
                    records = buffer[key] = []
                records.append((cell.value, value, input_number) if input_number else (cell.value, value))

            return collect

        inner = inner or self._processor(timed)
        backend = self.state_backend
        key_groups, first, last = backend._key_groups, backend._first_key_group, backend._last_key_group
        set_key = backend.set_current_key

        def process(value: Any) -> None:
            metrics.records_in += 1
            try:
                key = key_of(value)
                kg = key_groups.get(key)
                if kg is not None and first <= kg <= last:  # set_current_key, inlined
                    backend.current_key, backend.current_key_group = key, kg
                else:
                    set_key(key)
            except cee:
                raise
            except Exception as exc:
                err(exc, value)
                return
            inner(value)

        return process

    def process_batch(self, batch) -> None:
        """BATCH, keyed by a field: held whole (key_batches.py); a batch whose keys cannot be
        grouped so (and all input after it) goes into the per-record buffer."""
        if batch.num_rows == 0:
            return
        self.handler(False)  # the wiring the replay emits through
        if not self._buffer and self._key_batches.add(batch):
            self.metrics.records_in += batch.num_rows
            return
        self._key_batches.release(self._buffer)  # rows held before it go first
        rows_emitter(self.handler(False), self.cell)(batch)

    def dispose(self) -> None:
        try:
            super().dispose()
        finally:
            self.state_backend.dispose()

    # ---- snapshot / restore ------------------------------------------------
    def snapshot_state(self) -> dict:
        """Flink's snapshotState: this subtask's watermark, keyed state and pending timers,
        by key group."""
        return {**super().snapshot_state(), "keyed_state": self.state_backend.snapshot(),
                "timers": self.timer_service.snapshot()}

    def initialize_state(self, snapshots, own: Optional[dict] = None) -> None:
        """Flink's initializeState: the entries of this subtask's key groups from the snapshots
        of any number of former subtasks (same max parallelism, any parallelism)."""
        snapshots = list(snapshots)
        super().initialize_state(snapshots, own)
        self.state_backend.restore([s["keyed_state"] for s in snapshots])
        self.timer_service.restore([s["timers"] for s in snapshots], self.state_backend.key_group_range)
        if self.current_watermark > MIN_WATERMARK_TS:  # lateness is judged against the restored watermark
            self.timer_service.current_watermark = self.current_watermark

    # ---- watermarks and the end of input ------------------------------------
    def process_watermark(self, watermark: Watermark) -> None:
        ts = watermark.timestamp
        if self.batch:
            if ts < MAX_WATERMARK_TS:
                return  # BATCH: no watermark before the end of input
            self._replay_batch()
            self.current_watermark = ts
        else:
            self.current_watermark = ts
            self.timer_service.advance_watermark(ts)
            if ts >= MAX_WATERMARK_TS:
                self._fire_all_timers()
        self.output.emit_watermark(watermark)

    def end_input(self) -> None:
        if self.batch:
            self._replay_batch()
        else:
            self._fire_all_timers()

    def _fire_all_timers(self) -> None:
        """STREAMING end of input: every remaining event-time timer (as under the MAX watermark),
        then the processing-time service is quiesced, as Java Flink does before finishing an
        operator: pending processing-time timers do not fire."""
        service = self.timer_service
        service.advance_watermark(MAX_WATERMARK_TS)
        service.quiesce_processing_time()

    def _replay_batch(self) -> None:
        if self._key_batches:
            for key, records in self._key_batches.by_key():
                self.state_backend.set_current_key(key)
                self.process_key(key, records)
                self.end_key(key)
        buffer = self._buffer
        if not buffer:
            return
        keys = list(buffer)
        for key in keys:
            records = buffer.pop(key)
            self.state_backend.set_current_key(key)
            self.process_key(key, records)
            self.end_key(key)

    def process_key(self, key: Any, records: list) -> None:
        """BATCH: the records [(timestamp, value)] of `key` (the current key), in arrival order.
        Every TIMING_SAMPLE_EVERY-th record goes through the timed wiring (time_ms)."""
        from airflow_flinkchain.runtime.core.metrics import TIMING_SAMPLE_EVERY

        sort_by_timestamp(records)
        process, cell = self._processor(False), self.cell
        timed = self._timed_processor
        if timed is None:
            timed = self._timed_processor = self._timing(self._processor(True))
        n = self._replayed
        saved = cell.value
        try:
            for ts, value in records:
                cell.value = ts
                n += 1
                if n % TIMING_SAMPLE_EVERY:
                    process(value)
                else:
                    timed(value)
        finally:
            cell.value = saved
            self._replayed = n

    def end_key(self, key: Any) -> None:
        self.current_watermark = MAX_WATERMARK_TS
        try:
            self.timer_service.fire_all_at_key_end()
            self.on_key_end(key)
        finally:
            self.current_watermark = MIN_WATERMARK_TS
            self.timer_service.current_watermark = MIN_WATERMARK_TS
        self.state_backend.clear_all()


class UserTimers:
    """For keyed operators of a function with `on_timer(ts, ctx)`: their timers (both
    domains) call it; `setup_on_timer()` at setup."""

    def setup_on_timer(self) -> None:
        on_timer = getattr(self.node.function, "on_timer", None)
        self.on_timer = on_timer if callable(on_timer) else None
        self._timer_emitter = None

    def _fire(self, timer) -> None:
        fire = self._timer_emitter
        if fire is None:
            fire = self._timer_emitter = timer_firer(self, self.on_timer, ProcessContext(self, self.firing_emitter))
        fire(timer)

    on_event_time = _fire
    on_processing_time = _fire


class KeyedProcessOperator(UserTimers, KeyedOperator):
    """A KeyedProcessFunction (or callable(value, ctx)): `process_element`, `on_timer`."""

    def setup(self, runtime_context) -> None:
        super().setup(runtime_context)
        self.fn = adapt_function(self.node.function, "process_element", self.node)
        self.setup_on_timer()

    def record_processor(self, emit, side) -> Callable:
        return process_handler(self, self.fn, ProcessContext(self, side), emit, count_in=False)


def timer_firer(op: KeyedOperator, on_timer: Optional[Callable], ctx: ProcessContext) -> Callable:
    """fire(timer): the user's `on_timer(ts, ctx)` for a timer of the current key, its
    results stamped with the timer's time, failures under the operator's on_error policy."""
    emit_results = make_result_emitter(op, op.firing_emitter(), ctx)
    cell, err, cee = op.cell, op.error_handler(False), ChainExecutionError

    # process_handler's shape for a timer (its time on the cell, the timer as the failing record).
    def fire(timer) -> None:
        if on_timer is None:
            return
        ts = timer.timestamp
        saved, cell.value = cell.value, ts  # outputs of a timer carry its time
        try:
            results = on_timer(ts, ctx)
            if results is not None:
                emit_results(results)
        except cee:
            raise
        except Exception as exc:
            err(exc, {"timer": ts, "key": timer.key})
        finally:
            cell.value = saved

    return fire


class ReduceOperator(KeyedOperator):
    """Keyed reduce: rolling results (STREAMING) or one final result per key (BATCH)."""

    STATE = ValueStateDescriptor("_reduce_state")
    _end_emitter: Any = _UNSET  # built at the first key's end (the output is set after __init__)

    def setup(self, runtime_context) -> None:
        super().setup(runtime_context)
        self.fn = adapt_function(self.node.function, "reduce", self.node)
        self.acc_state = self.state_backend.get_state(self.STATE)

    def record_processor(self, emit, side) -> Callable:
        fn, err, metrics, cee = self.fn, self.error_handler(False), self.metrics, ChainExecutionError
        state = self.acc_state
        value_of, update = state.value, state.update

        # map_processor's shape with the reduce step inlined on purpose for the per-record path.
        def rolling(value: Any) -> None:
            try:
                acc = value_of()
                acc = value if acc is None else fn(acc, value)
                update(acc)
            except cee:
                raise
            except Exception as exc:
                err(exc, value)
                return
            metrics.records_out += 1
            if emit is not None:
                emit(acc)

        return rolling

    def process_key(self, key: Any, records: list) -> None:
        """BATCH: fold the key's records in timestamp order into a local accumulator (timed
        per key: the fold calls nothing downstream)."""
        start = time.perf_counter()
        sort_by_timestamp(records)
        fn, err, cee = self.fn, self.error_handler(False), ChainExecutionError
        values = iter(records)
        acc = next(values)[1]
        for _ts, value in values:
            try:
                acc = fn(acc, value)
            except cee:
                raise
            except Exception as exc:
                err(exc, value)
        self.acc_state.update(acc)
        self.sampled_time += time.perf_counter() - start
        self.sampled_in += len(records)

    def on_key_end(self, key: Any) -> None:
        acc = self.acc_state.value()
        if acc is None:
            return
        cell = self.cell
        saved, cell.value = cell.value, MAX_WATERMARK_TS
        try:
            self.metrics.records_out += 1
            emit = self._end_emitter
            if emit is _UNSET:
                emit = self._end_emitter = self.firing_emitter()
            if emit is not None:
                emit(acc)
        finally:
            cell.value = saved


class KeyedMapOperator(KeyedOperator):
    """map after key_by: the function runs in the record's key context (keyed state)."""

    method = "map"
    processor = staticmethod(map_processor)

    def setup(self, runtime_context) -> None:
        super().setup(runtime_context)
        self.fn = adapt_function(self.node.function, self.method, self.node)

    def record_processor(self, emit, side) -> Callable:
        return self.processor(self, self.fn, emit, count_in=False)


class KeyedFlatMapOperator(KeyedMapOperator):
    method = "flat_map"
    processor = staticmethod(flat_map_processor)


class KeyedFilterOperator(KeyedMapOperator):
    method = "filter"
    processor = staticmethod(filter_processor)


KEYED_OPERATORS = {
    OperatorKind.KEYED_PROCESS: KeyedProcessOperator,
    OperatorKind.REDUCE: ReduceOperator,
    OperatorKind.MAP: KeyedMapOperator,
    OperatorKind.FLAT_MAP: KeyedFlatMapOperator,
    OperatorKind.FILTER: KeyedFilterOperator,
}
