"""The chain runtime on a real standalone cluster: every chain of a pipeline through
spark-submit of runtime/spark/entry.py (client mode), package shipped with --py-files,
plan + exchange + metrics under a shared exchange root; outputs equal local execute()."""

from __future__ import annotations

import pytest

from chains import submit_pipeline
from pipelines import expected_word_counts, failing, word_counts

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(600)]


def _sorted(records):
    return sorted(tuple(r) if isinstance(r, list) else r for r in records)


@pytest.fixture(scope="module")
def local_result(spark):
    return word_counts().execute(spark=spark)


def test_pipeline_chains_on_cluster_equal_local_mode(standalone_cluster, local_result, tmp_path):
    """file:// exchange root (the plain-path form is exercised by the failure test below)."""
    root = "file://" + str(tmp_path / "exchange")
    pipeline = word_counts()
    run = submit_pipeline(pipeline, standalone_cluster.master_url, root, "cluster_run_1", standalone_cluster.env)
    chains = [c.id for c in pipeline.plan().chains]
    assert len(chains) == 2
    for chain_id in chains:
        res = run.results[chain_id]
        assert res.returncode == 0, f"chain {chain_id}:\n{res.stderr[-4000:]}"
        # Counters come back through the exchange root (works wherever the driver runs).
        doc = run.metrics(chain_id)
        assert doc["state"] == "success" and doc["error"] is None
        assert doc["spark_app_id"].startswith("app-"), doc["spark_app_id"]  # a standalone app, not local-...
        assert doc["operators"]
    expected = expected_word_counts()
    assert _sorted(run.output("totals")) == expected["totals"] == _sorted(local_result.output("totals"))
    assert _sorted(run.output("odd")) == expected["odd"] == _sorted(local_result.output("odd"))
    # Per-operator counters agree with local mode.
    def counts(docs, name):
        return sum(o["records_in"] for d in docs for o in d["operators"] if o["name"] == name)
    cluster_docs = [run.metrics(c) for c in chains]
    local_docs = list(local_result.metrics.values())
    for name in ("split", "weigh", "route", "sum"):
        assert counts(cluster_docs, name) == counts(local_docs, name) > 0, name
    # Each chain was an application of the standalone master (named by spark-submit --name or by the entry).
    names = standalone_cluster.app_names()
    assert all(any(pipeline.name in n and n.endswith(c) for n in names) for c in chains), names


def test_user_error_reaches_the_submitter_through_the_exchange_root(standalone_cluster, tmp_path):
    root = str(tmp_path / "exchange")
    pipeline = failing()
    run = submit_pipeline(pipeline, standalone_cluster.master_url, root, "cluster_run_fail", standalone_cluster.env)
    (chain_id,) = run.results
    res = run.results[chain_id]
    assert res.returncode == 1
    # spark_entry prints the error (naming the operator) on stderr; JVM shutdown logs may follow it.
    output = res.stdout + "\n" + res.stderr
    failed = [l for l in output.splitlines() if f"chain {chain_id!r} failed" in l]
    assert failed and "explode" in failed[-1] and "boom on record 3" in failed[-1], output[-3000:]
    doc = run.metrics(chain_id)
    assert doc["state"] == "failed"
    assert "explode" in doc["error"] and "boom on record 3" in doc["error"]
