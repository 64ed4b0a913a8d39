// inferlab explorer: knobs -> /api/estimate -> SVG charts. No library, no network beyond this server.
"use strict";

const SVGNS = "http://www.w3.org/2000/svg";
const COLORS = { a: "#1f77b4", b: "#d62728", prefill: "#ff7f0e", decode: "#1f77b4" };
// The knobs, in the order of the panel; their defaults come from /api/catalog.
const KNOBS = [
  ["model", "model", "select", "models"], ["gpu", "GPU", "select", "gpus"], ["engine", "engine", "select", "engines"],
  ["tp", "TP", "number"], ["pp", "PP", "number"], ["ep", "EP", "number"], ["dp", "replicas (DP)", "number"],
  ["weights", "weights", "select", "formats"], ["activations", "activations", "select", "formats"],
  ["kv", "KV cache", "select", "formats"], ["batch", "batch", "number"], ["isl", "ISL", "number"],
  ["osl", "OSL", "number"], ["spec", "speculation", "text"], ["prefix_hit", "prefix hit rate", "range"],
  ["disagg", "disaggregation", "text"],
];
const SERVE_FIELDS = { mode: "serve-mode", loads: "serve-loads", requests: "serve-requests",
  ttft_slo_ms: "serve-ttft-slo", tpot_slo_ms: "serve-tpot-slo" };
const state = { catalog: null, seq: { a: 0, b: 0 }, views: { a: null, b: null }, timer: null };

const $ = (id) => document.getElementById(id);

function el(tag, attrs, text) {
  const node = document.createElementNS(SVGNS, tag);
  for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, v);
  if (text !== undefined) node.textContent = text;
  return node;
}

// --- knobs -------------------------------------------------------------------------------
function buildPanel(side) {
  const panel = $("panel-" + side);
  for (const [name, label, kind, source] of KNOBS) {
    const id = side + "-" + name;
    const lab = document.createElement("label");
    lab.htmlFor = id;
    lab.textContent = label;
    let input;
    if (kind === "select") {
      input = document.createElement("select");
      const options = source === "formats" ? ["checkpoint", ...state.catalog.formats] : state.catalog[source];
      for (const o of options) input.add(new Option(o, o));
    } else {
      input = document.createElement("input");
      input.type = kind;
      if (kind === "number") input.min = "1";
      if (kind === "range") { input.min = "0"; input.max = "0.95"; input.step = "0.05"; }
      if (name === "spec") input.placeholder = "eagle:k=4,accept=0.7";
      if (name === "disagg") input.placeholder = "prefill=h200x4,decode=h200x8";
    }
    input.id = id;
    input.value = state.catalog.defaults[name];
    input.addEventListener(kind === "select" || kind === "range" ? "change" : "input", () => changed(kind === "text" || kind === "number"));
    if (kind === "range") input.addEventListener("input", () => changed(true));
    panel.append(lab, input);
  }
}

function knobValues(side) {
  const out = {};
  for (const [name] of KNOBS) out[name] = $(side + "-" + name).value;
  return out;
}

function nonDefault(values, prefix) {
  const out = {};
  for (const [k, v] of Object.entries(values)) if (String(v) !== String(state.catalog.defaults[k])) out[prefix + k] = v;
  return out;
}

function writeUrl() {
  const q = nonDefault(knobValues("a"), "");
  const compare = $("compare").checked;
  if (compare) { q.compare = "1"; Object.assign(q, nonDefault(knobValues("b"), "b_")); }
  if (!$("view-serve").hidden) q.tab = "serve";
  for (const [k, id] of Object.entries(SERVE_FIELDS)) if ($(id).value !== $(id).defaultValue) q[k] = $(id).value;
  const search = new URLSearchParams(q).toString();
  history.replaceState(null, "", search ? "?" + search : location.pathname);
}

function readUrl() {
  const q = new URLSearchParams(location.search);
  for (const side of ["a", "b"]) {
    for (const [name] of KNOBS) {
      const key = (side === "b" ? "b_" : "") + name;
      const fallback = side === "b" && q.has(name) ? q.get(name) : null;
      const value = q.has(key) ? q.get(key) : fallback;
      if (value !== null) $(side + "-" + name).value = value;
    }
  }
  $("compare").checked = q.get("compare") === "1";
  for (const [k, id] of Object.entries(SERVE_FIELDS)) if (q.has(k)) $(id).value = q.get(k);
  showTab(q.get("tab") === "serve" ? "serve" : "estimate");
}

