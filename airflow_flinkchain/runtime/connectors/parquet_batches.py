"""A Parquet source read by the subtasks themselves, as records or Arrow batches.

Spark would read the files in the JVM, shuffle the rows to the chain's parallelism and
stream them to the Python worker as Arrow; the shuffle would also lose the files' order.
Each subtask reads its contiguous share of the rows (subtask k of p: rows [k*n/p,
(k+1)*n/p) in file and row-group order, the split `execute_local()` makes, see
`file_splits`) straight from the files with pyarrow, touching only the row groups that
overlap its share; the same share in every attempt. Its records come as `SourceSplits`,
one split per file piece. Used for a Parquet file or a flat directory of them (no glob,
no reader options, no partition subdirectories); anything else is read by Spark (`files`).
"""

from __future__ import annotations

from itertools import chain
from typing import Any, Iterator, Optional

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from airflow_flinkchain.runtime.core.arrow_records import batch_records
from airflow_flinkchain.runtime.connectors.base import SourceReader
from airflow_flinkchain.runtime.connectors.file_splits import pieces_layout, subtask_pieces
from airflow_flinkchain.runtime.core.splits import SourceSplits
from airflow_flinkchain.runtime.core.batches import with_split_starts
from airflow_flinkchain.runtime.exchange.layout import Location
from airflow_flinkchain.runtime.exchange.schema import parse_output_type

BATCH_ROWS = 65536
_GLOB = frozenset("*?[{")


def direct_files(descriptor: Any, path: Optional[str]) -> Optional[list]:
    """The files the subtasks can read themselves (on the driver, once), or None."""
    if descriptor.format != "parquet" or descriptor.options or path is None or _GLOB & set(path):
        return None
    loc = Location(path)
    info = loc.fs.get_file_info(loc.path)
    if info.type == pafs.FileType.File:
        return [loc.path]
    if info.type != pafs.FileType.Directory:
        return None
    entries = loc.fs.get_file_info(pafs.FileSelector(loc.path, recursive=False))
    if any(e.type == pafs.FileType.Directory and not e.base_name.startswith((".", "_")) for e in entries):
        return None  # partition directories: Spark reads their values as columns
    return loc.list_files(recursive=False)


class ParquetBatchReader(SourceReader):
    """The subtasks' own pyarrow reader of a Parquet source (see the module docstring)."""

    plain_values = True

    def __init__(self, descriptor: Any, path: str, files: list, label: str, parallelism: int,
                 read_schema: Any = None):
        self.path = path
        self.files = files
        self.schema = descriptor.schema
        self.monitor = descriptor.monitor
        self.label = label
        self.parallelism = parallelism
        self.read_schema = read_schema  # the files' schema the run's plan recorded (inferred_types)

    def input_dataframe(self, spark: Any, parallelism: int) -> Any:
        return None  # the subtasks read by themselves

    def _pieces(self, subtask: int) -> tuple[list, tuple[bool, bool]]:
        """([(ParquetFile, first row, end row)]: the subtask's splits, their `pieces_layout`)."""
        fs = Location(self.path).fs
        metas = [pq.ParquetFile(fs.open_input_file(f)) for f in self.files]
        if self.read_schema is not None:
            from airflow_flinkchain.runtime.connectors.inferred_types import check_file_schema

            for f, m in zip(self.files, metas):
                check_file_schema(self.read_schema, m.schema_arrow, f, self.label)
        rows = [m.metadata.num_rows for m in metas]
        pieces = subtask_pieces(rows, subtask, self.parallelism)
        return [(metas[i], lo, hi) for i, lo, hi in pieces], pieces_layout(rows, pieces)

    def _piece_batches(self, pf: Any, lo: int, hi: int) -> Iterator[pa.RecordBatch]:
        """Rows [lo, hi) of one file, reading only the row groups that overlap them."""
        schema = parse_output_type(self.schema, self.label)
        offset = 0
        for rg in range(pf.metadata.num_row_groups):
            rows = pf.metadata.row_group(rg).num_rows
            a, b = max(lo, offset), min(hi, offset + rows)
            if a < b:
                table = pf.read_row_group(rg, columns=None if schema is None else schema.names)
                table = table.slice(a - offset, b - a)
                if schema is not None:
                    table = table.cast(schema)
                yield from table.to_batches(max_chunksize=BATCH_ROWS)
            offset += rows

    def read_batches(self, subtask: int, batches: Iterator[Any]) -> Iterator[pa.RecordBatch]:
        pieces, layout = self._pieces(subtask)
        return with_split_starts([self._piece_batches(*piece) for piece in pieces], self.monitor, *layout)

    def read(self, subtask: int, batches: Iterator[Any]) -> SourceSplits:
        pieces, layout = self._pieces(subtask)
        return SourceSplits([chain.from_iterable(map(batch_records, self._piece_batches(*piece)))
                             for piece in pieces], self.monitor, *layout)
