from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from tests.store.sample import metrics, plan

DAG = "orders_dag"
DAG_URLS = [f"/api/pipelines/{DAG}", f"/api/pipelines/{DAG}/runs/run_1", f"/ui/dag/{DAG}"]


@pytest.fixture(scope="module")
def seeded(airflow_env):
    from airflow_flinkchain.store import RunStore

    store = RunStore()
    store.start_run(DAG, "run_1", plan=plan(), started_at="2025-01-01T10:00:00Z")
    for chain in ("read_orders", "by_customer", "write_rejects"):
        store.record_attempt(metrics(chain=chain), try_number=1)
    store.finish_run(DAG, "run_1", ended_at="2025-01-01T10:01:00Z")
    store.record_plan("other_dag", plan(pipeline="other"))
    return store


@pytest.fixture(scope="module")
def client(auth_manager, seeded):
    from airflow_flinkchain.plugin.app import app

    return TestClient(app)


def auth(token):
    return {"Authorization": f"Bearer {token}"}


@pytest.mark.parametrize("url", DAG_URLS + ["/api/pipelines", "/ui/pipelines"])
def test_unauthenticated_requests_get_401(client, url):
    assert client.get(url).status_code == 401


@pytest.mark.parametrize("url", DAG_URLS)
def test_a_user_without_dag_access_gets_403(client, tokens, url):
    assert client.get(url, headers=auth(tokens["nobody"])).status_code == 403


def test_refused_pages_say_so_in_words_and_the_api_in_json(client, tokens):
    """The Airflow UI shows the pages in its iframe: a refusal is a readable note there,
    with the page's stylesheet; the API keeps Airflow's JSON error."""
    page = client.get(f"/ui/dag/{DAG}", headers=auth(tokens["nobody"]))
    assert page.status_code == 403 and "text/html" in page.headers["content-type"]
    assert "No access" in page.text and "You do not have access to the DAG <code>orders_dag</code>" in page.text
    assert "detail" not in page.text and 'href="../../static/chains.css"' in page.text
    signed_out = client.get("/ui/pipelines")
    assert signed_out.status_code == 401 and "Not signed in" in signed_out.text
    assert 'href="../static/chains.css"' in signed_out.text and 'href="../../" data-airflow-link' in signed_out.text
    api = client.get(f"/api/pipelines/{DAG}", headers=auth(tokens["nobody"]))
    assert api.status_code == 403 and api.json() == {"detail": "Forbidden"}


def test_a_garbage_token_is_refused(client):
    assert client.get(f"/api/pipelines/{DAG}", headers=auth("not-a-jwt")).status_code in (401, 403)


@pytest.mark.parametrize("token", ["not-a-jwt", "eyJhbGciOiJIUzUxMiJ9.e30.c2lnbmF0dXJl"])
def test_a_garbage_token_reads_as_an_invalid_session_not_as_no_access(client, token):
    """Airflow answers a token that does not decode with 403 "Invalid JWT token": the page says
    the session is invalid or expired (as for an expired token), not "ask your administrator"."""
    page = client.get(f"/ui/dag/{DAG}", headers=auth(token))
    assert page.status_code == 401 and "Not signed in" in page.text, page.text
    assert "session is invalid or has expired" in page.text and "administrator" not in page.text


def test_pipeline_list_shows_only_readable_dags(client, tokens):
    answer = client.get("/api/pipelines", headers=auth(tokens["viewer"])).json()
    assert [p["dag_id"] for p in answer["pipelines"]] == [DAG, "other_dag"]
    orders = answer["pipelines"][0]
    assert (orders["chains"], orders["operators"], orders["runs"]) == (3, 6, 1)
    assert orders["latest_run"]["state"] == "success"
    assert client.get("/api/pipelines", headers=auth(tokens["nobody"])).json() == {"pipelines": []}


def test_pipeline_answers_plan_and_runs(client, tokens):
    answer = client.get(f"/api/pipelines/{DAG}", headers=auth(tokens["viewer"])).json()
    assert answer["pipeline"] == "orders"
    assert [c["id"] for c in answer["plan"]["chains"]] == ["read_orders", "by_customer", "write_rejects"]
    assert answer["plan"]["edges"][1]["output_tag"] == "rejects"
    [run] = answer["runs"]
    assert run["run_id"] == "run_1" and run["chain_states"]["by_customer"] == "success"


def test_run_answers_per_operator_metrics_and_its_plan(client, tokens):
    answer = client.get(f"/api/pipelines/{DAG}/runs/run_1", headers=auth(tokens["admin"])).json()
    head = answer["run"]["chains"][0]
    parse = next(o for o in head["operators"] if o["key"] == "parse")
    assert (parse["records_in"], parse["side_outputs"], parse["dead_lettered"]) == (1000, {"rejects": 30}, 10)
    assert head["slowest"] == "parse" and head["lossiest"] == "valid"
    assert answer["plan"]["pipeline"] == "orders"


def test_run_api_gives_the_watermark_per_operator_and_chain(client, tokens):
    """The watermark gauge reaches the Chains tab: per operator the lowest subtask watermark,
    per chain the lowest of its operators', null where there is none; the page embeds the gauge."""
    import html
    import json
    import re

    from airflow_flinkchain.metrics_schema import GAUGE_NAMES

    chains = client.get(f"/api/pipelines/{DAG}/runs/run_1", headers=auth(tokens["viewer"])).json()["run"]["chains"]
    by_id = {c["chain_id"]: c for c in chains}
    assert by_id["by_customer"]["watermark"] == 1200
    assert [o["watermark"] for o in by_id["by_customer"]["operators"]] == [1200, 1200]
    assert by_id["read_orders"]["watermark"] is None
    page = client.get(f"/ui/dag/{DAG}", headers=auth(tokens["viewer"]))
    embedded = json.loads(html.unescape(re.search(r'data-gauges="([^"]*)"', page.text).group(1)))
    assert [g["name"] for g in embedded] == list(GAUGE_NAMES) == ["watermark"]
    assert "gaugeStat" in client.get("/static/chains.js").text


