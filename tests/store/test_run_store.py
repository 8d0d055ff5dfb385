from __future__ import annotations

import threading

import pytest

from airflow_flinkchain.store import RunStore
from tests.store.sample import metrics, plan

DAG = "orders_dag"


@pytest.fixture
def store(store_url):
    return RunStore(store_url)


def _full_run(store, run_id="run_1", failed_chain=None):
    store.start_run(DAG, run_id, plan=plan(), started_at="2025-01-01T10:00:00Z")
    for chain in ("read_orders", "by_customer", "write_rejects"):
        state = "failed" if chain == failed_chain else "success"
        store.record_attempt(metrics(run_id=run_id, chain=chain, state=state), try_number=1)
    return store.finish_run(DAG, run_id)


def test_plan_is_versioned_by_hash_and_recorded_once(store):
    first = store.record_plan(DAG, plan())
    assert store.record_plan(DAG, plan()) == first
    second = store.record_plan(DAG, plan(strategy="none"))
    assert second != first
    pipeline = store.get_pipeline(DAG)
    assert pipeline["plan_hash"] == second and pipeline["plan"]["strategy"] == "none"
    assert store.get_plan(DAG, first)["strategy"] == "flink"  # old runs keep their plan
    [listed] = store.list_pipelines()
    assert listed["dag_id"] == DAG and listed["pipeline"] == "orders"
    assert (listed["chains"], listed["operators"], listed["runs"]) == (3, 6, 0)


def test_run_metrics_are_summed_over_subtasks_per_operator(store):
    assert _full_run(store) == "success"
    run = store.get_run_metrics(DAG, "run_1")
    assert run["state"] == "success" and run["started_at"] == "2025-01-01T10:00:00+00:00"
    assert [c["chain_id"] for c in run["chains"]] == ["read_orders", "by_customer", "write_rejects"]
    head = run["chains"][0]
    assert [o["key"] for o in head["operators"]] == ["read_orders", "parse", "valid"]
    parse = head["operators"][1]
    assert parse["subtasks"] == 2
    assert (parse["records_in"], parse["records_out"], parse["dead_lettered"]) == (1000, 960, 10)
    assert parse["side_outputs"] == {"rejects": 30}
    assert parse["time_share"] == pytest.approx(600 / 800)
    assert head["slowest"] == "parse"
    assert head["lossiest"] == "valid"  # 160 of 960 filtered beats 10 of 1000 dead-lettered
    assert head["outputs"][0] == {"edge": "valid__by_customer", "path": "/x/run_1/valid__by_customer",
                                  "records": 800}
    assert head["duration_ms"] == 5000 and head["spark_app_id"] == "local-read_orders-1"
    assert run["chains"][1]["outputs"] == [{"sink": "write_totals", "path": "/out/totals", "records": 30}]


def test_rerecording_an_attempt_replaces_its_metrics(store):
    _full_run(store)
    store.record_attempt(metrics(chain="read_orders", scale=2), try_number=1)
    head = store.get_run_metrics(DAG, "run_1")["chains"][0]
    assert head["attempts"] == 1
    assert head["operators"][1]["records_in"] == 2000  # replaced, not added


def test_latest_attempt_wins_and_failures_are_kept(store):
    store.start_run(DAG, "run_1", plan=plan())
    store.record_attempt(metrics(chain="read_orders", attempt=1, state="failed"), try_number=1)
    assert store.finish_run(DAG, "run_1") == "failed"
    store.record_attempt(metrics(chain="read_orders", attempt=2, scale=3), try_number=2)
    head = store.get_run_metrics(DAG, "run_1")["chains"][0]
    assert (head["state"], head["attempts"], head["try_number"]) == ("success", 2, 2)
    assert head["operators"][0]["records_out"] == 3000


def test_run_state_is_derived_from_the_chains_of_its_plan(store):
    assert _full_run(store, "ok") == "success"
    assert _full_run(store, "bad", failed_chain="by_customer") == "failed"
    store.start_run(DAG, "partial")
    store.record_attempt(metrics(run_id="partial", chain="read_orders"))
    assert store.finish_run(DAG, "partial") == "failed"  # two chains never ran
    assert store.finish_run(DAG, "partial", state="success") == "success"  # explicit state wins
    assert store.get_run_metrics(DAG, "bad")["chains"][1]["error"].startswith("ValueError")


