"""Source descriptors: plain data recorded at parse time (no I/O, no Spark here).

The runtime turns a descriptor into the subtasks' input (`runtime.connectors`):
* `CollectionSource(items)`: non-parallel; all items go to subtask 0. The items
  are written once as data files when the plan is serialized (not pickled into
  the plan) and streamed back by subtask 0.
* `FileSource(path, format)` / `ParquetSource` / `CsvSource` / `JsonLinesSource`:
  read with Spark's readers, repartitioned to the chain's parallelism and fed to
  the chain as Arrow batches; each row becomes a dict record. `schema` (a
  pyarrow schema or a dict name -> type string, as `output_type`) fixes the
  column types; without it Parquet/JSON use the file's types and CSV infers them.
* `SqlSource(query, url=... | conn_id=...)`: non-parallel; subtask 0 runs the
  query with SQLAlchemy, one dict per row. `conn_id` is an Airflow connection,
  resolved by the Airflow chain task (outside Airflow: pass `url=`).
`path` may hold Airflow templates (`{{ ds }}`, `{{ run_id }}`), rendered at run
time: by the Airflow task (passed as overrides) or by `execute()`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

FILE_FORMATS = ("parquet", "csv", "json")


@dataclass(frozen=True, eq=False)
class Source:
    """Base of every source. `parallel=False` makes the source a non-parallel
    operator (parallelism 1), as Flink's `from_collection` is.

    Examples:
        >>> ParquetSource("/data/orders").describe()
        'parquet files at /data/orders'
    """

    parallel = True
    #: The Airflow Asset this source is (an inlet of the chain task reading it): None
    #: derives the URI from the source, a string overrides it, an object with `.uri`
    #: (an Airflow `Asset`) gives URI and name, False makes it no asset.
    asset: Any = field(default=None, kw_only=True)
    #: The asset's name (Airflow's default: its URI).
    asset_name: Optional[str] = field(default=None, kw_only=True)

    def __post_init__(self) -> None:
        normalize_asset(self, f"source {self.describe()!r}")

    def describe(self) -> str:
        """A short human description (shown in plans and the UI)."""
        return type(self).__name__


@dataclass(frozen=True, eq=False)
class CollectionSource(Source):
    """The records of `items`, on one subtask (what `from_collection` uses).

    Examples:
        >>> CollectionSource(items=(1, 2, 3)).describe()
        'collection of 3 records'
    """

    items: tuple = field(default=())
    parallel = False

    def describe(self) -> str:
        return f"collection of {len(self.items)} records"


@dataclass(frozen=True, eq=False)
class FileSource(Source):
    """Files at `path` (a directory or glob; may hold Airflow templates) in `format`
    ("parquet", "csv" or "json" lines), read in parallel; one dict per row. `schema`
    fixes the column types; `options` go to Spark's reader. `monitor=True` (in a
    streaming pipeline with a `checkpoint_dir`): each run reads the files that
    arrived since the last run, as Flink's FileSource with continuous monitoring.

    Examples:
        >>> FileSource("/data/orders/{{ run_key }}", "json").describe()
        'json files at /data/orders/{{ run_key }}'
    """

    path: str
    format: str = "parquet"
    schema: Any = None
    options: dict = field(default_factory=dict)
    monitor: bool = False  # stream runs: each run reads the files not read before (docs/stream-runs.md)
    formats = FILE_FORMATS

    def __post_init__(self) -> None:
        if self.format not in self.formats:
            raise ValueError(f"file source {self.path!r}: format must be one of {self.formats}, got {self.format!r}")
        if not isinstance(self.path, str) or not self.path:
            raise ValueError(f"file source needs a non-empty path string, got {self.path!r}")
        super().__post_init__()

    def describe(self) -> str:
        return f"{self.format} files at {self.path}"


@dataclass(frozen=True, eq=False)
class TextLineFileSource(FileSource):
    """The lines of the text files at `path` (a file, or a directory read recursively): one
    str record per line, without its line terminator (\\n, \\r\\n or \\r), decoded with `charset`.
    Each file is one split, read in order by one subtask (file i by subtask i mod
    parallelism), as Flink's FileSource with `StreamFormat.text_line_format()`.

    Examples:
        >>> TextLineFileSource("/data/books").describe()
        'text files at /data/books'
    """

    format: str = "text"
    charset: str = "UTF-8"
    formats = ("text",)

    def __post_init__(self) -> None:
        if self.schema is not None or self.options or self.monitor:
            raise ValueError(f"text line source {self.path!r}: schema, options and monitor do not apply "
                             "(every record is one line, a str)")
        "".encode(self.charset)  # an unknown charset fails when the pipeline is written
        super().__post_init__()


def ParquetSource(path: str, schema: Any = None, monitor: bool = False, *, asset: Any = None,
                  asset_name: Optional[str] = None, **options: Any) -> FileSource:
    """Parquet files at `path`.

    Examples:
        >>> ParquetSource("/data/orders", schema={"id": "int64", "amount": "double"}).format
        'parquet'
    """
    return FileSource(path, "parquet", schema, options, monitor, asset=asset, asset_name=asset_name)


def CsvSource(path: str, schema: Any = None, header: bool = True, monitor: bool = False, *, asset: Any = None,
              asset_name: Optional[str] = None, **options: Any) -> FileSource:
    """CSV files at `path`, with a header line unless `header=False`; column types
    are inferred unless `schema` gives them.

    Examples:
        >>> CsvSource("/data/orders.csv", sep=";").options
        {'header': True, 'sep': ';'}
    """
    return FileSource(path, "csv", schema, {"header": header, **options}, monitor, asset=asset,
                      asset_name=asset_name)


def JsonLinesSource(path: str, schema: Any = None, monitor: bool = False, *, asset: Any = None,
                    asset_name: Optional[str] = None, **options: Any) -> FileSource:
    """JSON lines files at `path`: one JSON object per line, one dict per object.

    Examples:
        >>> JsonLinesSource("/data/orders/{{ ds }}").format
        'json'
    """
    return FileSource(path, "json", schema, options, monitor, asset=asset, asset_name=asset_name)


@dataclass(frozen=True, eq=False)
class SqlSource(Source):
    """The rows of `query` (SQLAlchemy; `params` bound), one dict per row, on one
    subtask. Give the database as a SQLAlchemy `url` or an Airflow `conn_id`.
    `incremental_column` (stream runs): each run reads the rows whose column is
    above the value the last run ended at, in that column's order.

    Examples:
        >>> SqlSource("select * from orders", url="postgresql://etl:secret@db/shop").describe()
        'SQL query on postgresql://etl:***@db/shop'
    """

    query: str
    url: Optional[str] = None
    conn_id: Optional[str] = None
    params: dict = field(default_factory=dict)
    incremental_column: Optional[str] = None  # stream runs: each run reads the rows above the last value read
    parallel = False

    def __post_init__(self) -> None:
        if (self.url is None) == (self.conn_id is None):
            raise ValueError(f"SqlSource({self.query!r}) needs exactly one of url= or conn_id=")
        super().__post_init__()

    def describe(self) -> str:
        return f"SQL query on {self.conn_id or _redact(self.url)}"


def normalize_asset(descriptor: Any, where: str) -> None:
    """Keep the asset override as plain strings (the plan is pickled and read by a
    runtime that never imports Airflow): an Airflow `Asset` becomes its URI and name."""
    asset = descriptor.asset
    if asset is not None and asset is not False and not isinstance(asset, str):
        uri, name = getattr(asset, "uri", None), getattr(asset, "name", None)
        if not isinstance(uri, str):
            raise ValueError(f"{where}: asset= must be a URI string, an Airflow Asset or False, got {asset!r}")
        object.__setattr__(descriptor, "asset", uri)
        if descriptor.asset_name is None and isinstance(name, str) and name != uri:
            object.__setattr__(descriptor, "asset_name", name)
    for value in (descriptor.asset, descriptor.asset_name):
        if isinstance(value, str) and ("{{" in value or "{%" in value or not value.strip()):
            raise ValueError(f"{where}: asset URI and name must be fixed, non-empty strings (Airflow resolves "
                             f"assets when it parses the DAG), got {value!r}")
    if asset is True:
        raise ValueError(f"{where}: asset=True is not a URI; leave asset unset to derive it from the path or table")


def _redact(url: Optional[str]) -> str:
    """A database URL without its password (descriptions end up in the UI)."""
    if not url or "@" not in url or "://" not in url:
        return str(url)
    scheme, rest = url.split("://", 1)
    creds, host = rest.rsplit("@", 1)
    return f"{scheme}://{creds.split(':', 1)[0]}:***@{host}"


@dataclass(frozen=True, eq=False)
class UnboundedSource(Source):
    """Base of a source that keeps receiving data (a log, a queue, a table), read by stream
    runs (docs/stream-runs.md): Flink's split enumerator and split reader in three methods.
    A split is a partition / shard / file with a string id; a position is JSON-able data.
    Each run reads, per split, from the position the last committed run ended at to the end
    `discover` reported when the run began. Read once, in the first run, by a pipeline
    without a `checkpoint_dir`.

    Examples:
        >>> class Numbers(UnboundedSource):
        ...     def discover(self, positions): return {"p0": 3}
        ...     def read_split(self, split_id, start, end): return range(start, end)
        >>> list(Numbers().read_split("p0", Numbers().initial_position("p0"), 3))
        [0, 1, 2]
    """

    def discover(self, positions: dict) -> dict:
        """{split_id: end position} of what is available now (driver, at the start of a
        chain attempt); `positions`: the committed {split_id: position}."""
        raise NotImplementedError(f"{type(self).__name__} must implement discover(positions)")

    def initial_position(self, split_id: str) -> Any:
        """Where a split never read before starts (0 unless overridden)."""
        return 0

    def read_split(self, split_id: str, start: Any, end: Any) -> Any:
        """The records of a split from `start` (inclusive) to `end` (exclusive), in order
        (on the subtask that reads the split); the same records for the same range."""
        raise NotImplementedError(f"{type(self).__name__} must implement read_split(split_id, start, end)")
