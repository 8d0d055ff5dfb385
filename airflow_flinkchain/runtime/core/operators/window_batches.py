"""STREAMING batches of a vectorized tumbling event-time window (WindowedStream.sum and co.,
`aggregate(Aggregates.of(...))`, default trigger): the per-record WindowOperator's semantics
over whole batches, its state and timers kept where the per-record operator keeps them (the
window contents in the core's window state per key and window, a timer per window end and,
with allowed lateness, per cleanup time), so snapshots are the same.

A batch comes with the watermark in force before each row (`arrivals`; a plain batch: the
current watermark for every row). Every timer of the operator is a window's end - 1 or that
plus the allowed lateness, so the timestamps where anything can fire, and where a window
turns late, lie on two grids of the window size. The batch is cut where the watermark
crosses a grid point; per segment, after the watermark of its first row went through the
operator (firing what the per-record operator fires there, with its own code):
  * rows whose window's cleanup time <= the watermark are late: dropped (counted) or sent to
    the late side output, each after the watermark it arrived with;
  * rows whose window already fired (end - 1 <= the watermark, allowed lateness not passed)
    re-fire their window one by one, through the per-record operator;
  * the other rows are folded per key and window (grouped fold, in row order) into the
    window state, and their windows' timers registered in first-row order.
What the fold cannot compute exactly (core/grouped.py lists when) takes the per-record
operator, row by row, with the same watermarks.

Watermarks go on downstream as per record when the results leave the chain (every advance,
`marks`); when they stay in it, only the last advance before each result or late record
(nothing chained after a window has timers). The default trigger's firings on a watermark
run in one loop: WindowOperator._on_timer's steps for EventTimeTrigger, inlined.
"""

from __future__ import annotations

import heapq
import time
from typing import Optional

import numpy as np
import pyarrow as pa

from airflow_flinkchain.api.aggregations import AggregationFunction
from airflow_flinkchain.runtime.core.batches import batch_rows, timestamps, without_timestamps
from airflow_flinkchain.runtime.core.elements import MAX_WATERMARK_TS, Watermark
from airflow_flinkchain.runtime.core.errors import ChainExecutionError
from airflow_flinkchain.runtime.core.grouped import aggregate_groups, key_codes, rolling, window_groups
from airflow_flinkchain.runtime.core.outputs import (BroadcastingOutputCollector, ChainingOutput, DirectedOutput,
                                                     RecordWriterOutput, TypeCoercingOutput)
from airflow_flinkchain.window import EventTimeTrigger, TimeWindow

_BOUND = 2**61  # timestamps and lateness within it: the grid arithmetic stays inside int64


