// The dashboard's script: a file of its own, not inline, so the page runs under the API's
// content security policy (scripts from this origin only).
"use strict";
const tokenInput = document.getElementById("token");
tokenInput.value = sessionStorage.getItem("drsvc-token") || "";
tokenInput.addEventListener("change", () => sessionStorage.setItem("drsvc-token", tokenInput.value));

function headers() {
  const h = {"Content-Type": "application/json"};
  if (tokenInput.value) h["Authorization"] = "Bearer " + tokenInput.value;
  return h;
}
async function call(method, path, body) {
  const answer = await fetch(path, {method, headers: headers(), body: body ? JSON.stringify(body) : undefined});
  const doc = await answer.json().catch(() => ({}));
  if (!answer.ok) {
    const err = new Error((doc.error && doc.error.message) || answer.statusText);
    err.status = answer.status;
    throw err;
  }
  return doc;
}
function say(text, style) {
  const m = document.getElementById("message");
  m.textContent = text; m.className = style || "";
}
function cell(row, content, style) {
  const td = row.insertCell();
  if (content instanceof Node) td.appendChild(content); else td.textContent = content ?? "–";
  if (style) td.className = style;
  return td;
}
function fill(id, rows, render) {
  const body = document.querySelector("#" + id + " tbody");
  body.replaceChildren();
  for (const r of rows) render(body.insertRow(), r);
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
async function refreshFlows() {
  const doc = await call("GET", "/v1/flows");
  const now = Date.now() / 1000;
  fill("flows", doc.flows, (row, f) => {
    const copied = f.partitions.reduce((s, p) => s + (p.replicated_offset || 0), 0);
    const h = history[f.flow] = history[f.flow] || {lag: [], last: null, rate: null};
    if (h.last && now > h.last.t) h.rate = Math.max(0, (copied - h.last.copied) / (now - h.last.t));
    h.last = {t: now, copied};
    h.lag.push(f.lag || 0); if (h.lag.length > 60) h.lag.shift();
    row.dataset.flow = f.flow;
    cell(row, f.flow);
    cell(row, f.error ? "unreadable" : f.state, f.error ? "bad" : (f.lag ? "warn" : "ok"));
    cell(row, f.lag);
    cell(row, h.rate === null ? "…" : Math.round(h.rate));
    cell(row, spark(h.lag));
  });
}
async function refreshClusters() {
  const rows = await call("GET", "/v1/clusters");
  fill("clusters", rows, (row, c) => {
    row.dataset.cluster = c.cluster;
    cell(row, c.cluster);
    cell(row, c.reachable ? "yes" : "no", c.reachable ? "ok" : "bad");
    cell(row, c.consul_health, c.consul_health === "passing" ? "ok" : "bad");
    cell(row, c.heartbeats.map(h => `${h.observer}: ${h.state} (${h.freshness_s}s)`).join(", ") || "–");
  });
}
async function refreshApps() {
  const doc = await call("GET", "/v1/apps?exposure=false");
  document.getElementById("leader").textContent = "controller leader: " + (doc.controller_leader || "none");
  const clusters = [...document.querySelectorAll("#clusters tbody tr")].map(r => r.dataset.cluster);
  fill("apps", doc.apps, (row, a) => {
    row.dataset.app = a.app;
    cell(row, a.app);
    cell(row, a.active || "none (switching)", a.active ? "ok" : "warn").className += " active";
    cell(row, a.epoch);
    const moves = document.createElement("span");
    if (a.running) moves.textContent = "failover " + a.running + " running";
    else for (const to of clusters.filter(c => c !== a.active)) {
      const b = document.createElement("button");
      b.textContent = (to === a.preferred ? "Fail back to " : "Fail over to ") + to;
      b.dataset.to = to;
      b.addEventListener("click", () => plan(a.app, to, to === a.preferred ? "failback" : "failover"));
      moves.appendChild(b);
    }
    cell(row, moves);
  });
}
async function refreshFailovers() {
  const rows = (await call("GET", "/v1/failovers")).slice(-10).reverse();
  fill("failovers", rows, (row, f) => {
    cell(row, f.id); cell(row, f.app); cell(row, `${f.from} → ${f.to}`); cell(row, f.kind);
    cell(row, f.state, f.state === "completed" ? "ok" : (f.state === "running" ? "warn" : "bad"));
    cell(row, f.rpo_records);
  });
}

// -- events: long-poll
const events = [];
async function pollEvents(after) {
  try {
    const doc = await call("GET", `/v1/events?after=${after}&wait_s=10`);
    events.push(...doc.events);
    events.splice(0, Math.max(0, events.length - 20));
    fill("events", [...events].reverse(), (row, e) => {
      cell(row, new Date(e.at_ms).toLocaleTimeString()); cell(row, e.failover_id);
      cell(row, e.step); cell(row, e.outcome, e.outcome === "ok" ? "ok" : "bad");
    });
    setTimeout(() => pollEvents(doc.last_id), 100);
  } catch (err) {
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
    const doc = await call("POST", `/v1/apps/${app}/${kind}`, {to, dry_run: true});
    pending = {app, to, kind, expect_kind: doc.kind, expect_epoch: doc.epoch};
    document.getElementById("plan-title").textContent = `${kind} of ${app}: ${doc.from} → ${doc.to} (${doc.kind})`;
    document.getElementById("plan-notice").textContent = notice || "";
    document.getElementById("plan-epoch").textContent = `Planned at epoch ${doc.epoch}: it runs only if nothing has moved the application since.`;
    const steps = doc.steps.map((s, i) => `${i + 1}. ${s.name} (on failure: ${s.on_failure})`).join("\n");
    const groups = doc.groups.map(g => `group ${g.group} ${g.topic}-${g.partition} → ${g.target_offset} (${g.exact ? "exact" : g.reason})`).join("\n");
    document.getElementById("plan-body").textContent = steps + "\n\n" + (groups || "no committed groups") + (doc.note ? "\n\nnote: " + doc.note : "");
    document.getElementById("plan").style.display = "block";
  } catch (err) { say(`${notice ? notice + " " : ""}${kind} of ${app} refused: ${err.message}`, "bad"); }
}
document.getElementById("plan-cancel").addEventListener("click", () => {
  pending = null; document.getElementById("plan").style.display = "none";
});
document.getElementById("plan-confirm").addEventListener("click", async () => {
  const p = pending; pending = null;
  document.getElementById("plan").style.display = "none";
  if (!p) return;
  try {
    const record = await call("POST", `/v1/apps/${p.app}/${p.kind}`, {to: p.to, expect_kind: p.expect_kind, expect_epoch: p.expect_epoch});
    say(`${p.kind} ${record.id} of ${p.app} to ${p.to} started`, "ok");
  } catch (err) {
    if (err.status === 412) { say(CHANGED, "warn"); await plan(p.app, p.to, p.kind, CHANGED); return; }
    say(`${p.kind} of ${p.app} refused: ${err.message}`, "bad");
  }
});

function every(seconds, refresh) {
  const run = async () => {
    try { await refresh(); } catch (err) { say(err.message, "bad"); }
    setTimeout(run, seconds * 1000);
  };
  run();
}
every(5, refreshClusters);
every(3, refreshFlows);
every(2, refreshApps);
every(3, refreshFailovers);
pollEvents(0);
