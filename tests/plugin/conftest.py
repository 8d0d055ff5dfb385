"""Plugin tests run against a real Airflow configuration in a throwaway
AIRFLOW_HOME: SimpleAuthManager, a migrated SQLite metadata DB (the auth
dependencies look up DAG teams and revoked tokens there), and a SQLite run store.

The environment is set here, at import, before anything imports Airflow."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

AIRFLOW_HOME = Path(tempfile.mkdtemp(prefix="flinkchain-plugin-tests-"))
TEST_ENV = {
    "AIRFLOW_HOME": str(AIRFLOW_HOME),
    "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
    "AIRFLOW__CORE__UNIT_TEST_MODE": "False",
    "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{AIRFLOW_HOME / 'airflow.db'}",
    "AIRFLOW__CORE__AUTH_MANAGER": "airflow.api_fastapi.auth.managers.simple.simple_auth_manager.SimpleAuthManager",
    "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": "admin:admin,viewer:viewer",
    "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "False",
    "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(AIRFLOW_HOME / "passwords.json"),
    "AIRFLOW__API_AUTH__JWT_SECRET": "flinkchain-test-secret-" + "x" * 48,
    "AIRFLOW__API__SECRET_KEY": "flinkchain-test-secret",
}
# Read when a store is opened, not at import: set only while this package's tests run
# (a collection-time setting leaked into every later Airflow subprocess of the session).
STORE_URL = f"sqlite:///{AIRFLOW_HOME / 'flinkchain_store.db'}"
# AIRFLOW_HOME and the metadata DB are fixed when Airflow is imported; everything
# else is read from the environment when used.
BOUND_AT_IMPORT = ("AIRFLOW_HOME", "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN")
if "airflow" not in sys.modules:
    os.environ.update(TEST_ENV)
else:  # another test package imported Airflow first: keep its home and DB (migrated below)
    os.environ.update({k: v for k, v in TEST_ENV.items() if k not in BOUND_AT_IMPORT})


@pytest.fixture(scope="package", autouse=True)
def plugin_store_url():
    old = os.environ.get("FLINKCHAIN_STORE_URL")
    os.environ["FLINKCHAIN_STORE_URL"] = STORE_URL
    yield STORE_URL
    if old is None:
        os.environ.pop("FLINKCHAIN_STORE_URL", None)
    else:
        os.environ["FLINKCHAIN_STORE_URL"] = old


@pytest.fixture(scope="session")
def airflow_env():
    """The Airflow environment of the plugin tests, metadata DB migrated once."""
    log = AIRFLOW_HOME / "db-migrate.log"
    with log.open("w") as out:
        done = subprocess.run([str(Path(sys.executable).parent / "airflow"), "db", "migrate"],
                              stdout=out, stderr=subprocess.STDOUT, env=os.environ.copy())
    assert done.returncode == 0, log.read_text()[-3000:]
    return dict(os.environ)


@pytest.fixture(scope="session")
def auth_manager(airflow_env):
    from airflow.api_fastapi.app import init_auth_manager

    return init_auth_manager()


@pytest.fixture(scope="session")
def tokens(auth_manager):
    """JWTs issued by the auth manager itself, as its login endpoint would."""
    from airflow.api_fastapi.auth.managers.simple.user import SimpleAuthManagerUser

    return {
        "admin": auth_manager.generate_jwt(SimpleAuthManagerUser(username="admin", role="admin")),
        "viewer": auth_manager.generate_jwt(SimpleAuthManagerUser(username="viewer", role="viewer")),
        # A signed-in user without any role: SimpleAuthManager grants no DAG access.
        "nobody": auth_manager.generate_jwt(SimpleAuthManagerUser(username="nobody", role=None)),
    }
