#include "plan_page.hpp"

#include <algorithm>
#include <string_view>

#include "headroom/estimator/memory.hpp"
#include "headroom/estimator/mtsl.hpp"

namespace headroom::cli {
namespace {

// The page: the data in a JSON script element, the rest drawn by the script below from it (SVG, no library).
constexpr std::string_view kHead = R"html(<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>headroom plan</title>
<style>
body{font:14px/1.4 system-ui,-apple-system,"Segoe UI",sans-serif;margin:1.5em;color:#111;max-width:1200px}
h1{font-size:1.3em;margin:0 0 .2em} h2{font-size:1.1em;margin:1.4em 0 .4em} .muted{color:#555}
table{border-collapse:collapse;width:100%;font-variant-numeric:tabular-nums}
th,td{padding:3px 6px;border-bottom:1px solid #ddd;text-align:right;white-space:nowrap}
th{cursor:pointer;background:#f2f2f2;user-select:none} th.sorted::after{content:" \25BE"} th.sorted.asc::after{content:" \25B4"}
td.name,th.name{text-align:left;font-family:ui-monospace,Menlo,monospace}
tbody tr{cursor:pointer} tbody tr:hover{background:#eef5fb} tbody tr.selected{background:#d7e9f7;outline:2px solid #0072B2}
.verdict-oom{color:#D55E00;font-weight:600} .verdict-uncertain{color:#9a6a00;font-weight:600}
svg text{font-size:11px;fill:#222} .cmd{font-family:ui-monospace,Menlo,monospace;background:#f6f6f6;padding:.6em;
white-space:pre-wrap;word-break:break-all;border:1px solid #ddd} button{font:inherit;padding:2px 10px}
.grid{display:grid;grid-template-columns:1fr 1fr;gap:1.5em} .legend span{display:inline-block;margin-right:1em}
.swatch{display:inline-block;width:.9em;height:.9em;margin-right:.3em;vertical-align:-1px;border:1px solid #333}
@media print{button,.noprint{display:none} tbody tr{cursor:auto} .grid{display:block}}
</style></head><body>
<script type="application/json" id="data">)html";

constexpr std::string_view kTail = R"html(</script>
<h1 id="title"></h1><div id="job" class="muted"></div>
<h2>Ranked layouts <span class="muted noprint">(click a row; click a heading to sort)</span></h2>
<table id="ranked"><thead></thead><tbody></tbody></table>
<div class="grid">
<div><h2>Pareto front: step time against peak memory</h2><svg id="pareto" width="560" height="320" role="img"
aria-label="Pareto front"></svg><div class="muted">Whiskers: the held-out bands of the peak and of the step.</div></div>
<div><h2>Memory per stage of the selected layout</h2><svg id="memory" width="560" height="320" role="img"
aria-label="memory per stage"></svg><div class="legend" id="memory-legend"></div></div>
</div>
<h2>Selected layout: <span id="sel-name"></span></h2>
<div>step <b><span id="sel-step"></span> s</b>, <span id="sel-tokens"></span> tokens/s, MFU <span id="sel-mfu"></span>%,
peak <b><span id="sel-peak"></span> GiB</b> of <span id="sel-capacity"></span> GiB (<span id="sel-verdict"></span>)</div>
<div id="mtsl-section" hidden><h2>How long can the sequence be? <span class="muted">Peak memory of the selected
layout against sequence length, at its batch</span></h2><svg id="mtsl" width="1000" height="320" role="img"
aria-label="peak memory against sequence length"></svg><div class="muted" id="mtsl-text"></div></div>
<h2>Where the step goes</h2><svg id="breakdown" width="1000" height="260" role="img" aria-label="step breakdown"></svg>
<h2>Launch it <button id="copy" class="noprint" type="button">Copy</button> <span id="copied" class="muted"></span></h2>
<div class="cmd" id="launch"></div>
<h2>Where the numbers come from</h2><div id="sources" class="muted"></div>
<script>
"use strict";
const D = JSON.parse(document.getElementById("data").textContent);
const C = {params:"#0072B2", grads:"#E69F00", optimizer:"#009E73", activations:"#CC79A7", residual:"#56B4E9",
           fp8_copies_and_scales:"#F0E442", host:"#999999"};
const f = (x, d) => (x === null || x === undefined) ? "-" : Number(x).toFixed(d);
const esc = s => String(s).replace(/[&<>"]/g, c => ({"&":"&amp;","<":"&lt;",">":"&gt;","\"":"&quot;"}[c]));
function name(l) {
  let s = "tp" + l.tp + " cp" + l.cp + " pp" + l.pp + (l.vpp > 1 ? "x" + l.vpp : "") + " dp" + l.dp;
  if (l.ep > 1) s += " ep" + l.ep;
  s += " mbs" + l.mbs + " " + (l.sharding_code || "") + " rc:" + l.recompute;
  if (l.recompute_method && (l.recompute_method !== "uniform" || l.recompute_num_layers !== 1))
    s += "-" + l.recompute_method + l.recompute_num_layers;
  if (l.recompute_modules && l.recompute_modules.join(",") !== "core_attn") s += "(" + l.recompute_modules.join(",") + ")";
  if (l.schedule !== "1f1b" && l.schedule !== "interleaved") s += " " + l.schedule;
  if (l.tp > 1 && !l.sequence_parallel) s += " no-sp";
  return s;
}
document.getElementById("title").textContent = "headroom plan: " + D.model + " on " + D.gpus + " x " + D.gpu;
document.getElementById("job").textContent = "cluster " + D.cluster + ", framework " + D.framework + ", seq " + D.seq +
  ", global batch " + D.gbs + ", " + D.precision + (D.lora ? ", LoRA rank " + D.lora.rank : "") + "; " + D.evaluated +
  " layouts searched, " + D.fitting + " fit, " + D.layouts.length + " shown";
const label = x => (x.label ? x.label + ": " : "") + name(x.layout);
const cols = [["#", r => r.i + 1, 0], ["layout", r => label(r.x), null], ["step s", r => r.x.step_time_s, 3],
  ["tokens/s", r => r.x.tokens_per_s, 0], ["TFLOP/s", r => r.x.tflops_per_gpu, 1], ["MFU %", r => 100 * r.x.mfu, 1],
  ["peak GiB", r => r.x.peak_gib, 2], ["margin GiB", r => r.x.margin_gib, 2], ["verdict", r => r.x.verdict, null]];
const rows = D.layouts.map((x, i) => ({x, i}));
const thead = document.querySelector("#ranked thead"), tbody = document.querySelector("#ranked tbody");
let sortCol = 0, asc = true, selected = -1;
function drawTable() {
  thead.innerHTML = "<tr>" + cols.map((c, j) => "<th data-col='" + j + "' class='" + (j === 1 ? "name " : "") +
    (j === sortCol ? "sorted" + (asc ? " asc" : "") : "") + "'>" + c[0] + "</th>").join("") + "</tr>";
  const sorted = rows.slice().sort((a, b) => {
    const u = cols[sortCol][1](a), v = cols[sortCol][1](b);
    return (u < v ? -1 : u > v ? 1 : 0) * (asc ? 1 : -1);
  });
  tbody.innerHTML = sorted.map(r => "<tr data-index='" + r.i + "'" + (r.i === selected ? " class='selected'" : "") +
    ">" + cols.map((c, j) => {
      const v = c[1](r);
      const text = c[2] === null ? esc(v) : f(v, c[2]);
      const cls = j === 1 ? "name" : j === 8 ? "verdict-" + v : "";
      return "<td class='" + cls + "' data-value='" + esc(v) + "'>" + text + "</td>";
    }).join("") + "</tr>").join("");
}
thead.addEventListener("click", e => {
  const j = Number(e.target.dataset.col); if (isNaN(j)) return;
  asc = j === sortCol ? !asc : true; sortCol = j; drawTable();
});
tbody.addEventListener("click", e => {
  const tr = e.target.closest("tr"); if (tr) select(Number(tr.dataset.index));
});
function svg(el, w, h) { el.setAttribute("viewBox", "0 0 " + w + " " + h); el.innerHTML = ""; return el; }
function add(el, tag, attrs, text) {
  const n = document.createElementNS("http://www.w3.org/2000/svg", tag);
  for (const k in attrs) n.setAttribute(k, attrs[k]);
  if (text !== undefined) n.textContent = text;
  el.appendChild(n); return n;
}
function axis(el, x0, y0, w, h, xmax, ymax, xlabel, ylabel) {
  add(el, "line", {x1:x0, y1:y0, x2:x0 + w, y2:y0, stroke:"#333"});
  add(el, "line", {x1:x0, y1:y0, x2:x0, y2:y0 - h, stroke:"#333"});
  for (let k = 0; k <= 4; k++) {
    if (xmax !== null) add(el, "text", {x:x0 + w * k / 4, y:y0 + 14, "text-anchor":"middle"}, f(xmax * k / 4, 1));
    add(el, "text", {x:x0 - 4, y:y0 - h * k / 4 + 4, "text-anchor":"end"}, f(ymax * k / 4, ymax < 10 ? 2 : 0));
  }
  add(el, "text", {x:x0 + w / 2, y:y0 + 30, "text-anchor":"middle"}, xlabel);
  add(el, "text", {x:12, y:y0 - h / 2, transform:"rotate(-90 12 " + (y0 - h / 2) + ")", "text-anchor":"middle"}, ylabel);
}
function drawPareto() {
  const el = svg(document.getElementById("pareto"), 560, 320), P = D.pareto;
  if (!P.length) return;
  const hi = (x, k, v) => x[k] ? x[k][1] : v;
  const cap = D.details.length ? D.details[0].estimate.memory.capacity_gib : 0;
  const xmax = Math.max(cap, ...P.map(p => hi(p, "peak_gib_interval", p.peak_gib))) * 1.05;
  const ymax = Math.max(...P.map(p => hi(p, "step_time_s_interval", p.step_time_s))) * 1.05;
  const X = v => 60 + 480 * v / xmax, Y = v => 280 - 260 * v / ymax;
  axis(el, 60, 280, 480, 260, xmax, ymax, "peak memory per GPU (GiB)", "step time (s)");
  if (cap) {
    add(el, "line", {x1:X(cap), y1:280, x2:X(cap), y2:20, stroke:"#D55E00", "stroke-dasharray":"4 3"});
    add(el, "text", {x:X(cap) - 4, y:30, "text-anchor":"end"}, "capacity");
  }
  let path = "";
  P.forEach((p, k) => {
    const x = X(p.peak_gib), y = Y(p.step_time_s);
    if (p.peak_gib_interval) add(el, "line", {x1:X(p.peak_gib_interval[0]), y1:y, x2:X(p.peak_gib_interval[1]), y2:y,
      stroke:"#777"});
    if (p.step_time_s_interval) add(el, "line", {x1:x, y1:Y(p.step_time_s_interval[0]), x2:x,
      y2:Y(p.step_time_s_interval[1]), stroke:"#777"});
    path += (k ? "L" : "M") + x + " " + y;
    const dot = add(el, "circle", {cx:x, cy:y, r:4.5, fill:"#0072B2", stroke:"#fff"});
    add(dot, "title", {}, name(p.layout) + ": " + f(p.step_time_s, 3) + " s, " + f(p.peak_gib, 2) + " GiB");
  });
  add(el, "path", {d:path, fill:"none", stroke:"#0072B2", "stroke-width":1});
}
function drawMemory(est) {
  const el = svg(document.getElementById("memory"), 560, 320), S = est.memory.stages;
  const keys = Object.keys(C), cap = est.memory.capacity_gib;
  const ymax = Math.max(cap, ...S.map(s => s.total / 2 ** 30)) * 1.08;
  const n = S.length, bw = Math.min(60, 440 / n * 0.7), Y = v => 280 - 260 * v / ymax;
  axis(el, 60, 280, 480, 260, null, ymax, "pipeline stage", "GiB per GPU");
  S.forEach((s, k) => {
    let acc = 0; const x = 60 + 480 * (k + 0.5) / n - bw / 2;
    keys.forEach(key => {
      const v = (s[key] || 0) / 2 ** 30; if (v <= 0) return;
      const r = add(el, "rect", {x, y:Y(acc + v), width:bw, height:Y(acc) - Y(acc + v), fill:C[key], stroke:"#fff"});
      add(r, "title", {}, "stage " + s.stage + " " + key + ": " + f(v, 2) + " GiB");
      acc += v;
    });
    add(el, "text", {x:x + bw / 2, y:Y(acc) - 4, "text-anchor":"middle"}, f(acc, 1));
    add(el, "text", {x:x + bw / 2, y:294, "text-anchor":"middle"}, String(s.stage));
  });
  add(el, "line", {x1:60, y1:Y(cap), x2:540, y2:Y(cap), stroke:"#D55E00", "stroke-dasharray":"6 3"});
  add(el, "text", {x:540, y:Y(cap) - 4, "text-anchor":"end"}, "capacity " + f(cap, 1) + " GiB");
  document.getElementById("memory-legend").innerHTML = keys.map(k => "<span><i class='swatch' style='background:" +
    C[k] + "'></i>" + k.replace(/_/g, " ") + "</span>").join("");
}
function drawBreakdown(est) {
  const el = svg(document.getElementById("breakdown"), 1000, 260), B = est.perf.breakdown;
  const items = Object.keys(B).filter(k => typeof B[k] === "number" && k !== "slowest_stage" && B[k] > 0);
  const max = Math.max(...items.map(k => B[k]), 1e-9), h = Math.min(22, 240 / Math.max(items.length, 1));
  items.forEach((k, j) => {
    const y = 10 + j * h, w = 640 * B[k] / max;
    add(el, "text", {x:250, y:y + h * 0.7, "text-anchor":"end"}, k.replace(/_s$/, "").replace(/_/g, " "));
    add(el, "rect", {x:260, y, width:Math.max(w, 1), height:h * 0.8, fill:"#009E73"});
    add(el, "text", {x:266 + w, y:y + h * 0.7}, f(B[k], 3) + " s");
  });
  el.setAttribute("viewBox", "0 0 1000 " + (20 + items.length * h));
  el.setAttribute("height", 20 + items.length * h);
}
function drawMtsl(x, m) {
  const sec = document.getElementById("mtsl-section");
  sec.hidden = !m; if (!m) return;
  const el = svg(document.getElementById("mtsl"), 1000, 320), P = m.points, cap = m.capacity_gib;
  const hi = p => p.peak_gib_interval ? p.peak_gib_interval[1] : p.peak_gib;
  const xmax = P[P.length - 1].seq, ymax = Math.max(cap, ...P.map(hi)) * 1.08;
  const X = v => 70 + 900 * v / xmax, Y = v => 280 - 260 * v / ymax;
  axis(el, 70, 280, 900, 260, null, ymax, "sequence length (tokens)", "peak GiB per GPU");
  for (let k = 0; k <= 4; k++) add(el, "text", {x:X(xmax * k / 4), y:294, "text-anchor":"middle"}, f(xmax * k / 4, 0));
  if (P[0].peak_gib_interval) {
    const top = P.map(p => X(p.seq) + " " + Y(p.peak_gib_interval[1])).join("L");
    const bottom = P.slice().reverse().map(p => X(p.seq) + " " + Y(p.peak_gib_interval[0])).join("L");
    add(el, "path", {d:"M" + top + "L" + bottom + "Z", fill:"#56B4E9", "fill-opacity":0.3, stroke:"none"});
  }
  add(el, "path", {d:"M" + P.map(p => X(p.seq) + " " + Y(p.peak_gib)).join("L"), fill:"none", stroke:"#0072B2",
    "stroke-width":2});
  P.forEach(p => add(add(el, "circle", {cx:X(p.seq), cy:Y(p.peak_gib), r:2.5, fill:"#0072B2"}), "title", {},
    f(p.seq, 0) + " tokens: " + f(p.peak_gib, 2) + " GiB"));
  add(el, "line", {x1:70, y1:Y(cap), x2:970, y2:Y(cap), stroke:"#D55E00", "stroke-dasharray":"6 3"});
  add(el, "text", {x:970, y:Y(cap) - 4, "text-anchor":"end"}, "capacity " + f(cap, 1) + " GiB");
  const mark = (s, text, dash) => { if (s > 0 && s <= xmax) {
    add(el, "line", {x1:X(s), y1:280, x2:X(s), y2:20, stroke:"#333", "stroke-dasharray":dash});
    add(el, "text", {x:X(s) + 4, y:34}, text); } };
  mark(x.layout.seq, "this job: " + f(x.layout.seq, 0), "2 3");
  if (!m.capped) mark(m.mtsl_tokens, "MTSL " + f(m.mtsl_tokens, 0), "6 2");
  document.getElementById("mtsl-text").textContent = m.capped ? "The layout fits at every length considered." :
    m.mtsl_tokens === 0 ? "Out of memory at every length: " + m.binding_term + " alone fill stage " + m.binding_stage +
    "." : "MTSL " + f(m.mtsl_tokens, 0) + " tokens" + (m.mtsl_tokens_interval ? " (band " +
    f(m.mtsl_tokens_interval[0], 0) + "-" + f(m.mtsl_tokens_interval[1], 0) + ")" : "") + ", where " + m.binding_term +
    " of stage " + m.binding_stage + " reach the capacity. Shaded: the held-out band of the peak.";
}
function select(i) {
  selected = i; drawTable();
  const x = D.layouts[i], d = D.details[i];
  document.getElementById("sel-name").textContent = label(x);
  document.getElementById("sel-step").textContent = f(x.step_time_s, 3);
  document.getElementById("sel-tokens").textContent = f(x.tokens_per_s, 0);
  document.getElementById("sel-mfu").textContent = f(100 * x.mfu, 1);
  document.getElementById("sel-peak").textContent = f(x.peak_gib, 2);
  document.getElementById("sel-capacity").textContent = f(d.estimate.memory.capacity_gib, 2);
  document.getElementById("sel-verdict").textContent = x.verdict;
  document.getElementById("launch").textContent = d.launch;
  drawMemory(d.estimate); drawBreakdown(d.estimate); drawMtsl(x, d.mtsl);
  const p = d.estimate.perf;
  document.getElementById("sources").textContent = "Coefficients " + p.coefficients + " (" + p.coefficients_source +
    "); links: " + p.link_coefficients_source + ". Step band: " + p.interval_source + ". Memory band: " +
    d.estimate.memory.interval_source + ".";
}
document.getElementById("copy").addEventListener("click", () => {
  const text = document.getElementById("launch").textContent, done = m => {
    document.getElementById("copied").textContent = m; };
  if (navigator.clipboard) navigator.clipboard.writeText(text).then(() => done("copied"), () => done("select and copy"));
  else done("select and copy");
});
drawTable(); drawPareto();
if (D.layouts.length) {
  const m = /select=(\d+)/.exec(location.hash), i = m ? Math.min(Number(m[1]), D.layouts.length - 1) : 0;
  const tr = tbody.querySelector("tr[data-index='" + i + "']");
  tr.dispatchEvent(new MouseEvent("click", {bubbles: true}));
}
</script></body></html>
)html";

}  // namespace

nlohmann::json mtsl_curve_json(const Plan& r, const Layout& l) {
  const MtslResult m = max_trainable_seq(r.model, r.cluster, l, r.framework.residual);
  const MtslInterval band = mtsl_interval(r.model, r.cluster, l, r.framework.residual, r.framework.memory_band);
  const std::int64_t g = m.granularity, top = 3 * std::max(l.seq, m.capped ? 4 * l.seq : m.tokens) / 2;
  constexpr int kPoints = 24;
  nlohmann::json points = nlohmann::json::array();
  const ErrorBand& b = r.framework.memory_band;
  Layout at = l;
  for (int k = 1; k <= kPoints; ++k) {
    at.seq = std::max(g, top * k / kPoints / g * g);
    const double peak = peak_memory_bytes(r.model, r.cluster, at, r.framework.residual);
    points.push_back(
        {{"seq", at.seq},
         {"peak_gib", peak / kGiB},
         {"peak_gib_interval",
          b.known ? nlohmann::json::array({b.lower(peak) / kGiB, b.upper(peak) / kGiB}) : nlohmann::json(nullptr)}});
  }
  return {{"mtsl_tokens", m.tokens},
          {"mtsl_tokens_interval", band.known ? nlohmann::json::array({band.low, band.high}) : nlohmann::json(nullptr)},
          {"capped", m.capped},
          {"binding_stage", m.binding_stage},
          {"binding_term", std::string(m.binding_term)},
          {"capacity_gib", m.capacity_bytes / kGiB},
          {"points", points}};
}

std::string plan_page_html(const nlohmann::json& doc) {
  const std::string json = doc.dump();
  // Inside <script>, "</" could end the element: JSON allows "<\/" for it.
  std::string data;
  data.reserve(json.size() + 64);
  for (std::size_t i = 0; i < json.size(); ++i) {
    data += json[i];
    if (json[i] == '<' && i + 1 < json.size() && json[i + 1] == '/') data += '\\';
  }
  std::string page;
  page.reserve(kHead.size() + data.size() + kTail.size());
  page.append(kHead).append(data).append(kTail);
  return page;
}

}  // namespace headroom::cli
