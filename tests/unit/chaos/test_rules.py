"""Pass rules and the recovery time, on hand-made verdicts and histories."""

from __future__ import annotations

from typing import Any

from chaos.rules import SCENARIO_CHECKS, judge, rto_seconds, scenario_document

HEALED = [{"name": "kill-worker", "end_ms": 5}]


def _verdict(**checks: int) -> dict[str, Any]:
    return {
        "checks": {name: 0 for name in (*SCENARIO_CHECKS, "aborted_visible")} | checks,
        "failed": [],
        "rpo_records": None,
        "rpo_reported_records": None,
        "counts": {"acknowledged": 100, "reread_after_planned_failover": 0},
    }


def _judge(verdict: dict[str, Any], exactly_once: bool = False, **kw: Any) -> list[str]:
    args: dict[str, Any] = {"faults": HEALED, "expected_faults": ["kill-worker"]} | kw
    return judge(verdict, exactly_once=exactly_once, **args)


def test_a_clean_run_passes() -> None:
    assert _judge(_verdict()) == []


def test_duplicates_fail_exactly_once_only() -> None:
    assert _judge(_verdict(duplicates=3)) == []
    assert _judge(_verdict(duplicates=3), exactly_once=True) == [
        "duplicates in exactly-once mode: 3"
    ]


def test_every_always_fatal_check_fails() -> None:
    for name in ("lost", "reordered", "altered", "loops", "skipped_after_failover"):
        assert _judge(_verdict(**{name: 1})) == [f"{name}: 1"]
    assert _judge(_verdict(aborted_visible=2)) == ["aborted_visible: 2"]


def test_rereads_fail_only_after_a_planned_failover() -> None:
    verdict = _verdict(reread_after_failover=40)
    assert _judge(verdict) == []  # unplanned: resumed from checkpoints, counted
    verdict["counts"]["reread_after_planned_failover"] = 2
    assert _judge(verdict) == ["re-read after a planned failover: 2"]


def test_the_recovery_point_must_be_the_reported_one() -> None:
    verdict = _verdict() | {"rpo_records": 12, "rpo_reported_records": 12}
    assert _judge(verdict) == []
    verdict = _verdict() | {"rpo_records": 12, "rpo_reported_records": 10}
    assert _judge(verdict) == ["recovery point 12 differs from the reported 10"]


def test_a_fault_that_never_healed_or_a_missing_failover_fails() -> None:
    assert _judge(_verdict(), faults=[{"name": "kill-worker", "end_ms": None}]) == [
        "fault kill-worker was not injected and healed"
    ]
    assert _judge(_verdict(), failovers_expected=2, failovers_seen=1) == [
        "1 failover(s) recorded, 2 expected"
    ]


def test_problems_and_an_empty_workload_fail() -> None:
    verdict = _verdict()
    verdict["counts"]["acknowledged"] = 0
    assert _judge(verdict, problems=["run: boom"]) == [
        "run: boom",
        "the workload had no acknowledged record",
    ]


def test_rto_is_the_first_read_on_the_new_cluster_after_the_fault() -> None:
    consumed = [
        {"cluster": "east", "processed_ms": 900},
        {"cluster": "west", "processed_ms": 500},  # before the fault: not a recovery
        {"cluster": "west", "processed_ms": 13_400},
        {"cluster": "west", "processed_ms": 12_000},
    ]
    assert rto_seconds(1_000, "west", consumed) == 11.0
    assert rto_seconds(None, "west", consumed) is None
    assert rto_seconds(1_000, "south", consumed) is None


def test_the_run_document_has_exactly_the_issue_keys() -> None:
    document = scenario_document("s", 3, [], _verdict(duplicates=2), 4.5, "r/report.html")
    assert list(document) == [
        "scenario",
        "seed",
        "passed",
        "checks",
        "rpo_records",
        "rpo_reported_records",
        "rto_seconds",
        "report",
    ]
    assert list(document["checks"]) == list(SCENARIO_CHECKS)
    assert document["passed"] is True and document["checks"]["duplicates"] == 2
    assert scenario_document("s", 3, ["lost: 1"], _verdict(), None, "")["passed"] is False
