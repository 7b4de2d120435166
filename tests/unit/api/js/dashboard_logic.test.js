// The dashboard's pure decisions (drsvc/api/static/dashboard_logic.js), run by Node's own test
// runner from tests/unit/api/test_dashboard_logic.py: the path of the module is its argument.
"use strict";
const test = require("node:test");
const assert = require("node:assert/strict");
const L = require(process.env.DASHBOARD_LOGIC);

const APPS = {controller_leader: null, apps: [{app: "orders", active: "west", epoch: 4}]};

test("a failed refresh keeps the last good answer and says how old it is", () => {
  let panel = L.answered(L.emptyPanel(), APPS, 1000);
  assert.equal(L.panelStatus(panel, 2000), "");
  panel = L.refreshFailed(panel, "Failed to fetch", 30000);
  assert.deepEqual(panel.doc, APPS);
  assert.equal(L.isStale(panel), true);
  assert.equal(L.panelStatus(panel, 38000), "last updated 37 s ago; refresh failed: Failed to fetch");
  panel = L.refreshFailed(panel, "no answer within 10 s", 40000);
  assert.equal(panel.doc.apps[0].epoch, 4, "a second failure does not lose the data either");
  panel = L.answered(panel, {apps: []}, 41000);
  assert.equal(L.isStale(panel), false);
});

test("before a first answer a failure says so and shows nothing", () => {
  const panel = L.refreshFailed(L.emptyPanel(), "401: a bearer token is required", 5);
  assert.equal(panel.doc, null);
  assert.equal(L.panelStatus(panel, 9), "no answer yet; refresh failed: 401: a bearer token is required");
});

test("a value the answer did not hold is a dash, never zero", () => {
  assert.equal(L.shown(undefined), "—");
  assert.equal(L.shown(null), "—");
  assert.equal(L.shown(NaN), "—");
  assert.equal(L.shown(0), "0");
  assert.equal(L.shown(4), "4");
});

test("the lost count is exact, a lower bound, or unknown, as the answer says", () => {
  assert.equal(L.lostText({rpo_records: 0, rpo_exact: true, rpo_measured_by: "switch"}), "0");
  assert.equal(L.lostText({rpo_records: 0, rpo_exact: false, rpo_measured_by: "switch"}), "—");
  assert.equal(L.lostText({rpo_records: 3, rpo_exact: false, rpo_measured_by: "switch"}), "≥ 3");
  assert.equal(L.lostText({rpo_records: 1, rpo_exact: true, rpo_measured_by: "recovery"}), "1");
  assert.equal(L.lostText({}), "—");
  assert.match(L.lostTitle({rpo_records: 1, rpo_exact: true, rpo_measured_by: "recovery"}), /recovered/);
});

test("an answer of the wrong shape is a failure, not an empty panel", () => {
  assert.equal(L.problemWith("apps", APPS), null);
  assert.match(L.problemWith("apps", {}), /not in the expected shape/);
  assert.match(L.problemWith("failovers", {error: {}}), /failovers/);
  assert.equal(L.problemWith("failovers", []), null);
  assert.match(L.problemWith("flows", null), /flows/);
  assert.equal(L.problemWith("clusters", [{cluster: "east"}]), null);
});

test("a copy rate needs both samples whole", () => {
  const flow = {partitions: [{replicated_offset: 10}, {replicated_offset: 5}]};
  assert.equal(L.copiedRecords(flow), 15);
  assert.equal(L.copiedRecords({partitions: [{replicated_offset: null}]}), null);
  assert.equal(L.copyRate(null, {t: 2, copied: 15}), null);
  assert.equal(L.copyRate({t: 1, copied: 5}, {t: 3, copied: 15}), 5);
  assert.equal(L.copyRate({t: 1, copied: null}, {t: 3, copied: 15}), null);
});

test("a timeout and a refusal are named", () => {
  const abort = new Error("aborted"); abort.name = "AbortError";
  assert.equal(L.failureText(abort, 10000), "no answer within 10 s");
  const refused = new Error("forbidden"); refused.status = 403;
  assert.equal(L.failureText(refused, 10000), "403: forbidden");
  assert.equal(L.failureText(new TypeError("Failed to fetch"), 10000), "Failed to fetch");
});
