"""A stream run's chain summary (the metrics document's `stream` entry) in the run store."""

from __future__ import annotations

import pytest

from airflow_flinkchain.store import RunStore
from tests.store.sample import metrics, plan

STREAM = {
    "chain": "by_customer",
    "read": {"orders": [["/in/a.json", 0, [120, 1700000000000000000]], ["/in/b.json", 0, [80, 1700000000000000001]]]},
    "sources": {"orders": {"/in/a.json": [120, 1700000000000000000]}},
    "operators": {"by_customer": {"chain": "by_customer", "parallelism": 3, "stateful": True, "watermark": 1200,
                                  "bytes": 4096, "written": 1024, "max_parallelism": 128,
                                  "shared": [f"/ckpt/shared/by_customer/kg-{k:05d}-x.pkl" for k in range(128)]}},
    "sinks": {},
}


@pytest.fixture
def store(store_url):
    return RunStore(store_url)


def test_stream_summary_is_kept_per_attempt_without_the_shared_files(store):
    store.start_run("orders_dag", "run_1", plan=plan(), started_at="2025-01-01T10:00:00Z")
    store.record_attempt({**metrics(chain="by_customer"), "stream": STREAM}, try_number=1)
    store.record_attempt(metrics(chain="read_orders"), try_number=1)
    chains = {c["chain_id"]: c for c in store.get_run_metrics("orders_dag", "run_1")["chains"]}
    got = chains["by_customer"]["stream"]
    assert got["read"] == STREAM["read"] and got["sources"] == STREAM["sources"]
    assert got["operators"]["by_customer"]["bytes"] == 4096 and "shared" not in got["operators"]["by_customer"]
    assert chains["read_orders"]["stream"] is None  # not a stream run
    # a re-recorded attempt without the entry drops it
    store.record_attempt(metrics(chain="by_customer"), try_number=1)
    chains = {c["chain_id"]: c for c in store.get_run_metrics("orders_dag", "run_1")["chains"]}
    assert chains["by_customer"]["stream"] is None