function changed(debounce) {
  writeUrl();
  clearTimeout(state.timer);
  if (debounce) state.timer = setTimeout(refresh, 120); else refresh();
}

// --- estimate tab --------------------------------------------------------------------------
async function refresh() {
  const compare = $("compare").checked;
  $("panel-b").hidden = !compare;
  for (const node of document.querySelectorAll(".col-b")) node.hidden = !compare;
  const sides = compare ? ["a", "b"] : ["a"];
  if (!compare) state.views.b = null;
  const started = performance.now();
  const results = await Promise.all(sides.map(fetchEstimate));
  const errors = results.filter((r) => r && r.error).map((r) => r.side.toUpperCase() + ": " + r.error);
  $("error").textContent = errors.join("  ");
  drawEstimate();
  $("status").textContent = "updated in " + Math.round(performance.now() - started) + " ms";
  document.body.dataset.updates = String(Number(document.body.dataset.updates || 0) + 1);
}

async function fetchEstimate(side) {
  const seq = ++state.seq[side];
  const response = await fetch("/api/estimate?" + new URLSearchParams(knobValues(side)));
  const data = await response.json();
  if (seq !== state.seq[side]) return null;  // a newer request for this side is on its way
  if (data.error) { state.views[side] = null; return { side, error: data.error }; }
  state.views[side] = data;
  return { side };
}

const METRICS = [
  ["ttft", "TTFT [ms]", (v) => v.metrics.ttft_s, (x) => (x * 1e3).toFixed(1)],
  ["tpot", "TPOT [ms]", (v) => v.metrics.tpot_s, (x) => (x * 1e3).toFixed(2)],
  ["throughput", "output tok/s", (v) => v.metrics.output_tokens_per_s, (x) => x.toFixed(0)],
  ["throughput-gpu", "tok/s per GPU", (v) => v.metrics.output_tokens_per_s_per_gpu, (x) => x.toFixed(0)],
  ["throughput-user", "tok/s per user", (v) => v.metrics.output_tokens_per_s_per_user, (x) => x.toFixed(1)],
  ["gpus", "GPUs", (v) => v.num_gpus, (x) => x.toFixed(0)],
  ["memory", "memory per GPU [GB]", (v) => v.metrics.memory_per_gpu_bytes, (x) => (x / 1e9).toFixed(1)],
  ["max-seqs", "KV capacity [sequences]", (v) => v.memory.max_sequences, (x) => x.toFixed(0)],
  ["usd-out", "$ per M output tokens", (v) => v.metrics.usd_per_million_output, (x) => x.toFixed(3)],
  ["usd-in", "$ per M input tokens", (v) => v.metrics.usd_per_million_input, (x) => x.toFixed(4)],
];

function drawEstimate() {
  const body = $("metrics").tBodies[0];
  body.replaceChildren();
  for (const [key, label, get, fmt] of METRICS) {
    const row = body.insertRow();
    row.insertCell().textContent = label;
    for (const side of ["a", "b"]) {
      const cell = row.insertCell();
      cell.id = side + "-" + key;
      if (side === "b") { cell.className = "col-b"; cell.hidden = !$("compare").checked; }
      const view = state.views[side];
      const value = view ? get(view) : null;
      cell.textContent = value === null || value === undefined ? "-" : fmt(value);
      cell.dataset.value = value === null || value === undefined ? "" : String(value);
    }
  }
  for (const side of ["a", "b"]) {
    const view = state.views[side];
    $("title-" + side).textContent = view ? side.toUpperCase() + ": " + view.title : "";
    $("explain-" + side).textContent = view ? view.explain : "";
  }
  drawRoofline(state.views.a);
  drawMemory();
  const series = (key, scale) => ["a", "b"].filter((s) => state.views[s]).map((s) => ({
    name: s.toUpperCase(), color: COLORS[s], x: state.views[s].batch_curve.batch,
    y: state.views[s].batch_curve[key].map((v) => (v === null ? null : v * scale)),
    mark: Number(knobValues(s).batch) }));
  drawLines($("chart-ttft"), series("ttft_s", 1e3), { xlog: true, ylog: true, xlabel: "batch" });
  drawLines($("chart-tpot"), series("tpot_s", 1e3), { xlog: true, ylog: false, xlabel: "batch" });
  drawLines($("chart-throughput"), series("output_tokens_per_s", 1), { xlog: true, ylog: true, xlabel: "batch" });
}

// --- charts --------------------------------------------------------------------------------
const BOX = { left: 58, right: 12, top: 12, bottom: 36, width: 460, height: 300 };

