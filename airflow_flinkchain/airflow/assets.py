"""Sources and sinks as Airflow Assets: inlets and outlets of the chain tasks.

A file source/sink or a SQL table is an Asset; collections, collect sinks and the
exchange datasets between chains are internal to a run and are not. URIs follow
Airflow's asset URI conventions (the ones its providers register):

* files: ``file:///abs/path``, ``s3://bucket/key`` (``s3a://``/``s3n://`` too),
  ``hdfs://namenode:port/path``, ``gs://``, ``abfss://``... as written. A templated
  path segment (``{{ run_key }}``, ``day={{ ds }}``) stands for every run's
  directory and becomes ``*`` (``file:///data/out/*/totals``): the asset is the
  dataset, each run a new part of it; the rendered path is in the event's extra.
* SQL tables, per connection type: ``postgres://host:5432/database/schema/table``,
  ``mysql://host:3306/database/table``, ``sqlite:///path/to.db/table``, otherwise
  ``{type}://host:port/database/table``. A `conn_id` connection is read when the DAG
  is parsed; when it cannot be, the URI names the connection
  (``x-airflow-connection://{conn_id}/{table}``) and a warning says so.

`asset=` on a source/sink overrides the URI (or gives an Airflow `Asset`),
`asset_name=` the name, `asset=False` makes it no asset. Parse time: no I/O
besides reading a `conn_id` connection.
"""

from __future__ import annotations

import logging
import os
import re
import urllib.parse
from dataclasses import dataclass
from typing import Any, Optional

from airflow_flinkchain.io.sinks import DeltaSink, FileSink, IcebergSink, SqlSink
from airflow_flinkchain.io.sources import DeltaSource, FileSource, NatsJetStreamSource, PostgresCdcSource, SqlSource

log = logging.getLogger(__name__)

_TEMPLATE = re.compile(r"\{\{.*?\}\}|\{%.*?%\}")
#: Object-store schemes Spark spells differently from Airflow's asset convention.
_SCHEME_ALIASES = {"s3a": "s3", "s3n": "s3", "gcs": "gs"}
#: SQLAlchemy backend / Airflow connection type -> asset URI scheme and default port.
_SQL_SCHEMES = {"postgresql": ("postgres", 5432), "postgres": ("postgres", 5432), "mysql": ("mysql", 3306),
                "mariadb": ("mysql", 3306), "mssql": ("mssql", 1433), "oracle": ("oracle", 1521)}
ROLES = ("source", "sink")


@dataclass(frozen=True)
class AssetRef:
    """One source or sink of a chain as an asset (plain data; `asset()` builds Airflow's)."""

    role: str  # "source" (an inlet) or "sink" (an outlet)
    operator_key: str
    operator: str  # the source/sink operator's name
    uri: str
    name: str
    #: ((column, type), ...) of a typed source/sink (`schema=` / `output_type=`), else ().
    fields: tuple = ()

    def asset(self):
        from airflow_flinkchain.airflow.compat import Asset

        return Asset(uri=self.uri, name=self.name)


def asset_of(descriptor: Any, where: str = "") -> Optional[Any]:
    """The Airflow `Asset` (uri, name) of a source/sink descriptor, None when it is
    none (collections, collect sinks, `asset=False`). What the Chains tab links with."""
    uri = asset_uri(descriptor, where)
    if uri is None:
        return None
    from airflow_flinkchain.airflow.compat import Asset

    return Asset(uri=uri, name=descriptor.asset_name or uri)


def asset_uri(descriptor: Any, where: str = "") -> Optional[str]:
    """The asset URI of a source/sink descriptor (its `asset=` override first), or None."""
    uri = _derived_uri(descriptor, where)
    if uri is None:
        return None
    from airflow_flinkchain.airflow.compat import Asset

    return Asset(uri=uri).uri  # Airflow's normal form: what a downstream `Asset(...)` compares equal to


