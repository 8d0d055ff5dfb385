/* airflow-flinkchain Chains tab, stream runs (docs/stream-runs.md): for the run on screen,
   per chain the input it read (files / ranges per source), the state it holds (snapshot
   size) and the watermark it reached. Fed by the same run JSON as chains.js (`chains[].stream`);
   redrawn whenever chains.js draws a run (it rewrites #run-summary). */
(function () {
  "use strict";

  const app = document.getElementById("chains-app");
  const box = document.getElementById("stream-run");
  const summary = document.getElementById("run-summary");
  const picker = document.getElementById("run-select");
  if (!app || !box || !summary) return;
  const numberFormat = new Intl.NumberFormat("en");

  function el(tag, text, attrs) {
    const node = document.createElement(tag);
    if (text !== undefined && text !== null) node.textContent = text;
    for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, v);
    return node;
  }

  function bytes(n) {
    if (n === null || n === undefined) return "–";
    if (n < 1024) return `${numberFormat.format(n)} B`;
    const units = ["KiB", "MiB", "GiB", "TiB"];
    let v = n / 1024, i = 0;
    while (v >= 1024 && i < units.length - 1) { v /= 1024; i += 1; }
    return `${v.toFixed(1)} ${units[i]}`;
  }

  function watermark(ms) {  // as chains.js shows gauges: a UTC time with milliseconds
    if (ms === null || ms === undefined) return "–";
    if (Math.abs(ms) < 1e11) return numberFormat.format(ms);
    return new Date(ms).toISOString().replace("T", " ").replace("Z", " UTC");
  }

  // What a chain's sources read in this run: "3 files" / "2 ranges" / "whole" / "nothing".
  function readText(read) {
    const parts = [];
    for (const [source, ranges] of Object.entries(read || {})) {
      if (!Array.isArray(ranges)) { parts.push(`${source}: ${ranges}`); continue; }
      const files = ranges.filter((r) => Array.isArray(r[2])).length;
      const label = files === ranges.length ? (files === 1 ? "file" : "files") : (ranges.length === 1 ? "range" : "ranges");
      parts.push(`${source}: ${numberFormat.format(ranges.length)} ${label}`);
    }
    return parts.join(" · ") || "–";
  }

  function readTitle(read) {
    return Object.entries(read || {}).flatMap(([source, ranges]) => Array.isArray(ranges)
      ? ranges.map((r) => `${source} ${r[0]} [${JSON.stringify(r[1])}, ${JSON.stringify(r[2])})`) : []).join("\n");
  }

  function render(run) {
    const chains = (run?.chains || []).filter((c) => c.stream);
    if (!chains.length) { box.hidden = true; box.replaceChildren(); return; }
    const table = el("table", null, { class: "stream-table" });
    const head = el("tr");
    for (const h of ["chain", "input read", "state size", "watermark reached"]) head.append(el("th", h));
    table.append(el("thead"), el("tbody"));
    table.tHead.append(head);
    for (const c of chains) {
      const ops = Object.values(c.stream.operators || {});
      const state = ops.reduce((s, o) => s + (o.bytes || 0), 0);
      const marks = ops.map((o) => o.watermark).filter((w) => w !== null && w !== undefined);
      const row = el("tr", null, { "data-chain": c.chain_id });
      row.append(el("td", c.chain_id), el("td", readText(c.stream.read), { class: "read", title: readTitle(c.stream.read) }),
                 el("td", bytes(state), { class: "state-size", "data-bytes": String(state) }),
                 el("td", watermark(marks.length ? Math.min(...marks) : null), { class: "watermark" }));
      table.tBodies[0].append(row);
    }
    box.replaceChildren(el("h2", "Stream run"), table);
    box.hidden = false;
  }

  async function refresh() {
    const runId = picker?.value;
    if (!runId || picker.disabled) { render(null); return; }
    const response = await fetch(`${app.dataset.api}/runs/${encodeURIComponent(runId)}`,
                                 { credentials: "same-origin", headers: { Accept: "application/json" } });
    if (response.ok) render((await response.json()).run);
  }

  new MutationObserver(() => refresh().catch(() => render(null))).observe(summary, { childList: true });
})();
