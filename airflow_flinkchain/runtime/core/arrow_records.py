"""Arrow batches <-> dict records where the per-record path meets Arrow: a source's batches
become records, a typed writer's buffered records become columns.

`batch_records(batch)` equals `batch.to_pylist()`: each column converted by Arrow, the rows
built by the C helper (`_flatcheck.records`) instead of pyarrow's dict comprehension per row.
`dict_columns(records, names)` is one C pass that checks and takes apart the records of a
typed stream (`exchange.schema.record_columns` names the record that does not fit). Without the
C helper (no compiler, the spark-submit zip, FLINKCHAIN_PURE_PYTHON=1) both are None and the
callers use pyarrow's and their own Python loops: the same answers.
"""

from __future__ import annotations

from typing import Any

from airflow_flinkchain.runtime.core.accelerator import FLATCHECK

_records = getattr(FLATCHECK, "records", None)
#: (records list, names tuple) -> [column lists], or None when a record does not fit
dict_columns = getattr(FLATCHECK, "columns", None)


def batch_records(batch: Any) -> list:
    """`batch.to_pylist()` of a RecordBatch or Table: the rows as dicts, keys in the schema's order."""
    if _records is None:
        return batch.to_pylist()
    return _records(tuple(batch.schema.names), [c.to_pylist() for c in batch.columns], batch.num_rows)
