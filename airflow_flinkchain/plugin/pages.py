"""Server-side HTML of the plugin pages: a small shell (templates/page.html)
filled with escaped values. The Chains tab's graph is drawn by static/chains.js
from the JSON API; the note and the pipeline list need no script."""

from __future__ import annotations

import json
from html import escape
from pathlib import Path
from string import Template
from urllib.parse import quote

from airflow_flinkchain import metrics_schema

TEMPLATE = Template((Path(__file__).parent / "templates" / "page.html").read_text())


def _page(title: str, body: str, static: str, script: str = "") -> str:
    return TEMPLATE.substitute(title=escape(title), body=body, static=static, script=script)


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
    latest = p.get("latest_run")
    latest_html = (
        f'<span class="state {escape(latest["state"])}">{escape(latest["state"])}</span> '
        f'<span class="muted">{escape(latest["run_id"])}</span>' if latest else '<span class="muted">none</span>'
    )
    # The Airflow UI route of the DAG's Chains tab; _top leaves the plugin iframe.
    href = f"../../dags/{quote(p['dag_id'], safe='')}/plugin/chains"
    return (
        f'<tr><td><a href="{href}" target="_top">{escape(p["dag_id"])}</a></td>'
        f"<td>{escape(p['pipeline'])}</td><td>{p['chains']} / {p['operators']}</td>"
        f"<td>{p['runs']}</td><td>{latest_html}</td></tr>"
    )
