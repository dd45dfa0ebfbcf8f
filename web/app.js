/*
 * tokbench web: a small frontend over the public API, nothing else.
 *
 * - The API key lives in sessionStorage (this tab only) and goes out as
 *   "Authorization: Bearer" on every call.
 * - Routes (location.hash): #/ jobs list, #/jobs/<id> job page, #/compare,
 *   #/frontier (GET /v1/pareto drawn as SVG built with the DOM), #/schedules
 *   (the project's schedules: pause, resume, delete, and a form to make one).
 * - The job page follows GET /v1/jobs/{id}/events: Server-Sent Events read
 *   with fetch() streaming, because EventSource cannot send the
 *   Authorization header; it reconnects with Last-Event-ID.
 * - The job page makes read-only share links (POST /v1/jobs/{id}/shares)
 *   and revokes them.
 * - Reports are the server's HTML (GET /v1/jobs/{id}/report), shown in a
 *   sandboxed iframe through srcdoc: no script can run in it.
 * - Every value from the API is put into the page as text (textContent),
 *   never as HTML.
 */
"use strict";

const KEY = "tokbench.key";
const $ = (sel, root) => (root || document).querySelector(sel);

function apiKey() { return sessionStorage.getItem(KEY); }

class ApiError extends Error {
  constructor(status, problem) {
    super((problem && (problem.detail || problem.title)) || ("HTTP " + status));
    this.status = status;
  }
}

async function api(path, opts) {
  opts = opts || {};
  const headers = Object.assign({ "Authorization": "Bearer " + apiKey() }, opts.headers || {});
  const resp = await fetch(path, Object.assign({}, opts, { headers }));
  if (resp.status === 401) {
    signOut();
    throw new ApiError(401, { detail: "the API key was refused; sign in again" });
  }
  if (!resp.ok) {
    let problem = null;
    try { problem = await resp.json(); } catch (e) { /* not JSON */ }
    throw new ApiError(resp.status, problem);
  }
  return resp;
}

async function apiJson(path, opts) { return (await api(path, opts)).json(); }

function signOut() {
  sessionStorage.removeItem(KEY);
  stopStreams();
  route();
}

function show(tplId) {
  const main = $("#main");
  main.replaceChildren($(tplId).content.cloneNode(true));
  return main;
}

function el(tag, text, cls) {
  const e = document.createElement(tag);
  if (text !== undefined && text !== null) e.textContent = String(text);
  if (cls) e.className = cls;
  return e;
}

function fmtTime(s) {
  if (!s) return "";
  const d = new Date(s);
  return isNaN(d) ? String(s) : d.toLocaleString();
}

function labelsInto(node, labels) {
  node.replaceChildren();
  for (const [k, v] of Object.entries(labels || {})) node.append(el("span", k + "=" + v, "label"));
}

function progressOf(job) {
  const p = job.progress || {};
  const total = p.cells_total || 0, done = p.cells_done || 0;
  return { done, total, pct: total > 0 ? Math.min(100, 100 * done / total) : (job.state === "succeeded" ? 100 : 0), eta: p.eta_s };
}

/* ------------------------------------------------------------- sign in */

function viewSignin() {
  $("#nav").hidden = true;
  show("#tpl-signin");
  $("#signin-form").addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const k = $("#key").value.trim();
    $("#signin-error").textContent = "";
    sessionStorage.setItem(KEY, k);
    try {
      await apiJson("/v1/jobs?limit=1");
      route();
    } catch (e) {
      sessionStorage.removeItem(KEY);
      $("#signin-error").textContent = e.status === 401 ? "This key was refused." : e.message;
    }
  });
}

/* ---------------------------------------------------------------- jobs */

async function viewJobs() {
  show("#tpl-jobs");
  const tbody = $("#jobs tbody");
  let next = null;
  async function load(reset) {
    const st = $("#state-filter").value;
    const q = new URLSearchParams({ limit: "50" });
    if (st) q.set("state", st);
    if (!reset && next) q.set("cursor", next);
    try {
      const page = await apiJson("/v1/jobs?" + q);
      if (reset) tbody.replaceChildren();
      for (const j of page.jobs || []) tbody.append(jobRow(j));
      next = page.next || page.next_cursor || null;
      $("#more").hidden = !next;
      if (reset && !(page.jobs || []).length) {
        const tr = el("tr"); const td = el("td", "No jobs yet.", "muted"); td.colSpan = 6;
        tr.append(td); tbody.append(tr);
      }
    } catch (e) { $("#jobs-error").textContent = e.message; }
  }
  $("#state-filter").addEventListener("change", () => load(true));
  $("#more").addEventListener("click", () => load(false));
  await load(true);
}

