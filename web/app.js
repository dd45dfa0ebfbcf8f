/*
 * tokbench web: a small frontend over the public API, nothing else.
 *
 * - The API key lives in sessionStorage (this tab only) and goes out as
 *   "Authorization: Bearer" on every call.
 * - Routes (location.hash): #/ jobs list, #/jobs/<id> job page, #/compare.
 * - The job page follows GET /v1/jobs/{id}/events: Server-Sent Events read
 *   with fetch() streaming, because EventSource cannot send the
 *   Authorization header; it reconnects with Last-Event-ID.
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

async function showRegressions(id) {
  let doc;
  try { doc = await apiJson("/v1/jobs/" + encodeURIComponent(id) + "/result"); } catch (e) { return; }
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
  else viewJobs();
}

window.addEventListener("hashchange", route);
document.addEventListener("DOMContentLoaded", () => {
  $("#signout").addEventListener("click", signOut);
  route();
});
