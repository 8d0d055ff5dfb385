"""Runs a test directory's keyed-state tests against both state backends: its conftest imports
these hooks. Every pipeline built in a test gets the backend (the pipeline's default is
swapped), and so do WindowOperators and backends the tests construct directly. Spark tests and
BATCH-mode cases (BATCH always uses the heap backend) run once, on the heap."""

from __future__ import annotations

import pytest

from airflow_flinkchain.runtime.state import backend as heap_module
from airflow_flinkchain.runtime.state.factory import create_keyed_state_backend

BACKENDS = ("hashmap", "rocksdb")


def pytest_generate_tests(metafunc):
    uses_spark = "spark" in metafunc.fixturenames or metafunc.definition.get_closest_marker("spark")
    if "state_backend_kind" in metafunc.fixturenames and not uses_spark:
        metafunc.parametrize("state_backend_kind", BACKENDS, indirect=True)


def _is_batch(value) -> bool:
    return str(getattr(value, "name", value)).lower() == "batch"


def pytest_collection_modifyitems(config, items):
    keep, drop = [], []
    for item in items:
        params = getattr(getattr(item, "callspec", None), "params", {})
        if params.get("state_backend_kind") == "rocksdb" and any(_is_batch(v) for v in params.values()):
            drop.append(item)
        else:
            keep.append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


def rocksdb_backend(*args, **kwargs):
    return create_keyed_state_backend("rocksdb", *args, **kwargs)


@pytest.fixture(autouse=True)
def state_backend_kind(request, monkeypatch):
    kind = getattr(request, "param", "hashmap")
    if kind == "rocksdb":
        from airflow_flinkchain.api import pipeline as pipeline_module
        from airflow_flinkchain.runtime.core.operators import window as window_module
        from airflow_flinkchain.state_backend import EmbeddedRocksDBStateBackend

        monkeypatch.setattr(pipeline_module, "HashMapStateBackend", EmbeddedRocksDBStateBackend)
        monkeypatch.setattr(window_module, "create_keyed_state_backend", lambda _kind: rocksdb_backend())
        monkeypatch.setattr(heap_module, "HeapKeyedStateBackend", rocksdb_backend)
        if hasattr(request.module, "HeapKeyedStateBackend"):
            monkeypatch.setattr(request.module, "HeapKeyedStateBackend", rocksdb_backend)
    return kind
