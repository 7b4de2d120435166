// The dashboard's decisions, as pure functions (no DOM, no fetch): what a panel shows after an
// answer or a failed refresh, how a value is written, and which answers are whole enough to show.
// The page loads this file before dashboard.js; the unit tests load it in Node.
//
// The rule behind all of it: the page never shows a number that was not in an answer. A refresh
// that fails or times out keeps the last good answer on screen, marked with its age and the
// failure; a value an answer did not hold is written as "—", never as 0.
(function (root) {
  "use strict";

  const UNKNOWN = "—";

  // A panel before its first answer.
  function emptyPanel() {
    return {doc: null, atMs: null, error: null};
  }

  // The panel after a good answer: it replaces what was shown.
  function answered(panel, doc, nowMs) {
    return {doc, atMs: nowMs, error: null};
  }

  // The panel after a failed refresh: what was shown stays, with the failure noted.
  function refreshFailed(panel, error, nowMs) {
    return {doc: panel.doc, atMs: panel.atMs, error: String(error), failedAtMs: nowMs};
  }

  // "" while the last refresh worked; otherwise how old the data on screen is and why it is not
  // newer.
  function panelStatus(panel, nowMs) {
    if (panel.error === null) return "";
    if (panel.doc === null) return `no answer yet; refresh failed: ${panel.error}`;
    const age = Math.max(0, Math.round((nowMs - panel.atMs) / 1000));
    return `last updated ${age} s ago; refresh failed: ${panel.error}`;
  }

  function isStale(panel) {
    return panel.error !== null;
  }

  // A value as the page writes it: as answered, or "—" when the answer did not hold it.
  function shown(value) {
    if (value === null || value === undefined || Number.isNaN(value)) return UNKNOWN;
    return String(value);
  }

  // A failover's lost records (its recovery point): exact when the answer says so (at the switch
  // of a planned failover, or counted by the recovery of the returned site); a lower bound
  // otherwise ("≥ 3"), and unknown when even that is 0 (an unplanned failover whose lost
  // cluster's end was never seen, until the site is recovered).
  function lostText(failover) {
    const n = failover.rpo_records;
    if (typeof n !== "number") return UNKNOWN;
    if (failover.rpo_exact === true) return String(n);
    return n > 0 ? `≥ ${n}` : UNKNOWN;
  }

  // A short explanation of lostText, for the cell's title.
  function lostTitle(failover) {
    if (typeof failover.rpo_records !== "number") return "not in the answer";
    if (failover.rpo_exact === true) {
      return failover.rpo_measured_by === "recovery"
        ? "counted when the lost site returned and was recovered"
        : "records not replicated at the switch";
    }
    return "at least this many: the lost cluster's end was not seen; exact once it is recovered";
  }

  // Whether an answer has the shape a panel needs; a reason when it does not (it is then
  // treated as a failed refresh, never drawn as empty).
  function problemWith(panelName, doc) {
    const isList = Array.isArray;
    const wanted = {
      clusters: () => isList(doc),
      flows: () => doc !== null && typeof doc === "object" && isList(doc.flows),
      apps: () => doc !== null && typeof doc === "object" && isList(doc.apps),
      failovers: () => isList(doc),
    }[panelName];
    if (wanted === undefined) return `unknown panel ${panelName}`;
    return wanted() ? null : `the answer for ${panelName} is not in the expected shape`;
  }

  // Records copied by a flow, summed over its partitions; null when a partition's position is
  // not in the answer (a rate from a partial sum would be wrong).
  function copiedRecords(flow) {
    let total = 0;
    for (const p of flow.partitions || []) {
      if (typeof p.replicated_offset !== "number") return null;
      total += p.replicated_offset;
    }
    return total;
  }

  // Records per second between two samples {t (s), copied}; null when either is unknown.
  function copyRate(previous, current) {
    if (!previous || previous.copied === null || current.copied === null) return null;
    if (current.t <= previous.t) return null;
    return Math.max(0, (current.copied - previous.copied) / (current.t - previous.t));
  }

  // The text of a failed call: a timeout says so, a refusal names its status.
  function failureText(err, timeoutMs) {
    if (err && err.name === "AbortError") return `no answer within ${Math.round(timeoutMs / 1000)} s`;
    if (err && err.status) return `${err.status}: ${err.message}`;
    return (err && err.message) || String(err);
  }

  const DashboardLogic = {
    UNKNOWN, emptyPanel, answered, refreshFailed, panelStatus, isStale, shown, lostText,
    lostTitle, problemWith, copiedRecords, copyRate, failureText,
  };
  if (typeof module === "object" && module.exports) module.exports = DashboardLogic;
  else root.DashboardLogic = DashboardLogic;
})(typeof globalThis !== "undefined" ? globalThis : this);