def _derived_uri(descriptor: Any, where: str) -> Optional[str]:
    override = getattr(descriptor, "asset", None)
    if override is False:
        return None
    if isinstance(override, str):
        return override
    where = where or _describe(descriptor)
    if isinstance(descriptor, (FileSource, FileSink, DeltaSource, DeltaSink)):  # a Delta table is its location
        return file_uri(descriptor.path)
    if isinstance(descriptor, (SqlSource, SqlSink)):
        table = getattr(descriptor, "table", None) or _query_table(getattr(descriptor, "query", ""))
        if table is None:
            return None  # a query over several tables: no single asset (give asset= to name one)
        if descriptor.url is not None:
            return sql_uri_from_url(descriptor.url, table)
        return sql_uri_from_connection(descriptor.conn_id, table, where)
    if isinstance(descriptor, NatsJetStreamSource):
        if descriptor.conn_id:
            server = _connection_server(descriptor.conn_id, where)
            return f"{server}/{descriptor.stream}" if server.startswith("x-") else nats_uri(server, descriptor.stream)
        return nats_uri(descriptor.servers[0], descriptor.stream)
    if isinstance(descriptor, IcebergSink):
        return iceberg_uri(descriptor.catalog_name, descriptor.table)
    if isinstance(descriptor, PostgresCdcSource):  # one table: its URI; several: none unless asset= names one
        if len(descriptor.tables) != 1:
            return None
        if descriptor.url is None:
            return sql_uri_from_connection(descriptor.conn_id, descriptor.tables[0], where)
        return sql_uri_from_url(descriptor.url, descriptor.tables[0])
    return None


def _connection_server(conn_id: str, where: str) -> str:
    """host:port of an Airflow connection (no credentials), for a NATS asset URI."""
    from airflow_flinkchain.airflow.compat import get_connection

    try:
        conn = get_connection(conn_id)
    except Exception as exc:
        log.warning("%s: Airflow connection %r could not be read when parsing (%s); its asset URI names the "
                    "connection. Define the connection where DAGs are parsed, or pass asset=.", where, conn_id,
                    type(exc).__name__)
        return f"x-airflow-connection://{conn_id}"
    return f"nats://{conn.host or '127.0.0.1'}:{conn.port or 4222}"


def chain_asset_refs(job_graph: Any, chain_id: str) -> tuple[AssetRef, ...]:
    """The assets of one chain's sources (inlets) and sinks (outlets), in chain order."""
    graph = job_graph.stream_graph
    chain = next(c for c in job_graph.chains if c.id == chain_id)
    refs = []
    for node_id in chain.node_ids:
        node = graph.node(node_id)
        role = str(getattr(node.kind, "value", node.kind))
        if role not in ROLES:
            continue
        uri = asset_uri(node.function, f"{role} {node.name!r}")
        if uri is not None:
            refs.append(AssetRef(role, node.key, node.name, uri, node.function.asset_name or uri,
                                 declared_fields(node.function)))
    return tuple(refs)


def plan_assets(job_graph: Any) -> list[dict]:
    """Every source/sink asset of a pipeline, as recorded with its plan in the run store
    (`plan["assets"]`, read by the Chains tab to link each one to Airflow's asset page)."""
    return [{"operator": r.operator_key, "chain": c.id, "role": r.role, "uri": r.uri, "name": r.name}
            for c in job_graph.chains for r in chain_asset_refs(job_graph, c.id)]


def declared_fields(descriptor: Any) -> tuple:
    """((column, type), ...) a source/sink declares (`schema=` / `output_type=`: a dict
    name -> type, a pyarrow schema or a PyFlink ROW_NAMED), else ()."""
    from airflow_flinkchain.common import to_output_type

    declared = getattr(descriptor, "output_type", None) or getattr(descriptor, "schema", None)
    declared = to_output_type(declared)
    if isinstance(declared, dict):
        return tuple((str(k), str(v)) for k, v in declared.items())
    names, types = getattr(declared, "names", None), getattr(declared, "types", None)
    if names is not None and types is not None:  # a pyarrow schema
        return tuple((str(n), str(t)) for n, t in zip(names, types))
    return ()


def event_extra(ref: AssetRef, committed: dict, run: Any, pipeline: Any, chain_id: str) -> dict:
    """The extra of a sink's asset event (JSON): what was committed, by which run and operator."""
    return {
        "records_written": int(committed.get("records") or 0),
        "path": str(committed.get("path") or ""),
        "run_key": run.run_key,
        "run_id": run.run_id,
        "pipeline": pipeline.pipeline,
        "chain": chain_id,
        "operator": ref.operator,
    }


def published_extra(ref: AssetRef, published: dict, run: Any, pipeline: Any) -> dict:
    """The extra of a stream run's sink event, emitted by the commit step once the run's files
    are published (`stream_run.published_sinks`): the sink's directory in `path`, the run's
    part files there in `files` (read exactly these), the checkpoint that committed them."""
    return {**event_extra(ref, published, run, pipeline, published["chain"]),
            "files": list(published["files"]), "checkpoint": published["checkpoint"], "seq": published["seq"]}


