"""Airflow UI plugin: a "Chains" tab on every DAG's page and DAG run's page, and a nav entry
listing all pipelines, served by a FastAPI app under /flinkchain.
Registered through the `airflow.plugins` entry point (pyproject.toml).

Every Airflow process loads the plugins (the scheduler, each task's runner, `dag.test()`),
but only the api-server serves the app: the app (app.py: FastAPI routes, Airflow's auth
dependencies, seconds to build) is imported on its first request (`LazyApp`)."""

from __future__ import annotations

import importlib
from typing import Any

from airflow.plugins_manager import AirflowPlugin

from airflow_flinkchain.plugin.pages import CHAINS_TAB_ROUTE, RUN_CHAINS_TAB_ROUTE, URL_PREFIX

PIPELINES_NAV_ROUTE = "flinkchain-pipelines"


class LazyApp:
    """An ASGI app that imports `module`'s `app` on the first request and hands every
    request to it (Airflow mounts the plugin's app as it is, under its url_prefix)."""

    def __init__(self, module: str):
        self.module = module
        self._app: Any = None

    @property
    def app(self) -> Any:
        if self._app is None:
            self._app = importlib.import_module(self.module).app
        return self._app

    async def __call__(self, scope, receive, send) -> None:
        await self.app(scope, receive, send)


class FlinkChainPlugin(AirflowPlugin):
    name = "flinkchain"
    fastapi_apps = [{"app": LazyApp("airflow_flinkchain.plugin.app"), "url_prefix": URL_PREFIX,
                     "name": "flinkchain"}]
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
