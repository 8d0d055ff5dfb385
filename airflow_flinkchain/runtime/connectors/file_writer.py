"""One subtask's part file of a file sink (pyarrow only: also what `execute_local()`
writes with). Without `output_type` the schema widens over the output
(`schema_widening`); JSON lines are standard JSON (`json_lines`)."""

from __future__ import annotations

from typing import Any, Optional

import pyarrow as pa

from airflow_flinkchain.runtime.core.arrow_records import batch_records
from airflow_flinkchain.runtime.connectors.json_lines import json_lines
from airflow_flinkchain.runtime.core.batches import conform, without_timestamps
from airflow_flinkchain.runtime.connectors.schema_widening import SchemaSpill, file_writer, records_batch
from airflow_flinkchain.runtime.exchange.layout import Location, part_name
from airflow_flinkchain.runtime.exchange.schema import columns_to_arrays, parse_output_type, record_columns

SINK_BATCH_ROWS = 65536
#: A typed sink moves buffered records into per-field columns every this many records (and
#: at every fused chunk), while they are still in the CPU cache; the dicts are freed then.
COLUMNIZE_ROWS = 1024
EXTENSIONS = {"parquet": "parquet", "csv": "csv", "json": "json"}


class FileSinkWriter:
    """One subtask's file of a file sink, written into the attempt's staging dir."""

    def __init__(self, stage: Location, fmt: str, subtask: int, output_type: Any, label: str):
        self.location = stage.join(part_name(subtask, EXTENSIONS[fmt]))
        self.fmt = fmt
        self.label = label
        self.schema = parse_output_type(output_type, label)
        self.buffer: list = []
        typed_columns = self.schema is not None and fmt != "json"  # JSON lines are written as the dicts are
        self.columns = [[] for _ in self.schema.names] if typed_columns else None
        self.spill = SchemaSpill(self.location, label) if self.schema is None and fmt != "json" else None
        self.pending = 0  # records moved into self.columns, not yet written
        self.batches: list = []  # whole batches (typed), not yet written: one row group per SINK_BATCH_ROWS
        self.batch_rows = 0
        self.count = 0
        self._writer = None
        self._stream = None

    def write(self, value: Any, timestamp: Optional[int] = None) -> None:
        self.buffer.append(value)
        if len(self.buffer) >= (SINK_BATCH_ROWS if self.columns is None else COLUMNIZE_ROWS):
            self._flush_if_full()

    def fused_hooks(self) -> tuple:
        """(append, flush_if_full, buffer, limit) for generated chain code
        (runtime/core/operators/fused.py): it appends records straight to the buffer (files
        keep no timestamps) and calls flush_if_full() once per input chunk - or when
        len(buffer) >= limit - instead of paying a write() call per record."""
        limit = SINK_BATCH_ROWS if self.columns is None else COLUMNIZE_ROWS
        return self.buffer.append, self._flush_if_full, self.buffer, limit

    def write_batch(self, batch: pa.RecordBatch) -> None:
        """A whole Arrow batch from a batch operator (no per-record step for Parquet and CSV):
        cast to output_type when declared (the records buffered before it are written first)."""
        batch = without_timestamps(batch)  # files keep no timestamps
        if self.fmt == "json":
            self.buffer.extend(batch_records(batch))
            self._flush_if_full()
            return
        if self.buffer or self.pending or self.columns is None:
            self.flush()  # the records before this batch go first
        if self.columns is None:
            self.spill.add(batch)
            self.count += batch.num_rows
            return
        self.batches.append(conform(batch, self.schema, self.label))
        self.batch_rows += batch.num_rows
        if self.batch_rows >= SINK_BATCH_ROWS:
            self._write_batches()

    def _write_batches(self) -> None:
        if self.batches:
            self._arrow_writer(self.schema).write_table(pa.Table.from_batches(self.batches, self.schema))
            self.count += self.batch_rows
            self.batches, self.batch_rows = [], 0

    def _flush_if_full(self) -> None:
        if self.columns is not None:
            self._columnize()
            if self.pending >= SINK_BATCH_ROWS:
                self.flush()
        elif len(self.buffer) >= SINK_BATCH_ROWS:
            self.flush()

    def _columnize(self) -> None:
        if self.buffer:
            for column, values in zip(self.columns, record_columns(self.buffer, self.schema.names, self.label)):
                column.extend(values)
            self.pending += len(self.buffer)
            self.buffer.clear()  # the same list: fused code holds its append

    def flush(self) -> None:
        if self.columns is not None:  # typed Parquet/CSV
            self._write_batches()
            self._columnize()
            if self.pending:
                batch = pa.RecordBatch.from_arrays(columns_to_arrays(self.columns, self.schema, self.label),
                                                   schema=self.schema)
                self._arrow_writer(self.schema).write_batch(batch)
                self.count += self.pending
                self.pending = 0
                self.columns = [[] for _ in self.schema.names]
            return
        if not self.buffer:
            return
        if self.fmt == "json":
            self._out().write(json_lines(self.buffer, self.label).encode())
        else:
            self.spill.add(records_batch(self.buffer, self.fmt, self.label))
        self.count += len(self.buffer)
        self.buffer.clear()  # the same list: fused code holds its append

    def _out(self):
        if self._stream is None:
            self._stream = self.location.open_output()
        return self._stream

    def _arrow_writer(self, schema: pa.Schema):
        if self._writer is None:
            self._writer = file_writer(self.fmt, self._out(), schema)
        return self._writer

    def close(self) -> None:
        self.flush()
        if self.spill is not None:
            schema = self.spill.schema()
            if schema is not None:
                writer = self._arrow_writer(schema)
                for batch in self.spill.batches(schema):
                    writer.write_batch(batch)
            self.spill.discard()
        elif self._writer is None and self.fmt != "json" and self.schema is not None:
            self._arrow_writer(self.schema)  # typed sink: an empty file still carries the schema
        if self._writer is not None:
            self._writer.close()
        if self._stream is not None:
            self._stream.close()

    def abort(self) -> None:
        for closable in (self._writer, self._stream):
            try:
                if closable is not None:
                    closable.close()
            except Exception:
                pass
        if self.spill is not None:
            self.spill.discard()