function jobRow(j) {
  const tr = el("tr");
  tr.dataset.id = j.id;
  const a = el("a", String(j.id).slice(0, 8));
  a.href = "#/jobs/" + encodeURIComponent(j.id);
  const tdId = el("td"); tdId.append(a);
  const tdState = el("td"); tdState.append(el("span", j.state, "state " + j.state));
  const p = progressOf(j);
  const tdP = el("td");
  const bar = el("span", null, "bar"); const fill = el("div"); fill.style.width = p.pct + "%";
  bar.append(fill); tdP.append(bar, el("span", " " + p.done + (p.total ? "/" + p.total : "")));
  const tdL = el("td"); labelsInto(tdL, j.labels);
  tr.append(tdId, tdState, tdP, tdL, el("td", fmtTime(j.created_at)), el("td", fmtTime(j.finished_at)));
  return tr;
}

/* ----------------------------------------------------------------- job */

let streams = [];
function stopStreams() { for (const c of streams) c.abort(); streams = []; }

const TERMINAL = new Set(["succeeded", "failed", "cancelled"]);

async function viewJob(id) {
  show("#tpl-job");
  $("#job-id").textContent = id;
  $("#compare-link").href = "#/compare?head=" + encodeURIComponent(id);
  for (const b of document.querySelectorAll("button[data-format]"))
    b.addEventListener("click", () => download(id, b.dataset.format));
  let job;
  try { job = await apiJson("/v1/jobs/" + encodeURIComponent(id)); }
  catch (e) { $("#job-error").textContent = e.message; return; }
  $("#share-btn").addEventListener("click", () => share(id, job.labels || {}));
  renderJob(job);
  await loadReport(id);
  if (!TERMINAL.has(job.state)) follow(id, job);
  else showRegressions(id);
}

function renderJob(job) {
  $("#job-state").textContent = job.state;
  $("#job-endpoint").textContent = job.endpoint_id || "";
  labelsInto($("#job-labels"), job.labels);
  const p = progressOf(job);
  $("#job-bar").style.width = p.pct + "%";
  let txt = p.total ? p.done + " of " + p.total + " cells" : p.done + " cells";
  if (job.progress && job.progress.current_cell && !TERMINAL.has(job.state)) {
    const c = job.progress.current_cell;
    txt += " · now: " + (c.phase || "") + " " + (c.context_label || c.context || "") +
      (c.phase === "decode" ? " × " + c.concurrency : c.phase === "rate" && c.users != null ? " with " + c.users + " users" :
        c.phase === "rate" && c.rate_rps != null ? " at " + c.rate_rps + " req/s" : "");
  }
  if (p.eta && !TERMINAL.has(job.state)) txt += " · about " + Math.round(p.eta) + " s left";
  $("#job-progress").textContent = txt;
  $("#job-error").textContent = job.error || "";
}

async function loadReport(id) {
  try {
    const html = await (await api("/v1/jobs/" + encodeURIComponent(id) + "/report?format=html")).text();
    const frame = $("#report");
    if (frame) setFrame(frame, html);
  } catch (e) { const n = $("#job-error"); if (n) n.textContent = e.message; }
}

/* Shows a server-rendered page in a sandboxed frame (no scripts run in it;
 * same origin only so that the frame can be sized to its content). */
function setFrame(frame, html) {
  frame.onload = () => {
    try { frame.style.height = (frame.contentDocument.documentElement.scrollHeight + 24) + "px"; }
    catch (e) { /* keep the CSS height */ }
  };
  frame.srcdoc = html;
}

/* Issue 35: "signed by this service" with the key id, when the result is
 * signed (docs/verify.md: tokbench verify checks it). */
function showSignature(doc) {
  const p = $("#signature");
  const sig = doc && doc.signature;
  if (!p) return;
  p.hidden = !sig;
  if (!sig) return;
  const code = el("code", String(sig.kid || ""));
  const keys = el("a", "its keys");
  keys.href = "/v1/signing-keys";
  p.replaceChildren(el("span", "Signed by this service, key "), code,
    el("span", " (" + String(sig.alg || "") + ", " + String(sig.signed_at || "") + "); check with tokbench verify against "),
    keys, el("span", "."));
}