function scale(lo, hi, log, a, b) {
  if (log) { lo = Math.log10(lo); hi = Math.log10(hi); }
  if (hi === lo) { hi = lo + 1; }
  return (v) => a + ((log ? Math.log10(v) : v) - lo) / (hi - lo) * (b - a);
}

function ticks(lo, hi, log) {
  if (log) {
    const out = [];
    for (let e = Math.floor(Math.log10(lo)); e <= Math.ceil(Math.log10(hi)); e++) {
      const v = 10 ** e;
      if (v >= lo * 0.999 && v <= hi * 1.001) out.push(v);
    }
    return out.length >= 2 ? out : [lo, hi];
  }
  const step = 10 ** Math.floor(Math.log10((hi - lo) / 4 || 1));
  const count = Math.ceil((hi - lo) / step);
  const n = count > 20 ? step * 5 : count > 8 ? step * 2 : step;
  const out = [];
  for (let v = Math.ceil(lo / n) * n; v <= hi + 1e-9; v += n) out.push(v);
  return out;
}

function label(v) {
  // 3 significant digits with an SI prefix: 1.5k, 20G, 1P (thousands from 10k on)
  for (const [from, factor, prefix] of [[1e15, 1e15, "P"], [1e12, 1e12, "T"], [1e9, 1e9, "G"], [1e6, 1e6, "M"], [1e4, 1e3, "k"]]) {
    if (Math.abs(v) >= from) return String(Number((v / factor).toPrecision(3))) + prefix;
  }
  return String(Number(v.toPrecision(3)));
}

function frame(svg, xdom, ydom, opts) {
  svg.replaceChildren();
  svg.dataset.renders = String(Number(svg.dataset.renders || 0) + 1);
  const x = scale(xdom[0], xdom[1], opts.xlog, BOX.left, BOX.width - BOX.right);
  const y = scale(ydom[0], ydom[1], opts.ylog, BOX.height - BOX.bottom, BOX.top);
  const axis = el("g", { class: "axis" });
  for (const t of ticks(xdom[0], xdom[1], opts.xlog)) {
    axis.append(el("line", { x1: x(t), x2: x(t), y1: BOX.top, y2: BOX.height - BOX.bottom, class: "grid" }));
    axis.append(el("text", { x: x(t), y: BOX.height - BOX.bottom + 14, "text-anchor": "middle" }, label(t)));
  }
  for (const t of ticks(ydom[0], ydom[1], opts.ylog)) {
    axis.append(el("line", { x1: BOX.left, x2: BOX.width - BOX.right, y1: y(t), y2: y(t), class: "grid" }));
    axis.append(el("text", { x: BOX.left - 4, y: y(t) + 4, "text-anchor": "end" }, label(t)));
  }
  axis.append(el("rect", { x: BOX.left, y: BOX.top, width: BOX.width - BOX.left - BOX.right,
    height: BOX.height - BOX.top - BOX.bottom, fill: "none", stroke: "#999" }));
  axis.append(el("text", { x: (BOX.left + BOX.width) / 2, y: BOX.height - 4, "text-anchor": "middle" }, opts.xlabel || ""));
  if (opts.ylabel) axis.append(el("text", { x: 12, y: BOX.height / 2, transform: `rotate(-90 12 ${BOX.height / 2})`, "text-anchor": "middle" }, opts.ylabel));
  svg.append(axis);
  return { x, y };
}

function extent(values, log) {
  const v = values.filter((t) => t !== null && Number.isFinite(t) && (!log || t > 0));
  if (!v.length) return null;
  let lo = Math.min(...v), hi = Math.max(...v);
  if (log) { lo /= 1.3; hi *= 1.3; } else { const pad = (hi - lo) * 0.08 || Math.abs(hi) * 0.1 || 1; lo = Math.max(0, lo - pad); hi += pad; }
  return [lo, hi];
}

function empty(svg, text) {
  svg.replaceChildren(el("text", { x: 230, y: 150, "text-anchor": "middle" }, text));
  svg.dataset.renders = String(Number(svg.dataset.renders || 0) + 1);
}

