/* airflow-flinkchain Chains tab: draws a pipeline's job graph (one box per chain,
   its operators in order) with per-operator metrics of one run.
   Data: GET <api> (plan + runs) and GET <api>/runs/<run_id> (metrics + the run's plan). */
(function () {
  "use strict";

  const app = document.getElementById("chains-app");
  const api = app.dataset.api;
  // The operator counters (airflow_flinkchain.metrics_schema), embedded by the page.
  const counters = Object.fromEntries(JSON.parse(app.dataset.counters).map((c) => [c.name, c]));
  const droppedCounters = Object.values(counters).filter((c) => c.dropped);
  // The operator gauges (the event-time watermark): shown when measured (not null).
  const gauges = JSON.parse(app.dataset.gauges || "[]");
  const graph = document.getElementById("graph");
  const picker = document.getElementById("run-select");
  const numberFormat = new Intl.NumberFormat("en");
  const SVG_NS = "http://www.w3.org/2000/svg";

  // ---- small helpers ----------------------------------------------------------
  function el(tag, attrs, children) {
    const node = document.createElement(tag);
    for (const [name, value] of Object.entries(attrs || {})) {
      if (value === undefined || value === null || value === false) continue;
      if (name === "text") node.textContent = value;
      else node.setAttribute(name, value);
    }
    for (const child of children || []) if (child) node.append(child);
    return node;
  }
  const n = (value) => numberFormat.format(value || 0);
  // A time in ms (operator times are sampled with µs precision, chain durations have ms):
  // µs below a millisecond, three significant digits below a second, then s, min, h.
  function ms(value) {
    if (value == null) return "–";
    if (value === 0) return "0 ms";
    if (value < 1) return `${+(value * 1000).toPrecision(3)} µs`;
    if (value < 1000) return `${+value.toPrecision(3)} ms`;
    const s = value / 1000;
    if (s < 60) return `${s.toFixed(s < 10 ? 2 : 1)} s`;
    const min = Math.floor(s / 60);
    if (min < 60) return `${min} min ${Math.round(s - min * 60)} s`;
    return `${Math.floor(min / 60)} h ${min % 60} min`;
  }
  // An operator kind as words that may wrap ("timestamps_and_watermarks": three short lines).
  const kindLabel = (kind) => String(kind || "").replace(/_/g, " ");
  const shortTime = (iso) => (iso ? iso.replace("T", " ").replace(/(\.\d+)?\+00:00$/, " UTC") : "–");

  class ApiError extends Error {
    constructor(status, detail) { super(detail); this.status = status; }
  }

  async function getJSON(url) {
    const response = await fetch(url, { credentials: "same-origin", headers: { Accept: "application/json" } });
    if (!response.ok) {
      const body = await response.json().catch(() => ({}));
      throw new ApiError(response.status, typeof body.detail === "string" ? body.detail : response.statusText);
    }
    return response.json();
  }

  // ---- layout: chains in columns by their longest distance from a source chain ----
  function columnsOf(plan) {
    const level = new Map(plan.chains.map((c) => [c.id, 0]));
    for (let pass = 0; pass < plan.chains.length; pass++) {
      for (const edge of plan.edges) {
        const next = level.get(edge.source) + 1;
        if (level.has(edge.target) && next > level.get(edge.target)) level.set(edge.target, next);
      }
    }
    const columns = [];
    for (const chain of plan.chains) (columns[level.get(chain.id)] ||= []).push(chain);
    // Order each column by where its inputs leave the columns before (operator rows
    // counted top to bottom), so that exchange edges cross as little as possible.
    const rank = new Map();
    columns.filter(Boolean).forEach((column, index) => {
      if (index > 0) {
        const weight = (chain) => {
          const ins = plan.edges.filter((e) => e.target === chain.id && rank.has(e.source));
          const rows = ins.map((e) => rank.get(e.source) + operatorIndex(plan, e.source, e.source_operator) / 100);
          return rows.length ? rows.reduce((a, b) => a + b, 0) / rows.length : Infinity;
        };
        column.sort((a, b) => weight(a) - weight(b));
      }
      let row = 0;
      for (const chain of column) { rank.set(chain.id, row); row += chain.operators.length; }
    });
    return columns.filter(Boolean);
  }

  function operatorIndex(plan, chainId, operator) {
    const chain = plan.chains.find((c) => c.id === chainId);
    const index = chain ? chain.operators.findIndex((o) => o.key === operator || o.name === operator) : -1;
    return Math.max(index, 0);
  }

  // ---- one chain box ---------------------------------------------------------------
  function chainBox(chain, plan, metrics) {
    metrics = withStreamGauges(metrics);
    const opMetrics = new Map((metrics?.operators || []).map((o) => [o.key, o]));
    const inbound = new Map();  // operator name/key -> chained edge feeding it
    for (const e of plan.chained_edges || []) if (e.chain === chain.id) inbound.set(e.target_operator, e);

    const header = el("header", {}, [
      el("span", { class: "chain-name", title: chain.name, text: chain.id }),
      el("span", { class: "badge", title: "parallelism", text: `×${chain.parallelism}` }),
      metrics && el("span", { class: `state ${metrics.state}`, text: metrics.state }),
    ]);
    const list = el("ol", { class: "operators" });
    chain.operators.forEach((op, index) => {
      const m = opMetrics.get(op.key);
      const via = inbound.get(op.name) || inbound.get(op.key);
      list.append(operatorRow(op, m, metrics, index > 0 ? via : null, chain.operators[index - 1]));
    });
    return el("section", { class: `chain ${metrics?.state === "failed" ? "failed" : ""}`, id: `chain-${chain.id}`,
                           "data-chain": chain.id }, [header, list, chainFooter(metrics)]);
  }

  // A stream run's chain: the watermark each operator committed (its snapshot's, what the
  // Stream run table shows; a drain's is the end of the stream) replaces the gauge noted before
  // the end of input, which is kept as `watermark_reached` (shown in the title).
  function withStreamGauges(metrics) {
    const committed = metrics?.stream?.operators;
    if (!committed) return metrics;
    const operators = metrics.operators.map((o) => {
      const mark = committed[o.key]?.watermark;
      return mark == null || mark === o.watermark ? o : { ...o, watermark: mark, watermark_reached: o.watermark };
    });
    const marks = operators.map((o) => o.watermark).filter((w) => w != null);
    return { ...metrics, operators, watermark: marks.length ? Math.min(...marks) : metrics.watermark };
  }

  function operatorRow(op, m, chainMetrics, via, previous) {
    // Flags only mean something when there is another operator to compare with.
    const compared = chainMetrics && chainMetrics.operators.length > 1;
    const slowest = compared && chainMetrics.slowest === op.key;
    const lossiest = compared && chainMetrics.lossiest === op.key;
    const row = el("li", { class: `operator${slowest ? " slowest" : ""}${lossiest ? " lossiest" : ""}`,
                           "data-key": op.key, "data-name": op.name }, [
      el("div", { class: "op-title" }, [
        el("span", { class: "kind", title: op.kind, text: kindLabel(op.kind) }),
        el("span", { class: "op-name", title: op.uid ? `uid ${op.uid}` : op.key, text: op.name }),
        op.vectorized && el("span", { class: "flag vectorized", title: "computes over Arrow batches",
                                      text: "vectorized" }),
        !op.vectorized && op.per_record_reason && el("span", { class: "flag per-record", title: op.per_record_reason,
                                                             text: "per record" }),
        slowest && el("span", { class: "flag slow", text: "slowest" }),
        lossiest && el("span", { class: "flag lossy", text: "lossiest" }),
      ]),
    ]);
    // Show where the record comes from only when it is not simply the operator above.
    const routed = via && (via.output_tag || (via.selected_names || []).length);
    if (via && (routed || (previous && via.source_operator !== previous.name && via.source_operator !== previous.key))) {
      const route = via.output_tag ? ` · side output “${via.output_tag}”`
        : (via.selected_names || []).length ? ` · select ${via.selected_names.join(", ")}` : "";
      row.append(el("div", { class: "via", text: `from ${via.source_operator}${route}` }));
    }
    if (!m) {
      if (chainMetrics) row.append(el("div", { class: "op-stats muted", text: "no metrics" }));
      return row;
    }
    // Sources take nothing in and sinks pass nothing on: show what they do have.
    const stats = el("div", { class: "op-stats" }, [
      op.kind !== "source" && counterStat(counters.records_in, m),
      op.kind !== "sink" && counterStat(counters.records_out, m),
    ]);
    for (const [tag, count] of Object.entries(m.side_outputs || {})) stats.append(stat(tag, count, `side output ${tag}`, "stat-side"));
    for (const c of droppedCounters) if (m[c.name]) stats.append(counterStat(c, m, "stat-dropped"));
    for (const g of gauges) if (m[g.name] != null) stats.append(gaugeStat(g, m[g.name], m[`${g.name}_reached`]));
    row.append(stats);
    const share = Math.round((m.time_share || 0) * 1000) / 10;
    // Time is sampled on records passing through the chain: records an operator only got
    // otherwise (e.g. emitted by a reduce at the end of input) leave it without a sample,
    // and an operator that got no record has no time to show.
    const untimed = !m.time_ms;
    row.append(el("div", { class: "timebar", title: !untimed ? `${share}% of the chain's operator time`
      : m.records_in > 0 || op.kind === "source"
        ? "no timing sample: its records did not pass through the sampled path (e.g. emitted at the end of input)"
        : "no timing sample: no record came in" }, [
      el("div", { style: `width:${Math.min(100, share)}%` }),
      el("span", { text: `${untimed ? "not timed" : `${share}% · ${ms(m.time_ms)}`} · ${m.subtasks} subtask${m.subtasks === 1 ? "" : "s"}` }),
    ]));
    return row;
  }

  function counterStat(counter, m, cls) {
    return stat(counter.label, m[counter.name], counter.description, cls);
  }

  // A gauge is an event time in ms (the watermark): shown as a UTC time when it is an epoch one.
  // Flink's MAX watermark (Long.MAX_VALUE, a drained or finished stream) is the end of the
  // stream, its MIN none yet; both are beyond what a Date holds (±8.64e15 ms).
  function gaugeText(value) {
    if (value >= 8.64e15) return "end of stream";
    if (value <= -8.64e15) return "none";
    return Math.abs(value) >= 1e11 ? new Date(value).toISOString().replace("T", " ").replace("Z", " UTC") : n(value);
  }

  // A gauge's text as nodes that may wrap between the date and the time of day only (a chain
  // box is narrower than a whole UTC time in a narrow frame).
  function gaugeNodes(value) {
    const text = gaugeText(value), split = text.match(/^(\d{4}-\d\d-\d\d) (.+)$/);
    const piece = (t) => el("span", { class: "nowrap", text: t });
    return split ? [piece(split[1]), " ", piece(split[2])] : [piece(text)];
  }

  // `reached`: the event time the operator got to before a drain ended the stream (or null).
  function gaugeStat(gauge, value, reached) {
    const before = reached != null ? `; before the drain it had reached ${gaugeText(reached)}` : "";
    return el("span", { class: `stat-gauge stat-${gauge.name}`, title: `${gauge.description} (${n(value)} ms)${before}` },
              [`${gauge.label} `, el("span", { class: "n" }, gaugeNodes(value))]);
  }

  function stat(label, value, title, cls) {
    return el("span", { class: cls, title }, [`${label} `, el("span", { class: "n", text: n(value) })]);
  }

  function chainFooter(m) {
    if (!m) return el("footer", { text: "not run in this run" });
    const parts = [`attempt ${m.attempt}${m.attempts > 1 ? ` (${m.attempts} attempts)` : ""}`];
    if (m.duration_ms != null) parts.push(ms(m.duration_ms));
    for (const g of gauges) if (m[g.name] != null) parts.push([`${g.label} `, ...gaugeNodes(m[g.name])]);
    if (m.spark_app_id) parts.push(m.spark_app_id);
    const line = parts.flatMap((part, i) => [i ? " · " : null, typeof part === "string"
      ? el("span", { class: "part", text: part }) : el("span", {}, part)]);
    return el("footer", {}, [...line, m.error && el("div", { class: "error", text: m.error })]);
  }

  // ---- exchange edges between chains (drawn after the boxes are laid out) ----------
  function operatorElement(chainId, operator) {
    const box = document.getElementById(`chain-${chainId}`);
    if (!box) return null;
    for (const li of box.querySelectorAll(".operator"))
      if (li.dataset.key === operator || li.dataset.name === operator) return li;
    return box.querySelector("header");
  }

  function drawEdges(plan, runMetrics) {
    graph.querySelectorAll("svg.edges, .edge-label").forEach((node) => node.remove());
    const origin = graph.getBoundingClientRect();
    const svg = document.createElementNS(SVG_NS, "svg");
    svg.setAttribute("class", "edges");
    svg.setAttribute("width", graph.scrollWidth);
    svg.setAttribute("height", graph.scrollHeight);
    svg.innerHTML = '<defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="var(--edge)"/></marker></defs>';
    const records = new Map();
    for (const chain of runMetrics?.chains || [])
      for (const out of chain.outputs || []) if (out.edge) records.set(out.edge, out.records);

    for (const edge of plan.edges) {
      const from = operatorElement(edge.source, edge.source_operator);
      const to = operatorElement(edge.target, edge.target_operator);
      if (!from || !to) continue;
      const a = from.getBoundingClientRect(), b = to.getBoundingClientRect();
      const x1 = a.right - origin.left + graph.scrollLeft + 1, y1 = a.top + a.height / 2 - origin.top;
      const x2 = b.left - origin.left + graph.scrollLeft - 2, y2 = b.top + Math.min(b.height / 2, 18) - origin.top;
      const bend = Math.max(40, (x2 - x1) / 2);
      const path = document.createElementNS(SVG_NS, "path");
      path.setAttribute("d", `M${x1},${y1} C${x1 + bend},${y1} ${x2 - bend},${y2} ${x2},${y2}`);
      path.setAttribute("fill", "none");
      path.setAttribute("stroke", "var(--edge)");
      path.setAttribute("stroke-width", "1.6");
      if (edge.output_tag) path.setAttribute("stroke-dasharray", "5 3");
      path.setAttribute("marker-end", "url(#arrow)");
      svg.append(path);
      graph.append(edgeLabel(edge, records.get(edge.id), (x1 + x2) / 2, (y1 + y2) / 2));
    }
    graph.prepend(svg);
  }

  function edgeLabel(edge, count, x, y) {
    const label = el("div", { class: "edge-label", "data-edge": edge.id, style: `left:${x}px;top:${y}px`,
                              title: `${edge.source_operator} → ${edge.target_operator} (${edge.id})` }, [
      el("span", { class: "partitioner", text: edge.partitioner }),
    ]);
    if (edge.input) label.append(el("div", { class: "tag", text: `input ${edge.input}` }));
    if (edge.output_tag) label.append(el("div", { class: "tag", text: `side output “${edge.output_tag}”` }));
    if ((edge.selected_names || []).length) label.append(el("div", { class: "tag", text: `select ${edge.selected_names.join(", ")}` }));
    if (count != null) label.append(el("div", { class: "records", text: `${n(count)} records` }));
    return label;
  }

  // ---- sources and sinks: one row each, with a cell for links to their pages ------
  // Links of a source or sink (e.g. to its Airflow asset): `links` of the operator in the plan
  // or in the run's metrics, [{href, text}], hrefs being Airflow UI addresses relative to the
  // Airflow root ("assets/12").
  function endpointLinks(op, m) {
    return [...(op.links || []), ...(m?.links || [])];
  }

  function renderEndpoints(plan, run) {
    const section = document.getElementById("endpoints");
    const byChain = new Map((run?.chains || []).map((c) => [c.chain_id, c]));
    const rows = [];
    let anyLinks = false;
    for (const chain of plan.chains) {
      const metrics = byChain.get(chain.id);
      for (const op of chain.operators) {
        if (op.kind !== "source" && op.kind !== "sink") continue;
        const m = (metrics?.operators || []).find((o) => o.key === op.key);
        const out = (metrics?.outputs || []).find((o) => o.sink === op.key);
        const links = endpointLinks(op, m);
        anyLinks ||= links.length > 0;
        rows.push(el("tr", { "data-key": op.key }, [
          el("td", { class: "kind", text: op.kind }),
          el("td", { class: "op-name", text: op.name }),
          el("td", { text: chain.id }),
          el("td", { class: "n", text: m ? n(op.kind === "source" ? m.records_out : m.records_in) : "–" }),
          el("td", { class: "path", text: out?.path || "" }),
          el("td", { class: "links" }, links.map((l) => el("a", { href: new URL(l.href, airflowRoot()).href,
                                                                    "data-airflow-link": "", text: l.text }))),
        ]));
      }
    }
    section.querySelector("tbody").replaceChildren(...rows);
    section.classList.toggle("no-links", !anyLinks);
    section.hidden = !rows.length;
  }

  // The Airflow UI's root: this page is <root>/flinkchain/ui/dag/<dag_id>.
  const airflowRoot = () => new URL("../../../", location.href);

  // ---- page -----------------------------------------------------------------------
  let shown = null;  // {plan, run, runId} on screen, to redraw the edges on resize
  let pipeline = null;
  let following;  // the run shown or being loaded

  function render(plan, run, runId, missing) {
    shown = { plan, run, runId };
    document.getElementById("plan-info").textContent =
      `${plan.chains.length} chains · ${plan.chains.reduce((s, c) => s + c.operators.length, 0)} operators · ` +
      `chaining: ${plan.strategy}` +
      (plan.runtime_mode ? ` · runtime mode: ${plan.runtime_mode.toUpperCase()}` : "");
    const byChain = new Map((run?.chains || []).map((c) => [c.chain_id, c]));
    graph.replaceChildren(...columnsOf(plan).map((column) =>
      el("div", { class: "column" }, column.map((chain) => chainBox(chain, plan, byChain.get(chain.id))))));
    drawEdges(plan, run);
    renderSummary(run, runId, missing);
    renderEndpoints(plan, run);
    // stream.js draws the stream-run table from the same document (one fetch per run shown)
    app.dispatchEvent(new CustomEvent("run-shown", { detail: { run, plan, gaugeText } }));
  }

  // `missing`: why the run has no record (the API's 404: a run not set up yet, or unknown).
  function renderSummary(run, runId, missing) {
    const box = document.getElementById("run-summary");
    if (!run) {
      box.replaceChildren(el("span", { class: "muted", text: runId
        ? `${missing || `Run ${runId} has no record`}: showing the plan only.`
        : "No run recorded yet: showing the plan only." }));
      return;
    }
    const items = [
      el("span", {}, ["Run ", el("b", { text: run.run_id }), " ", el("span", { class: `state ${run.state}`, text: run.state })]),
      el("span", {}, ["Started ", el("b", { text: shortTime(run.started_at) })]),
    ];
    if (run.ended_at) items.push(el("span", {}, ["Ended ", el("b", { text: shortTime(run.ended_at) })]));
    const failed = run.chains.filter((c) => c.state === "failed").length;
    items.push(el("span", {}, [el("b", { text: `${run.chains.length}` }), " chain attempts recorded",
                               failed ? `, ${failed} failed` : ""]));
    // Why the run failed before its chains ran (a refused stream run, a damaged checkpoint).
    if (run.error) items.push(el("div", { class: "run-error", text: run.error }));
    box.replaceChildren(...items);
  }

  async function showRun(runId) {
    let data = { run: null };
    if (runId) {
      try {
        data = await getJSON(`${api}/runs/${encodeURIComponent(runId)}`);
      } catch (error) {  // 404: a run the store has no record of (not set up yet, or unknown): the plan alone
        if (error.status !== 404) throw error;
        data = { run: null, missing: error.message };
      }
    }
    if (runId === following) render(data.plan || pipeline.plan, data.run, runId, data.missing);  // not overtaken
  }

  // The run the address asks for: the DAG run page's (/dags/<dag>/runs/<run>/plugin/chains),
  // else ?run_id= of Airflow's address or of this page's.
  const RUN_PAGE = /(\/dags\/[^/]+\/runs\/)([^/]+)(\/plugin\/)/;

  function runOfAddress() {
    const url = AirflowFrame.address();
    const onRunPage = url.pathname.match(RUN_PAGE);
    if (onRunPage) return decodeURIComponent(onRunPage[2]);
    return url.searchParams.get("run_id") || new URLSearchParams(location.search).get("run_id");
  }

  // A run id in a path as the Airflow UI writes it (it compares addresses as text): only what a
  // path segment may not hold is encoded (RFC 3986 pchar keeps sub-delims, ":" and "@").
  const pathSegment = (text) => encodeURIComponent(text).replace(/%(24|26|2B|2C|3B|3D|3A|40)/gi, decodeURIComponent);

  // Choosing a run changes the address, so that the view can be shared: on the DAG run page
  // it goes to that run's page, elsewhere ?run_id= changes in place.
  function putRunInAddress(runId) {
    const url = AirflowFrame.address();
    if (RUN_PAGE.test(url.pathname)) {
      url.pathname = url.pathname.replace(RUN_PAGE, (_, head, run, tail) => `${head}${pathSegment(runId)}${tail}`);
      AirflowFrame.navigate(url.href);
    } else {
      url.searchParams.set("run_id", runId);
      AirflowFrame.navigate(url.href, { replace: true });
    }
  }

  function fillPicker(selected) {
    const options = pipeline.runs.map((r) => el("option", { value: r.run_id, text: `${r.run_id} · ${r.state}` }));
    if (selected && !pipeline.runs.some((r) => r.run_id === selected))
      options.unshift(el("option", { value: selected, text: selected }));
    if (!options.length) options.push(el("option", { text: "no runs yet" }));
    picker.replaceChildren(...options);
    if (selected) picker.value = selected;
    picker.disabled = !pipeline.runs.length;
  }

  async function follow(runId) {
    following = runId;
    app.dataset.ready = "false";
    fillPicker(runId);
    await showRun(runId);
    app.dataset.run = runId || "";
    app.dataset.ready = "true";  // for tests and screenshots
  }

  async function main() {
    pipeline = await getJSON(api);
    picker.addEventListener("change", () => {
      const runId = picker.value;
      if (runId !== following) follow(runId).catch(showError);
      putRunInAddress(runId);
    });
    AirflowFrame.onAddressChange(() => {
      const runId = runOfAddress() || pipeline.runs[0]?.run_id;
      if (runId !== following) follow(runId).catch(showError);
    });
    let resizeTimer;
    window.addEventListener("resize", () => {
      clearTimeout(resizeTimer);
      resizeTimer = setTimeout(() => shown && drawEdges(shown.plan, shown.run), 100);
    });
    await follow(runOfAddress() || pipeline.runs[0]?.run_id);
  }

  // What went wrong, in words (the API's JSON error is for programs).
  function problem(error) {
    // Airflow answers a token that does not decode with 403 "Invalid JWT token": not signed in.
    const signedOut = error.status === 401 || (error.status === 403 && /token/i.test(error.message));
    if (signedOut)
      return ["Not signed in", "Your Airflow session is invalid or has expired. Reload the page to sign in to " +
              "Airflow again."];
    if (error.status === 403)
      return ["No access", `You do not have access to the DAG ${app.dataset.dagId}, so its chains and run ` +
              "metrics are not shown. Ask your Airflow administrator for read access to the DAG."];
    if (error.status === 404) return ["Not found", error.message];
    return ["Could not load the job graph", error.message];
  }

  function showError(error) {
    const [title, text] = problem(error);
    // Nothing of the run shown before stays under the note (it may not be the user's to see).
    shown = null;
    document.getElementById("run-summary").replaceChildren();
    document.getElementById("plan-info").textContent = "";
    app.dispatchEvent(new CustomEvent("run-shown", { detail: { run: null, plan: null, gaugeText } }));
    const endpoints = document.getElementById("endpoints");
    endpoints.querySelector("tbody").replaceChildren();
    endpoints.hidden = true;
    graph.replaceChildren(el("div", { class: "note error-box", "data-status": error.status || "" },
                             [el("h2", { text: title }), el("p", { text })]));
    app.dataset.ready = "error";
  }

  main().catch(showError);
})();
