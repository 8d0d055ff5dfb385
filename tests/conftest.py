"""Shared fixtures. One SparkSession for the whole test session (runtime tests)."""

from __future__ import annotations

import os
import sys

import pytest

# One JVM class-data archive for every spark-submit of the session (tests give Airflow homes
# of their own, and the default directory is under the Airflow home): created by the first.
os.environ.setdefault("AIRFLOW__FLINKCHAIN__JVM_ARCHIVE_DIR",
                      os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "build", "jvm"))


@pytest.fixture(scope="session")
def spark(s3_server):
    """Started after the S3 server: Spark's Python workers take the environment the session
    started with (AWS_ENDPOINT_URL and the test credentials), as spark-submit's do."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from airflow_flinkchain.runtime.spark.session import get_or_create_spark

    session = get_or_create_spark(master="local[2]", app_name="flinkchain-tests")
    yield session
    session.stop()


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory):
    """A moto S3 server for the session (tests/s3_server.py), its AWS_* variables set in
    os.environ (so spark-submit, Spark's Python workers and Airflow subprocesses see them too)."""
    sys.path.insert(0, os.path.dirname(__file__))
    from s3_server import S3Server

    server = S3Server().start(str(tmp_path_factory.mktemp("moto") / "moto.log"))
    try:
        with pytest.MonkeyPatch.context() as env:
            for k, v in server.env.items():
                env.setenv(k, v)
            yield server
    finally:
        server.stop()
