"""The chain operator of a WINDOW node: window.py's WindowOperator inside an OperatorChain.

Records enter with the timestamp of the chain's TimestampCell; results leave stamped
with the timestamp the core gives them (a window's `max_timestamp()`, also for late
firings; a late record keeps its own), through the chain's outputs. The late-data
side output is an ordinary side output (an edge with the tag).

STREAMING: each watermark advances the core's timers (firing windows) and is then
forwarded. BATCH: the KeyedOperator base holds the records and, at the end of input,
replays them key by key in timestamp order, firing each key's windows at the end of
the key (Flink's sort-based batch execution: nothing is late); then the MAX watermark
goes on. A window reducing or aggregating over tumbling or sliding event-time windows with
the default trigger replays a key in local accumulators (window_replay.py). Keyed by a
field, the operator takes typed exchange batches into its buffer whole (KeyedOperator).
"""

from __future__ import annotations

import time
from typing import Any, Callable, Optional

from airflow_flinkchain.graph.windows import WindowFunctionKind
from airflow_flinkchain.runtime.core.elements import Watermark
from airflow_flinkchain.runtime.core.errors import ChainExecutionError
from airflow_flinkchain.runtime.core.operators.base import adapt_function
from airflow_flinkchain.runtime.core.operators.keyed import KeyedOperator, sort_by_timestamp
from airflow_flinkchain.runtime.core.operators.window import (
    WindowOperator,
    aggregate_window,
    process_window,
    reduce_window,
)
from airflow_flinkchain.runtime.core.operators.window_replay import KeyWindowFold


def _drop(_value: Any) -> None:
    pass


_UNKNOWN = object()


class _ChainOutput:
    """The core's output (`collect(value, ts)`, `collect_side(tag, value, ts)`,
    `emit_watermark(ts)`) onto the chain: the timestamp goes into the cell for the call."""

    def __init__(self, operator: "WindowStreamOperator"):
        self._op = operator
        self._cell = operator.cell
        self._metrics = operator.metrics
        self._main: Callable[[Any], None] = _drop
        self._side_lookup: Callable[[str], Optional[Callable]] = lambda tag_id: None
        self._side: dict = {}

    def bind(self, main: Optional[Callable], side_lookup: Callable[[str], Optional[Callable]]) -> None:
        self._main = main or _drop
        self._side_lookup = side_lookup
        self._side = {}

    def collect(self, value: Any, timestamp: Optional[int]) -> None:
        cell = self._cell
        saved, cell.value = cell.value, timestamp
        try:
            self._metrics.records_out += 1
            self._main(value)
        finally:
            cell.value = saved

    def collect_side(self, tag: Any, value: Any, timestamp: Optional[int]) -> None:
        tag_id = tag if isinstance(tag, str) else tag.tag_id
        emit = self._side.get(tag_id, _UNKNOWN)
        if emit is _UNKNOWN:
            emit = self._side[tag_id] = self._side_lookup(tag_id)
        counts = self._metrics.side_outputs
        counts[tag_id] = counts.get(tag_id, 0) + 1
        if emit is None:
            return
        cell = self._cell
        saved, cell.value = cell.value, timestamp
        try:
            emit(value)
        finally:
            cell.value = saved

    def emit_watermark(self, timestamp: int) -> None:
        self._op.current_watermark = timestamp
        self._op.output.emit_watermark(Watermark(timestamp))


class WindowStreamOperator(KeyedOperator):
    """A keyed operator whose timers are the core's: they fire its windows. The KeyedOperator
    base sets the current key per record, advances the timers on watermarks (STREAMING) and
    replays each key's records in timestamp order, then fires its timers (BATCH)."""

    def __init__(self, node, scope):
        super().__init__(node, scope)
        self.spec = node.function
        self.chain_output = _ChainOutput(self)
        self.window_operator = self._create_core()
        self.timer_service = self.window_operator.timer_service
        self._core_open = False
        self._key_fold: Any = _UNKNOWN  # BATCH: the KeyWindowFold, or None (built at the first key)
        self._folded: Optional[list] = None  # BATCH: the current key's windows, fired at its end

    def _create_core(self) -> WindowOperator:
        spec, where = self.spec, f"window operator {self.node.name!r}"
        kind = spec.function_kind
        if kind is WindowFunctionKind.REDUCE:
            reduce_fn = adapt_function(spec.function, "reduce", self.node)
            descriptor, fn = reduce_window(reduce_fn, spec.window_function, where)
        elif kind is WindowFunctionKind.AGGREGATE:
            descriptor, fn = aggregate_window(spec.function, spec.window_function, where)
        else:
            descriptor, fn = process_window(spec.function, where)
        backend = self.state_backend
        return WindowOperator(spec.assigner, descriptor, fn, self.chain_output,
                              key_selector=lambda _value: backend.current_key,  # set by the base per record
                              trigger=spec.trigger, allowed_lateness=spec.allowed_lateness,
                              late_data_output_tag=spec.late_data_tag, backend=backend, name=self.node.name)

    # ---- lifecycle ----
    def open(self) -> None:
        super().open()
        self._core_open = True  # set before: a failing open() still gets its close() on dispose
        self.window_operator.open(self.runtime_context)

    def close(self) -> None:
        super().close()
        if self._core_open:
            self._core_open = False
            self.window_operator.close()

    def dispose(self) -> None:
        try:
            if self._core_open:
                self._core_open = False
                self.window_operator.close()
        finally:
            super().dispose()  # the state backend goes last

    # ---- records ----
    def _build_handler(self, timed: bool) -> Callable[[Any], None]:
        if not timed:  # firings (on watermarks, at the end): the fast wiring, sampled
            self.chain_output.bind(self.firing_emitter(), self.firing_emitter)
        return super()._build_handler(timed)

    def record_processor(self, emit, side) -> Callable:
        cell, err, cee = self.cell, self.error_handler(False), ChainExecutionError
        process_element = self.window_operator.process_element

        def process(value: Any) -> None:
            try:
                process_element(value, cell.value)
            except cee:
                raise
            except Exception as exc:
                err(exc, value)

        return process

    # ---- BATCH: one key at a time ----
    def process_key(self, key: Any, records: list) -> None:
        """BATCH: the key's records folded into local window accumulators (window_replay.py)
        when the window takes that path, else through the core record by record."""
        fold = self._key_fold
        if fold is _UNKNOWN:
            core = self.window_operator
            fold = self._key_fold = KeyWindowFold(core, self.cell, self.error_handler(False)) \
                if KeyWindowFold.applies(core) else None
        if fold is not None:
            sort_by_timestamp(records)
            if fold.takes(records):
                start = time.perf_counter()
                self._folded = fold.fold(records)
                self.sampled_time += time.perf_counter() - start
                self.sampled_in += len(records)
                return
        super().process_key(key, records)

    def on_key_end(self, key: Any) -> None:
        folded, self._folded = self._folded, None
        if folded:
            self._key_fold.fire(folded)

    # ---- firings ----
    def process_watermark(self, watermark: Watermark) -> None:
        # guarded() inlined: this runs once per watermark, in STREAMING mode after every record
        try:
            KeyedOperator.process_watermark(self, watermark)
        except ChainExecutionError:
            raise
        except Exception as exc:
            raise self.error("window firing", exc) from exc

    def end_input(self) -> None:
        self.guarded("window firing", lambda: KeyedOperator.end_input(self))