function drawLines(svg, series, opts) {
  const xs = extent(series.flatMap((s) => s.x), opts.xlog);
  const ys = extent(series.flatMap((s) => s.y), opts.ylog);
  if (!xs || !ys) { empty(svg, "nothing runs"); return; }
  const { x, y } = frame(svg, xs, ys, opts);
  for (const s of series) {
    const pts = s.x.map((xv, i) => [xv, s.y[i]]).filter(([, yv]) => yv !== null);
    svg.append(el("polyline", { points: pts.map(([a, b]) => `${x(a).toFixed(1)},${y(b).toFixed(1)}`).join(" "),
      fill: "none", stroke: s.color, "stroke-width": 2, "stroke-dasharray": s.dash || "" }));
    for (const [a, b] of pts) {
      const chosen = a === s.mark;
      svg.append(el("circle", { cx: x(a), cy: y(b), r: chosen ? 5 : 2.5, fill: chosen ? "#fff" : s.color, stroke: s.color, "stroke-width": 2 }));
    }
    if (s.label && pts.length) {
      const [a, b] = pts[pts.length - 1];
      svg.append(el("text", { x: x(a) - 4, y: y(b) - 6, fill: s.color, "text-anchor": "end" }, s.label));
    }
  }
  if (series.length > 1) legend(svg, series);
}

function legend(svg, items) {
  items.forEach((s, i) => {
    svg.append(el("rect", { x: BOX.left + 8, y: BOX.top + 6 + i * 14, width: 10, height: 3, fill: s.color }));
    svg.append(el("text", { x: BOX.left + 22, y: BOX.top + 11 + i * 14 }, s.name));
  });
}

function drawRoofline(view) {
  const svg = $("chart-roofline");
  if (!view || !view.roofline) { empty(svg, view ? "no single step to draw for disaggregated pools" : "-"); return; }
  const r = view.roofline;
  const ops = r.ops;
  const peaks = Object.values(r.roofs);
  const xs = extent([...ops.map((o) => o.intensity), 1, Math.max(...peaks) / r.memory_bandwidth * 4], true);
  const ys = extent([...ops.map((o) => o.flops_per_s), Math.max(...peaks)], true);
  const { x, y } = frame(svg, xs, ys, { xlog: true, ylog: true, xlabel: "intensity [FLOP/B]", ylabel: "FLOP/s per GPU" });
  for (const [name, peak] of Object.entries(r.roofs)) {
    const ridge = peak / r.memory_bandwidth;
    const x0 = xs[0];
    const pts = [[x0, x0 * r.memory_bandwidth], [ridge, peak], [xs[1], peak]].filter(([, b]) => b >= ys[0]);
    svg.append(el("polyline", { points: pts.map(([a, b]) => `${x(a)},${y(Math.min(b, ys[1]))}`).join(" "), fill: "none", stroke: "#555", "stroke-dasharray": "4 3" }));
    svg.append(el("text", { x: x(xs[1]) - 4, y: y(peak) - 3, "text-anchor": "end", fill: "#555" }, name + " peak"));
  }
  for (const o of ops) {
    const dot = el("circle", { cx: x(o.intensity), cy: y(o.flops_per_s), r: 2 + 8 * Math.sqrt(o.share), fill: COLORS[o.phase], "fill-opacity": 0.6 });
    dot.append(el("title", {}, `${o.phase} ${o.op}: ${label(o.intensity)} FLOP/B, ${label(o.flops_per_s)}FLOP/s, ${o.bound}, ${(o.share * 100).toFixed(0)}% of the step`));
    svg.append(dot);
  }
  legend(svg, [{ name: "prefill ops", color: COLORS.prefill }, { name: "decode ops", color: COLORS.decode }]);
}

function drawMemory() {
  const svg = $("chart-memory");
  svg.replaceChildren();
  svg.dataset.renders = String(Number(svg.dataset.renders || 0) + 1);
  const sides = ["a", "b"].filter((s) => state.views[s]);
  if (!sides.length) { empty(svg, "-"); return; }
  const capacity = Math.max(...sides.map((s) => state.views[s].memory.capacity_bytes));
  const parts = [["weights", "weights_bytes", "#4e79a7"], ["KV cache", "kv_bytes", "#f28e2b"],
    ["workspace", "workspace_bytes", "#76b7b2"], ["reserve", "reserve_bytes", "#bab0ab"]];
  const w = (b) => (b / capacity) * (BOX.width - 80);
  sides.forEach((side, i) => {
    const m = state.views[side].memory;
    const top = 30 + i * 120;
    let left = 40;
    svg.append(el("text", { x: 4, y: top + 24 }, side.toUpperCase()));
    for (const [name, key, color] of parts) {
      const width = w(m[key] || 0);
      const rect = el("rect", { x: left, y: top, width: Math.max(width, 0), height: 36, fill: color });
      rect.append(el("title", {}, `${name}: ${(m[key] / 1e9).toFixed(2)} GB`));
      svg.append(rect);
      if (width > 40) svg.append(el("text", { x: left + 3, y: top + 22, fill: "#fff" }, name));
      left += width;
    }
    svg.append(el("rect", { x: 40, y: top, width: w(m.capacity_bytes), height: 36, fill: "none", stroke: "#333" }));
    svg.append(el("line", { x1: 40 + w(m.budget_bytes), x2: 40 + w(m.budget_bytes), y1: top - 4, y2: top + 40, stroke: "#b00020" }));
    const free = m.budget_bytes - m.weights_bytes - m.workspace_bytes - m.reserve_bytes;
    svg.append(el("text", { x: 40, y: top + 54 }, `${(m.capacity_bytes / 1e9).toFixed(1)} GB per GPU; usable up to the red line`));
    svg.append(el("text", { x: 40, y: top + 70 }, `KV pool ${(free / 1e9).toFixed(1)} GB, ${(m.kv_bytes_per_token / 1e3).toFixed(1)} kB per token: up to ${m.max_sequences} sequences`));
  });
}

