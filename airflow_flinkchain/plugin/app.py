"""The plugin's FastAPI app, mounted by Airflow's api-server under /flinkchain.

    GET /api/pipelines                          pipelines the user may read
    GET /api/pipelines/{dag_id}                 current plan + runs (newest first)
    GET /api/pipelines/{dag_id}/runs/{run_id}   per-chain, per-operator metrics + the run's plan
    GET /ui/dag/{dag_id}                        the Chains tab (HTML; draws with static/chains.js)
    GET /ui/pipelines                           the nav page listing pipelines
    GET /static/...                             JS/CSS (no CDN: works offline)

Routes are plain `def`: the store is synchronous, FastAPI runs them in a thread pool.
The API answers a refused request with Airflow's JSON error; the pages (shown in the
Airflow UI's iframe) with a readable note."""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI, HTTPException, Request
from fastapi.exception_handlers import http_exception_handler
from fastapi.responses import HTMLResponse, Response
from fastapi.staticfiles import StaticFiles
from starlette.exceptions import HTTPException as StarletteHTTPException

from airflow_flinkchain.airflow.compat import store_url
from airflow_flinkchain.plugin import pages
from airflow_flinkchain.plugin.asset_links import add_asset_links
from airflow_flinkchain.plugin.auth import GetUserDep, can_read_dag, readable_dag_ids
from airflow_flinkchain.plugin.pages import URL_PREFIX  # noqa: F401  (where Airflow mounts this app)
from airflow_flinkchain.store import RunStore

STATIC_DIR = Path(__file__).parent / "static"

app = FastAPI(
    title="airflow-flinkchain",
    description="Chain graphs and per-operator metrics of airflow-flinkchain pipelines.",
    docs_url=None,
    redoc_url=None,
)
app.mount("/static", StaticFiles(directory=STATIC_DIR), name="static")


@app.exception_handler(StarletteHTTPException)
async def _refused_page(request: Request, exc: StarletteHTTPException) -> Response:
    # Airflow's auth dependencies raise 401/403 once a route matched, before it runs.
    path = getattr(request.scope.get("route"), "path", "")
    if exc.status_code in (401, 403) and path.startswith("/ui/"):
        depth = path.count("/") - 1  # back from /ui/... to the app's root, then to Airflow's
        status = 401 if session_refused(exc) else exc.status_code
        html = pages.no_access_page(status, request.path_params.get("dag_id"),
                                    static="../" * depth + "static", home="../" * (depth + 1))
        return HTMLResponse(html, status_code=status)
    return await http_exception_handler(request, exc)


def session_refused(exc: StarletteHTTPException) -> bool:
    """The user is not signed in: no token, an expired one (Airflow's 401) or one that does not
    decode (Airflow answers a garbage or forged token with 403 "Invalid JWT token"), as opposed
    to a signed-in user who may not read the DAG (403 "Forbidden")."""
    return exc.status_code == 401 or "token" in str(exc.detail).lower()


def _store() -> RunStore:
    # Resolved per request (cheap: engines are cached per URL) so config changes apply.
    return RunStore(store_url())


@app.get("/api/pipelines")
def list_pipelines(user: GetUserDep) -> dict:
    pipelines = _store().list_pipelines()
    allowed = readable_dag_ids(user, (p["dag_id"] for p in pipelines))
    return {"pipelines": [p for p in pipelines if p["dag_id"] in allowed]}


@app.get("/api/pipelines/{dag_id}", dependencies=[can_read_dag])
def get_pipeline(dag_id: str) -> dict:
    pipeline = _store().get_pipeline(dag_id)
    if pipeline is None:
        raise HTTPException(404, f"DAG {dag_id!r} has no flinkchain pipeline recorded")
    add_asset_links(pipeline.get("plan"))
    return pipeline


@app.get("/api/pipelines/{dag_id}/runs/{run_id}", dependencies=[can_read_dag])
def get_run(dag_id: str, run_id: str) -> dict:
    store = _store()
    run = store.get_run_metrics(dag_id, run_id)
    if run is None:
        if _airflow_has_run(dag_id, run_id):
            raise HTTPException(404, f"Run {run_id} has no record of its chains yet (its pipeline setup task "
                                     "has not run)")
        raise HTTPException(404, f"DAG {dag_id} has no run {run_id}")
    plan = store.get_plan(dag_id, run["plan_hash"]) if run["plan_hash"] else None
    return {"run": run, "plan": add_asset_links(plan)}


def _airflow_has_run(dag_id: str, run_id: str) -> bool:
    from airflow.models.dagrun import DagRun

    return bool(DagRun.find(dag_id=dag_id, run_id=run_id))


@app.get("/ui/dag/{dag_id}", response_class=HTMLResponse, dependencies=[can_read_dag])
def chains_tab(dag_id: str) -> HTMLResponse:
    pipeline = _store().get_pipeline(dag_id, run_limit=1)
    if pipeline is None:
        return HTMLResponse(pages.no_pipeline_page(dag_id))
    return HTMLResponse(pages.chains_page(dag_id, pipeline["pipeline"]))


@app.get("/ui/pipelines", response_class=HTMLResponse)
def pipelines_nav(user: GetUserDep) -> HTMLResponse:
    return HTMLResponse(pages.pipelines_page(list_pipelines(user)["pipelines"]))
