"""Server-side HTML of the plugin pages: a small shell (templates/page.html)
filled with escaped values. The Chains tab's graph is drawn by static/chains.js
from the JSON API. Every page loads static/airflow_frame.js, which makes links
work inside the Airflow UI's sandboxed iframe (see there)."""

from __future__ import annotations

import json
from html import escape
from pathlib import Path
from string import Template
from typing import Optional
from urllib.parse import quote

from airflow_flinkchain import metrics_schema

#: Where Airflow's api-server mounts the plugin's app.
URL_PREFIX = "/flinkchain"
# The Airflow UI routes of the Chains tab on the DAG page and on the DAG run page (the
# plugin's external views; a url_route is unique across all plugin views).
CHAINS_TAB_ROUTE = "chains"
RUN_CHAINS_TAB_ROUTE = "run-chains"

# Characters a URL path segment may hold as they are (RFC 3986 pchar): the Airflow UI writes
# run ids such as manual__2025-01-02T09:30:00+00:00 unencoded and compares addresses as text.
PATH_SAFE = "!$&'()*+,;=:@"

TEMPLATE = Template((Path(__file__).parent / "templates" / "page.html").read_text())


def _page(title: str, body: str, static: str, script: str = "") -> str:
    script = f'<script src="{static}/airflow_frame.js"></script>' + script
    return TEMPLATE.substitute(title=escape(title), body=body, static=static, script=script)


def _airflow_link(href: str, text: str) -> str:
    """A link to a page of the Airflow UI (relative: works under a base_url sub-path);
    airflow_frame.js follows it in the Airflow window when the page is in its iframe."""
    return f'<a href="{escape(href)}" data-airflow-link>{escape(text)}</a>'


def chains_page(dag_id: str, pipeline: str) -> str:
    # Relative URLs keep working when Airflow runs under a base_url sub-path.
    body = f"""
<main id="chains-app" data-dag-id="{escape(dag_id)}" data-api="../../api/pipelines/{quote(dag_id, safe='')}"
      data-counters="{escape(json.dumps(metrics_schema.as_json()))}"
      data-gauges="{escape(json.dumps(metrics_schema.gauges_as_json()))}">
  <header class="page-head">
    <div>
      <h1>{escape(pipeline)} <span class="muted">· {escape(dag_id)}</span></h1>
      <p class="muted" id="plan-info"></p>
    </div>
    <label class="run-picker">Run <select id="run-select" disabled><option>loading…</option></select></label>
  </header>
  <section id="run-summary" class="run-summary"></section>
  <section id="stream-run" class="stream-run" hidden></section>
  <div id="graph" class="graph" aria-label="job graph"><p class="muted">Loading the job graph…</p></div>
  <p class="legend muted">
    Each box is a chain: one Airflow task, one Spark job; its operators run fused, head first.
    <span class="flag slow">slowest</span> most time in the chain ·
    <span class="flag lossy">lossiest</span> largest share of records dropped (filtered, skipped or dead-lettered).
  </p>
  <section id="endpoints" class="endpoints" aria-label="sources and sinks" hidden>
    <h2>Sources and sinks</h2>
    <table class="endpoints">
      <thead><tr><th>Kind</th><th>Name</th><th>Chain</th><th>Records</th><th>Path</th><th class="links">Links</th></tr></thead>
      <tbody></tbody>
    </table>
  </section>
  <noscript>This page needs JavaScript to draw the job graph.</noscript>
</main>"""
    return _page(f"Chains · {dag_id}", body, "../../static", '<script src="../../static/chains.js"></script>'
                 '<script src="../../static/stream.js"></script>')


def no_pipeline_page(dag_id: str) -> str:
    body = f"""
<main class="note">
  <h1>No chains here</h1>
  <p>The DAG <code>{escape(dag_id)}</code> has no airflow-flinkchain pipeline recorded, so there is no job
  graph to show. The Chains tab fills in once a DAG built with <code>StreamPipeline</code> has run its
  setup task.</p>
</main>"""
    return _page(f"Chains · {dag_id}", body, "../../static")


def no_access_page(status: int, dag_id: Optional[str], static: str, home: str) -> str:
    """What a page of the plugin shows instead of Airflow's JSON error: 403 (the user may not
    read the DAG) or 401 (not signed in, or the session is invalid or expired)."""
    if status == 401:
        title, text = "Not signed in", (
            "Your Airflow session is invalid or has expired, or you are not signed in. Sign in to "
            f"Airflow again to see the chains. {_airflow_link(home, 'Go to Airflow')}")
    else:
        what = f"the DAG <code>{escape(dag_id)}</code>" if dag_id else "this page"
        title, text = "No access", (
            f"You do not have access to {what}, so its chains and run metrics are not shown. "
            "Ask your Airflow administrator for read access to the DAG.")
    body = f"""
<main class="note no-access" data-status="{status}">
  <h1>{title}</h1>
  <p>{text}</p>
</main>"""
    return _page(title, body, static)


def pipelines_page(pipelines: list[dict]) -> str:
    if not pipelines:
        rows = '<tr><td colspan="5" class="muted">No pipeline recorded yet (or none you may read).</td></tr>'
    else:
        rows = "\n".join(_pipeline_row(p) for p in pipelines)
    body = f"""
<main>
  <h1>Pipelines</h1>
  <table class="pipelines">
    <thead><tr><th>DAG</th><th>Pipeline</th><th>Chains / operators</th><th>Runs</th><th>Latest run</th></tr></thead>
    <tbody>{rows}</tbody>
  </table>
</main>"""
    return _page("Pipelines · flinkchain", body, "../static")


def _pipeline_row(p: dict) -> str:
    # The Airflow UI routes of the DAG's Chains tab and of its latest run's.
    dag = f"../../dags/{quote(p['dag_id'], safe=PATH_SAFE)}"
    latest = p.get("latest_run")
    latest_html = (
        f'<span class="state {escape(latest["state"])}">{escape(latest["state"])}</span> '
        + _airflow_link(f"{dag}/runs/{quote(latest['run_id'], safe=PATH_SAFE)}/plugin/{RUN_CHAINS_TAB_ROUTE}",
                        latest["run_id"])
        if latest else '<span class="muted">none</span>'
    )
    link = _airflow_link(f"{dag}/plugin/{CHAINS_TAB_ROUTE}", p["dag_id"])
    return (
        f"<tr><td>{link}</td>"
        f"<td>{escape(p['pipeline'])}</td><td>{p['chains']} / {p['operators']}</td>"
        f"<td>{p['runs']}</td><td>{latest_html}</td></tr>"
    )
