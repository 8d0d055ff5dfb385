"""A tiny driver for one keyed event-time operator: feeds (value, timestamp) records through a
WatermarkStrategy (a watermark after every record, STREAMING) or Flink's BATCH order, and
captures outputs, side outputs and watermarks."""

from __future__ import annotations

from typing import Any, Iterable, Optional

from airflow_flinkchain.common import CollectingWatermarkOutput, WatermarkStrategy
from airflow_flinkchain.runtime.core.elements import MAX_WATERMARK_TS
from airflow_flinkchain.runtime.core.operators.window import run_batch


class CollectingOutput:
    def __init__(self) -> None:
        self.records: list = []  # (value, timestamp)
        self.side: dict = {}  # tag id -> [(value, timestamp)]
        self.watermarks: list = []

    def collect(self, value: Any, timestamp: Optional[int]) -> None:
        self.records.append((value, timestamp))

    def collect_side(self, tag, value: Any, timestamp: Optional[int]) -> None:
        self.side.setdefault(tag.tag_id, []).append((value, timestamp))

    def emit_watermark(self, timestamp: int) -> None:
        self.watermarks.append(timestamp)


def timestamped(records: Iterable[Any], strategy: WatermarkStrategy) -> list:
    """[(value, timestamp, watermark or None)]: the watermark the generator emits after each
    record (None when it did not advance)."""
    assigner = strategy.get_timestamp_assigner()
    generator = strategy.create_watermark_generator()
    out = CollectingWatermarkOutput()
    result = []
    for value in records:
        ts = assigner.extract_timestamp(value, None) if assigner is not None else None
        generator.on_event(value, ts, out)
        before = len(out.watermarks)
        generator.on_periodic_emit(out)
        result.append((value, ts, out.watermarks[-1] if len(out.watermarks) > before else None))
    return result


def run_streaming(operator: Any, records: Iterable[Any], strategy: WatermarkStrategy) -> None:
    for value, ts, watermark in timestamped(records, strategy):
        operator.process_element(value, ts)
        if watermark is not None:
            operator.process_watermark(watermark)
    operator.process_watermark(MAX_WATERMARK_TS)


def run_batch_mode(operator: Any, records: Iterable[Any], strategy: WatermarkStrategy) -> None:
    run_batch(operator, [(v, ts) for v, ts, _wm in timestamped(records, strategy)])


class KeyedProcessHarness:
    """A KeyedProcessFunction over HeapKeyedStateBackend + InternalTimerService: outputs of
    process_element carry the record's timestamp, outputs of on_timer the timer's."""

    def __init__(self, function: Any, key_selector: Any, output: CollectingOutput, backend: Any = None):
        from airflow_flinkchain.runtime.state.backend import HeapKeyedStateBackend
        from airflow_flinkchain.runtime.core.timers import InternalTimerService

        self.function = function
        self.key_selector = key_selector
        self.output = output
        self.backend = backend or HeapKeyedStateBackend()
        self.timer_service = InternalTimerService(self.backend, self)
        self._ts: Optional[int] = None
        harness = self

        class TimerService:
            def register_event_time_timer(self, t):
                harness.timer_service.register_event_time_timer(None, t)

            def delete_event_time_timer(self, t):
                harness.timer_service.delete_event_time_timer(None, t)

            def current_watermark(self):
                return harness.timer_service.current_watermark

        class Ctx:
            def timestamp(self):
                return harness._ts

            def get_current_key(self):
                return harness.backend.current_key

            def timer_service(self):
                return TimerService()

            def output(self, tag, value):
                harness.output.collect_side(tag, value, harness._ts)

        self.ctx = Ctx()
        function.open(self.backend)

    def _emit(self, results) -> None:
        for r in results or ():
            self.output.collect(r, self._ts)

    def process_element(self, value: Any, timestamp: Optional[int]) -> None:
        self.backend.set_current_key(self.key_selector(value))
        self._ts = timestamp
        self._emit(self.function.process_element(value, self.ctx))

    def on_event_time(self, timer) -> None:
        self._ts = timer.timestamp
        self._emit(self.function.on_timer(timer.timestamp, self.ctx))

    def process_watermark(self, timestamp: int) -> None:
        self.timer_service.advance_watermark(timestamp)
        self.output.emit_watermark(timestamp)
