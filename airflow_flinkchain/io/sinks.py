"""Sink descriptors: plain data recorded at parse time (no I/O, no Spark here).

Every sink is idempotent per run: a retried or cleared run replaces what the
earlier attempt wrote, it never duplicates (see `runtime.spark.job`).
* `CollectSink(name)`: records kept under the run's exchange area
  (`_collect/{name}/`), read by `execute().output(name)`.
* `FileSink(path, format)` / `ParquetSink` / `CsvSink` / `JsonLinesSink`: `path`
  is a directory, replaced as a whole by each run; one file per subtask
  (`part-00000.parquet`, ...). Records must be dicts (JSON lines: any JSON value;
  dates, Decimals, bytes and sets get the standard encodings listed in
  `runtime.connectors.json_lines`). `output_type` (as for streams) fixes the
  Parquet/CSV schema and validates records; without it the schema is the union
  of all records' fields, types widened (conflicts are refused, naming the field).
  `path` may hold `{{ ds }}` / `{{ run_id }}`.
* `SqlSink(table, url=... | conn_id=...)`: rows appended to `table` with a
  `_run_id` column (name: `run_id_column`) and a `_dag_id` column (name:
  `dag_id_column`; None to omit). Subtasks stage their rows; after all succeeded
  the driver, in ONE transaction, deletes the rows of this (dag id, run id) and
  inserts the staged ones: a retried run replaces its rows, another DAG's run
  with the same run id keeps its own. The table is
  created when missing (columns: the union of all records' fields, or output_type).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

from airflow_flinkchain.common.typeinfo import record_string
from airflow_flinkchain.io.sources import FILE_FORMATS, _redact, normalize_asset


@dataclass(frozen=True, eq=False)
class Sink:
    """Base of every sink (`DataStream.sink_to`). A sink's destination belongs to it
    alone: two sinks of a pipeline with one destination are refused at `plan()`.

    Examples:
        >>> SqlSink("totals", url="sqlite:///shop.db").describe()
        'SQL table totals on sqlite:///shop.db'
    """

    #: The Airflow Asset this sink is (an outlet of the chain task writing it): None
    #: derives the URI from the sink, a string overrides it, an object with `.uri`
    #: (an Airflow `Asset`) gives URI and name, False makes it no asset.
    asset: Any = field(default=None, kw_only=True)
    #: The asset's name (Airflow's default: its URI).
    asset_name: Optional[str] = field(default=None, kw_only=True)

    def __post_init__(self) -> None:
        normalize_asset(self, f"sink {self.describe()!r}")

    def describe(self) -> str:
        """A short human description (shown in plans and the UI)."""
        return type(self).__name__


@dataclass(frozen=True, eq=False)
class CollectSink(Sink):
    """Keeps the records for `execute().output(name)` (tests, notebooks, examples);
    what `DataStream.collect(name)` uses.

    Examples:
        >>> CollectSink("totals").describe()
        "collect('totals')"
    """

    name: str

    def describe(self) -> str:
        return f"collect({self.name!r})"


@dataclass(frozen=True, eq=False)
class PrintSink(CollectSink):
    """`DataStream.print(sink_identifier)`: each record as Flink prints it (Java's toString of
    its declared `type_info`; `str(value)` for Python objects), prefixed as Flink's
    PrintSinkOutputWriter: "id> ", "N> " (the 1-based subtask) when the sink runs with
    parallelism > 1, "id:N> " for both. The lines are kept as a collect sink's (under `name`)
    and written to stdout by the driver when the sink commits (`execute()`, `execute_local()`;
    the chain task's log in Airflow runs).

    Examples:
        >>> from airflow_flinkchain.common import Types
        >>> PrintSink("print-0").line(("a", 1.5), 1, 2)
        "2> ('a', 1.5)"
        >>> PrintSink("print-0", "out", Types.TUPLE([Types.STRING(), Types.FLOAT()])).line(("a", 1.5), 0, 1)
        'out> (a,1.5)'
    """

    sink_identifier: Optional[str] = None
    type_info: Any = None

    def line(self, value: Any, subtask: int, parallelism: int) -> str:
        """The printed line of `value` written by subtask `subtask` (0-based) of `parallelism`."""
        prefix = self.sink_identifier or ""
        if parallelism > 1:
            prefix = f"{prefix}:{subtask + 1}" if prefix else str(subtask + 1)
        text = record_string(value, self.type_info)
        return f"{prefix}> {text}" if prefix else text

    def describe(self) -> str:
        return "print()" if self.sink_identifier is None else f"print({self.sink_identifier!r})"


@dataclass(frozen=True, eq=False)
class FileSink(Sink):
    """Files in the directory `path` (may hold Airflow templates), replaced as a whole
    by each run, one file per subtask, in `format` ("parquet", "csv" or "json"
    lines). `output_type` fixes the schema and validates records; without it the
    schema is widened over the whole output.

    Examples:
        >>> FileSink("/data/out/{{ run_key }}", "csv").describe()
        'csv files at /data/out/{{ run_key }}'
    """

    path: str
    format: str = "parquet"
    output_type: Any = None
    options: dict = field(default_factory=dict)
    formats = FILE_FORMATS

    def __post_init__(self) -> None:
        if self.format not in self.formats:
            raise ValueError(f"file sink {self.path!r}: format must be one of {self.formats}, got {self.format!r}")
        if not isinstance(self.path, str) or not self.path:
            raise ValueError(f"file sink needs a non-empty path string, got {self.path!r}")
        super().__post_init__()

    def describe(self) -> str:
        return f"{self.format} files at {self.path}"


@dataclass(frozen=True, eq=False)
class RowFormatFileSink(FileSink):
    """Text files in the directory `path`, one line per record: the record as `print()` shows
    it (Java's toString of `type_info`, `str(value)` for Python objects), encoded with
    `charset` (Flink's row-format FileSink with `Encoder.simple_string_encoder()`). Each
    subtask writes one part file `{part_prefix}-{subtask}-0{part_suffix}`; the directory is
    replaced as a whole by each run, as every file sink's. Flink's time buckets and rolling
    policy do not apply: a run's part files are complete when the run commits.

    Examples:
        >>> from airflow_flinkchain.common import Types
        >>> s = RowFormatFileSink("/data/out", part_prefix="prefix", part_suffix=".ext",
        ...                       type_info=Types.TUPLE([Types.STRING(), Types.INT()]))
        >>> s.part_file(1), s.line(("a", 1)), s.describe()
        ('prefix-1-0.ext', '(a,1)', 'text files at /data/out')
    """

    format: str = "text"
    charset: str = "UTF-8"
    part_prefix: str = "part"
    part_suffix: str = ""
    type_info: Any = None
    #: what `with_rolling_policy` was given (kept for plans; see the class docstring)
    rolling_policy: Any = None
    formats = ("text",)

    def __post_init__(self) -> None:
        if self.output_type is not None or self.options:
            raise ValueError(f"row-format file sink {self.path!r}: output_type and options do not apply; "
                             "records are written as lines")
        for what in (self.part_prefix, self.part_suffix):
            if not isinstance(what, str) or "/" in what:
                raise ValueError(f"row-format file sink {self.path!r}: part prefix and suffix must be strings "
                                 f"without '/', got {what!r}")
        "".encode(self.charset)
        super().__post_init__()

    def part_file(self, subtask: int) -> str:
        """The name of subtask `subtask`'s part file."""
        return f"{self.part_prefix}-{subtask}-0{self.part_suffix}"

    def line(self, value: Any) -> str:
        """The line written for `value` (without its newline)."""
        return record_string(value, self.type_info)


def ParquetSink(path: str, output_type: Any = None, *, asset: Any = None, asset_name: Optional[str] = None) -> FileSink:
    """Parquet files in `path`.

    Examples:
        >>> ParquetSink("/data/totals", output_type={"customer": "string", "amount": "double"}).format
        'parquet'
    """
    return FileSink(path, "parquet", output_type, asset=asset, asset_name=asset_name)


def CsvSink(path: str, output_type: Any = None, *, asset: Any = None, asset_name: Optional[str] = None,
            **options: Any) -> FileSink:
    """CSV files in `path`, with a header line.

    Examples:
        >>> CsvSink("/data/totals").format
        'csv'
    """
    return FileSink(path, "csv", output_type, options, asset=asset, asset_name=asset_name)


def JsonLinesSink(path: str, *, asset: Any = None, asset_name: Optional[str] = None) -> FileSink:
    """JSON lines files in `path`: one standard JSON value per record.

    Examples:
        >>> JsonLinesSink("/data/events").format
        'json'
    """
    return FileSink(path, "json", asset=asset, asset_name=asset_name)


@dataclass(frozen=True, eq=False)
class SqlSink(Sink):
    """Rows of `table` (SQLAlchemy `url` or Airflow `conn_id`), replaced per run in one
    transaction: the rows of this (DAG id, run id) are deleted and the run's inserted.
    The table is created when missing.

    Examples:
        >>> SqlSink("revenue", conn_id="warehouse").describe()
        'SQL table revenue on warehouse'
    """

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
        super().__post_init__()

    def describe(self) -> str:
        return f"SQL table {self.table} on {self.conn_id or _redact(self.url)}"


def _run_columns(sink: Any, where: str) -> None:
    if not isinstance(sink.run_id_column, str) or not sink.run_id_column:
        raise ValueError(f"{where}: run_id_column must be a column name, got {sink.run_id_column!r}")
    if sink.dag_id_column is not None and (not isinstance(sink.dag_id_column, str) or not sink.dag_id_column):
        raise ValueError(f"{where}: dag_id_column must be a column name or None, got {sink.dag_id_column!r}")


DELTA_MODES = ("append", "merge")


@dataclass(frozen=True, eq=False)
class DeltaSink(Sink):
    """A Delta Lake table at `path` (a directory or object-store URI; `storage_options` go to
    delta-rs), written with `deltalake` (docs/connectors.md#delta-lake). In a stream run all of
    a run's output becomes ONE Delta commit, written after the checkpoint's commit point and
    carrying an application transaction (app id: pipeline and sink, version: the checkpoint
    id), so a repeated publication writes nothing. `mode="append"` appends the records;
    `merge_keys` (mode "merge") upserts them: per key the run's last record replaces the
    table's row. The table is created on the first write, partitioned by `partition_by`.
    In a batch run the run's output is one Delta commit too: an append replaces the rows of
    this (DAG id, run id) (columns `run_id_column`, `dag_id_column`, as SqlSink's), a merge
    upserts; so a retried run replaces its rows.

    Examples:
        >>> DeltaSink("/lake/orders_by_customer", merge_keys=("customer",)).describe()
        'Delta table /lake/orders_by_customer (merge on customer)'
    """

    path: str
    mode: str = "append"
    merge_keys: Optional[tuple] = None
    partition_by: Optional[tuple] = None
    storage_options: Optional[dict] = None
    #: Batch runs, mode "append": the columns keying a run's rows (as SqlSink's).
    run_id_column: str = "_run_id"
    dag_id_column: Optional[str] = "_dag_id"

    def __post_init__(self) -> None:
        if not isinstance(self.path, str) or not self.path or "{{" in self.path or "{%" in self.path:
            raise ValueError(f"DeltaSink needs a fixed, non-empty path string (one table), got {self.path!r}")
        for name in ("merge_keys", "partition_by"):
            value = getattr(self, name)
            if value is not None:
                value = (value,) if isinstance(value, str) else tuple(value)
                if not value or not all(isinstance(c, str) and c for c in value):
                    raise ValueError(f"DeltaSink({self.path!r}): {name} must be column names, got {value!r}")
                object.__setattr__(self, name, value)
        if self.merge_keys is not None and self.mode == "append":
            object.__setattr__(self, "mode", "merge")
        if self.mode not in DELTA_MODES:
            raise ValueError(f"DeltaSink({self.path!r}): mode must be one of {DELTA_MODES}, got {self.mode!r}")
        if self.mode == "merge" and not self.merge_keys:
            raise ValueError(f"DeltaSink({self.path!r}): mode='merge' needs merge_keys, the columns of the key")
        _run_columns(self, f"DeltaSink({self.path!r})")
        super().__post_init__()

    def describe(self) -> str:
        return f"Delta table {self.path}" + (f" (merge on {', '.join(self.merge_keys)})" if self.merge_keys else "")


@dataclass(frozen=True, eq=False)
class IcebergSink(Sink):
    """The Iceberg table `table` ("namespace.table") of a catalog, written with `pyiceberg`
    (docs/connectors.md#iceberg). `catalog`: a dict of pyiceberg catalog properties (e.g.
    `{"type": "sql", "uri": "sqlite:////data/catalog.db", "warehouse": "file:///data/wh"}`;
    its optional "name" names the catalog, default "default") or the name of a catalog
    configured for pyiceberg (`.pyiceberg.yaml`, `PYICEBERG_CATALOG__...` variables). In a
    stream run all of a run's output becomes ONE appended snapshot, written after the
    checkpoint's commit point, whose summary holds the app id (pipeline and sink) and the
    checkpoint id; a publication finding its checkpoint in the table's history writes
    nothing. In a batch run the run's output is one commit replacing the rows of this
    (DAG id, run id) (columns `run_id_column`, `dag_id_column`, as SqlSink's). The table
    (and its namespace) is created from the first records when missing.

    Examples:
        >>> IcebergSink("shop.totals", catalog={"type": "sql", "uri": "sqlite:////data/c.db"}).describe()
        'Iceberg table shop.totals (catalog default)'
    """

    table: str
    catalog: Any = None
    run_id_column: str = "_run_id"
    dag_id_column: Optional[str] = "_dag_id"

    def __post_init__(self) -> None:
        parts = self.table.split(".") if isinstance(self.table, str) else []
        if len(parts) < 2 or not all(parts) or "{{" in self.table:
            raise ValueError(f"IcebergSink needs a fixed table name 'namespace.table', got {self.table!r}")
        if not isinstance(self.catalog, (str, dict)) or not self.catalog:
            raise ValueError(f"IcebergSink({self.table!r}) needs catalog=: a dict of pyiceberg catalog properties "
                             "(e.g. {'type': 'sql', 'uri': 'sqlite:////data/catalog.db', 'warehouse': "
                             f"'file:///data/warehouse'}}) or a configured catalog's name, got {self.catalog!r}")
        _run_columns(self, f"IcebergSink({self.table!r})")
        super().__post_init__()

    @property
    def catalog_name(self) -> str:
        return self.catalog if isinstance(self.catalog, str) else str(self.catalog.get("name") or "default")

    @property
    def namespace(self) -> str:
        return self.table.rsplit(".", 1)[0]

    def describe(self) -> str:
        return f"Iceberg table {self.table} (catalog {self.catalog_name})"