async function showRegressions(id) {
  let doc;
  try { doc = await apiJson("/v1/jobs/" + encodeURIComponent(id) + "/result"); } catch (e) { return; }
  showSignature(doc);
  const reg = doc && doc.regressions;
  const box = $("#regressions");
  if (!reg || !box) return;
  box.hidden = false;
  box.replaceChildren();
  const history = reg.method === "history";
  const pct = ((history ? reg.min_effect : reg.tolerance) * 100).toFixed(1) + "%";
  const link = el("a", String(reg.base_job_id || "").slice(0, 8));
  link.href = "#/compare?base=" + encodeURIComponent(reg.base_job_id || "") + "&head=" + encodeURIComponent(id);
  const against = history
    ? [el("span", " (judged against up to " + reg.history_runs + " earlier runs; last good job "), link, el("span", ")")]
    : reg.base_job_id ? [el("span", " against job "), link, el("span", " (too little history: two runs compared)")] : [];
  if (!history && !reg.base_job_id) {
    box.className = "ok";
    box.append(el("span", "No earlier good job of this endpoint with the same labels to compare with."));
    return;
  }
  if (!reg.regressed) {
    box.className = "ok";
    box.append(el("span", history ? "No significant regression beyond " + pct : "No regression beyond " + pct), ...against);
  } else {
    box.className = "";
    box.append(el("b", (reg.cells || []).length + " regression(s)" + (history ? ", significant and beyond " : " beyond ") + pct), ...against);
    const ul = el("ul");
    for (const c of (reg.cells || []).slice(0, 50)) ul.append(el("li", why(c)));
    const mx = reg.matrix && reg.matrix.total_tps;
    if (mx && mx.outcome === "worse") ul.append(el("li", "the whole matrix (geometric mean of total tok/s): " + signed(mx.change_pct) + "%"));
    box.append(ul);
  }
  if (!history) return;
  /* the history of the first regressed decode cell, else of the first judged one */
  const judged = (reg.verdicts || []).filter(v => v.phase === "decode" && v.metric === "total_tps" && v.outcome !== "too_little_history");
  const pick = (reg.cells || []).find(c => c.phase === "decode" && c.metric === "total_tps") || judged[0];
  if (!pick) return;
  try {
    const job = await apiJson("/v1/jobs/" + encodeURIComponent(id));
    const q = new URLSearchParams({ endpoint_id: job.endpoint_id, labels: JSON.stringify(job.labels || {}),
      phase: "decode", context: String(pick.context), concurrency: String(pick.concurrency), metric: "total_tps" });
    const series = await apiJson("/v1/series?" + q.toString());
    box.append(historyChart(series, (pick.context_label || pick.context) + " × " + pick.concurrency + ": total tok/s, run by run"));
    q.delete("context");
    q.delete("concurrency");
    const matrix = await apiJson("/v1/series?" + q.toString());
    box.append(historyChart(matrix, "The matrix: geometric mean of total tok/s over each cell's median, run by run"));
  } catch (e) { /* the chart is a nicety */ }
}

function signed(x) {
  const n = Number(x);
  return (n > 0 ? "+" : n < 0 ? "\u2212" : "") + Math.abs(n).toFixed(1);
}

/* One regression in words, as tb_regress_why writes it. */
function why(c) {
  const where = c.phase === "prefill" ? (c.context_label || c.context) + " prefill"
    : (c.context_label || c.context) + " × " + c.concurrency;
  if (c.kind === "lost") return where + ": lost (valid before, " + c.head + " now)";
  if (c.fallback || !c.ci95_pct) return where + " " + c.metric + ": " + signed(c.change_pct) + "% (against the last good run: too little history)";
  const p = c.p < 0.001 ? "p < 0.001" : "p = " + Number(c.p).toFixed(3);
  return where + " " + c.metric + ": " + signed(c.change_pct) + "% (CI " + signed(c.ci95_pct[0]) + "\u2026" +
    signed(c.ci95_pct[1]) + "%, " + p + ", " + c.earlier_runs + " earlier runs)";
}

/* A series as an SVG line: points with their 95% intervals as error bars,
 * change points as dashed verticals. */
