"""The Chains tab as a user meets it: the real Airflow 3 UI (api-server, auth on) in
headless chromium, the plugin pages inside the UI's sandboxed iframe. Every link is
clicked and where it lands checked; the run shown follows the UI's address and
choosing one changes it; a user who may not read the DAG gets a note, not JSON."""

from __future__ import annotations

import os
import urllib.parse

import pytest

from tests.plugin.browser import CHROMIUM, Browser
from tests.plugin.dag_level_auth import OUTSIDER
from tests.plugin.ui_stack import (CHAIN_ERROR, CHECKPOINT_DIR, DAG, FAILED_RUN, LONG_LINK, LONG_PATH, REFUSAL, REFUSED_RUN,
                                   RUNS, SOURCES_RUN, STREAM_RUNS, UiStack, seed_store)

pytestmark = [pytest.mark.airflow, pytest.mark.browser]

FRAME = "document.querySelector('iframe[title=\"Chains\"], iframe[title=\"Pipelines\"]')"
DOC = f"{FRAME}.contentDocument"
APP = f"{DOC}.getElementById('chains-app')"
# The sandbox the Airflow UI gives plugin views (airflow/ui: ExternalView / PluginPage).
UI_SANDBOX = "allow-scripts allow-same-origin allow-forms allow-downloads"


def quoted(run_id: str, safe: str = "!$&'()*+,;=:@") -> str:
    """A run id in an address as the Airflow UI writes it: in a path only what a path segment
    may not hold is encoded; in the query (safe="") everything."""
    return urllib.parse.quote(run_id, safe=safe)


@pytest.fixture(scope="module")
def users(auth_manager):
    """Signed-in users (their `_token`, as Airflow's login issues it)."""
    from airflow.api_fastapi.auth.managers.simple.user import SimpleAuthManagerUser

    return {name: auth_manager.generate_jwt(SimpleAuthManagerUser(username=name, role=role))
            for name, role in (("alice", "viewer"), (OUTSIDER, "viewer"), ("admin", "admin"))}


@pytest.fixture(scope="module")
def stack(airflow_env, plugin_store_url, users):
    if not os.path.exists(CHROMIUM):
        pytest.skip("chromium not installed (make system-deps installs it)")
    from airflow_flinkchain.store import RunStore

    from tests.plugin.conftest import AIRFLOW_HOME

    # A store of its own: other plugin tests seed the package's store with other runs of orders_dag.
    url = f"sqlite:///{AIRFLOW_HOME / 'browser_store.db'}"
    seed_store(RunStore(url))
    stack = UiStack(AIRFLOW_HOME, {**os.environ, "FLINKCHAIN_STORE_URL": url})
    try:
        stack.trigger_runs(users["admin"])
        yield stack
    finally:
        stack.stop()


def signed_in(stack, token: str, width: int = 1280, height: int = 800) -> Browser:
    browser = Browser(width=width, height=height)
    browser.set_cookie(stack.base, "_token", token)  # what Airflow's login sets
    return browser


def wait_for_tab(browser: Browser, run_id: str) -> None:
    browser.wait_for(f"{APP}.dataset.ready === 'true' && {APP}.dataset.run === {run_id!r}")


def choose_run(browser: Browser, run_id: str) -> None:
    """Pick the run in the run picker with the keyboard, as a user does."""
    steps = browser.eval(f"""(() => {{
        const picker = {DOC}.getElementById('run-select');
        picker.focus();
        return [...picker.options].findIndex(o => o.value === {run_id!r}) - picker.selectedIndex;
    }})()""")
    for _ in range(abs(steps)):
        browser.press("ArrowDown" if steps > 0 else "ArrowUp")