def test_concurrent_runs_of_one_dag_do_not_collide(store):
    store.record_plan(DAG, plan())
    errors = []

    def one_run(i):
        try:
            run_id = f"run_{i}"
            store.start_run(DAG, run_id, started_at=f"2025-01-01T10:00:0{i}Z")
            for chain in ("read_orders", "by_customer", "write_rejects"):
                store.record_attempt(metrics(run_id=run_id, chain=chain, scale=i + 1))
            store.finish_run(DAG, run_id)
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=one_run, args=(i,)) for i in range(6)]
    [t.start() for t in threads]
    [t.join() for t in threads]
    assert not errors
    runs = store.list_runs(DAG)
    assert [r["run_id"] for r in runs] == [f"run_{i}" for i in reversed(range(6))]  # newest first
    assert all(r["state"] == "success" for r in runs)
    for i in range(6):
        head = store.get_run_metrics(DAG, f"run_{i}")["chains"][0]
        assert head["operators"][0]["records_out"] == 1000 * (i + 1)


def test_attempt_without_a_started_run_creates_it(store):
    store.record_plan(DAG, plan())
    store.record_attempt(metrics(run_id="late", chain="write_rejects"))
    run = store.get_run_metrics(DAG, "late")
    assert run["state"] == "running" and run["pipeline"] == "orders"
    assert run["chains"][0]["operators"][0]["records_in"] == 30


def test_unknown_pipeline_and_run(store):
    assert store.get_pipeline("nope") is None
    assert store.get_run_metrics("nope", "r") is None
    assert store.list_runs("nope") == []
    assert store.list_pipelines() == []


def test_an_operators_watermark_is_its_lowest_subtask_watermark(store):
    """The watermark gauge: the lowest over the subtasks that have one (an operator is as far in
    event time as its slowest subtask); NULL, not 0, where no subtask has one."""
    _full_run(store)
    head, by_customer, rejects = store.get_run_metrics(DAG, "run_1")["chains"]
    assert [o["watermark"] for o in by_customer["operators"]] == [1200, 1200]
    assert by_customer["watermark"] == 1200
    assert [o["watermark"] for o in head["operators"]] == [None, None, None]
    assert head["watermark"] is None and rejects["watermark"] is None


def test_a_refused_run_is_recorded_failed_with_its_reason(store):
    """A stream run refused by its setup (a re-run of a run that is no longer the latest) was
    recorded as a success by its first try: the store shows it failed, with the reason, and a
    new start of the run clears the reason."""
    _full_run(store)
    assert store.get_run_metrics("orders_dag", "run_1")["state"] == "success"
    store.refuse_run("orders_dag", "run_1", "only the latest run can be re-run")
    run = store.get_run_metrics("orders_dag", "run_1")
    assert (run["state"], run["error"]) == ("failed", "only the latest run can be re-run")
    assert [(r["state"], r["error"]) for r in store.list_runs("orders_dag")] == [
        ("failed", "only the latest run can be re-run")]
    store.refuse_run("orders_dag", "never_started", "2 runs are running")  # refused before anything was recorded
    assert store.get_run_metrics("orders_dag", "never_started")["state"] == "failed"
    store.start_run("orders_dag", "run_1", plan=plan())
    assert (store.get_run_metrics("orders_dag", "run_1")["state"], store.get_run_metrics(
        "orders_dag", "run_1")["error"]) == ("running", None)


def test_a_published_sink_path_replaces_the_staged_one(store):
    """A stream run's commit records where its sinks were published, on the latest attempts."""
    _full_run(store)
    doc = metrics(chain="by_customer", attempt=2)
    doc["outputs"] = [{"sink": "write_totals", "path": None, "records": 30}]
    store.record_attempt(doc, try_number=2)
    assert store.record_publication("orders_dag", "run_1", {"write_totals": "/published/totals"}) == 1
    chains = {c["chain_id"]: c for c in store.get_run_metrics("orders_dag", "run_1")["chains"]}
    assert chains["by_customer"]["outputs"] == [{"sink": "write_totals", "path": "/published/totals", "records": 30}]
    assert chains["write_rejects"]["outputs"][0]["path"] == "/out/rejects"  # other sinks are left alone
