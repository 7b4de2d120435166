"""When a scenario passes, and its recovery time (pure functions of its verdict and history).

The rules (issue 14): zero lost apart from the recovery point on site loss, which must equal
what drsvc reported; zero duplicates in exactly-once mode (counted and reported at least once);
zero reordered, altered, looped, skipped after a failover or aborted records seen; zero re-read
after a planned failover. Issue 32 adds "never two active": zero records or group commits that
landed on a cluster after another was activated (the consistency job's ``two_active``), and no
moment at which the clients' leases let one client use one cluster while another used a
different one (:mod:`chaos.lease_overlap`). A scenario also fails when a fault it scheduled was
not injected and healed, when a drill's or a move's failover did not complete, or when the run
itself went wrong.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from chaos.lease_overlap import Overlap
from drsvc.verify.verdict import ALWAYS_FATAL

#: the ``checks`` object of ``chaos run --json``, in order
SCENARIO_CHECKS = (
    "lost",
    "duplicates",
    "reordered",
    "altered",
    "loops",
    "skipped_after_failover",
    "reread_after_failover",
    "two_active",
)

#: the consistency job's checks that fail a run whenever they count anything
ALWAYS_ZERO = ALWAYS_FATAL


def judge(
    verdict: Mapping[str, Any],
    *,
    exactly_once: bool,
    faults: Iterable[Mapping[str, Any]],
    expected_faults: Sequence[str],
    failovers_expected: int = 0,
    failovers_seen: int = 0,
    problems: Sequence[str] = (),
    overlaps: Sequence[Overlap] = (),
) -> list[str]:
    """Why the scenario failed (empty: it passed). ``verdict`` is a ``drsvc verify`` verdict
    document; ``faults`` the rows of the ``faults`` history; ``expected_faults`` the kinds the
    schedule named (each must have started and been healed at least once); ``overlaps`` the
    times two clusters were held at once by the clients' leases."""
    reasons = list(problems)
    if overlaps:
        longest = max(overlaps, key=lambda o: o.seconds)
        reasons.append(
            f"two clusters held at once by clients' leases {len(overlaps)} time(s), the longest "
            f"{longest.seconds:.2f} s ({longest.first} and {longest.second})"
        )
    checks: Mapping[str, int] = verdict.get("checks", {})
    for name in ALWAYS_ZERO:
        if checks.get(name, 0):
            reasons.append(f"{name}: {checks[name]}")
    if exactly_once and checks.get("duplicates", 0):
        reasons.append(f"duplicates in exactly-once mode: {checks['duplicates']}")
    planned_rereads = int(verdict.get("counts", {}).get("reread_after_planned_failover", 0))
    if planned_rereads:
        reasons.append(f"re-read after a planned failover: {planned_rereads}")
    rpo, reported = verdict.get("rpo_records"), verdict.get("rpo_reported_records")
    if rpo != reported or "rpo" in verdict.get("failed", []):
        reasons.append(f"recovery point {rpo} differs from the reported {reported}")
    healed = {f["name"] for f in faults if f.get("end_ms") is not None}
    for kind in expected_faults:
        if kind not in healed:
            reasons.append(f"fault {kind} was not injected and healed")
    if failovers_seen < failovers_expected:
        reasons.append(f"{failovers_seen} failover(s) recorded, {failovers_expected} expected")
    if not verdict.get("counts", {}).get("acknowledged"):
        reasons.append("the workload had no acknowledged record")
    return reasons


def rto_seconds(
    fault_ms: int | None, to_cluster: str | None, consumed: Iterable[Mapping[str, Any]]
) -> float | None:
    """Recovery time: from the fault to the first record a consumer processed on the cluster
    the application moved to (None without a failover or before any such read)."""
    if fault_ms is None or to_cluster is None:
        return None
    reads = [
        int(r["processed_ms"])
        for r in consumed
        if r["cluster"] == to_cluster and int(r["processed_ms"]) >= fault_ms
    ]
    return round((min(reads) - fault_ms) / 1000, 1) if reads else None


def scenario_document(
    name: str,
    seed: int,
    reasons: Sequence[str],
    verdict: Mapping[str, Any],
    rto_s: float | None,
    report: str,
) -> dict[str, Any]:
    """The one object ``chaos run --json`` prints."""
    checks = verdict.get("checks", {})
    return {
        "scenario": name,
        "seed": seed,
        "passed": not reasons,
        "checks": {c: int(checks.get(c, 0)) for c in SCENARIO_CHECKS},
        "rpo_records": verdict.get("rpo_records"),
        "rpo_reported_records": verdict.get("rpo_reported_records"),
        "rto_seconds": rto_s,
        "report": report,
    }