def test_every_link_of_the_pipelines_page_lands_on_the_airflow_page(stack, users):
    """The Pipelines page (Browse menu) links each DAG's Chains tab and its latest run's:
    clicked inside the sandboxed iframe, each opens that page of the Airflow UI itself."""
    with signed_in(stack, users["alice"]) as browser:
        browser.open(f"{stack.base}/plugin/flinkchain-pipelines")
        browser.wait_for(f"{DOC}.querySelector('a[data-airflow-link]')")
        assert browser.eval(f"{FRAME}.getAttribute('sandbox')") == UI_SANDBOX
        links = browser.eval(f"[...{DOC}.querySelectorAll('a')].map(a => a.textContent)")
        expected = {  # link text -> (Airflow UI address, the run the tab then shows)
            DAG: (f"/dags/{DAG}/plugin/chains", RUNS[1]),
            RUNS[1]: (f"/dags/{DAG}/runs/{quoted(RUNS[1])}/plugin/run-chains", RUNS[1]),
            "other_dag": ("/dags/other_dag/plugin/chains", ""),
        }
        assert sorted(links) == sorted(expected)
        for text, (address, run_id) in expected.items():
            browser.open(f"{stack.base}/plugin/flinkchain-pipelines")
            browser.wait_for(f"{DOC}.querySelector('a[data-airflow-link]')")
            browser.click(f"[...{DOC}.querySelectorAll('a')].find(a => a.textContent === {text!r})")
            landed = browser.wait_for(f"location.pathname.includes('/dags/') && location.pathname")
            assert landed == address, text
            # The Airflow UI itself shows the DAG's page with the Chains tab selected ...
            browser.wait_for("[...document.querySelectorAll('a.active')].some(t => t.textContent.trim() === 'Chains')")
            # ... and the tab the pipeline (and run) the link is about.
            dag_id = address.split("/")[2]
            browser.wait_for(f"{APP}.dataset.dagId === {dag_id!r} && {APP}.dataset.ready === 'true'")
            assert browser.eval(f"{APP}.dataset.run") == run_id
        # Back goes back to the Pipelines page, as after any link.
        browser.eval("history.back()")
        browser.wait_for("location.pathname.startsWith('/plugin/flinkchain-pipelines')")


def test_the_run_follows_the_address_and_choosing_one_changes_it(stack, users):
    with signed_in(stack, users["alice"]) as browser:
        # The DAG's tab: the latest run, or ?run_id= of Airflow's address.
        browser.open(f"{stack.base}/dags/{DAG}/plugin/chains")
        wait_for_tab(browser, RUNS[1])
        browser.open(f"{stack.base}/dags/{DAG}/plugin/chains?run_id={quoted(RUNS[0], safe='')}")
        wait_for_tab(browser, RUNS[0])
        assert f"<b>{RUNS[0]}</b>" in browser.eval(f"{DOC}.getElementById('run-summary').innerHTML")
        choose_run(browser, RUNS[1])
        wait_for_tab(browser, RUNS[1])
        assert browser.location() == f"/dags/{DAG}/plugin/chains?run_id={quoted(RUNS[1], safe='')}"  # shareable
        # The DAG run page has the tab too, showing that page's run; choosing another run
        # goes to that run's page (Airflow's header follows).
        browser.open(f"{stack.base}/dags/{DAG}/runs/{quoted(RUNS[0])}")
        browser.wait_for("[...document.querySelectorAll('a')].some(a => a.textContent.trim() === 'Chains')")
        browser.click("[...document.querySelectorAll('a')].find(a => a.textContent.trim() === 'Chains')")
        browser.wait_for(f"location.pathname === '/dags/{DAG}/runs/{quoted(RUNS[0])}/plugin/run-chains'")
        wait_for_tab(browser, RUNS[0])
        choose_run(browser, RUNS[1])
        browser.wait_for(f"location.pathname === '/dags/{DAG}/runs/{quoted(RUNS[1])}/plugin/run-chains'")
        wait_for_tab(browser, RUNS[1])
        browser.wait_for(f"document.title.startsWith({RUNS[1]!r})")
        # The browser's back button brings the previous run back, in Airflow and in the tab.
        browser.eval("history.back()")
        browser.wait_for(f"location.pathname === '/dags/{DAG}/runs/{quoted(RUNS[0])}/plugin/run-chains'")
        wait_for_tab(browser, RUNS[0])


