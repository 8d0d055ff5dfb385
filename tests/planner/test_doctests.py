"""The examples in docstrings run."""

import doctest
import importlib

import pytest

MODULES = [
    "airflow_flinkchain.api.datastream",
    "airflow_flinkchain.api.pipeline",
    "airflow_flinkchain.planner.formats",
    "conformance_cases",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    result = doctest.testmod(importlib.import_module(name))
    assert result.failed == 0 and result.attempted > 0
