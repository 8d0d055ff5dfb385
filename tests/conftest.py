"""Shared fixtures. One SparkSession for the whole test session (runtime tests)."""

from __future__ import annotations

import os
import sys

import pytest


@pytest.fixture(scope="session")
def spark():
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from airflow_flinkchain.runtime.spark.session import get_or_create_spark

    session = get_or_create_spark(master="local[2]", app_name="flinkchain-tests")
    yield session
    session.stop()