def test_times_layout_and_source_sink_links(stack, users):
    """The plan's chaining and runtime mode above the graph; operator times below a
    millisecond in µs, chain durations with their fraction of a second, the graph inside the
    frame (the frame is the only scrolling box), and the sources and sinks with their links, which land on the Airflow page they name."""
    with signed_in(stack, users["alice"]) as browser:
        browser.open(f"{stack.base}/dags/{DAG}/plugin/chains?run_id={quoted(RUNS[1], safe='')}")
        wait_for_tab(browser, RUNS[1])
        info = browser.eval(f"{DOC}.getElementById('plan-info').innerText")
        assert info.endswith("chaining: flink · runtime mode: BATCH"), info  # the plan's mode in force
        sink = browser.eval(f"{DOC}.querySelector('#chain-write_rejects').innerText")
        assert "62.5 µs" in sink and "2.25 s" in sink, sink
        assert "0 ms" not in sink
        sized = browser.eval(f"""(() => {{
            const d = {DOC}, graph = d.getElementById('graph'), page = d.scrollingElement;
            return {{graph: [graph.scrollWidth, graph.clientWidth, getComputedStyle(graph).overflowX],
                     frame: [page.scrollWidth, page.clientWidth],
                     ui: [document.scrollingElement.scrollHeight, document.scrollingElement.clientHeight]}};
        }})()""")
        assert sized["graph"][2] == "visible", sized  # no scrolling box of its own
        assert sized["frame"][0] <= sized["frame"][1], sized  # no sideways scrolling at 1280 px
        assert sized["ui"][0] <= sized["ui"][1], sized  # the Airflow page does not scroll
        # Sources and sinks, by name, with room for their links.
        rows = browser.eval(f"[...{DOC}.querySelectorAll('#endpoints tbody tr')].map(r => r.innerText)")
        assert [r.split("\t")[:3] for r in rows] == [
            ["SOURCE", "read_orders", "read_orders"], ["SINK", "write_totals", "by_customer"],
            ["SINK", "write_rejects", "write_rejects"]], rows
        links = browser.eval(f"[...{DOC}.querySelectorAll('#endpoints a')].map(a => a.textContent)")
        assert links == [LONG_LINK, "all assets"]
        browser.click(f"[...{DOC}.querySelectorAll('#endpoints a')].find(a => a.textContent === 'all assets')")
        browser.wait_for("location.pathname === '/assets'")
        # Run 1's plan has no links: the column is not shown.
        browser.eval("history.back()")
        wait_for_tab(browser, RUNS[1])
        choose_run(browser, RUNS[0])
        wait_for_tab(browser, RUNS[0])
        assert browser.eval(f"getComputedStyle({DOC}.querySelector('#endpoints th.links')).display") == "none"


def test_a_user_without_access_reads_why(stack, users):
    with signed_in(stack, users[OUTSIDER]) as browser:
        browser.open(f"{stack.base}/dags/{DAG}/plugin/chains")
        text = browser.wait_for(f"{DOC}.body.innerText.includes('No access') && {DOC}.body.innerText")
        assert f"You do not have access to the DAG {DAG}" in text and "detail" not in text
        # The DAGs they may read are listed and open as usual.
        browser.open(f"{stack.base}/plugin/flinkchain-pipelines")
        browser.wait_for(f"{DOC}.querySelector('a[data-airflow-link]')")
        assert browser.eval(f"[...{DOC}.querySelectorAll('a')].map(a => a.textContent)") == ["other_dag"]


# The run documents the tab fetched (the iframe's resource timing): one per run shown.
RUN_FETCHES = f"{FRAME}.contentWindow.performance.getEntriesByType('resource').filter(e => e.name.includes('/runs/'))" \
              ".map(e => decodeURIComponent(e.name.split('/runs/')[1]))"
# Elements of chain boxes that stick out of their box (right edge past the box's), with their text.
OVERFLOWING = f"""[...{DOC}.querySelectorAll('.chain')].flatMap(box => {{
    const right = box.getBoundingClientRect().right;
    return [...box.querySelectorAll('*')].filter(e => e.getBoundingClientRect().right > right + 0.5)
        .map(e => e.className + ': ' + e.textContent);
}})"""


def test_stream_runs_drained_and_mid_stream_at_1400_px(stack, users):
    """A drained stream run shows its Stream run table with the MAX watermark as the end of the
    stream and the position range each split of its source read; an operator that got no record is "not timed"; a mid-stream run's watermarks are UTC
    times that stay inside their chain boxes at a 1400 px window; each run document is fetched
    once per run shown."""
    slice_run, drain = STREAM_RUNS
    with signed_in(stack, users["alice"], width=1400) as browser:
        browser.open(f"{stack.base}/dags/{DAG}/plugin/chains?run_id={quoted(drain, safe='')}")
        wait_for_tab(browser, drain)
        table = browser.wait_for(f"!{DOC}.getElementById('stream-run').hidden && "
                                 f"{DOC}.querySelector('#stream-run table').innerText")
        rows = browser.eval(f"[...{DOC}.querySelectorAll('#stream-run tbody tr')].map(r => r.innerText.split('\t'))")
        assert [r[0] for r in rows] == ["read_orders", "by_customer", "write_rejects"], table
        assert rows[1][3] == "end of stream" and rows[0][3] == "–", rows
        assert rows[0][1] == "read_orders: ORDERS 101 → 250", rows  # an unbounded source's position range
        title = browser.eval(f"{DOC}.querySelector('#stream-run tbody tr td.read').title")
        assert title == "read_orders ORDERS [101, 250)\nread_orders ORDERS.audit at 40 (nothing new)", title
        box = browser.eval(f"{DOC}.querySelector('#chain-by_customer').innerText")
        # the drain's boxes agree with its table: the operators' committed watermark is the end of
        # the stream (the event time reached before the drain is in the title)
        assert "watermark end of stream" in box and "Invalid" not in box and "2025-01-01" not in box, box
        title = browser.eval(f"{DOC}.querySelector('#chain-by_customer .stat-watermark').title")
        assert title.endswith("before the drain it had reached 2025-01-01 10:00:00.000 UTC"), title
        assert "not timed" in box and "0% · 0 ms" not in box, box
        assert browser.eval(RUN_FETCHES) == [drain]

        choose_run(browser, slice_run)
        wait_for_tab(browser, slice_run)
        rows = browser.eval(f"[...{DOC}.querySelectorAll('#stream-run tbody tr')].map(r => r.innerText.split('\t'))")
        assert rows[0][1] == "read_orders: 1 file" and rows[1][3] == "2025-01-01 10:00:00.000 UTC", rows
        box = browser.eval(f"{DOC}.querySelector('#chain-by_customer').innerText")
        assert "watermark 2025-01-01 10:00:00.000 UTC" in box, box
        assert browser.eval(OVERFLOWING) == []
        assert browser.eval(RUN_FETCHES) == [drain, slice_run]


