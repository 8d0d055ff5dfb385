"""Keyed state, timers and reduce modes on Spark (one run per mode, parallelism 2; STREAMING with
the RocksDB state backend): the same outputs as the in-process runner (heap backend) and as
Flink's semantics."""

from __future__ import annotations

from collections import Counter

import pytest

from airflow_flinkchain.runtime.core.elements import MAX_WATERMARK_TS
from airflow_flinkchain.runtime.spark.local import execute_pipeline

from .test_timers import Sessions
from .util import collect_stamped, pipeline

RECORDS = [((k, v), ts) for k, v, ts in [
    ("a", 1, 10), ("b", 2, 11), ("c", 3, 40), ("a", 4, 12), ("b", 5, 60), ("a", 6, 5), ("c", 7, 41),
    ("d", 8, 13), ("a", 9, 80), ("d", 10, 14)]]


def _pipeline(mode, backend="hashmap"):
    p, src = pipeline(mode, RECORDS, out_of_orderness=10, parallelism=2)
    p.set_state_backend(backend)
    keyed = src.key_by(lambda r: r[0])
    collect_stamped(keyed.process(Sessions()).name("sessions"), "sessions")
    collect_stamped(keyed.sum(1).name("sums"), "sums")
    return p


@pytest.mark.parametrize("mode, backend", [("batch", "hashmap"), ("streaming", "rocksdb")])
def test_keyed_timers_state_and_reduce_on_spark(spark, mode, backend):
    """STREAMING runs its keyed state in RocksDB inside the Python workers."""
    res = execute_pipeline(_pipeline(mode, backend), spark=spark)
    local = _pipeline(mode).execute_local()
    for name in ("sessions", "sums"):
        assert Counter(res.output(name)) == Counter(local.output(name)), name
    sessions = Counter(res.output("sessions"))
    sums = Counter(res.output("sums"))
    if mode == "batch":
        # a's records 6@5, 1@10, 4@12, 9@80 in timestamp order: one session ending 85
        assert sessions == Counter({(("a", 4), 85): 1, (("b", 2), 65): 1, (("c", 2), 46): 1, (("d", 2), 19): 1})
        assert sums == Counter({(("a", 20), MAX_WATERMARK_TS): 1, (("b", 7), MAX_WATERMARK_TS): 1,
                                (("c", 10), MAX_WATERMARK_TS): 1, (("d", 18), MAX_WATERMARK_TS): 1})
    else:
        # the watermark (max ts - 11) reaches 29 after c@40, 49 after b@60, 69 after a@80: each
        # fires the sessions it passes; a record behind it starts a new session whose timer
        # fires at the next advance
        assert sessions == Counter({(("a", 1), 15): 1, (("b", 1), 16): 1, (("a", 1), 17): 1, (("c", 1), 45): 1,
                                    (("d", 1), 18): 1, (("b", 1), 65): 1, (("c", 1), 46): 1, (("d", 1), 19): 1,
                                    (("a", 2), 85): 1})
        assert sums == Counter({(("a", 1), 10): 1, (("a", 5), 12): 1, (("a", 11), 5): 1, (("a", 20), 80): 1,
                                (("b", 2), 11): 1, (("b", 7), 60): 1, (("c", 3), 40): 1, (("c", 10), 41): 1,
                                (("d", 8), 13): 1, (("d", 18), 14): 1})  # rolling, stamped with each record