class StreamingWindowBatches:
    """Mixin of VectorizedWindowAggregationOperator: its STREAMING batch path."""

    _marks: Optional[tuple] = None  # while a batch is processed: its watermark advances to pass on

    def process_watermark(self, watermark: Watermark) -> None:
        """STREAMING: KeyedOperator.process_watermark with the firings of the default trigger
        done in one loop (WindowOperator._on_timer for EventTimeTrigger, inlined: a timer at the
        window's end - 1 emits its contents, one at its cleanup time clears them)."""
        if self.batch or type(self.window_operator.trigger) is not EventTimeTrigger:
            return super().process_watermark(watermark)
        try:
            ts = watermark.timestamp
            self.current_watermark = ts
            self._fire(ts)
            if ts >= MAX_WATERMARK_TS:
                self._fire_all_timers()
            self.output.emit_watermark(watermark)
        except ChainExecutionError:
            raise
        except Exception as exc:
            raise self.error("window firing", exc) from exc

    def _fire(self, ts: int) -> None:
        service = self.timer_service
        service.current_watermark = ts
        queue = service.event_time_timers
        heap, live = queue._heap, queue._live
        if not heap or heap[0][0] > ts:
            return
        core = self.window_operator
        state, set_key, collect, lateness = core.window_state, self.state_backend.set_current_key, \
            self.chain_output.collect, core.allowed_lateness
        pop = heapq.heappop
        while heap and heap[0][0] <= ts:
            t, seq, key, window = pop(heap)
            entry = (t, key, window)
            if live.get(entry) != seq:
                continue  # deleted
            del live[entry]
            set_key(key)
            state.namespace = window
            end = window[1] - 1
            if t == end:
                contents = state.get()
                if contents is not None:
                    collect(contents, end)
            if t == end + lateness or (lateness and end + lateness > MAX_WATERMARK_TS and t == MAX_WATERMARK_TS):
                state.clear()
                queue.remove(end, key, window)  # EventTimeTrigger.clear

    def process_watermarked_batch(self, batch: pa.RecordBatch, arrivals: np.ndarray,
                                  marks: Optional[tuple] = None) -> None:
        if self.batch:
            self.process_batch(batch)  # BATCH: held to the end of input, watermarks do not matter
        else:
            self._stream(batch, arrivals, marks)

    def _stream(self, batch: pa.RecordBatch, arrivals: Optional[np.ndarray], marks: Optional[tuple] = None) -> None:
        t0 = time.perf_counter()
        n = batch.num_rows
        wm0 = self.current_watermark
        arr = np.full(n, wm0, dtype=np.int64) if arrivals is None else np.maximum(arrivals, wm0)
        if marks is not None and len(marks[0]) and self._every_watermark():
            self._marks, self._next_mark = (marks[0].tolist(), marks[1].tolist()), 0
        else:
            self._marks = None
        try:
            self._stream_rows(batch, arr, n)
            self._pass(n - 1, arr)
        finally:
            self._marks = None
        self.sampled_time += time.perf_counter() - t0
        self.sampled_in += n

    def _stream_rows(self, batch: pa.RecordBatch, arr: np.ndarray, n: int) -> None:
        prepared = self._prepare(batch)
        if prepared is None:
            return self._rows_with_watermarks(batch, arr, 0, n)
        rows, t, codes, keys = prepared
        size, offset = self.size, self.offset
        lateness = self.window_operator.allowed_lateness
        start = t - (t - offset) % size
        end_ts = start + (size - 1)
        cleanup = end_ts + lateness
        grid = np.clip(arr, -2 * _BOUND, 2 * _BOUND)
        crossed = np.zeros(n, dtype=bool)  # before row i, the watermark passes a grid point
        for residue in {(offset - 1) % size, (offset - 1 + lateness) % size}:
            q = (grid - residue) // size
            crossed[1:] |= q[1:] > q[:-1]
        cuts = [0, *np.flatnonzero(crossed).tolist(), n]
        self.metrics.records_in += n
        for lo, hi in zip(cuts, cuts[1:]):
            if lo < hi:
                self._segment(rows, lo, hi, arr, t, codes, keys, start, end_ts, cleanup)

    def _prepare(self, batch: pa.RecordBatch) -> Optional[tuple]:
        """(rows, timestamps, key codes, keys), or None: the batch goes per record."""
        ts = timestamps(batch)
        rows = without_timestamps(batch)
        if ts is None or ts.null_count or self.key_field not in rows.schema.names or \
                self.window_operator.allowed_lateness > _BOUND:
            return None
        t = ts.to_numpy(zero_copy_only=False).astype(np.int64)
        if len(t) and (int(t.max()) > _BOUND or int(t.min()) < -_BOUND):
            return None
        encoded = key_codes(rows.column(self.key_field))
        if encoded is None:
            return None
        return rows, t, encoded[0], encoded[1]

    def _advance(self, watermark: int) -> None:
        if watermark > self.current_watermark:
            self.process_watermark(Watermark(watermark))

    def _pass(self, row: int, arr: np.ndarray) -> None:
        """The watermarks in force before `row`: every advance up to it when they are all passed
        on (`_every_watermark`), else only the last (the others reach nothing that could see them)."""
        if self._marks is None:
            if row >= 0:
                self._advance(int(arr[row]))
            return
        positions, values = self._marks
        k = self._next_mark
        while k < len(positions) and positions[k] <= row:
            self._advance(values[k])
            k += 1
        self._next_mark = k

    def _every_watermark(self) -> bool:
        """Whether the results leave the chain (an exchange): then every watermark advance is passed
        on, as per record, for the timers of the operators downstream. Operators chained after the
        window are not keyed and have no timers: for them and for sinks, the last watermark before
        each result (or late record) is all there is to see."""
        every = getattr(self, "_every_wm", None)
        if every is None:
            every = self._every_wm = reaches_exchange(self.output)
        return every

    def _segment(self, rows, lo, hi, arr, t, codes, keys, start, end_ts, cleanup) -> None:
        self._pass(lo, arr)  # fires what the per-record operator fires before row lo
        wm = self.current_watermark
        late = cleanup[lo:hi] <= wm
        refire = (end_ts[lo:hi] <= wm) & ~late
        on_time = np.flatnonzero(~late & ~refire) + lo
        if len(on_time) and not self._fold_on_time(rows, on_time, codes, keys, start, end_ts, cleanup):
            self._rows_with_watermarks(rows, arr, lo, hi, t, on_time)
        core = self.window_operator
        tag = core.late_data_output_tag
        if tag is None:
            core.num_late_records_dropped += int(late.sum())
            events = np.flatnonzero(refire) + lo
        else:
            events = np.flatnonzero(late | refire) + lo
        if not len(events):
            return
        values = rows.take(pa.array(events)).to_pylist()
        process, cell, set_key = self._processor(False), self.cell, self.state_backend.set_current_key
        saved = cell.value
        try:
            for i, value in zip(events.tolist(), values):
                self._pass(i, arr)
                ts = int(t[i])
                if late[i - lo]:
                    core.output.collect_side(tag, value, ts)
                else:
                    set_key(keys[codes[i]])
                    cell.value = ts
                    process(value)
        finally:
            cell.value = saved

    def _fold_on_time(self, rows, idx, codes, keys, start, end_ts, cleanup) -> bool:
        """The on-time rows `idx` into their windows' state, timers registered per window."""
        sub = rows.take(pa.array(idx))
        _codes, _starts, first, inverse = window_groups(codes[idx], start[idx], self.size)
        order = np.argsort(first, kind="stable")  # windows in first-row order
        rank = np.empty_like(order)
        rank[order] = np.arange(len(order))
        gid = rank[inverse.reshape(-1)].astype(np.int64)
        heads = idx[first[order]]  # per window: its first row in the batch
        fn = self.function
        if isinstance(fn, AggregationFunction):
            result = rolling(sub, gid, fn.position, fn.kind, {}, only_last=True)
            if result is None:
                return False
            partial = dict(zip(result.last_codes.tolist(), result.out.to_pylist()))
            partials = [partial[g] for g in range(len(heads))]
        else:
            partials = self._accumulators(sub, gid, fn)
            if partials is None:
                return False
        core = self.window_operator
        state, add_timer, set_key = core.window_state, core.timer_service.event_time_timers.add, \
            self.state_backend.set_current_key
        add = state.add if isinstance(fn, AggregationFunction) else state.add_accumulator
        size, lateness, windows = self.size, core.allowed_lateness, {}
        for key, s, acc in zip([keys[c] for c in codes[heads].tolist()], start[heads].tolist(), partials):
            window = windows.get(s)
            if window is None:
                window = windows[s] = TimeWindow(s, s + size)
            m = s + size - 1
            set_key(key)
            state.namespace = window
            add(acc)
            add_timer(m, key, window)
            if lateness and m + lateness < MAX_WATERMARK_TS:
                add_timer(m + lateness, key, window)
        return True

    @staticmethod
    def _accumulators(sub: pa.RecordBatch, gid: np.ndarray, fn) -> Optional[list]:
        """Aggregates.of(...): one accumulator per window (as `fn.add` leaves it), or None."""
        columns = {}
        for i, (field, how) in enumerate(fn.columns.values()):
            if how == "avg":
                columns[f"{i}s"], columns[f"{i}n"] = (field, "sum"), (field, "count")
            else:
                columns[f"{i}"] = (field, how)
        out = aggregate_groups(sub, gid, columns)
        if out is None:
            return None
        accs = []
        for r in out.to_pylist():
            accs.append([[r[f"{i}s"], r[f"{i}n"]] if how == "avg" else r[f"{i}"]
                         for i, (_f, how) in enumerate(fn.columns.values())])
        return accs

    def _rows_with_watermarks(self, batch, arr, lo, hi, t=None, only=None) -> None:
        """Rows [lo, hi) of `batch` (or those in `only`) through the per-record operator, each
        after the watermark it arrived with. With `t`, `batch` has no timestamp column and the
        rows are counted already."""
        if t is None:
            values, ts = batch_rows(batch.slice(lo, hi - lo))
            handle, picked = self.handler(False), range(lo, hi)
        else:
            picked = only.tolist()
            values, ts = batch.take(pa.array(picked)).to_pylist(), [int(t[i]) for i in picked]
            key_of, set_key, process = self.key_selector, self.state_backend.set_current_key, self._processor(False)

            def handle(value):
                set_key(key_of(value))
                process(value)
        cell = self.cell
        saved = cell.value
        try:
            for j, (i, value) in enumerate(zip(picked, values)):
                if t is None:
                    self._pass(i, arr)
                cell.value = None if ts is None else ts[j]
                handle(value)
        finally:
            cell.value = saved


def reaches_exchange(output) -> bool:
    """Whether records emitted to `output` can leave the chain on an exchange edge."""
    if isinstance(output, RecordWriterOutput):
        return True
    if isinstance(output, ChainingOutput):
        return reaches_exchange(output.target.output)
    if isinstance(output, TypeCoercingOutput):
        return reaches_exchange(output.output)
    if isinstance(output, (BroadcastingOutputCollector, DirectedOutput)):
        return any(reaches_exchange(o) for o in output.outputs)
    return True  # an output of another kind: pass every watermark on
