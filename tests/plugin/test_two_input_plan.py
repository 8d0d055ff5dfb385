"""The Chains tab's plan answer carries which input of a two-input operator each edge
feeds (chains.js labels the edge `input N`)."""

from __future__ import annotations

from fastapi.testclient import TestClient

from tests.two_input.pipelines import enrich_pipeline


def test_plan_answer_has_the_input_of_each_two_input_edge(auth_manager, airflow_env, tokens, tmp_path,
                                                          monkeypatch):
    from airflow_flinkchain.plugin.app import app
    from airflow_flinkchain.store import RunStore

    # a store of its own: the other plugin tests count the DAGs of the shared one
    monkeypatch.setenv("FLINKCHAIN_STORE_URL", f"sqlite:///{tmp_path / 'store.db'}")
    RunStore().record_plan("two_input_dag", enrich_pipeline(name="enrich").plan().to_dict())
    answer = TestClient(app).get("/api/pipelines/two_input_dag",
                                 headers={"Authorization": f"Bearer {tokens['viewer']}"}).json()
    edges = {(e["source_operator"], e["target_operator"]): e.get("input") for e in answer["plan"]["edges"]}
    assert edges == {("customers", "levels"): 1, ("orders", "levels"): 2,
                     ("levels", "convert"): 1, ("rates", "convert"): 2}