function historyChart(series, title) {
  const NS = "http://www.w3.org/2000/svg";
  const pts = series.points || [];
  const fig = el("figure");
  fig.append(el("figcaption", title));
  if (pts.length < 2) return fig;
  const W = 640, H = 180, L = 56, R = 8, T = 8, B = 20;
  const lo = Math.min(...pts.map(p => p.ci95 ? p.ci95[0] : p.value));
  const hi = Math.max(...pts.map(p => p.ci95 ? p.ci95[1] : p.value));
  const pad = (hi - lo) * 0.1 || Math.abs(hi) * 0.05 || 1;
  const y = v => T + (H - T - B) * (1 - (v - (lo - pad)) / ((hi + pad) - (lo - pad)));
  const x = i => L + (W - L - R) * i / (pts.length - 1);
  const svg = document.createElementNS(NS, "svg");
  svg.setAttribute("viewBox", "0 0 " + W + " " + H);
  svg.setAttribute("width", "100%");
  svg.setAttribute("role", "img");
  svg.setAttribute("aria-label", title);
  const add = (tag, attrs, text) => {
    const e = document.createElementNS(NS, tag);
    for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
    if (text !== undefined) e.textContent = text;
    svg.append(e);
    return e;
  };
  add("text", { x: 2, y: y(hi) + 4, "font-size": 11 }, Math.round(hi));
  add("text", { x: 2, y: y(lo) + 4, "font-size": 11 }, Math.round(lo));
  for (const c of series.change_points || [])
    add("line", { x1: x(c.index) - 0.5 * (W - L - R) / (pts.length - 1), x2: x(c.index) - 0.5 * (W - L - R) / (pts.length - 1),
                  y1: T, y2: H - B, stroke: "#d32f2f", "stroke-dasharray": "4 3" });
  pts.forEach((p, i) => {
    if (p.ci95) add("line", { x1: x(i), x2: x(i), y1: y(p.ci95[0]), y2: y(p.ci95[1]), stroke: "#90a4ae" });
  });
  add("polyline", { points: pts.map((p, i) => x(i) + "," + y(p.value)).join(" "), fill: "none", stroke: "#1565c0", "stroke-width": 1.5 });
  pts.forEach((p, i) => {
    const dot = add("circle", { cx: x(i), cy: y(p.value), r: 3, fill: i === pts.length - 1 ? "#d32f2f" : "#1565c0" });
    const tip = document.createElementNS(NS, "title");
    tip.textContent = fmtTime(p.at) + ": " + Number(p.value).toFixed(1) + (p.ci95 ? " (" + p.ci95[0].toFixed(1) + "\u2026" + p.ci95[1].toFixed(1) + ")" : "");
    dot.append(tip);
  });
  add("text", { x: L, y: H - 4, "font-size": 11 }, "oldest");
  add("text", { x: W - R - 40, y: H - 4, "font-size": 11 }, "newest");
  fig.append(svg);
  return fig;
}

/* Server-Sent Events over fetch: "id:", "event:", "data:" lines, events
 * split by a blank line, possibly across reads. */