# ---- URI conventions ------------------------------------------------------------------

def file_uri(path: str) -> str:
    """A file source/sink path as Airflow's asset URI; templated segments become `*`."""
    path = _TEMPLATE.sub("*", path.strip())
    parsed = urllib.parse.urlsplit(path)
    scheme = parsed.scheme.lower()
    if len(scheme) > 1 and "://" in path or scheme == "file":  # one letter: a Windows drive
        scheme = _SCHEME_ALIASES.get(scheme, scheme)
        if scheme == "file":
            return "file://" + _abs(parsed.path)
        return urllib.parse.urlunsplit((scheme, parsed.netloc, parsed.path.rstrip("/"), "", ""))
    return "file://" + _abs(path)


def nats_uri(server: str, stream: str) -> str:
    """A JetStream stream as an asset URI: `nats://host:port/STREAM` (the first server; no
    credentials; port 4222 when the URL has none)."""
    u = urllib.parse.urlsplit(server if "://" in server else "nats://" + server)
    return f"nats://{u.hostname or 'localhost'}:{u.port or 4222}/{stream}"


def iceberg_uri(catalog: str, table: str) -> str:
    """An Iceberg table as an asset URI: `iceberg://{catalog}/{namespace}/{table}` (the
    catalog's name; a nested namespace keeps its dots)."""
    namespace, name = table.rsplit(".", 1)
    return f"iceberg://{urllib.parse.quote(catalog, safe='')}/{namespace}/{name}"


def sql_uri_from_url(url: str, table: str) -> str:
    """A table on a SQLAlchemy URL as Airflow's asset URI (never with credentials)."""
    from sqlalchemy.engine import make_url

    u = make_url(url)
    backend = u.get_backend_name()
    if backend == "sqlite":
        return f"sqlite://{_abs(u.database) if u.database and u.database != ':memory:' else '/:memory:'}/{table}"
    return _sql_uri(backend, u.host, u.port, u.database, table)


def sql_uri_from_connection(conn_id: str, table: str, where: str) -> str:
    """A table on an Airflow connection as an asset URI, by its connection type."""
    from airflow_flinkchain.airflow.compat import get_connection

    try:
        conn = get_connection(conn_id)
    except Exception as exc:
        log.warning("%s: Airflow connection %r could not be read when parsing (%s); its asset URI names the "
                    "connection. Define the connection where DAGs are parsed, or pass asset= to the source/sink.",
                    where, conn_id, type(exc).__name__)
        return f"x-airflow-connection://{conn_id}/{table}"
    if conn.conn_type == "sqlite":
        return f"sqlite://{_abs(conn.host or '')}/{table}"
    return _sql_uri(conn.conn_type, conn.host, conn.port, conn.schema, table)


def _sql_uri(kind: str, host: Optional[str], port: Optional[int], database: Optional[str], table: str) -> str:
    scheme, default_port = _SQL_SCHEMES.get(kind, (kind, None))
    netloc = f"{host or 'localhost'}:{port or default_port}" if (port or default_port) else (host or "localhost")
    parts = [database or "default"] + table.split(".")
    if scheme == "mysql" and len(parts) == 3:
        parts = parts[1:]  # `db.table`: MySQL's database is the schema
    if scheme == "postgres" and len(parts) == 2:
        parts.insert(1, "public")  # Airflow's postgres convention: database/schema/table
    return f"{scheme}://{netloc}/" + "/".join(parts)


def _query_table(query: str) -> Optional[str]:
    """The table of a plain `select ... from <table>` query (no join, no subquery)."""
    m = re.fullmatch(r"\s*select\s+.+?\s+from\s+([A-Za-z_][\w.]*)(\s+(where|order|limit)\b.*)?\s*;?\s*",
                     query, re.IGNORECASE | re.DOTALL)
    if not m or re.search(r"\b(join|select)\b", m.group(2) or "", re.IGNORECASE):
        return None
    return m.group(1)


def _abs(path: str) -> str:
    path = path.rstrip("/") or "/"
    return path if path.startswith("/") else os.path.abspath(path)


def _describe(descriptor: Any) -> str:
    try:
        return str(descriptor.describe())
    except Exception:
        return type(descriptor).__name__
