"""Fixtures for the cluster tests: a real Spark standalone master + 1 worker on 127.0.0.1."""

from __future__ import annotations

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))
from airflow_flinkchain.localcluster.standalone import StandaloneCluster  # noqa: E402


@pytest.fixture(scope="session")
def standalone_cluster(tmp_path_factory, request):
    """One master and one worker (1 core, 1g), stopped by process group in a finalizer."""
    cluster = StandaloneCluster(tmp_path_factory.mktemp("spark-standalone"), workers=1, cores=1, memory="1g")
    request.addfinalizer(cluster.stop)
    cluster.start()
    return cluster
