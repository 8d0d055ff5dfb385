"""Flink's StatusWatermarkValve: a subtask's watermark is the minimum over its
input channels that are active and aligned, and advances only when that minimum
does; an IDLE channel does not hold it back.

Input channels of a downstream subtask k are the (edge, upstream subtask)
pairs whose channel k it reads: number them 0..n-1 in any fixed way.

    valve = WatermarkValve(n)
    for element in valve.merge(pairs):    # pairs: (input_channel, element)
        ...                                # records pass, watermarks are combined

`merge(pairs, statuses=True)` also yields WatermarkStatus.IDLE / ACTIVE when the combined
status changes (Flink's valve emits it downstream): a two-input operator needs to know when
one of its inputs is idle as a whole.

or element by element: `valve.input_watermark(channel, ts)` and
`valve.input_watermark_status(channel, idle)` return the new combined Watermark
or None; `valve.idle` is the combined status (idle when every channel is).

As in Flink: a channel that goes idle stops counting at once; a channel that
becomes active again counts ("is aligned") only from the moment its watermark
reaches the combined one, so its re-activation never moves the combined
watermark back. When every channel is idle, the combined watermark jumps to the
highest channel watermark.
"""

from __future__ import annotations

from typing import Any, Iterable, Iterator, Optional

from airflow_flinkchain.runtime.core.elements import MAX_WATERMARK_TS, MIN_WATERMARK_TS, Watermark, WatermarkStatus


class WatermarkValve:
    def __init__(self, num_input_channels: int):
        if num_input_channels < 1:
            raise ValueError(f"a WatermarkValve needs at least one input channel, got {num_input_channels}")
        self.num_input_channels = num_input_channels
        self._channel_watermarks = [MIN_WATERMARK_TS] * num_input_channels
        self._idle = [False] * num_input_channels
        self._aligned = [True] * num_input_channels
        self.current_watermark = MIN_WATERMARK_TS
        self.idle = False
        self._all_aligned = True

    def input_watermark(self, channel: int, timestamp: int) -> Optional[Watermark]:
        """Record channel's watermark; return the combined one if it advanced."""
        if self._idle[channel]:
            return None  # an idle channel's watermarks are ignored until it is active again
        marks = self._channel_watermarks
        if timestamp <= marks[channel]:
            return None  # watermarks per channel never go back
        marks[channel] = timestamp
        if self._all_aligned:  # the common case: every channel active and aligned
            combined = min(marks) if self.num_input_channels > 1 else timestamp
            return self._output(combined) if combined > self.current_watermark else None
        if not self._aligned[channel] and timestamp >= self.current_watermark:
            self._aligned[channel] = True
            self._all_aligned = all(self._aligned)
        return self._advance_to_aligned_min()

    def input_watermark_status(self, channel: int, idle: bool) -> Optional[Watermark]:
        """Mark a channel idle or active; return the combined watermark if it advanced."""
        if idle == self._idle[channel]:
            return None
        if idle:
            self._idle[channel] = True
            self._aligned[channel] = False
            self._all_aligned = False
            if all(self._idle):
                self.idle = True
                highest = max(self._channel_watermarks)
                return self._output(highest) if highest > self.current_watermark else None
            if self._channel_watermarks[channel] == self.current_watermark:
                return self._advance_to_aligned_min()  # it may have been the one holding the minimum back
            return None
        self._idle[channel] = False
        self.idle = False
        if self._channel_watermarks[channel] >= self.current_watermark:
            self._aligned[channel] = True
            self._all_aligned = all(self._aligned)
        return None

    def hand_over(self, source: int, target: int) -> None:
        """What channel `source` read goes on on the active channel `target` (a split read piece
        after piece by consecutive upstream subtasks): `target` takes `source`'s watermark and is
        aligned as `source` was; `source` becomes idle. The combined watermark does not change."""
        self._channel_watermarks[target] = self._channel_watermarks[source]
        self._aligned[target] = self._aligned[source]
        self._idle[source], self._aligned[source] = True, False
        self._all_aligned = False

    def _advance_to_aligned_min(self) -> Optional[Watermark]:
        marks, aligned = self._channel_watermarks, self._aligned
        candidates = [marks[i] for i in range(self.num_input_channels) if aligned[i]]
        if candidates:
            combined = min(candidates)
            if combined > self.current_watermark:
                return self._output(combined)
        return None

    def _output(self, timestamp: int) -> Watermark:
        self.current_watermark = timestamp
        return Watermark(timestamp)

    def channel_finished(self, channel: int) -> Optional[Watermark]:
        """A channel with no more input no longer holds the watermark back (a
        finished input is active with the MAX watermark, as Flink's sources end)."""
        resumed = self.input_watermark_status(channel, False)
        return self.input_watermark(channel, MAX_WATERMARK_TS) or resumed

    def merge_single(self, elements: Iterable[Any], statuses: bool = False) -> Iterator[Any]:
        """merge() of a valve with one input channel: its elements without channel numbers, an
        advancing watermark passed on as it is (the per-record path of STREAMING mode)."""
        if self.num_input_channels != 1:
            raise ValueError(f"merge_single needs a valve with one input channel, not {self.num_input_channels}")
        wm_type, status_type = Watermark, WatermarkStatus
        idle, marks = self._idle, self._channel_watermarks
        if statuses and self.idle:
            yield WatermarkStatus.IDLE
        for element in elements:
            t = type(element)
            if t is wm_type:
                ts = element.timestamp
                # one channel: its watermark is the combined one (input_watermark, inlined)
                if ts > self.current_watermark and not idle[0]:
                    marks[0] = self.current_watermark = ts
                    yield element
            elif t is status_type:
                yield from self._status(0, element.idle, statuses)
            else:
                yield element

    def merge(self, pairs: Iterable[tuple[int, Any]], statuses: bool = False) -> Iterator[Any]:
        """Records (bare values or StreamRecords) pass through in order; per-channel
        Watermarks and WatermarkStatuses become combined watermarks when the minimum advances
        (and, with `statuses`, the combined status when it changes)."""
        wm_type, status_type = Watermark, WatermarkStatus
        if statuses and self.idle:
            yield WatermarkStatus.IDLE
        for channel, element in pairs:
            t = type(element)
            if t is wm_type:
                combined = self.input_watermark(channel, element.timestamp)
                if combined is not None:
                    yield combined
            elif t is status_type:
                yield from self._status(channel, element.idle, statuses)
            else:
                yield element

    def _status(self, channel: int, idle: bool, statuses: bool) -> Iterator[Any]:
        """A channel's status: the combined watermark if it advanced, then (with `statuses`) the
        combined status if it changed - Flink's order."""
        was_idle = self.idle
        combined = self.input_watermark_status(channel, idle)
        if combined is not None:
            yield combined
        if statuses and self.idle != was_idle:
            yield WatermarkStatus.IDLE if self.idle else WatermarkStatus.ACTIVE
