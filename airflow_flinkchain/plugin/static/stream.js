/* airflow-flinkchain Chains tab, stream runs (docs/stream-runs.md): for the run on screen,
   per chain the input it read (files, or the position range per split of a source, as its users
   read it: an LSN range, stream sequences, table versions), the state it holds (snapshot
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

  // ---- positions as users read them, per source connector (the plan's `connector`) ----------
  // Each returns the text of one range read, [split, start, end) as the runtime records it, and
  // of one position kept; internal parts of a position (a CDC slot's owner, which names the
  // checkpoint directory) are never shown.
  const count = (k, one, many) => `${numberFormat.format(k)} ${k === 1 ? one : many}`;
  function lsn(value) {  // PostgreSQL's text form of an LSN: hi/lo 32 bits in hex
    const v = BigInt(value);
    return `${(v >> 32n).toString(16).toUpperCase()}/${(v & 0xFFFFFFFFn).toString(16).toUpperCase()}`;
  }
  const lsnOf = (p) => (p == null || p.lsn == null ? null : lsn(p.lsn));
  // a half-open range of integer positions [start, end): the first and last read
  function seqRange(label, start, end) {
    if (start == null || end == null || end <= start) return `${label} nothing new`;
    return end - start === 1 ? `${label} ${start}` : `${label} ${start}–${end - 1}`;
  }
  const plain = (p) => (p == null ? "start" : typeof p === "object" ? JSON.stringify(p) : String(p));
  const POSITIONS = {
    PostgresCdcSource: {  // {lsn, owner}: the transactions committed below the LSN were read
      range: (split, a, b) => {
        const from = lsnOf(a), to = lsnOf(b);
        if (to == null) return "snapshot";
        return from == null ? `snapshot → LSN ${to}` : `LSN ${from} → ${to}`;
      },
      at: (split, p) => `LSN ${lsnOf(p) ?? "snapshot"}`,
    },
    NatsJetStreamSource: {  // the next stream sequence to read
      range: (split, a, b) => `${split} ${seqRange("seq", a, b)}`,
      at: (split, p) => `${split} next seq ${p}`,
    },
    DeltaSource: {  // the next table version to read
      range: (split, a, b) => seqRange(b - a === 1 ? "version" : "versions", a, b),
      at: (split, p) => `next version ${p}`,
    },
    SqlSource: {  // the incremental column's last value read: (start, end]
      range: (split, a, b, op) => `${op?.incremental_column || "rows"} ${a == null ? "≤" : `${plain(a)} <`} ${
        a == null ? plain(b) : `… ≤ ${plain(b)}`}`,
      at: (split, p, op) => `${op?.incremental_column || "rows"} ≤ ${plain(p)}`,
    },
  };
  const GENERIC = {  // a user's UnboundedSource: its own positions; the title gives [start, end)
    range: (split, a, b) => `${split} ${plain(a)} → ${plain(b)}`,
    exact: (split, a, b) => `${split} [${JSON.stringify(a)}, ${JSON.stringify(b)})`,
    at: (split, p) => `${split} at ${plain(p)}`,
  };
  const isFile = (r) => Array.isArray(r[2]);  // [path, 0, [size, mtime_ns]]
  const fileName = (path) => String(path).replace(/\/+$/, "").split("/").pop();

  // What a chain's sources read in this run: "3 files", or per split of an unbounded source the
  // range read as its users read it ("LSN 0/16B3748 → 0/16B3990", "ORDERS seq 101–249");
  // "whole" / "nothing". `ops`: the plan's operators by key.
  function readText(read, ops) {
    const parts = [];
    for (const [source, ranges] of Object.entries(read || {})) {
      if (!Array.isArray(ranges)) { parts.push(`${source}: ${ranges}`); continue; }
      const files = ranges.filter(isFile).length;
      const kind = POSITIONS[ops.get(source)?.connector] || GENERIC;
      if (files && files === ranges.length) {
        parts.push(`${source}: ${count(files, "file", "files")}`);
      } else if (ranges.length <= SHOWN_RANGES) {
        parts.push(`${source}: ${ranges.map((r) => kind.range(r[0], r[1], r[2], ops.get(source))).join(", ")}`);
      } else {
        parts.push(`${source}: ${count(ranges.length, "range", "ranges")}`);
      }
    }
    return parts.join(" · ") || "–";
  }

  // Every range read (per split, or the files by name) and the splits this run read nothing of,
  // at the position they keep (`sources`: the positions the run committed).
  function readTitle(read, sources, ops) {
    return Object.entries(read || {}).flatMap(([source, ranges]) => {
      if (!Array.isArray(ranges)) return [];
      const op = ops.get(source), kind = POSITIONS[op?.connector] || GENERIC;
      const lines = ranges.map((r) => `${source} ${isFile(r) ? `file ${fileName(r[0])}` : (kind.exact || kind.range)(r[0], r[1], r[2], op)}`);
      const seen = new Set(ranges.map((r) => r[0]));
      for (const [split, p] of Object.entries(sources?.[source]?.splits || {})) {
        if (!seen.has(split)) lines.push(`${source} ${kind.at(split, p, op)} (nothing new)`);
      }
      return lines;
    }).join("\n");
  }

  // `watermark`: chains.js's text of a watermark (a UTC time, the end of the stream...).
  function render(run, plan, watermark) {
    const planned = new Map((plan?.chains || []).flatMap((c) => c.operators.map((o) => [o.key, o])));
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
      row.append(el("td", c.chain_id), el("td", readText(c.stream.read, planned),
                                            { class: "read", title: readTitle(c.stream.read, c.stream.sources, planned) }),
                 el("td", bytes(state), { class: "state-size", "data-bytes": String(state) }),
                 el("td", marks.length ? watermark(Math.min(...marks)) : "–", { class: "watermark" }));
      table.tBodies[0].append(row);
    }
    box.replaceChildren(el("h2", "Stream run"), table);
    box.hidden = false;
  }

  app.addEventListener("run-shown", (event) => render(event.detail.run, event.detail.plan, event.detail.gaugeText));
})();