def test_an_unknown_run_is_called_unknown(stack, users):
    """A run id Airflow does not know is unknown; a run Airflow has whose setup task has not
    recorded it yet says so."""
    stack.trigger_run(users["admin"], "manual__not_set_up")
    with signed_in(stack, users["alice"]) as browser:
        browser.open(f"{stack.base}/dags/{DAG}/plugin/chains?run_id=no_such_run")
        wait_for_tab(browser, "no_such_run")
        text = browser.eval(f"{DOC}.getElementById('run-summary').innerText")
        assert text == f"DAG {DAG} has no run no_such_run: showing the plan only.", text
        browser.open(f"{stack.base}/dags/{DAG}/plugin/chains?run_id=manual__not_set_up")
        wait_for_tab(browser, "manual__not_set_up")
        text = browser.eval(f"{DOC}.getElementById('run-summary').innerText")
        assert text == ("Run manual__not_set_up has no record of its chains yet (its pipeline setup task has "
                        "not run): showing the plan only."), text


def test_the_path_column_has_room_beside_the_links(stack, users):
    """Sink paths are read whole-ish: the Path column is wider than the Links column."""
    with signed_in(stack, users["alice"]) as browser:
        browser.open(f"{stack.base}/dags/{DAG}/plugin/chains?run_id={quoted(RUNS[1], safe='')}")
        wait_for_tab(browser, RUNS[1])
        widths = browser.eval(f"""(() => {{
            const head = [...{DOC}.querySelectorAll('#endpoints th')];
            const at = (name) => head.find(h => h.textContent === name).getBoundingClientRect().width;
            const ch = parseFloat(getComputedStyle({DOC}.querySelector('#endpoints td.path')).fontSize) * 0.6;
            return {{path: at('Path'), links: at('Links'), ch}};
        }})()""")
        assert widths["path"] >= 30 * widths["ch"] and widths["path"] > widths["links"], widths


FITS = f"""(() => {{
    const d = {DOC}, width = d.documentElement.clientWidth;
    const out = (e) => e.getBoundingClientRect().right > width + 0.5;
    return {{table: out(d.querySelector('table.endpoints')), scroll: d.scrollingElement.scrollWidth > width,
             links: [...d.querySelectorAll('#endpoints a')].filter(out).map(a => a.textContent)}};
}})()"""


def test_the_sources_and_sinks_table_fits_the_frame_at_1400_by_900(stack, users):
    """A long asset name and a long output path wrap inside the frame: no link is clipped."""
    with signed_in(stack, users["alice"], width=1400, height=900) as browser:
        browser.open(f"{stack.base}/dags/{DAG}/plugin/chains?run_id={quoted(RUNS[1], safe='')}")
        wait_for_tab(browser, RUNS[1])
        assert browser.eval(f"{DOC}.querySelector('#endpoints').innerText").count(LONG_PATH) == 1
        assert browser.eval(FITS) == {"table": False, "scroll": False, "links": []}


def test_a_refused_run_and_a_failed_chain_attempt_say_why(stack, users):
    """A stream run refused by its setup task (a damaged checkpoint pointer) shows the reason the
    run store has; a failed chain attempt shows its error in its box."""
    with signed_in(stack, users["alice"]) as browser:
        browser.open(f"{stack.base}/dags/{DAG}/plugin/chains?run_id={REFUSED_RUN}")
        wait_for_tab(browser, REFUSED_RUN)
        summary = browser.eval(f"{DOC}.getElementById('run-summary').innerText")
        assert "failed" in summary and REFUSAL in summary, summary
        assert browser.eval(f"{DOC}.querySelector('#run-summary .run-error').textContent") == REFUSAL
        choose_run(browser, FAILED_RUN)
        wait_for_tab(browser, FAILED_RUN)
        box = browser.eval(f"{DOC}.querySelector('#chain-read_orders').innerText")
        assert "failed" in box and CHAIN_ERROR in box and "not run in this run" not in box, box
        assert "1 chain attempts recorded, 1 failed" in browser.eval(f"{DOC}.getElementById('run-summary').innerText")


