"""Two-input operators (Flink's TwoInputStreamOperator): the base every co-operator shares.

A two-input operator is always a chain head (a chained operator has one input); the
chain feeds it `(input number, element)` pairs (runtime/core/input_selection.py).
Each input has its own watermark and status (its channels combined through one
WatermarkValve upstream of here); the operator's watermark is the minimum over the
inputs that are not idle, and it moves on (timers fire, the watermark goes downstream)
only when that minimum advances, as Flink's AbstractStreamOperator.processWatermark1/2
and processWatermarkStatus1/2 (IndexedCombinedWatermarkStatus): an input that is idle
as a whole (every channel IDLE) does not hold the other back; when both are idle the
watermark is the higher of the two and the operator's output is IDLE until an input is
active again (a watermark from an input makes it active). An input that ended counts
as active with the MAX watermark.

`input_handlers(timed)` is the pair (fn(value) for input 1, fn(value) for input 2);
subclasses build it in `build_input_handlers`. `KeyedTwoInputOperator` adds the keyed
part (KeyedOperator): each input's key selector sets the current key, so state and
timers are shared by both inputs; in BATCH mode each key's records of both inputs are
replayed together in timestamp order (ties: arrival order), then the key's timers fire.
"""

from __future__ import annotations

from typing import Any, Callable, Optional

from airflow_flinkchain.runtime.core.elements import MAX_WATERMARK_TS, MIN_WATERMARK_TS, Watermark, WatermarkStatus
from airflow_flinkchain.runtime.core.keys import key_getter
from airflow_flinkchain.runtime.core.operators.base import StreamOperator, adapt_function
from airflow_flinkchain.runtime.core.operators.keyed import KeyedOperator, _timestamp_or_min


class TwoInputStreamOperator(StreamOperator):
    fusable = False
    two_input = True
    methods: tuple = ()  # the function's (input 1, input 2) methods, adapted at setup into `fns`

    def __init__(self, node, scope):
        super().__init__(node, scope)
        self._input_watermarks = [MIN_WATERMARK_TS, MIN_WATERMARK_TS]
        self._input_idle = [False, False]
        self.idle = False  # both inputs idle: the output is IDLE
        self._input_handlers: dict = {}

    def setup(self, runtime_context) -> None:
        super().setup(runtime_context)
        if self.methods:
            self.fns = tuple(adapt_function(self.node.function, m, self.node) for m in self.methods)

    # ---- records -----------------------------------------------------------
    def build_input_handlers(self, timed: bool) -> tuple[Callable, Callable]:
        raise NotImplementedError

    def input_handlers(self, timed: bool = False) -> tuple[Callable, Callable]:
        hs = self._input_handlers.get(timed)
        if hs is None:
            h1, h2 = self.build_input_handlers(timed)
            if timed:
                h1, h2 = self._timing(h1), self._timing(h2)
            hs = self._input_handlers[timed] = (h1, h2)
        return hs

    def _build_handler(self, timed: bool) -> Callable[[Any], None]:
        return self.input_handlers(timed)[0]

    def emitters(self, timed: bool) -> tuple[Optional[Callable], Callable[[str], Optional[Callable]]]:
        out = self.output
        return out.main_emitter(timed), (lambda tag_id: out.side_emitter(tag_id, timed))

    # ---- snapshot / restore (stream runs) ----------------------------------
    def snapshot_state(self) -> dict:
        state = {**super().snapshot_state(), "input_watermarks": list(self._input_watermarks)}
        broadcast = getattr(self, "broadcast_states", None)
        if broadcast:
            state["broadcast"] = {name: st.snapshot() for name, st in broadcast.items()}
        return state

    def initialize_state(self, snapshots, own=None) -> None:
        snapshots = list(snapshots)
        super().initialize_state(snapshots, own)
        marks = [s["input_watermarks"] for s in ([own] if own is not None else snapshots) if "input_watermarks" in s]
        if marks:
            self._input_watermarks = [min(m[0] for m in marks), min(m[1] for m in marks)]
        broadcast = getattr(self, "broadcast_states", None)
        saved = next((s["broadcast"] for s in ([own] if own is not None else snapshots) if "broadcast" in s), None)
        if broadcast and saved:  # the same on every former subtask (Flink restores one copy)
            for name, entries in saved.items():
                if name in broadcast:
                    broadcast[name].put_all(entries)

    # ---- watermarks --------------------------------------------------------
    def process_watermark1(self, watermark: Watermark) -> None:
        self._input_watermark(0, watermark.timestamp)

    def process_watermark2(self, watermark: Watermark) -> None:
        self._input_watermark(1, watermark.timestamp)

    def process_watermark_status1(self, status: WatermarkStatus) -> None:
        self._input_status(0, status.idle)

    def process_watermark_status2(self, status: WatermarkStatus) -> None:
        self._input_status(1, status.idle)

    def end_of_input(self, input_number: int) -> None:
        """Input 1 or 2 has no more elements: it no longer holds the watermark back."""
        self._input_watermark(input_number - 1, MAX_WATERMARK_TS)

    def _input_watermark(self, index: int, timestamp: int) -> None:
        marks = self._input_watermarks
        if timestamp <= marks[index] and not self._input_idle[index]:
            return
        marks[index] = max(marks[index], timestamp)
        self._input_idle[index] = False  # a watermark makes its input active
        self._combine()

    def _input_status(self, index: int, idle: bool) -> None:
        if self._input_idle[index] != idle:
            self._input_idle[index] = idle
            self._combine()

    def _combine(self) -> None:
        """Flink's CombinedWatermarkStatus.updateCombinedWatermark: the minimum over the active
        inputs, the maximum when both are idle; the watermark first, then a changed status."""
        marks, idle = self._input_watermarks, self._input_idle
        was_idle = self.idle
        self.idle = idle[0] and idle[1]
        if self.idle:
            combined = max(marks)
        else:
            combined = min(m for m, i in zip(marks, idle) if not i)
        if combined > self.current_watermark:
            self.process_watermark(Watermark(combined))
        if self.idle != was_idle:
            self.output.emit_watermark_status(WatermarkStatus.IDLE if self.idle else WatermarkStatus.ACTIVE)