def test_the_session_cookie_works_like_the_header(client, tokens):
    """The Airflow UI shows the tab in a same-origin iframe: the browser sends the `_token` cookie."""
    client.cookies.set("_token", tokens["viewer"])
    try:
        assert client.get(f"/api/pipelines/{DAG}").status_code == 200
    finally:
        client.cookies.clear()


def test_unknown_pipeline_and_run_are_404_in_the_api(client, tokens):
    assert client.get("/api/pipelines/plain_dag", headers=auth(tokens["admin"])).status_code == 404
    unknown = client.get(f"/api/pipelines/{DAG}/runs/nope", headers=auth(tokens["admin"]))
    assert unknown.status_code == 404
    # Airflow has no such run either: it is unknown, not waiting for its setup task
    assert unknown.json()["detail"] == f"DAG {DAG} has no run nope"


def test_a_dag_without_pipeline_gets_a_friendly_note(client, tokens):
    page = client.get("/ui/dag/plain_dag", headers=auth(tokens["viewer"]))
    assert page.status_code == 200 and "text/html" in page.headers["content-type"]
    assert "No chains here" in page.text and "plain_dag" in page.text


def test_chains_page_loads_its_assets_from_the_package(client, tokens):
    page = client.get(f"/ui/dag/{DAG}", headers=auth(tokens["viewer"]))
    assert page.status_code == 200
    assert 'data-api="../../api/pipelines/orders_dag"' in page.text
    assert 'src="../../static/chains.js"' in page.text and 'href="../../static/chains.css"' in page.text
    assert "http://" not in page.text and "https://" not in page.text  # nothing from a CDN
    for asset, kind in (("chains.js", "javascript"), ("chains.css", "text/css")):
        answer = client.get(f"/static/{asset}")  # ../../static/ seen from /ui/dag/<dag_id>
        assert answer.status_code == 200 and kind in answer.headers["content-type"]


def test_chains_page_embeds_every_operator_counter(client, tokens):
    """The Chains tab draws the counters of metrics_schema, not a list of its own."""
    import html
    import json
    import re

    from airflow_flinkchain.metrics_schema import COUNTER_NAMES

    page = client.get(f"/ui/dag/{DAG}", headers=auth(tokens["viewer"]))
    embedded = json.loads(html.unescape(re.search(r'data-counters="([^"]*)"', page.text).group(1)))
    assert [c["name"] for c in embedded] == list(COUNTER_NAMES)
    assert {c["name"] for c in embedded if c["dropped"]} == {"filtered", "skipped", "dead_lettered"}
    script = client.get("/static/chains.js").text
    assert "m.skipped" not in script and "m.filtered" not in script  # drawn from the embedded list


def test_dag_ids_are_escaped_in_pages(client, tokens):
    page = client.get('/ui/dag/<img src=x onerror="alert(1)">', headers=auth(tokens["admin"]))
    assert page.status_code == 200
    assert "<img" not in page.text and "&lt;img src=x onerror=&quot;alert(1)&quot;&gt;" in page.text


def test_nav_page_lists_pipelines_with_links_to_their_tabs(client, tokens):
    page = client.get("/ui/pipelines", headers=auth(tokens["viewer"]))
    assert page.status_code == 200
    # Links into the Airflow UI, followed by airflow_frame.js inside the UI's sandboxed iframe
    # (which ignores target="_top").
    assert '<a href="../../dags/orders_dag/plugin/chains" data-airflow-link>orders_dag</a>' in page.text
    assert '<a href="../../dags/orders_dag/runs/run_1/plugin/run-chains" data-airflow-link>run_1</a>' in page.text
    assert "target=" not in page.text and 'src="../static/airflow_frame.js"' in page.text


def test_sources_and_sinks_link_to_the_assets_airflow_knows(client, tokens, tmp_path, monkeypatch):
    """plan["assets"] (recorded by the setup task) becomes `links` to Airflow's asset pages,
    by the asset ids of the metadata DB; an asset Airflow has not registered gets none.
    (A store of its own: the package's store is the one the browser test reads.)"""
    from airflow.models.asset import AssetModel
    from airflow.utils.session import create_session

    from airflow_flinkchain.store import RunStore

    monkeypatch.setenv("FLINKCHAIN_STORE_URL", f"sqlite:///{tmp_path / 'store.db'}")

    assets = [{"operator": "read_orders", "chain": "read_orders", "role": "source",
               "uri": "file:///data/orders", "name": "orders.raw"},
              {"operator": "write_totals", "chain": "by_customer", "role": "sink",
               "uri": "file:///data/totals", "name": "orders.totals"}]
    RunStore().record_plan("asset_links_dag", plan(pipeline="with_assets", assets=assets))
    with create_session() as session:
        row = AssetModel(name="orders.totals", uri="file:///data/totals")
        session.add(row)
        session.flush()
        totals_id = row.id
    try:
        answer = client.get("/api/pipelines/asset_links_dag", headers=auth(tokens["viewer"])).json()
    finally:
        with create_session() as session:
            session.delete(session.get(AssetModel, totals_id))
    ops = {op["key"]: op for chain in answer["plan"]["chains"] for op in chain["operators"]}
    assert ops["write_totals"]["links"] == [{"href": f"assets/{totals_id}", "text": "orders.totals"}]
    assert "links" not in ops["read_orders"]  # not registered in Airflow (yet)
