"""Typed channel files read as batches that carry their per-record watermarks.

`merged_batches` splits a batch wherever a stored watermark falls: in STREAMING mode, with a
watermark after every record, that is one batch per record. A head that can take them (a
vectorized STREAMING window) reads `WatermarkedBatch`es instead: whole batches plus, per row,
the combined watermark the WatermarkValve would have emitted before that row.

With every channel active and aligned (no watermark status in any file), the valve's output
is computable per file: the files are read one after the other, so while file i is read every
other channel's watermark is fixed (its last one for the files before, MIN for those after),
channel i's watermark is the running maximum of its stored watermarks, and the combined one is
max(combined at the file's start, min(others, channel i's)). Each batch also carries every
advance of the combined watermark inside it (`marks`); those after a file's last row go on as
Watermark elements. Files with watermark statuses take `merged_batches`. Watermarks stored in
bulk (`ChannelFile.watermark_array`) are used as they are, without a Python list.
"""

from __future__ import annotations

from typing import Iterator

import numpy as np

from airflow_flinkchain.runtime.core.batches import WatermarkedBatch
from airflow_flinkchain.runtime.core.elements import MAX_WATERMARK_TS, Watermark
from airflow_flinkchain.runtime.core.valve import WatermarkValve
from airflow_flinkchain.runtime.exchange.dataset import BATCH_ROWS, ChannelFile, merged_batches


def merged_watermarked_batches(files: list[ChannelFile]) -> Iterator:
    """As `merged_batches`, each batch with the watermarks in force before its rows."""
    bulk = [getattr(f, "watermark_array", None) for f in files]
    if not any(b is not None or f.watermarks for b, f in zip(bulk, files)) or any(
            f.initially_idle or b is None and any(type(m) is not int for _, m in f.watermarks)
            for b, f in zip(bulk, files)):
        return merged_batches(files)
    return _merged(files)


def _merged(files: list[ChannelFile]) -> Iterator:
    valve = WatermarkValve(len(files))
    marks_of = valve._channel_watermarks  # the valve's state is kept, as if it had merged them
    for i, f in enumerate(files):
        others = min((w for j, w in enumerate(marks_of) if j != i), default=MAX_WATERMARK_TS)
        stored = f.watermark_array if f.watermark_array is not None else \
            np.array(f.watermarks, dtype=np.int64).reshape(-1, 2)  # [[position, watermark], ...]
        at = stored[:, 0]
        own = np.maximum.accumulate(np.concatenate([[marks_of[i]], stored[:, 1]]))
        combined = np.maximum(valve.current_watermark, np.minimum(others, own))  # index 0: before any mark
        advancing = np.flatnonzero(combined[1:] > combined[:-1])  # the marks where the valve emits
        adv_at, adv_wm = at[advancing], combined[advancing + 1]
        position = 0
        try:
            for batch in f.file.iter_batches(batch_size=BATCH_ROWS):
                n = batch.num_rows
                if not n:
                    continue
                rows = np.arange(position, position + n, dtype=np.int64)
                arrivals = combined[np.searchsorted(at, rows, side="right")]
                lo, hi = np.searchsorted(adv_at, [position, position + n])
                yield WatermarkedBatch(batch, arrivals, (adv_at[lo:hi] - position, adv_wm[lo:hi]))
                position += n
        except Exception as exc:
            raise f._bad(f"could not be decoded ({type(exc).__name__}: {exc})") from None
        marks_of[i] = int(own[-1])
        valve.current_watermark = max(valve.current_watermark, int(combined[-1]))
        for wm in adv_wm[np.searchsorted(adv_at, position):].tolist():  # after the file's last row
            yield Watermark(wm)