async function follow(id, job) {
  const ctl = new AbortController();
  streams.push(ctl);
  const live = $("#job-live");
  let lastId = null, refresh = null, done = false, backoff = 1000;
  const state = Object.assign({}, job);
  const scheduleReport = () => {
    if (refresh) return;
    refresh = setTimeout(() => { refresh = null; loadReport(id); }, 1500);
  };
  while (!done && !ctl.signal.aborted) {
    try {
      const headers = { "Accept": "text/event-stream" };
      if (lastId) headers["Last-Event-ID"] = lastId;
      const resp = await api("/v1/jobs/" + encodeURIComponent(id) + "/events", { headers, signal: ctl.signal });
      if (live) live.hidden = false;
      backoff = 1000;
      const reader = resp.body.getReader();
      const dec = new TextDecoder();
      let buf = "";
      for (;;) {
        const { value, done: eof } = await reader.read();
        if (eof) break;
        buf += dec.decode(value, { stream: true }).replace(/\r\n?/g, "\n");
        let cut;
        while ((cut = buf.indexOf("\n\n")) >= 0) {
          const block = buf.slice(0, cut); buf = buf.slice(cut + 2);
          let ev = "message", data = [];
          for (const line of block.split("\n")) {
            if (line.startsWith(":")) continue;
            const i = line.indexOf(":");
            const f = i < 0 ? line : line.slice(0, i);
            const v = i < 0 ? "" : line.slice(i + 1).replace(/^ /, "");
            if (f === "id") lastId = v; else if (f === "event") ev = v; else if (f === "data") data.push(v);
          }
          if (!data.length) continue;
          let d; try { d = JSON.parse(data.join("\n")); } catch (e) { continue; }
          if (ev === "progress" || ev === "cell") {
            state.progress = Object.assign({}, state.progress || {}, d.progress || d);
            if (ev === "cell") {
              state.progress.cells_done = (d.cells_done !== undefined) ? d.cells_done : (state.progress.cells_done || 0);
              scheduleReport();
            }
          } else if (ev === "state") {
            state.state = d.state || state.state;
            if (d.error !== undefined) state.error = d.error;
          }
          renderJob(state);
          if (TERMINAL.has(state.state)) done = true;
        }
        if (done) break;
      }
      if (done) { try { reader.cancel(); } catch (e) { /* closed */ } }
    } catch (e) {
      if (ctl.signal.aborted) return;
      if (e.status && e.status < 500 && e.status !== 429) { $("#job-error").textContent = e.message; return; }
    }
    if (!done && !ctl.signal.aborted) {
      await new Promise((r) => setTimeout(r, backoff));
      backoff = Math.min(backoff * 2, 15000);
      try {
        const j = await apiJson("/v1/jobs/" + encodeURIComponent(id));
        Object.assign(state, j); renderJob(state);
        if (TERMINAL.has(j.state)) done = true;
      } catch (e) { /* retried above */ }
    }
  }
  if (live) live.hidden = true;
  if (ctl.signal.aborted) return;
  try { renderJob(await apiJson("/v1/jobs/" + encodeURIComponent(id))); } catch (e) { /* shown */ }
  await loadReport(id);
  showRegressions(id);
}

async function download(id, format) {
  try {
    const blob = await (await api("/v1/jobs/" + encodeURIComponent(id) + "/report?format=" + format)).blob();
    const url = URL.createObjectURL(blob);
    const a = el("a"); a.href = url;
    a.download = "tokbench-" + id + "." + (format === "md" ? "md" : format);
    document.body.append(a); a.click(); a.remove();
    setTimeout(() => URL.revokeObjectURL(url), 10000);
  } catch (e) { $("#job-error").textContent = e.message; }
}

/* A read-only link to the job's report for people without a key
 * (POST /v1/jobs/{id}/shares): its URL holds the token, shown this once;
 * Revoke deletes the share, and the link answers 404 from then on. */
async function share(id, labels) {
  const body = $("#share-private").checked ? { private_labels: Object.keys(labels) } : {};
  try {
    const s = await apiJson("/v1/jobs/" + encodeURIComponent(id) + "/shares", {
      method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body) });
    const url = $("#share-url");
    url.value = s.url;
    $("#share-note").textContent = "anyone with the link can read this report" +
      (s.expires_at ? " until " + fmtTime(s.expires_at) : "") + "; it is shown only now";
    $("#share-out").hidden = false;
    url.focus(); url.select();
    const revoke = $("#share-revoke");
    revoke.disabled = false;
    revoke.onclick = async () => {
      try {
        await api("/v1/shares/" + encodeURIComponent(s.id), { method: "DELETE" });
        $("#share-note").textContent = "revoked: the link opens nothing now";
        revoke.disabled = true;
      } catch (e) { $("#job-error").textContent = e.message; }
    };
  } catch (e) { $("#job-error").textContent = e.message; }
}

/* ------------------------------------------------------------- compare */

async function viewCompare(params) {
  show("#tpl-compare");
  const base = $("#base"), head = $("#head");
  try {
    const page = await apiJson("/v1/jobs?limit=100&state=succeeded");
    for (const j of page.jobs || []) {
      const name = String(j.id).slice(0, 8) + " · " + fmtTime(j.finished_at || j.created_at) +
        Object.entries(j.labels || {}).map(([k, v]) => " " + k + "=" + v).join("");
      for (const sel of [base, head]) { const o = el("option", name); o.value = j.id; sel.append(o); }
    }
  } catch (e) { $("#compare-error").textContent = e.message; }
  const want = (sel, v) => {
    if (!v) return;
    if (![...sel.options].some((o) => o.value === v)) { const o = el("option", v); o.value = v; sel.append(o); }
    sel.value = v;
  };
  want(base, params.get("base")); want(head, params.get("head"));
  if (!params.get("base") && base.options.length > 1) base.selectedIndex = 1;
  async function run() {
    $("#compare-error").textContent = "";
    const q = new URLSearchParams({ base: base.value, head: head.value, format: "html" });
    const tol = $("#tolerance").value;
    if (tol !== "") q.set("tolerance", tol);
    try {
      const html = await (await api("/v1/compare?" + q)).text();
      setFrame($("#compare-report"), html);
    } catch (e) { $("#compare-error").textContent = e.message; }
  }
  $("#compare-form").addEventListener("submit", (ev) => { ev.preventDefault(); run(); });
  if (params.get("base") && params.get("head")) run();
}

