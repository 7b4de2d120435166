"""A scenario's HTML report (one self-contained file): the verdict, replication lag over time
with the faults shaded, the fault and failover timeline, per-partition loss and duplicate
counts, and the JSON verdict. Building it is pure (:func:`build_report`); only
:func:`write_report` writes."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from html import escape
from pathlib import Path
from typing import Any

from chaos.report import svg

STYLE = (
    "body{font-family:sans-serif;max-width:900px;margin:2em auto;color:#222}"
    "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}"
    "th{background:#f3f3f3}td.l,th.l{text-align:left}.pass{color:#1a7f37}.fail{color:#c62828}"
    "pre{background:#f6f8fa;padding:1em;overflow:auto;font-size:12px}"
)


def _origin(faults: Sequence[Mapping[str, Any]], lag: Sequence[Mapping[str, Any]]) -> int:
    starts = [int(f["start_ms"]) for f in faults] + [int(s["at_ms"]) for s in lag]
    return min(starts) if starts else 0


def lag_series(
    lag: Sequence[Mapping[str, Any]], origin_ms: int
) -> dict[str, list[tuple[float, float | None]]]:
    """Per flow, (seconds since ``origin_ms``, lag or None where it could not be read)."""
    series: dict[str, list[tuple[float, float | None]]] = {}
    for sample in lag:
        if sample["flow"] == "*":
            for points in series.values():
                points.append(((sample["at_ms"] - origin_ms) / 1000, None))
            continue
        value = sample.get("lag")
        series.setdefault(str(sample["flow"]), []).append(
            ((sample["at_ms"] - origin_ms) / 1000, None if value is None else float(value))
        )
    return series


def intervals(
    faults: Sequence[Mapping[str, Any]], origin_ms: int
) -> list[tuple[str, float, float | None, str]]:
    rows = []
    for f in sorted(faults, key=lambda f: int(f["start_ms"])):
        end = None if f["end_ms"] is None else (int(f["end_ms"]) - origin_ms) / 1000
        rows.append(
            (
                f"{f['name']} {f['target']}",
                (int(f["start_ms"]) - origin_ms) / 1000,
                end,
                str(f["detail"]),
            )
        )
    return rows


def build_report(
    document: Mapping[str, Any],
    details: Mapping[str, Any],
    faults: Sequence[Mapping[str, Any]],
    lag: Sequence[Mapping[str, Any]],
    partitions: Sequence[Mapping[str, Any]],
) -> str:
    origin = _origin(faults, lag)
    spans = intervals(faults, origin)
    shaded = [(s, e if e is not None else s, label.split(" ")[0]) for label, s, e, _ in spans]
    passed = bool(document.get("passed"))
    word = '<b class="pass">PASSED</b>' if passed else '<b class="fail">FAILED</b>'
    checks = document.get("checks", {})
    check_rows = "".join(
        f'<tr><td class="l">{escape(k)}</td><td>{v}</td></tr>' for k, v in checks.items()
    )
    reasons = details.get("reasons", [])
    reason_html = (
        "<ul>" + "".join(f"<li>{escape(str(r))}</li>" for r in reasons) + "</ul>" if reasons else ""
    )
    part_rows = "".join(
        f'<tr><td class="l">{escape(p["cluster"])}</td><td class="l">{escape(p["topic"])}</td>'
        f"<td>{p['partition']}</td><td>{p['records']}</td><td>{p['lost']}</td>"
        f"<td>{p['duplicates']}</td></tr>"
        for p in partitions
    )
    groups = [
        (
            f"{p['cluster']}/{p['topic']}/{p['partition']}",
            {"lost": int(p["lost"]), "duplicates": int(p["duplicates"])},
        )
        for p in partitions
    ]
    bars_html = (
        svg.bars(groups)
        if any(p["lost"] or p["duplicates"] for p in partitions)
        else "<p>No partition lost or duplicated a record.</p>"
    )
    workload = details.get("workload", {})
    summary = ", ".join(f"{k} {v}" for k, v in workload.items())
    rpo = document.get("rpo_records")
    rto = document.get("rto_seconds")
    return f"""<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>chaos: {escape(str(document.get("scenario")))}</title>
<style>{STYLE}</style></head><body>
<h1>{escape(str(document.get("scenario")))}: {word}</h1>
<p>{escape(str(details.get("description", "")))}</p>
<p>delivery <b>{escape(str(details.get("delivery", "")))}</b>, seed {document.get("seed")},
faults: {escape(", ".join(details.get("faults_covered", [])))}<br>
workload: {escape(summary)}<br>
recovery point: {rpo} records (reported {document.get("rpo_reported_records")}),
recovery time: {"-" if rto is None else f"{rto} s"}</p>
{reason_html}
<h2>Checks</h2><table><tr><th class="l">check</th><th>violations</th></tr>{check_rows}</table>
<h2>Replication lag over time</h2>
<p>Records left to copy per flow (as <code>drsvc status</code> reads them), faults shaded;
gaps where a cluster could not be read.</p>
{svg.line_chart(lag_series(lag, origin), shaded, "seconds since the workload started", "records")}
<h2>Faults and failovers</h2>
{svg.timeline(spans, "seconds since the workload started")}
<h2>Per partition: lost and duplicated records</h2>
{bars_html}
<table><tr><th class="l">cluster</th><th class="l">topic</th><th>partition</th><th>records</th>
<th>lost</th><th>duplicates</th></tr>{part_rows}</table>
<h2>Verdict (JSON)</h2>
<pre>{escape(json.dumps(document, indent=2))}</pre>
<h2>The consistency job's verdict (JSON)</h2>
<pre>{escape(json.dumps(details.get("verdict", {}), indent=2, default=str))}</pre>
</body></html>
"""


def write_report(
    path: Path,
    document: Mapping[str, Any],
    details: Mapping[str, Any],
    faults: Sequence[Mapping[str, Any]],
    lag: Sequence[Mapping[str, Any]],
    partitions: Sequence[Mapping[str, Any]],
) -> Path:
    path.write_text(build_report(document, details, faults, lag, partitions))
    return path


def build_index(results: Sequence[Mapping[str, Any]], title: str) -> str:
    """A suite's page: one row per scenario with its numbers and a link to its report."""
    rows = []
    for r in results:
        word = '<b class="pass">passed</b>' if r.get("passed") else '<b class="fail">FAILED</b>'
        checks = r.get("checks", {})
        report = r.get("report_link") or r.get("report") or ""
        rows.append(
            f'<tr><td class="l"><a href="{escape(str(report))}">{escape(str(r["scenario"]))}'
            f'</a></td><td class="l">{escape(str(r.get("delivery", "")))}</td>'
            f'<td class="l">{escape(", ".join(r.get("faults", [])))}</td><td>{word}</td>'
            f"<td>{checks.get('lost', '-')}</td><td>{checks.get('duplicates', '-')}</td>"
            f"<td>{r.get('rpo_records')}</td><td>{r.get('rpo_reported_records')}</td>"
            f"<td>{r.get('rto_seconds')}</td><td>{r.get('elapsed_s', '')}</td></tr>"
        )
    return f"""<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>{escape(title)}</title><style>{STYLE}</style></head>
<body><h1>{escape(title)}</h1>
<table><tr><th class="l">scenario</th><th class="l">delivery</th><th class="l">faults</th>
<th>verdict</th><th>lost</th><th>duplicates</th><th>RPO</th><th>RPO reported</th><th>RTO s</th>
<th>took s</th></tr>{"".join(rows)}</table></body></html>
"""
