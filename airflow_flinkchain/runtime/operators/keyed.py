"""Keyed operators (after key_by), with BATCH semantics for bounded runs.

- KeyedProcessOperator: per-key ValueState via runtime_context.get_state,
  ctx.get_current_key(), event-time timers that fire when the watermark
  passes them (in timestamp, then registration order); the end of input
  pushes MAX_WATERMARK, which fires every remaining timer, as Flink's BATCH
  mode does. Processing-time timers fire at end of input.
- ReduceOperator: one final record per key at end of input (Flink's
  BatchGroupedReduceOperator: on MAX_WATERMARK, timestamp MAX_WATERMARK),
  keys in first-seen order (deterministic for a given input order; Flink
  orders by serialized key instead).
State and timers live in one KeyedStateBackend (snapshot()/restore())."""

from __future__ import annotations

from typing import Any, Callable

from airflow_flinkchain.runtime.elements import MAX_WATERMARK_TS, Watermark
from airflow_flinkchain.runtime.errors import ChainExecutionError
from airflow_flinkchain.runtime.operators.base import StreamOperator, adapt_function
from airflow_flinkchain.runtime.operators.process import ProcessContext, ProcessOperator, make_result_emitter
from airflow_flinkchain.runtime.state import KeyedStateBackend, TimerService

_MISSING = object()


class KeyedOperatorMixin:
    def _init_keyed(self) -> None:
        self.state_backend = KeyedStateBackend()
        if self.node.key_selector is None:
            raise ValueError(f"operator {self.node.name!r} is keyed but has no key selector (use key_by())")
        self.key_selector = adapt_function(self.node.key_selector, "get_key", self.node)


class KeyedProcessOperator(KeyedOperatorMixin, ProcessOperator):
    fusable = False  # the current key, state and timers are set per record by its own loop

    def __init__(self, node, scope):
        super().__init__(node, scope)
        self._init_keyed()
        self.timer_service = TimerService(self.state_backend, self)
        self._timer_fire = None

    def setup(self, runtime_context) -> None:
        super().setup(runtime_context)
        fn = self.node.function
        on_timer = getattr(fn, "on_timer", None)
        self.on_timer = on_timer if callable(on_timer) else None

    def make_process(self, emit, side) -> Callable:
        ctx = ProcessContext(self, side)
        emit_results = make_result_emitter(self, emit, ctx)
        fn, err, metrics, cee = self.fn, self.error_handler(False), self.metrics, ChainExecutionError
        backend, key_of = self.state_backend, self.key_selector

        def process(value: Any) -> None:
            metrics.records_in += 1
            try:
                backend.current_key = key_of(value)
                results = fn(value, ctx)
                if results is not None:
                    emit_results(results)
            except cee:
                raise
            except Exception as exc:
                err(exc, value)

        return process

    def _timer_firer(self) -> Callable[[int, Any], None]:
        if self._timer_fire is None:
            out = self.output
            ctx = ProcessContext(self, lambda tag_id: out.side_emitter(tag_id, False))
            emit_results = make_result_emitter(self, out.main_emitter(False), ctx)
            err, backend, cell, on_timer = self.error_handler(False), self.state_backend, self.cell, self.on_timer

            def fire(ts: int, key: Any) -> None:
                backend.current_key = key
                saved, cell.value = cell.value, ts  # outputs of a timer carry its timestamp
                try:
                    if on_timer is not None:
                        results = on_timer(ts, ctx)
                        if results is not None:
                            emit_results(results)
                except ChainExecutionError:
                    raise
                except Exception as exc:
                    err(exc, {"timer": ts, "key": key})
                finally:
                    cell.value = saved

            self._timer_fire = fire
        return self._timer_fire

    def process_watermark(self, watermark: Watermark) -> None:
        self.current_watermark = watermark.timestamp
        backend = self.state_backend
        due = backend.pop_due_timer(watermark.timestamp)
        if due is not None:
            fire = self._timer_firer()
            while due is not None:
                fire(*due)
                due = backend.pop_due_timer(watermark.timestamp)
        self.output.emit_watermark(watermark)

    def end_input(self) -> None:
        fire = None
        for ts, key in self.state_backend.pop_processing_time_timers():
            fire = fire or self._timer_firer()
            fire(ts, key)


class ReduceOperator(KeyedOperatorMixin, StreamOperator):
    TABLE = "reduce"

    def __init__(self, node, scope):
        super().__init__(node, scope)
        self._init_keyed()

    def setup(self, runtime_context) -> None:
        super().setup(runtime_context)
        self.fn = adapt_function(self.node.function, "reduce", self.node)

    def make_process(self, emit, side) -> Callable:
        fn, err, metrics = self.fn, self.error_handler(False), self.metrics
        accumulators, key_of, missing = self.state_backend.table(self.TABLE), self.key_selector, _MISSING

        def process(value: Any) -> None:
            metrics.records_in += 1
            try:
                key = key_of(value)
                acc = accumulators.get(key, missing)
                accumulators[key] = value if acc is missing else fn(acc, value)
            except Exception as exc:
                err(exc, value)

        return process

    def _emit_results(self) -> None:
        accumulators = self.state_backend.table(self.TABLE)
        if not accumulators:
            return
        emit = self.output.main_emitter(False)
        cell = self.cell
        saved, cell.value = cell.value, MAX_WATERMARK_TS
        try:
            results = list(accumulators.values())
            accumulators.clear()
            self.metrics.records_out += len(results)
            if emit is not None:
                for value in results:
                    emit(value)
        finally:
            cell.value = saved

    def process_watermark(self, watermark: Watermark) -> None:
        self.current_watermark = watermark.timestamp
        if watermark.timestamp >= MAX_WATERMARK_TS:
            self._emit_results()
        self.output.emit_watermark(watermark)

    def end_input(self) -> None:
        self._emit_results()
