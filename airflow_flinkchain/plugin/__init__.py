"""Airflow UI plugin: a "Chains" tab on every DAG's page and DAG run's page, and a nav entry
listing all pipelines, served by a FastAPI app under /flinkchain.
Registered through the `airflow.plugins` entry point (pyproject.toml)."""

from __future__ import annotations

from airflow.plugins_manager import AirflowPlugin

from airflow_flinkchain.plugin.app import URL_PREFIX, app
from airflow_flinkchain.plugin.pages import CHAINS_TAB_ROUTE, RUN_CHAINS_TAB_ROUTE

PIPELINES_NAV_ROUTE = "flinkchain-pipelines"


class FlinkChainPlugin(AirflowPlugin):
    name = "flinkchain"
    fastapi_apps = [{"app": app, "url_prefix": URL_PREFIX, "name": "flinkchain"}]
    # The Airflow UI shows external views in a same-origin iframe; {DAG_ID} is
    # filled in. Every DAG gets the tab (the UI cannot ask us first), so DAGs
    # without a pipeline get a friendly note. The DAG run page gets the same page
    # as a tab of its own: the page reads the run from the UI's address (the run
    # page's run, else ?run_id=; static/chains.js). Not {RUN_ID} in the href: the
    # UI would re-point the iframe on each run change, adding a history entry
    # that the browser's back button would then undo inside the frame only.
    external_views = [
        {
            "name": "Chains",
            "href": f"{URL_PREFIX}/ui/dag/{{DAG_ID}}",
            "destination": "dag",
            "url_route": CHAINS_TAB_ROUTE,
        },
        {
            "name": "Chains",
            "href": f"{URL_PREFIX}/ui/dag/{{DAG_ID}}",
            "destination": "dag_run",
            "url_route": RUN_CHAINS_TAB_ROUTE,
        },
        {
            "name": "Pipelines",
            "href": f"{URL_PREFIX}/ui/pipelines",
            "destination": "nav",
            "category": "browse",
            "url_route": PIPELINES_NAV_ROUTE,
        },
    ]
