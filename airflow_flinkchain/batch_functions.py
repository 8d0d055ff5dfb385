"""Vectorized (batch) functions: what `map_batches` / `filter_batches` record.

A batch function receives many records at once as columns: a
`pyarrow.RecordBatch` (`batch_format="pyarrow"`) or a `pandas.DataFrame`
(`batch_format="pandas"`, converted through pyarrow). Records are dicts
(field -> value); a batch holds one column per field.

Event time: when the records of a batch carry timestamps, the batch has one
more column, `TIMESTAMP_COLUMN` ("_ts", int64 milliseconds, null for a record
without one) - the same reserved column as typed exchange files. See
docs/vectorized.md for how a function's output keeps, sets or drops it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Optional

#: The reserved column of a batch holding each row's event timestamp.
TIMESTAMP_COLUMN = "_ts"

BATCH_FORMATS = ("pyarrow", "pandas")

#: Rows per batch when records are gathered into batches (a per-record operator or a
#: record source before a batch operator) and no batch_size was given.
DEFAULT_BATCH_ROWS = 10_000


@dataclass(frozen=True)
class BatchFunction:
    """The recorded function of a batch operator, with its batch settings (plain data).

    `fn`: the user's function, or an object with `map_batches` / `filter_batches`;
    `batch_format`: "pyarrow" or "pandas"; `batch_size`: at most this many rows per
    call (None: batches as they come, records gathered DEFAULT_BATCH_ROWS at a time)."""

    fn: Any
    batch_format: str = "pyarrow"
    batch_size: Optional[int] = None

    @property
    def rows_per_batch(self) -> int:
        return self.batch_size or DEFAULT_BATCH_ROWS

    def resolve(self, method: str) -> Callable:
        bound = getattr(self.fn, method, None)
        return bound if bound is not None and not callable(self.fn) else self.fn
