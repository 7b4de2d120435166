// The dashboard's script: a file of its own, not inline, so the page runs under the API's
// content security policy (scripts from this origin only). Its decisions (what a panel shows
// after a failed refresh, how a value is written) are the pure functions of dashboard_logic.js.
"use strict";
const tokenInput = document.getElementById("token");
tokenInput.value = sessionStorage.getItem("drsvc-token") || "";
tokenInput.addEventListener("change", () => sessionStorage.setItem("drsvc-token", tokenInput.value));

const L = DashboardLogic;
//: how long a read may take before the page stops waiting and says so (the data shown stays)
const CALL_TIMEOUT_MS = 10000;
//: a dry run probes the clusters, and a failover answers once its record is stored
const MOVE_TIMEOUT_MS = 60000;

function headers() {
  const h = {"Content-Type": "application/json"};
  if (tokenInput.value) h["Authorization"] = "Bearer " + tokenInput.value;
  return h;
}
// One call of the API: its JSON document, or an error (with the status when the API refused).
// An answer that is not JSON is an error too, never an empty document.
async function call(method, path, body, timeoutMs = CALL_TIMEOUT_MS) {
  const abort = new AbortController();
  const timer = setTimeout(() => abort.abort(), timeoutMs);
  try {
    const answer = await fetch(path, {method, headers: headers(), body: body ? JSON.stringify(body) : undefined, signal: abort.signal});
    let doc, unreadable = null;
    try { doc = await answer.json(); } catch (err) { unreadable = err; }
    if (!answer.ok) {
      const err = new Error((doc && doc.error && doc.error.message) || answer.statusText);
      err.status = answer.status;
      throw err;
    }
    if (unreadable) throw unreadable.name === "AbortError" ? unreadable : new Error("the answer is not JSON");
    return doc;
  } finally {
    clearTimeout(timer);
  }
}
function say(text, style) {
  const m = document.getElementById("message");
  m.textContent = text; m.className = style || "";
}
function cell(row, content, style) {
  const td = row.insertCell();
  if (content instanceof Node) td.appendChild(content); else td.textContent = L.shown(content);
  if (style) td.className = style;
  return td;
}
// Rows drawn into a new table body that replaces the old one only once every row is drawn: a
// row that cannot be drawn leaves the last good table on screen.
function fill(id, rows, render) {
  const body = document.createElement("tbody");
  for (const r of rows) render(body.insertRow(), r);
  document.querySelector("#" + id + " tbody").replaceWith(body);
}

// -- panels: each keeps its last good answer; a failed or timed-out refresh marks it stale
// ("last updated 37 s ago; refresh failed: ...") and leaves its data as it was.
const panels = {};
function showStatus(name) {
  const panel = panels[name];
  const status = document.getElementById(name + "-status");
  if (status) status.textContent = L.panelStatus(panel, Date.now());
  document.getElementById(name).closest("section").classList.toggle("stale", L.isStale(panel));
}
function panel(name, path, render) {
  panels[name] = L.emptyPanel();
  return async () => {
    try {
      const doc = await call("GET", path);
      const problem = L.problemWith(name, doc);
      if (problem) throw new Error(problem);
      render(doc);
      panels[name] = L.answered(panels[name], doc, Date.now());
    } catch (err) {
      panels[name] = L.refreshFailed(panels[name], L.failureText(err, CALL_TIMEOUT_MS), Date.now());
    }
    showStatus(name);
  };
}

// -- flows: lag and throughput history per flow, drawn as small charts
const history = {};
function spark(points) {
  const c = document.createElement("canvas");
  c.width = 120; c.height = 24;
  const g = c.getContext("2d");
  const max = Math.max(1, ...points);
  g.strokeStyle = "#0969da"; g.beginPath();
  points.forEach((v, i) => {
    const x = i * (c.width / Math.max(1, points.length - 1)), y = c.height - 2 - (v / max) * (c.height - 4);
    if (i) g.lineTo(x, y); else g.moveTo(x, y);
  });
  g.stroke();
  return c;
}
const refreshFlows = panel("flows", "/v1/flows", doc => {
  const now = Date.now() / 1000;
  fill("flows", doc.flows, (row, f) => {
    const h = history[f.flow] = history[f.flow] || {lag: [], last: null, rate: null};
    const sample = {t: now, copied: L.copiedRecords(f)};
    h.rate = L.copyRate(h.last, sample);
    h.last = sample;
    if (typeof f.lag === "number") { h.lag.push(f.lag); if (h.lag.length > 60) h.lag.shift(); }
    row.dataset.flow = f.flow;
    cell(row, f.flow);
    cell(row, f.error ? "unreadable" : f.state, f.error ? "bad" : (f.lag ? "warn" : "ok"));
    cell(row, f.lag);
    cell(row, h.rate === null ? null : Math.round(h.rate));
    cell(row, spark(h.lag));
  });
});
const refreshClusters = panel("clusters", "/v1/clusters", rows => {
  fill("clusters", rows, (row, c) => {
    row.dataset.cluster = c.cluster;
    cell(row, c.cluster);
    const answers = c.reachable === true ? "yes" : (c.reachable === false ? "no" : null);
    cell(row, answers, c.reachable ? "ok" : "bad");
    cell(row, c.consul_health, c.consul_health === "passing" ? "ok" : "bad");
    const seen = (c.heartbeats || []).map(h => `${h.observer}: ${h.state} (${L.shown(h.freshness_s)}s)`).join(", ");
    cell(row, seen || null);
  });
});
function knownClusters() {
  const doc = panels.clusters && panels.clusters.doc;
  return doc ? doc.map(c => c.cluster) : [];
}
const refreshApps = panel("apps", "/v1/apps?exposure=false", doc => {
  fill("apps", doc.apps, (row, a) => {
    row.dataset.app = a.app;
    cell(row, a.app);
    cell(row, a.active || "none (switching)", a.active ? "ok" : "warn").className += " active";
    cell(row, a.epoch);
    const moves = document.createElement("span");
    if (a.running) moves.textContent = "failover " + a.running + " running";
    else for (const to of knownClusters().filter(c => c !== a.active)) {
      const b = document.createElement("button");
      b.textContent = (to === a.preferred ? "Fail back to " : "Fail over to ") + to;
      b.dataset.to = to;
      b.addEventListener("click", () => plan(a.app, to, to === a.preferred ? "failback" : "failover"));
      moves.appendChild(b);
    }
    cell(row, moves);
  });
  document.getElementById("leader").textContent = "controller leader: " + (doc.controller_leader || "none");
});
function requester(by) {
  if (!by || by.kind === "unknown") return null;
  return `${by.kind}:${by.name || "?"}` + (by.role ? ` (${by.role})` : "");
}
const refreshFailovers = panel("failovers", "/v1/failovers", all => {
  fill("failovers", all.slice(-10).reverse(), (row, f) => {
    row.dataset.failover = f.id;
    cell(row, f.id); cell(row, f.app); cell(row, `${f.from} → ${f.to}`); cell(row, f.kind);
    cell(row, f.state, f.state === "completed" ? "ok" : (f.state === "running" ? "warn" : "bad"));
    cell(row, L.lostText(f)).title = L.lostTitle(f);
    cell(row, requester(f.requested_by));
  });
});

