from __future__ import annotations

from fastapi.testclient import TestClient


def test_plugin_declares_a_dag_tab_and_a_nav_entry(airflow_env):
    from airflow.api_fastapi.core_api.datamodels.plugins import ExternalViewResponse

    from airflow_flinkchain.plugin import FlinkChainPlugin

    views = [ExternalViewResponse(**v) for v in FlinkChainPlugin.external_views]
    tab = next(v for v in views if v.destination == "dag")
    assert tab.name == "Chains" and tab.href == "/flinkchain/ui/dag/{DAG_ID}"
    run_tab = next(v for v in views if v.destination == "dag_run")
    assert run_tab.name == "Chains" and run_tab.href == "/flinkchain/ui/dag/{DAG_ID}"
    assert len({v.url_route for v in views}) == len(views)  # Airflow drops a view whose route is taken
    assert any(v.destination == "nav" for v in views)
    assert not getattr(FlinkChainPlugin, "appbuilder_views", [])  # would need the FAB provider


def test_airflow_api_server_mounts_the_plugin(airflow_env, tokens):
    """Found through the `airflow.plugins` entry point and mounted by Airflow's own app."""
    from airflow.api_fastapi.app import create_app

    client = TestClient(create_app(apps="core"))
    assert client.get("/flinkchain/api/pipelines").status_code == 401
    answer = client.get("/flinkchain/api/pipelines", headers={"Authorization": f"Bearer {tokens['admin']}"})
    assert answer.status_code == 200 and "pipelines" in answer.json()
    plugins = client.get("/api/v2/plugins", headers={"Authorization": f"Bearer {tokens['admin']}"}).json()
    ours = next(p for p in plugins["plugins"] if p["name"] == "flinkchain")
    assert {v["destination"] for v in ours["external_views"]} == {"dag", "dag_run", "nav"}


def test_loading_the_plugin_does_not_build_its_app(airflow_env):
    """Every Airflow process loads the plugins (each task's runner too); only the api-server serves
    the app, which it builds on its first request (test above)."""
    import subprocess
    import sys

    code = ("import sys; from airflow_flinkchain.plugin import FlinkChainPlugin; "
            "print(sorted(m for m in ('airflow_flinkchain.plugin.app', 'airflow_flinkchain.plugin.auth', 'fastapi') "
            "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
