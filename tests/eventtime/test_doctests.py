import doctest

import pytest

from airflow_flinkchain import state, state_backend, window, window_triggers
from airflow_flinkchain.common import configuration, serialization, time, typeinfo, types, watermark_strategy
from airflow_flinkchain.runtime.state import key_groups

MODULES = [time, watermark_strategy, typeinfo, types, configuration, serialization, state, state_backend, window,
           window_triggers, key_groups]


@pytest.mark.parametrize("module", MODULES, ids=lambda m: m.__name__)
def test_module_examples(module):
    result = doctest.testmod(module)
    assert result.attempted > 0 and result.failed == 0
