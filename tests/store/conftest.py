"""Store tests run twice: on a SQLite file and on a throwaway PostgreSQL database
(created on 127.0.0.1:5432 for the session, dropped after)."""

from __future__ import annotations

import os
import uuid

import pytest
from sqlalchemy import create_engine, text

from airflow_flinkchain.store.engine import dispose_engines

PG_SERVER_URL = os.environ.get("FLINKCHAIN_TEST_PG_URL", "postgresql+psycopg2://postgres@127.0.0.1:5432/test")


@pytest.fixture(scope="session")
def postgres_url():
    """URL of a fresh database on the test PostgreSQL server, dropped at the end."""
    try:
        admin = create_engine(PG_SERVER_URL, isolation_level="AUTOCOMMIT")
        with admin.connect() as conn:
            conn.execute(text("SELECT 1"))
    except Exception as exc:  # noqa: BLE001 - any connection failure means "no server"
        pytest.skip(f"PostgreSQL not reachable at {PG_SERVER_URL}: {exc}")
    name = f"flinkchain_test_{uuid.uuid4().hex[:10]}"
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    yield admin.url.set(database=name).render_as_string(hide_password=False)
    dispose_engines()
    with admin.connect() as conn:
        conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    admin.dispose()


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def store_url(request, tmp_path):
    """A store URL with an empty store: a new SQLite file, or the session's
    PostgreSQL database emptied of flinkchain tables."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'store.db'}"
        return
    url = request.getfixturevalue("postgres_url")
    dispose_engines()
    engine = create_engine(url)
    with engine.begin() as conn:
        conn.execute(text("DROP SCHEMA public CASCADE; CREATE SCHEMA public"))
    engine.dispose()
    yield url
    dispose_engines()
