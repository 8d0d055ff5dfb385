"""Database URLs of the SQL sources and sinks, `PostgresCdcSource` and the run store.

SQLAlchemy URLs name a dialect and optionally its driver: `postgresql://` (SQLAlchemy 2.1:
psycopg 3), `postgresql+psycopg://` (psycopg 3), `postgresql+psycopg2://` (psycopg2). The
project installs both drivers. libpq (psycopg2.connect, which the CDC source uses) takes no
`+driver` part: `libpq_url` drops it. `check_driver` fails, naming the source or sink, when a
URL's driver is not installed: called when the connector opens, before anything is written."""

from __future__ import annotations

from typing import Optional

#: the PostgreSQL URL forms every database user of the project accepts
POSTGRES_SCHEMES = ("postgresql", "postgresql+psycopg2", "postgresql+psycopg", "postgres")
#: SQLAlchemy dialect+driver -> the pip package of its driver
DRIVER_PACKAGES = {"postgresql": "psycopg[binary]", "postgresql+psycopg": "psycopg[binary]",
                   "postgresql+psycopg2": "psycopg2-binary", "postgresql+pg8000": "pg8000",
                   "postgresql+asyncpg": "asyncpg", "mysql": "mysqlclient", "mysql+mysqldb": "mysqlclient",
                   "mysql+pymysql": "pymysql", "mariadb": "mysqlclient", "mariadb+pymysql": "pymysql",
                   "mysql+mysqlconnector": "mysql-connector-python", "mssql+pyodbc": "pyodbc",
                   "oracle+oracledb": "oracledb"}


def redact(url: Optional[str]) -> str:
    """A database or NATS URL without its password or token (descriptions end up in the UI
    and logs)."""
    if not url or "@" not in url or "://" not in url:
        return str(url)
    scheme, rest = url.split("://", 1)
    creds, host = rest.rsplit("@", 1)
    if ":" not in creds and scheme.startswith(("nats", "tls", "ws")):  # NATS: a bare user info is a token
        return f"{scheme}://***@{host}"
    return f"{scheme}://{creds.split(':', 1)[0]}:***@{host}"


def scheme_of(url: str) -> str:
    return url.split("://", 1)[0].lower() if "://" in url else ""


def libpq_url(url: str) -> str:
    """`url` as libpq takes it: `postgresql+psycopg2://...` and `postgresql+psycopg://...`
    become `postgresql://...`."""
    scheme = scheme_of(url)
    return "postgresql" + url[len(scheme):] if scheme.startswith("postgresql+") else url


def check_driver(url: str, where: str) -> None:
    """Fails, naming `where`, when `url` is no SQLAlchemy URL, names an unknown dialect, or its
    driver is not installed (SQLAlchemy would fail only when it first connects)."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError, NoSuchModuleError

    try:
        parsed = make_url(url)
    except (ArgumentError, ValueError):
        raise ValueError(f"{where}: {redact(url)!r} is not a SQLAlchemy URL; write "
                         "dialect[+driver]://user:password@host:port/database, e.g. "
                         "postgresql://etl@db:5432/shop") from None
    try:
        parsed.get_dialect().import_dbapi()
    except NoSuchModuleError:
        raise ValueError(f"{where}: SQLAlchemy knows no dialect {parsed.drivername!r} (URL {redact(url)}); "
                         f"PostgreSQL URLs start with {', '.join(s + '://' for s in POSTGRES_SCHEMES[:3])}") from None
    except ImportError as exc:
        package = DRIVER_PACKAGES.get(parsed.drivername, f"the Python driver of {parsed.drivername}")
        postgres = (" (or use postgresql:// or postgresql+psycopg2://, whose drivers the project installs)"
                    if parsed.drivername.startswith("postgresql") else "")
        raise ModuleNotFoundError(f"{where}: URL {redact(url)} names the SQLAlchemy driver {parsed.drivername!r}, "
                                  f"whose module {exc.name or ''!r} is not installed here: pip install "
                                  f"'{package}' where the pipeline runs{postgres}") from None