/* ------------------------------------------------------------ frontier */

const PALETTE = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2",
  "#17becf", "#7f7f7f", "#bcbd22"];
const SVGNS = "http://www.w3.org/2000/svg";
const Y_LABEL = { tps_per_gpu: "tok/s per GPU", cost_per_m_output_tokens: "cost per M output tokens",
  j_per_output_token: "J per output token" };

function svgEl(tag, attrs, text) {
  const e = document.createElementNS(SVGNS, tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, String(v));
  if (text !== undefined) e.textContent = String(text);
  return e;
}

function pointText(p) {
  const f = (v, d) => (typeof v === "number" ? v.toFixed(d) : "—");
  return p.endpoint + " · " + p.context + " × " + p.concurrency + " · " + f(p.x, 1) +
    " tok/s per user · " + Y_LABEL[p.yname] + " " + f(p.y, 3) + " [" + f(p.y_ci95[0], 3) + ", " +
    f(p.y_ci95[1], 3) + "] · TTFT " + f(p.ttft_p50_ms, 0) + " ms · job " + p.job_id.slice(0, 8) +
    (p.frontier ? " · on the frontier" : "");
}

/* The chart: x tok/s per user, y the axis chosen (lower better for cost and
 * joules: the axis is drawn so that better is up either way), points
 * coloured by configuration, error bars, the frontier line. */
function drawFrontier(doc) {
  const svg = $("#frontier-chart");
  svg.replaceChildren();
  const W = 960, H = 480, L = 70, R = 20, T = 20, B = 50;
  const pts = doc.points || [];
  for (const p of pts) p.yname = doc.y;
  if (!pts.length) {
    svg.append(svgEl("text", { x: W / 2, y: H / 2, "text-anchor": "middle" }, "no points yet"));
    return;
  }
  const lowerBetter = doc.better === "lower";
  const xs = pts.flatMap((p) => p.x_ci95), ys = pts.flatMap((p) => p.y_ci95);
  const x1 = Math.max(...xs) * 1.05 || 1, y1 = Math.max(...ys) * 1.05 || 1;
  const sx = (v) => L + (W - L - R) * v / x1;
  const sy = (v) => lowerBetter ? T + (H - T - B) * v / y1 : H - B - (H - T - B) * v / y1;
  svg.append(svgEl("line", { x1: L, y1: H - B, x2: W - R, y2: H - B, stroke: "#333" }));
  svg.append(svgEl("line", { x1: L, y1: T, x2: L, y2: H - B, stroke: "#333" }));
  svg.append(svgEl("text", { x: (L + W - R) / 2, y: H - 12, "text-anchor": "middle" },
    "tok/s per user"));
  svg.append(svgEl("text", { x: 14, y: (T + H - B) / 2, "text-anchor": "middle",
    transform: "rotate(-90 14 " + (T + H - B) / 2 + ")", id: "frontier-ylabel" },
    Y_LABEL[doc.y] + (lowerBetter ? " (lower is better, drawn up)" : "")));
  for (let i = 0; i <= 4; i++) {
    svg.append(svgEl("text", { x: sx(x1 * i / 4), y: H - B + 16, "text-anchor": "middle",
      "font-size": 11 }, (x1 * i / 4).toPrecision(3)));
    svg.append(svgEl("text", { x: L - 6, y: sy(y1 * i / 4) + 4, "text-anchor": "end",
      "font-size": 11 }, (y1 * i / 4).toPrecision(3)));
  }
  const colour = new Map();
  for (const p of pts) if (!colour.has(p.config.key)) colour.set(p.config.key, PALETTE[colour.size % PALETTE.length]);
  const front = pts.filter((p) => p.frontier).sort((a, b) => a.x - b.x);
  if (front.length > 1)
    svg.append(svgEl("polyline", { id: "frontier-line", fill: "none", stroke: "#333",
      "stroke-dasharray": "5 3", points: front.map((p) => sx(p.x) + "," + sy(p.y)).join(" ") }));
  pts.forEach((p, i) => {
    const c = colour.get(p.config.key);
    svg.append(svgEl("path", { d: "M" + sx(p.x_ci95[0]) + "," + sy(p.y) + "H" + sx(p.x_ci95[1]) +
      "M" + sx(p.x) + "," + sy(p.y_ci95[0]) + "V" + sy(p.y_ci95[1]), stroke: c, "stroke-width": 1 }));
    const a = svgEl("a", { href: "#/jobs/" + p.job_id });
    const dot = svgEl("circle", { cx: sx(p.x), cy: sy(p.y), r: p.frontier ? 6 : 4, fill: c,
      stroke: p.frontier ? "#000" : "none", "data-i": i, class: "pt" + (p.frontier ? " front" : "") });
    dot.append(svgEl("title", {}, pointText(p)));
    dot.addEventListener("mouseenter", () => { $("#frontier-hover").textContent = pointText(p); });
    a.append(dot);
    svg.append(a);
  });
  const legend = $("#frontier-legend");
  legend.replaceChildren();
  for (const [k, c] of colour) {
    const s = el("span", k, "label");
    s.style.borderLeft = "12px solid " + c;
    legend.append(s);
  }
}

