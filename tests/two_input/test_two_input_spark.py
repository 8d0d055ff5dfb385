"""Two-input chains on Spark (parallelism 2): a keyed co-process and a keyed broadcast
process, each chain reading both upstream exchanges; the same outputs as in process.
Also the shared keyed_enrich case (STREAMING) through Spark's exchange datasets."""

from __future__ import annotations

from collections import Counter

import pytest

from airflow_flinkchain.runtime.spark.local import execute_pipeline

from conformance_cases import as_multiset

from .cases import build_two_input_case, load_two_input_cases
from .pipelines import enrich_pipeline


@pytest.mark.parametrize("mode", ["streaming"])
def test_keyed_co_process_and_broadcast_on_spark(spark, mode):
    res = execute_pipeline(enrich_pipeline(2, mode, name="enrich_spark"), spark=spark)
    assert sorted(res.output("out")) == [("a", 20, 1, 1), ("a", 22, 1, 2), ("b", 40, 2, 1), ("c", 60, 3, 1)]
    case = next(c for c in load_two_input_cases() if c["name"] == "keyed_enrich")
    res = execute_pipeline(build_two_input_case(case, mode), spark=spark)
    assert as_multiset(res.output("out")) == as_multiset(case[f"expected_outputs_{mode}"]["out"])
    assert Counter(res.output("out")) == Counter(build_two_input_case(case, mode).execute_local().output("out"))
