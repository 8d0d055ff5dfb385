"""Sink descriptors: plain data recorded at parse time (no I/O, no Spark here).

Every sink is idempotent per run: a retried or cleared run replaces what the
earlier attempt wrote, it never duplicates (see `runtime.spark_job`).
* `CollectSink(name)`: records kept under the run's exchange area
  (`_collect/{name}/`), read by `execute().output(name)`.
* `FileSink(path, format)` / `ParquetSink` / `CsvSink` / `JsonLinesSink`: `path`
  is a directory, replaced as a whole by each run; one file per subtask
  (`part-00000.parquet`, ...). Records must be dicts (JSON lines: anything
  `json.dumps` takes; dates become strings). `output_type` (as for streams) fixes
  the Parquet/CSV schema and validates records; without it the schema is
  inferred from the records. `path` may hold `{{ ds }}` / `{{ run_id }}`.
* `SqlSink(table, url=... | conn_id=...)`: rows appended to `table` with a
  `_run_id` column (name: `run_id_column`) and a `_dag_id` column (name:
  `dag_id_column`; None to omit). Subtasks stage their rows; after all succeeded
  the driver, in ONE transaction, deletes the rows of this (dag id, run id) and
  inserts the staged ones: a retried run replaces its rows, another DAG's run
  with the same run id keeps its own. The table is
  created when missing (column types from the first records, or output_type).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

from airflow_flinkchain.io.sources import FILE_FORMATS, _redact


@dataclass(frozen=True, eq=False)
class Sink:
    def describe(self) -> str:
        return type(self).__name__


@dataclass(frozen=True, eq=False)
class CollectSink(Sink):
    """Keeps the records for `execute().output(name)` (tests, notebooks, examples)."""

    name: str

    def describe(self) -> str:
        return f"collect({self.name!r})"


@dataclass(frozen=True, eq=False)
class FileSink(Sink):
    path: str
    format: str = "parquet"
    output_type: Any = None
    options: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.format not in FILE_FORMATS:
            raise ValueError(f"file sink {self.path!r}: format must be one of {FILE_FORMATS}, got {self.format!r}")
        if not isinstance(self.path, str) or not self.path:
            raise ValueError(f"file sink needs a non-empty path string, got {self.path!r}")

    def describe(self) -> str:
        return f"{self.format} files at {self.path}"


def ParquetSink(path: str, output_type: Any = None) -> FileSink:
    return FileSink(path, "parquet", output_type)


def CsvSink(path: str, output_type: Any = None, **options: Any) -> FileSink:
    return FileSink(path, "csv", output_type, options)


def JsonLinesSink(path: str) -> FileSink:
    return FileSink(path, "json")


@dataclass(frozen=True, eq=False)
class SqlSink(Sink):
    table: str
    url: Optional[str] = None
    conn_id: Optional[str] = None
    run_id_column: str = "_run_id"
    output_type: Any = None
    #: With the run id, the key of a run's rows (tables created by the sink get it):
    #: two DAGs' scheduled runs share run ids. None: key by the run id alone.
    dag_id_column: Optional[str] = "_dag_id"

    def __post_init__(self) -> None:
        if (self.url is None) == (self.conn_id is None):
            raise ValueError(f"SqlSink({self.table!r}) needs exactly one of url= or conn_id=")

    def describe(self) -> str:
        return f"SQL table {self.table} on {self.conn_id or _redact(self.url)}"