async function viewFrontier(params) {
  show("#tpl-frontier");
  if (params.get("y")) $("#frontier-y").value = params.get("y");
  let seq = 0; /* only the newest request's answer is drawn */
  async function run() {
    const mine = ++seq;
    $("#frontier-error").textContent = "";
    const q = new URLSearchParams({ y: $("#frontier-y").value });
    const lab = $("#frontier-labels").value.trim();
    if (lab) q.set("labels", lab);
    const ttft = $("#slo-ttft").value, conc = $("#slo-conc").value;
    if (ttft !== "") q.set("ttft_p50_ms", ttft);
    if (conc !== "") q.set("concurrency", conc);
    try {
      const doc = await apiJson("/v1/pareto?" + q);
      if (mine !== seq) return;
      drawFrontier(doc);
      const b = doc.best;
      $("#frontier-best").textContent = !b ? doc.points.length + " points, " + doc.frontier +
        " on the frontier" : b.answer === "found" ? "Best meeting the SLOs: " + pointText(
          Object.assign(b.best, { yname: doc.y })) + " (" + b.meeting + " meet them, " + b.ties +
          " within its interval)" : "No configuration yet meets these SLOs.";
    } catch (e) { $("#frontier-error").textContent = e.message; }
  }
  $("#frontier-form").addEventListener("submit", (ev) => { ev.preventDefault(); run(); });
  $("#frontier-y").addEventListener("change", run);
  run();
}

/* ----------------------------------------------------------- schedules */

/* What a schedule runs, in a few words. */
function scheduleWhat(s) {
  if (s.preset) return "preset " + s.preset;
  const sp = s.spec || {};
  const ctx = (sp.contexts || []).map(c => c >= 1024 && c % 1024 === 0 ? c / 1024 + "K" : String(c));
  return "spec: " + (ctx.length ? ctx.join(", ") : "contexts from the server") +
    (sp.concurrency ? " \u00d7 " + sp.concurrency.join(", ") : "");
}

