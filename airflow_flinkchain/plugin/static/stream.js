/* airflow-flinkchain Chains tab, stream runs (docs/stream-runs.md): for the run on screen,
   per chain the input it read (files, or the position range per split of a source), the state it holds (snapshot
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

  const SHOWN_RANGES = 3;  // position ranges written out in the cell; more: a count (all in the title)

  function position(p) { return typeof p === "string" ? p : JSON.stringify(p); }

  // What a chain's sources read in this run: "3 files", or per split of an unbounded source (or
  // rows of an incremental query) the position range read, "p0 120 → 180"; "whole" / "nothing".
  function readText(read) {
    const parts = [];
    for (const [source, ranges] of Object.entries(read || {})) {
      if (!Array.isArray(ranges)) { parts.push(`${source}: ${ranges}`); continue; }
      const files = ranges.filter((r) => Array.isArray(r[2])).length;
      if (files === ranges.length) {
        parts.push(`${source}: ${numberFormat.format(files)} ${files === 1 ? "file" : "files"}`);
      } else if (ranges.length <= SHOWN_RANGES) {
        parts.push(`${source}: ${ranges.map((r) => `${r[0]} ${position(r[1])} → ${position(r[2])}`).join(", ")}`);
      } else {
        parts.push(`${source}: ${numberFormat.format(ranges.length)} ranges`);
      }
    }
    return parts.join(" · ") || "–";
  }

  // Every range read ([start, end) per split or file) and the splits this run read nothing of,
  // at the position they keep (`sources`: the positions the run committed).
  function readTitle(read, sources) {
    return Object.entries(read || {}).flatMap(([source, ranges]) => {
      if (!Array.isArray(ranges)) return [];
      const lines = ranges.map((r) => `${source} ${r[0]} [${JSON.stringify(r[1])}, ${JSON.stringify(r[2])})`);
      const seen = new Set(ranges.map((r) => r[0]));
      for (const [split, p] of Object.entries(sources?.[source]?.splits || {})) {
        if (!seen.has(split)) lines.push(`${source} ${split} at ${JSON.stringify(p)} (nothing new)`);
      }
      return lines;
    }).join("\n");
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
      row.append(el("td", c.chain_id), el("td", readText(c.stream.read),
                                            { class: "read", title: readTitle(c.stream.read, c.stream.sources) }),
                 el("td", bytes(state), { class: "state-size", "data-bytes": String(state) }),
                 el("td", marks.length ? watermark(Math.min(...marks)) : "–", { class: "watermark" }));
      table.tBodies[0].append(row);
    }
    box.replaceChildren(el("h2", "Stream run"), table);
    box.hidden = false;
  }

  app.addEventListener("run-shown", (event) => render(event.detail.run, event.detail.gaugeText));
})();