class KeyedTwoInputOperator(TwoInputStreamOperator, KeyedOperator):
    """Keyed on input 1 (the node's key selector) and, when given, on input 2
    (`TwoInputSpec.key_selector2`); an unkeyed input 2 (broadcast) is processed at
    once, outside any key, in both modes."""

    def __init__(self, node, scope):
        super().__init__(node, scope)
        spec = node.two_input
        selector2 = spec.key_selector2 if spec is not None else None
        self.key_selector2 = (key_getter(adapt_function(selector2, "get_key", node), node.name)
                              if selector2 is not None else None)
        self._co_processors: dict = {}

    def record_processors(self, emit, side) -> tuple[Callable, Callable]:
        """(fn(value) of input 1, fn(value) of input 2) for a record whose key (if keyed)
        is the current key; on_error applied inside."""
        raise NotImplementedError

    def _co_processor(self, timed: bool) -> tuple[Callable, Callable]:
        ps = self._co_processors.get(timed)
        if ps is None:
            ps = self._co_processors[timed] = self.record_processors(*self.emitters(timed))
        return ps

    def build_input_handlers(self, timed: bool) -> tuple[Callable, Callable]:
        p1, p2 = self._co_processor(timed)
        h1 = self._keyed_handler(timed, self.key_selector, p1, 1)
        if self.key_selector2 is not None:
            return h1, self._keyed_handler(timed, self.key_selector2, p2, 2)
        metrics = self.metrics

        def unkeyed(value: Any) -> None:
            metrics.records_in += 1
            p2(value)

        return h1, unkeyed

    def process_key(self, key: Any, records: list) -> None:
        """BATCH: the key's records of both inputs [(timestamp, value, input)], in timestamp order."""
        if any(r[0] is not None for r in records):
            records.sort(key=_timestamp_or_min)
        processors = (None, *self._co_processor(False))
        cell = self.cell
        saved = cell.value
        try:
            for ts, value, n in records:
                cell.value = ts
                processors[n](value)
        finally:
            cell.value = saved