// -- events: long-poll (its own bound: the API waits up to 10 s for a new event)
const events = [];
panels.events = L.emptyPanel();
async function pollEvents(after) {
  try {
    const doc = await call("GET", `/v1/events?after=${encodeURIComponent(after)}&wait_s=10`, undefined, 20000);
    if (!doc || !Array.isArray(doc.events)) throw new Error("the answer for events is not in the expected shape");
    events.push(...doc.events);
    events.splice(0, Math.max(0, events.length - 20));
    fill("events", [...events].reverse(), (row, e) => {
      cell(row, new Date(e.at_ms).toLocaleTimeString()); cell(row, e.failover_id);
      cell(row, e.step); cell(row, e.outcome, e.outcome === "ok" ? "ok" : "bad");
    });
    panels.events = L.answered(panels.events, doc, Date.now());
    showStatus("events");
    setTimeout(() => pollEvents(doc.last_id), 100);
  } catch (err) {
    panels.events = L.refreshFailed(panels.events, L.failureText(err, 20000), Date.now());
    showStatus("events");
    setTimeout(() => pollEvents(after), 3000);
  }
}

// -- moving an application: the dry-run plan first, then the real thing. "Run it" sends the plan's
// kind and the epoch it was made at: if anything moved since, the API answers 412 and runs
// nothing, and the page shows the new plan instead.
const CHANGED = "The situation changed since the plan was shown: look again.";
let pending = null;
async function plan(app, to, kind, notice) {
  if (!tokenInput.value) { say("Enter the API token to move an application.", "bad"); tokenInput.focus(); return; }
  try {
    const doc = await call("POST", `/v1/apps/${app}/${kind}`, {to, dry_run: true}, MOVE_TIMEOUT_MS);
    pending = {app, to, kind, expect_kind: doc.kind, expect_epoch: doc.epoch};
    document.getElementById("plan-title").textContent = `${kind} of ${app}: ${doc.from} → ${doc.to} (${doc.kind})`;
    document.getElementById("plan-notice").textContent = notice || "";
    document.getElementById("plan-epoch").textContent = `Planned at epoch ${doc.epoch}: it runs only if nothing has moved the application since.`;
    const steps = doc.steps.map((s, i) => `${i + 1}. ${s.name} (on failure: ${s.on_failure})`).join("\n");
    const groups = doc.groups.map(g => `group ${g.group} ${g.topic}-${g.partition} → ${g.target_offset} (${g.exact ? "exact" : g.reason})`).join("\n");
    document.getElementById("plan-body").textContent = steps + "\n\n" + (groups || "no committed groups") + (doc.note ? "\n\nnote: " + doc.note : "");
    document.getElementById("plan").style.display = "block";
  } catch (err) { say(`${notice ? notice + " " : ""}${kind} of ${app} refused: ${L.failureText(err, MOVE_TIMEOUT_MS)}`, "bad"); }
}
document.getElementById("plan-cancel").addEventListener("click", () => {
  pending = null; document.getElementById("plan").style.display = "none";
});
document.getElementById("plan-confirm").addEventListener("click", async () => {
  const p = pending; pending = null;
  document.getElementById("plan").style.display = "none";
  if (!p) return;
  try {
    const record = await call("POST", `/v1/apps/${p.app}/${p.kind}`, {to: p.to, expect_kind: p.expect_kind, expect_epoch: p.expect_epoch}, MOVE_TIMEOUT_MS);
    say(`${p.kind} ${record.id} of ${p.app} to ${p.to} started`, "ok");
  } catch (err) {
    if (err.status === 412) { say(CHANGED, "warn"); await plan(p.app, p.to, p.kind, CHANGED); return; }
    say(`${p.kind} of ${p.app} refused: ${L.failureText(err, MOVE_TIMEOUT_MS)}`, "bad");
  }
});

function every(seconds, refresh) {
  const run = async () => {
    await refresh();
    setTimeout(run, seconds * 1000);
  };
  run();
}
every(5, refreshClusters);
every(3, refreshFlows);
every(2, refreshApps);
every(3, refreshFailovers);
pollEvents("0");
// the ages in the panels' status lines move on between refreshes
setInterval(() => Object.keys(panels).forEach(showStatus), 1000);
