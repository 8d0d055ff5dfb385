/* airflow-flinkchain Chains tab, stream runs (docs/stream-runs.md): for the run on screen,
   per chain the input it read (files / ranges per source), the state it holds (snapshot
   size) and the watermark it reached. Drawn from the run document chains.js shows (its
   `run-shown` event on #chains-app, with its watermark formatting): no fetch of its own. */
(function () {
  "use strict";

  const app = document.getElementById("chains-app");
  const box = document.getElementById("stream-run");
  if (!app || !box) return;
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

  // `watermark`: chains.js's text of a watermark (a UTC time, the end of the stream...).
  function render(run, watermark) {
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
                 el("td", marks.length ? watermark(Math.min(...marks)) : "–", { class: "watermark" }));
      table.tBodies[0].append(row);
    }
    box.replaceChildren(el("h2", "Stream run"), table);
    box.hidden = false;
  }

  app.addEventListener("run-shown", (event) => render(event.detail.run, event.detail.gaugeText));
})();