def test_each_source_reads_as_its_users_read_it_and_kinds_are_whole(stack, users):
    """The Stream run table gives a CDC source's LSN range, a NATS source's stream sequences per
    subject, a Delta source's table versions, an incremental query's column range and a file
    source's files, never a position's internals (the checkpoint directory); operator kinds
    are shown whole."""
    with signed_in(stack, users["alice"], width=1400) as browser:
        browser.open(f"{stack.base}/dags/{DAG}/plugin/chains?run_id={SOURCES_RUN}")
        wait_for_tab(browser, SOURCES_RUN)
        browser.wait_for(f"!{DOC}.getElementById('stream-run').hidden")
        rows = browser.eval(f"[...{DOC}.querySelectorAll('#stream-run tbody tr')].map(r => r.cells[1].innerText)")
        assert rows == ["cdc: LSN 0/16B3748 → 0/16B3990", "nats: orders.eu seq 101–250, orders.us seq 7",
                        "delta: versions 3–5", "sql: order_id 120 < … ≤ 480", "files: 3 files"], rows
        titles = browser.eval(f"[...{DOC}.querySelectorAll('#stream-run td.read')].map(c => c.title)")
        assert titles[0] == "cdc LSN 0/16B3748 → 0/16B3990", titles
        assert titles[1] == ("nats orders.eu seq 101–250\nnats orders.us seq 7\n"
                             "nats orders.asia next seq 40 (nothing new)"), titles
        assert titles[4] == "files file part-0.json\nfiles file part-1.json\nfiles file part-2.json", titles
        assert CHECKPOINT_DIR not in browser.eval(f"{DOC}.documentElement.outerHTML")
        kinds = browser.eval(f"""[...{DOC}.querySelectorAll('.operator .kind')].map(k => {{
            const words = k.textContent.split(' ').map(word => {{
                const probe = k.cloneNode(); probe.textContent = word;
                probe.style.cssText = 'position:absolute;width:auto;white-space:nowrap;visibility:hidden';
                k.parentNode.append(probe); const w = probe.getBoundingClientRect().width; probe.remove();
                return w <= k.clientWidth + 0.5;
            }});
            return [k.title, k.textContent, words.every(Boolean), k.scrollWidth <= k.clientWidth];
        }})""")
        stamp = [k for k in kinds if k[0] == "timestamps_and_watermarks"]
        assert stamp == [["timestamps_and_watermarks", "timestamps and watermarks", True, True]], kinds
        assert all(k[2] and k[3] and k[1] == k[0].replace("_", " ") for k in kinds), kinds


def test_after_the_session_expired_nothing_of_the_last_run_stays(stack, users):
    """The session ends (the token no longer decodes) and another run is picked: the tab says
    "Not signed in" and shows nothing of the run shown before."""
    with signed_in(stack, users["alice"]) as browser:
        browser.open(f"{stack.base}/dags/{DAG}/plugin/chains?run_id={quoted(STREAM_RUNS[1], safe='')}")
        wait_for_tab(browser, STREAM_RUNS[1])
        browser.wait_for(f"!{DOC}.getElementById('stream-run').hidden && !{DOC}.getElementById('endpoints').hidden")
        browser.set_cookie(stack.base, "_token", "expired-session")
        choose_run(browser, RUNS[0])
        browser.wait_for(f"{APP}.dataset.ready === 'error'")
        state = browser.eval(f"""(() => {{ const d = {DOC}; return {{
            note: d.querySelector('#graph .error-box h2').textContent, chains: d.querySelectorAll('.chain').length,
            summary: d.getElementById('run-summary').innerText, info: d.getElementById('plan-info').innerText,
            stream: d.getElementById('stream-run').hidden && !d.querySelector('#stream-run table'),
            endpoints: d.getElementById('endpoints').hidden && !d.querySelector('#endpoints tbody tr'),
            edges: d.querySelectorAll('.edge-label, svg.edges').length}}; }})()""")
        assert state == {"note": "Not signed in", "chains": 0, "summary": "", "info": "", "stream": True,
                         "endpoints": True, "edges": 0}, state