// --- serving tab -----------------------------------------------------------------------------
async function runSweep() {
  const q = new URLSearchParams(knobValues("a"));
  for (const [k, id] of Object.entries(SERVE_FIELDS)) q.set(k, $(id).value);
  $("serve-error").textContent = "";
  $("serve-run").disabled = true;
  try {
    const response = await fetch("/api/serve?" + q);
    const data = await response.json();
    if (data.error) { $("serve-error").textContent = data.error; return; }
    for (;;) {
      const job = await (await fetch("/api/job?id=" + data.job)).json();
      $("serve-progress").max = job.total;
      $("serve-progress").value = job.done;
      $("serve-progress-text").textContent = `${job.done} of ${job.total} loads simulated`;
      if (job.error) { $("serve-error").textContent = job.error; return; }
      if (job.curve) { drawCurve(job.curve); return; }
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
  } finally {
    $("serve-run").disabled = false;
  }
}

function drawCurve(curve) {
  const p = "p" + curve.percentile;
  const pts = curve.points;
  const tput = pts.map((r) => r.output_tokens_per_s);
  const knee = curve.knee;
  drawLines($("chart-curve"), [
    { name: "P50 e2e", color: COLORS.a, x: tput, y: pts.map((r) => r.e2e_p50_s * 1e3) },
    { name: `P${curve.percentile} e2e`, color: COLORS.b, x: tput, y: pts.map((r) => r[`e2e_${p}_s`] * 1e3),
      mark: knee === null ? null : tput[knee] },
  ], { xlog: false, ylog: true, xlabel: "output tok/s", ylabel: "latency [ms]" });
  if (knee !== null) {
    const svg = $("chart-curve");
    svg.append(el("text", { x: BOX.width - BOX.right - 6, y: BOX.height - BOX.bottom - 8, "text-anchor": "end" },
      `knee at ${curve.loads[knee]} ${curve.kind === "rate" ? "req/s" : "clients"}`));
  }
  const series = [{ name: "completed req/s", color: COLORS.a, x: curve.loads, y: pts.map((r) => r.requests_per_s) }];
  if (pts[0].goodput_requests_per_s !== null && pts[0].goodput_requests_per_s !== undefined) {
    series.push({ name: "goodput req/s (within SLO)", color: COLORS.b, x: curve.loads, y: pts.map((r) => r.goodput_requests_per_s) });
  }
  drawLines($("chart-goodput"), series, { xlog: true, ylog: false, xlabel: curve.kind === "rate" ? "offered req/s" : "clients" });
  $("serve-title").textContent = curve.title;
  $("serve-text").textContent = curve.text;
}

// --- start ---------------------------------------------------------------------------------
function showTab(tab) {
  $("view-estimate").hidden = tab !== "estimate";
  $("view-serve").hidden = tab !== "serve";
  for (const b of document.querySelectorAll(".tab")) b.classList.toggle("active", b.dataset.tab === tab);
}

async function main() {
  state.catalog = await (await fetch("/api/catalog")).json();
  buildPanel("a");
  buildPanel("b");
  readUrl();
  for (const b of document.querySelectorAll(".tab")) b.addEventListener("click", () => { showTab(b.dataset.tab); writeUrl(); });
  $("compare").addEventListener("change", () => {
    if ($("compare").checked && !new URLSearchParams(location.search).has("compare")) {
      for (const [name] of KNOBS) $("b-" + name).value = $("a-" + name).value;
    }
    changed(false);
  });
  for (const id of Object.values(SERVE_FIELDS)) $(id).addEventListener("change", writeUrl);
  $("serve-run").addEventListener("click", runSweep);
  await refresh();
}

main();
