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

from airflow_flinkchain.io.database_urls import POSTGRES_SCHEMES, redact as _redact, scheme_of

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
    `incremental_column` (stream runs; an integer identity column): each run reads
    the rows not read before, in that column's order, without waiting for writers;
    an id a transaction still in progress took is read by a later run once it
    commits. `settle`: the longest (seconds) later runs look for such an id (None:
    until every transaction in progress when it was missing has ended; 300 s where
    transactions cannot be listed) (docs/connectors.md, "Incremental SQL reads").

    Examples:
        >>> SqlSource("select * from orders", url="postgresql://etl:secret@db/shop").describe()
        'SQL query on postgresql://etl:***@db/shop'
    """

    query: str
    url: Optional[str] = None
    conn_id: Optional[str] = None
    params: dict = field(default_factory=dict)
    incremental_column: Optional[str] = None  # stream runs: each run reads the rows not read before
    #: stream runs: the longest an id gap stays open for a late commit, in seconds
    settle: Optional[float] = None
    parallel = False

    def __post_init__(self) -> None:
        if (self.url is None) == (self.conn_id is None):
            raise ValueError(f"SqlSource({self.query!r}) needs exactly one of url= or conn_id=")
        if self.settle is not None and (isinstance(self.settle, bool) or not isinstance(self.settle, (int, float))
                                        or self.settle < 0):
            raise ValueError(f"SqlSource({self.query!r}): settle must be a number of seconds >= 0 or None, "
                             f"got {self.settle!r}")
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


NATS_VALUE_FORMATS = ("json", "string", "bytes")


@dataclass(frozen=True, eq=False)
class NatsJetStreamSource(UnboundedSource):
    """The messages of the NATS JetStream stream `stream` on `servers`, read by stream runs
    (docs/connectors.md#nats-jetstream). Positions are stream sequences kept in the checkpoint: one
    split for the whole stream, or one per subject filter of `subjects` (filters must not
    overlap). Each run reads from the committed sequence to the last sequence present when
    the run began; no consumer state is kept on the server. The record timestamp is the
    message's JetStream timestamp (milliseconds), so a `WatermarkStrategy` needs no timestamp
    assigner. `value_format`: "json" (the payload parsed), "string" (decoded UTF-8) or
    "bytes".

    Credentials: `conn_id` names an Airflow connection (host, port, login / password, or a
    token as password without login or extra "token"; extra "user_credentials", "tls_ca_file",
    "tls_cert_file", "tls_key_file"), resolved by the chain task and never in the plan;
    `user_credentials` is a NATS credentials (.creds) file, `tls_*_file` the TLS files.
    Descriptions never show a password or token.

    Examples:
        >>> NatsJetStreamSource(stream="ORDERS", subjects=("orders.eu", "orders.us")).describe()
        'NATS JetStream stream ORDERS (orders.eu, orders.us) at nats://127.0.0.1:4222'
        >>> NatsJetStreamSource(servers="nats://app:s3cret@mq:4222", stream="ORDERS").describe()
        'NATS JetStream stream ORDERS at nats://app:***@mq:4222'
    """

    servers: Any = "nats://127.0.0.1:4222"
    stream: str = "ORDERS"
    subjects: Optional[tuple] = None
    value_format: str = "json"
    conn_id: Optional[str] = None
    user_credentials: Optional[str] = None
    tls_ca_file: Optional[str] = None
    tls_cert_file: Optional[str] = None
    tls_key_file: Optional[str] = None

    def __post_init__(self) -> None:
        if isinstance(self.servers, str):
            object.__setattr__(self, "servers", (self.servers,))
        object.__setattr__(self, "servers", tuple(self.servers))
        if not self.servers or not all(isinstance(s, str) and s for s in self.servers):
            raise ValueError(f"NatsJetStreamSource(stream={self.stream!r}): servers must be a URL string or a "
                             f"list of them, got {self.servers!r}")
        if not isinstance(self.stream, str) or not self.stream or any(c in self.stream for c in " .*>"):
            raise ValueError(f"NatsJetStreamSource: stream must be a JetStream stream name (no spaces, '.', '*', "
                             f"'>'), got {self.stream!r}")
        if self.subjects is not None:
            subjects = (self.subjects,) if isinstance(self.subjects, str) else tuple(self.subjects)
            if not subjects or len(set(subjects)) != len(subjects) or not all(isinstance(s, str) and s
                                                                               for s in subjects):
                raise ValueError(f"NatsJetStreamSource(stream={self.stream!r}): subjects must be distinct, "
                                 f"non-empty subject filters, got {self.subjects!r}")
            object.__setattr__(self, "subjects", subjects)
        if self.value_format not in NATS_VALUE_FORMATS:
            raise ValueError(f"NatsJetStreamSource(stream={self.stream!r}): value_format must be one of "
                             f"{NATS_VALUE_FORMATS}, got {self.value_format!r}")
        super().__post_init__()

    def describe(self) -> str:
        subjects = f" ({', '.join(self.subjects)})" if self.subjects else ""
        where = self.conn_id and f"connection {self.conn_id}" or ",".join(_redact(u) for u in self.servers)
        return f"NATS JetStream stream {self.stream}{subjects} at {where}"

    def initial_position(self, split_id: str) -> Any:
        return 1  # stream sequences start at 1


@dataclass(frozen=True, eq=False)
class DeltaSource(UnboundedSource):
    """A Delta Lake table at `path` read incrementally by version, as Spark's Delta streaming
    source (docs/connectors.md#delta-lake): each stream run reads the rows of the files added
    by the versions committed since the last run, one dict per row; the position is the next
    version to read. The table must be append-only: a version that removes files (a delete,
    update, merge or overwrite) fails the run naming the version; compactions (OPTIMIZE) are
    skipped. Outside stream runs: the whole table's history of appends, read once.

    Examples:
        >>> DeltaSource("/lake/bronze/orders").describe()
        'Delta table /lake/bronze/orders'
    """

    path: str = ""
    storage_options: Optional[dict] = None
    parallel = False

    def __post_init__(self) -> None:
        if not isinstance(self.path, str) or not self.path or "{{" in self.path or "{%" in self.path:
            raise ValueError(f"DeltaSource needs a fixed, non-empty path string (one table), got {self.path!r}")
        super().__post_init__()

    def describe(self) -> str:
        return f"Delta table {self.path}"


@dataclass(frozen=True, eq=False)
class PostgresCdcSource(UnboundedSource):
    """The changes of PostgreSQL `tables` ("schema.table") by logical replication (`pgoutput`),
    read by stream runs (docs/connectors-postgres-cdc.md), as dicts in Debezium's envelope
    `{"op": "r"|"c"|"u"|"d", "before", "after", "source": {"table", "lsn", "txid", "ts_ms"}}`.
    The first run creates replication slot `slot_name` (and publication `publication_name`
    if missing) and reads the tables' rows consistent with the slot's start (op "r"); later
    runs read the transactions committed before the run began; the slot advances only after
    a run's checkpoint committed. The record timestamp is the commit time (milliseconds).
    Column values are typed alike in snapshot and changes (bool, int, Decimal, date, datetime,
    bytes, lists for arrays, ...: the table in docs/connectors-postgres-cdc.md). `url`:
    postgresql://, postgresql+psycopg2:// or postgresql+psycopg:// (psycopg2 connects).

    Give the database as `url` or as an Airflow connection `conn_id` (resolved by the chain
    task, as `SqlSource`'s; never in the plan).

    Examples:
        >>> PostgresCdcSource("postgresql://etl:secret@db:5432/shop", ("public.orders",)).describe()
        'PostgreSQL changes of public.orders at postgresql://etl:***@db:5432/shop (slot flinkchain)'
        >>> PostgresCdcSource(conn_id="shop_db", tables=("public.orders",)).describe()
        'PostgreSQL changes of public.orders at connection shop_db (slot flinkchain)'
    """

    url: Optional[str] = None
    tables: tuple = ("public.orders",)
    slot_name: str = "flinkchain"
    publication_name: str = "flinkchain"
    conn_id: Optional[str] = None
    parallel = False

    def __post_init__(self) -> None:
        where = f"PostgresCdcSource(slot_name={self.slot_name!r})"
        if (self.url is None) == (self.conn_id is None):
            raise ValueError(f"{where} needs exactly one of url= or conn_id=")
        if self.url is not None and (not isinstance(self.url, str) or scheme_of(self.url) not in POSTGRES_SCHEMES):
            raise ValueError(f"{where}: url must be a postgresql://user@host:port/database URL (also "
                             "postgresql+psycopg2:// or postgresql+psycopg://; psycopg2 connects either way), got "
                             f"{_redact(self.url) if isinstance(self.url, str) else self.url!r}")
        tables = (self.tables,) if isinstance(self.tables, str) else tuple(self.tables or ())
        tables = tuple(t if isinstance(t, str) and "." in t else f"public.{t}" if isinstance(t, str) else t
                       for t in tables)
        if not tables or len(set(tables)) != len(tables) or not all(
                isinstance(t, str) and len(t.split(".")) == 2 and all(t.split(".")) for t in tables):
            raise ValueError(f"{where}: tables must be distinct 'schema.table' names, got {self.tables!r}")
        object.__setattr__(self, "tables", tables)
        for what in ("slot_name", "publication_name"):
            name = getattr(self, what)
            if not isinstance(name, str) or not name or not all(c.islower() or c.isdigit() or c == "_"
                                                                for c in name) or len(name) > 63:
                raise ValueError(f"{where}: {what} must be lower-case letters, digits and '_' (at most 63), "
                                 f"got {name!r}")
        super().__post_init__()

    def describe(self) -> str:
        at = f"connection {self.conn_id}" if self.conn_id else _redact(self.url)
        return f"PostgreSQL changes of {', '.join(self.tables)} at {at} (slot {self.slot_name})"