function scheduleRow(s, reload, err) {
  const tr = el("tr");
  tr.dataset.id = s.id;
  const tdId = el("td");
  tdId.append(el("code", String(s.id).slice(0, 8)), el("br"), el("span", scheduleWhat(s), "muted"));
  const tdL = el("td"); labelsInto(tdL, s.labels); tdL.prepend(el("span", s.runs + " ", ""));
  const tdWhen = el("td");
  tdWhen.append(el("code", s.cron), el("br"), el("span", s.timezone, "muted"));
  const tdState = el("td");
  tdState.append(el("span", s.paused ? "paused" : "active", "state " + (s.paused ? "paused" : "active")));
  if (s.paused_reason) tdState.append(el("div", s.paused_reason, "error"));
  if (s.last_error && !s.paused_reason) tdState.append(el("div", s.last_error, "muted"));
  const tdLast = el("td");
  if (s.last_job_id) {
    const a = el("a", fmtTime(s.last_run_at));
    a.href = "#/jobs/" + encodeURIComponent(s.last_job_id);
    tdLast.append(a);
  }
  const tdAct = el("td");
  const toggle = el("button", s.paused ? "Resume" : "Pause");
  toggle.type = "button";
  toggle.dataset.action = s.paused ? "resume" : "pause";
  const del = el("button", "Delete");
  del.type = "button";
  del.dataset.action = "delete";
  const act = async (method, body) => {
    err.textContent = "";
    try {
      const opts = { method };
      if (body) { opts.headers = { "Content-Type": "application/json" }; opts.body = JSON.stringify(body); }
      await api("/v1/schedules/" + encodeURIComponent(s.id), opts);
      await reload();
    } catch (e) { err.textContent = e.message; }
  };
  toggle.addEventListener("click", () => act("PATCH", { paused: !s.paused }));
  del.addEventListener("click", () => act("DELETE"));
  tdAct.append(toggle, del);
  tr.append(tdId, tdL, tdWhen, tdState, el("td", s.paused ? "" : fmtTime(s.next_run_at)), tdLast, tdAct);
  return tr;
}

async function viewSchedules() {
  show("#tpl-schedules");
  const tbody = $("#schedules tbody"), err = $("#schedules-error"), ferr = $("#sched-form-error");
  let zone = "UTC";
  try { zone = Intl.DateTimeFormat().resolvedOptions().timeZone || "UTC"; } catch (e) { /* UTC */ }
  $("#sched-tz").value = zone;
  async function load() {
    try {
      const doc = await apiJson("/v1/schedules");
      tbody.replaceChildren();
      for (const s of doc.schedules || []) tbody.append(scheduleRow(s, load, err));
      if (!(doc.schedules || []).length) {
        const tr = el("tr"); const td = el("td", "No schedules yet.", "muted"); td.colSpan = 7;
        tr.append(td); tbody.append(tr);
      }
    } catch (e) { err.textContent = e.message; }
  }
  try {
    const [eps, ps] = await Promise.all([apiJson("/v1/endpoints"), apiJson("/v1/presets")]);
    for (const e of eps.endpoints || []) {
      const o = el("option", e.name); o.value = e.id; $("#sched-endpoint").append(o);
    }
    for (const p of ps.presets || []) {
      const o = el("option", p.name); o.value = p.name; $("#sched-preset").append(o);
    }
  } catch (e) { ferr.textContent = e.message; }
  const spec = $("#sched-spec"), preset = $("#sched-preset");
  preset.addEventListener("change", () => { spec.disabled = !!preset.value; });
  $("#sched-form").addEventListener("submit", async (ev) => {
    ev.preventDefault();
    ferr.textContent = "";
    const body = { endpoint_id: $("#sched-endpoint").value, cron: $("#sched-cron").value.trim(),
      timezone: $("#sched-tz").value.trim(), paused: $("#sched-paused").checked };
    try {
      if (preset.value) body.preset = preset.value;
      else body.spec = JSON.parse(spec.value || "{}");
      const labels = $("#sched-labels").value.trim();
      if (labels) body.labels = JSON.parse(labels);
    } catch (e) { ferr.textContent = "not JSON: " + e.message; return; }
    try {
      await apiJson("/v1/schedules", { method: "POST", headers: { "Content-Type": "application/json" },
        body: JSON.stringify(body) });
      await load();
    } catch (e) { ferr.textContent = e.message; }
  });
  await load();
}

/* --------------------------------------------------------------- routes */

function route() {
  stopStreams();
  if (!apiKey()) { viewSignin(); return; }
  $("#nav").hidden = false;
  const h = location.hash.replace(/^#/, "") || "/";
  const [path, query] = h.split("?");
  const m = path.match(/^\/jobs\/([0-9a-fA-F-]{36})$/);
  if (m) viewJob(m[1]);
  else if (path === "/compare") viewCompare(new URLSearchParams(query || ""));
  else if (path === "/frontier") viewFrontier(new URLSearchParams(query || ""));
  else if (path === "/schedules") viewSchedules();
  else viewJobs();
}

window.addEventListener("hashchange", route);
document.addEventListener("DOMContentLoaded", () => {
  $("#signout").addEventListener("click", signOut);
  route();
});
