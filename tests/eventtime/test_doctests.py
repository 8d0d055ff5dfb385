import doctest

import pytest

from airflow_flinkchain import common, state, state_backend, window
from airflow_flinkchain.runtime.state import key_groups


@pytest.mark.parametrize("module", [common, state, state_backend, window, key_groups], ids=lambda m: m.__name__)
def test_module_examples(module):
    result = doctest.testmod(module)
    assert result.attempted > 0 and result.failed == 0
