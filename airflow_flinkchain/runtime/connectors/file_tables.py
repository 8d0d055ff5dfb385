"""A JSON lines or CSV source on an object store, read by the subtasks with pyarrow.

Spark's JVM has no S3 filesystem here (the Hadoop S3 connector is not on PyPI), so a
file source on `s3://` (or another object store of the storage layer) is read by the
subtasks themselves: each reads the source with pyarrow (`file_rows`) and keeps its
contiguous share of the rows in file order, the split `execute_local()` makes
(`file_splits`), the same in every attempt. Parquet sources are read this way on
every filesystem (`parquet_batches`).
"""

from __future__ import annotations

from itertools import chain
from typing import Any, Iterator

import pyarrow as pa

from airflow_flinkchain.runtime.core.arrow_records import batch_records
from airflow_flinkchain.runtime.connectors.base import SourceReader
from airflow_flinkchain.runtime.connectors.file_splits import pieces_layout, subtask_pieces
from airflow_flinkchain.runtime.core.batches import with_split_starts
from airflow_flinkchain.runtime.core.splits import SourceSplits

BATCH_ROWS = 65536


class ArrowFileReader(SourceReader):
    """The subtasks' own pyarrow reader of a file source (see the module docstring)."""

    plain_values = True

    def __init__(self, descriptor: Any, path: str, label: str, parallelism: int):
        self.descriptor = descriptor
        self.path = path
        self.label = label
        self.parallelism = parallelism

    def input_dataframe(self, spark: Any, parallelism: int) -> Any:
        return None  # the subtasks read by themselves

    def _pieces(self, subtask: int) -> tuple[list, tuple[bool, bool]]:
        """(a table per piece of a file, their `pieces_layout`)."""
        from airflow_flinkchain.runtime.connectors.file_rows import read_file_table

        table, file_rows = read_file_table(self.descriptor, self.path, self.label)
        starts = [sum(file_rows[:i]) for i in range(len(file_rows))]
        pieces = subtask_pieces(file_rows, subtask, self.parallelism)
        return [table.slice(starts[i] + lo, hi - lo) for i, lo, hi in pieces], pieces_layout(file_rows, pieces)

    def read_batches(self, subtask: int, batches: Iterator[Any]) -> Iterator[pa.RecordBatch]:
        tables, layout = self._pieces(subtask)
        return with_split_starts([iter(t.to_batches(max_chunksize=BATCH_ROWS)) for t in tables],
                                 self.descriptor.monitor, *layout)

    def read(self, subtask: int, batches: Iterator[Any]) -> SourceSplits:
        tables, layout = self._pieces(subtask)
        return SourceSplits([chain.from_iterable(map(batch_records, t.to_batches(max_chunksize=BATCH_ROWS)))
                             for t in tables], self.descriptor.monitor, *layout)
