"""Flink's StatusWatermarkValve, reduced to what bounded runs need: a
subtask's watermark is the minimum over its input channels, and advances
only when that minimum does.

Input channels of a downstream subtask k are the (edge, upstream subtask)
pairs whose channel k it reads: number them 0..n-1 in any fixed way.

    valve = WatermarkValve(n)
    for element in valve.merge(pairs):    # pairs: (input_channel, element)
        ...                                # records pass, watermarks are combined

or element by element: `valve.input_watermark(channel, ts)` returns the new
combined Watermark or None.
"""

from __future__ import annotations

from typing import Any, Iterable, Iterator, Optional

from airflow_flinkchain.runtime.elements import MAX_WATERMARK_TS, MIN_WATERMARK_TS, Watermark


class WatermarkValve:
    def __init__(self, num_input_channels: int):
        if num_input_channels < 1:
            raise ValueError(f"a WatermarkValve needs at least one input channel, got {num_input_channels}")
        self.num_input_channels = num_input_channels
        self._channel_watermarks = [MIN_WATERMARK_TS] * num_input_channels
        self.current_watermark = MIN_WATERMARK_TS

    def input_watermark(self, channel: int, timestamp: int) -> Optional[Watermark]:
        """Record channel's watermark; return the combined one if it advanced."""
        marks = self._channel_watermarks
        if timestamp <= marks[channel]:
            return None  # watermarks per channel never go back
        marks[channel] = timestamp
        combined = min(marks)
        if combined > self.current_watermark:
            self.current_watermark = combined
            return Watermark(combined)
        return None

    def channel_finished(self, channel: int) -> Optional[Watermark]:
        """A channel with no more input no longer holds the watermark back."""
        return self.input_watermark(channel, MAX_WATERMARK_TS)

    def merge(self, pairs: Iterable[tuple[int, Any]]) -> Iterator[Any]:
        """Records (bare values or StreamRecords) pass through in order;
        per-channel Watermarks become combined ones when the minimum advances."""
        wm_type = Watermark
        for channel, element in pairs:
            if type(element) is wm_type:
                combined = self.input_watermark(channel, element.timestamp)
                if combined is not None:
                    yield combined
            else:
                yield element
