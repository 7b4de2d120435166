"""The pure rules of the migration workflow: state, cutover refusals, progress, verify verdict."""

from __future__ import annotations

import pytest

from failover.errors import FormatError
from failover.migration_cutover import PartitionCatchUp, catch_up_rows, cutover_refusals
from failover.migration_progress import Look, topic_progress
from failover.migration_state import (
    MigrationState,
    app_phase,
    finish_decision,
    migration_key,
    start_refusal,
    started,
)
from failover.migration_verify import GroupComparison, PartitionComparison, verdict


def test_state_round_trips_and_bad_documents_are_format_errors() -> None:
    state = MigrationState("copying", 5, None, ("b", "a"), {"t": {0: 7, 1: 9}})
    assert MigrationState.from_json(state.to_json()) == MigrationState(
        "copying", 5, None, ("a", "b"), {"t": {0: 7, 1: 9}}
    )
    assert migration_key("ns", "to-west") == "drsvc/ns/migrations/to-west"
    for bad in ("{", '{"state": "paused", "started_ms": 1}', '{"state": "copying"}', "[]"):
        with pytest.raises(FormatError):
            MigrationState.from_json(bad)


def test_start_refuses_conflicts_and_finished_migrations_and_resumes_otherwise() -> None:
    assert start_refusal(None, []) is None
    assert start_refusal(MigrationState("copying", 1), []) is None
    refusal = start_refusal(None, ["t: exists on the target with 5 partitions"])
    assert refusal is not None and "1 conflict(s)" in refusal and "5 partitions" in refusal
    assert "finished" in (start_refusal(MigrationState("finished", 1, 2), []) or "")
    again = started(MigrationState("copying", 1, None, ("a",)), 99, ["b"])
    assert (again.started_ms, again.created_topics) == (1, ("a", "b"))
    assert started(None, 99, ["b", "a"]) == MigrationState("copying", 99, None, ("a", "b"))


@pytest.mark.parametrize(
    ("active", "phase"),
    [("east", "on-source"), ("west", "on-target"), (None, "switching"), ("south", "elsewhere")],
)
def test_app_phase(active: str | None, phase: str) -> None:
    assert app_phase(active, "east", "west") == phase


def test_finish_waits_for_every_application() -> None:
    copying = MigrationState("copying", 1)
    assert not finish_decision(None, {}).allowed
    waiting = finish_decision(copying, {"a": "on-target", "b": "on-source", "c": "switching"})
    assert not waiting.allowed and waiting.not_moved == ("b", "c")
    assert "b (on-source), c (switching)" in waiting.reason
    assert finish_decision(copying, {"a": "on-target"}).allowed
    assert finish_decision(copying, {}).allowed
    assert finish_decision(MigrationState("finished", 1, 2), {"a": "on-source"}).allowed


def _refusals(**changes: object) -> list[str]:
    args: dict[str, object] = {
        "app": "orders",
        "app_topics": ["t"],
        "migration_apps": ["orders"],
        "migrated_topics": {"t", "u"},
        "state": MigrationState("copying", 1),
        "phase": "on-source",
        "partitions": [PartitionCatchUp("t", 0, 10, 10)],
    }
    args.update(changes)
    return cutover_refusals(**args)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        ({}, None),
        ({"state": None}, "was not started"),
        ({"state": MigrationState("finished", 1, 2)}, "is finished"),
        ({"migration_apps": ["other"]}, "not part of this migration"),
        ({"migration_apps": []}, None),
        ({"app_topics": ["t", "v"]}, "does not copy topic(s) v"),
        ({"phase": "switching"}, "is switching"),
        ({"phase": "on-target"}, "already on the target"),
        ({"partitions": [PartitionCatchUp("t", 0, 10, 7)]}, "3 record(s) in 1 partition(s)"),
        ({"partitions": [PartitionCatchUp("t", 1, 4, None)]}, "t-1 4 behind"),
    ],
)
def test_cutover_refusals(changes: dict[str, object], expected: str | None) -> None:
    found = _refusals(**changes)
    if expected is None:
        assert found == []
    else:
        assert any(expected in reason for reason in found), found


def test_cutover_lists_every_reason_and_bounds_the_partitions_shown() -> None:
    behind = [PartitionCatchUp("t", p, 5, 0) for p in range(8)]
    found = _refusals(state=None, phase="on-target", partitions=behind)
    assert len(found) == 3
    assert "40 record(s) in 8 partition(s)" in found[2] and "and 3 more" in found[2]
    rows = catch_up_rows({("t", 1): 5, ("t", 0): 3}, {("t", 0): 3})
    assert rows == [PartitionCatchUp("t", 0, 3, 3), PartitionCatchUp("t", 1, 5, None)]
    assert [r.lag for r in rows] == [0, 5]


def test_progress_rate_estimate_and_keeping_up() -> None:
    tp = ("t", 0)
    first = Look(0.0, {tp: 100}, {tp: 0}, {tp: 1100})
    assert topic_progress(None, first)[0].eta_s is None
    later = Look(10.0, {tp: 600}, {tp: 0}, {tp: 1200})
    (row,) = topic_progress(first, later)
    assert (row.copied, row.lag, row.records_per_s) == (600, 600, 50.0)
    assert row.eta_s == pytest.approx(600 / 40)  # the lag shrank by 400 in 10 s
    assert not row.keeping_up
    stuck = Look(20.0, {tp: 600}, {tp: 0}, {tp: 1300})
    assert topic_progress(later, stuck)[0].eta_s is None  # not gaining
    steady = Look(21.0, {tp: 1290}, {tp: 0}, {tp: 1330})
    assert topic_progress(stuck, steady)[0].keeping_up
    assert topic_progress(None, Look(0.0, {tp: 5}, {tp: 5}, {tp: 5}))[0].eta_s == 0.0


def _partition(**changes: object) -> PartitionComparison:
    values: dict[str, object] = {
        "topic": "t", "partition": 0, "source_records": 3, "source_first": 0, "source_last": 2,
        "source_checksum": "42", "copies": 3, "copied_first": 0, "copied_last": 2,
        "copies_checksum": "42", "missing": 0, "altered": 0, "duplicates": 0, "orphans": 0,
        "target_only": 5,
    }  # fmt: skip
    values.update(changes)
    return PartitionComparison(**values)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("changes", "problem"),
    [
        ({}, None),
        ({"missing": 1, "copies": 2}, "1 source record(s) have no copy"),
        ({"altered": 1, "copies_checksum": "7"}, "1 copy(ies) differ"),
        ({"duplicates": 1, "copies": 4}, "copied more than once"),
        ({"copies_checksum": "7"}, "checksums differ"),
        ({"copied_first": 1}, "copies of 1..2"),
    ],
)
def test_verdict_per_partition(changes: dict[str, object], problem: str | None) -> None:
    found = verdict([_partition(**changes)], [])
    assert found.passed == (problem is None)
    if problem is not None:
        assert any(problem in p for p in found.problems), found.problems
    assert found.as_dict()["totals"]["target_only"] == 5  # type: ignore[index]


def test_verdict_per_group() -> None:
    ok = GroupComparison("g", "t", 0, 5, 5, 9)
    behind = GroupComparison("g", "t", 1, 5, 8, 6)
    pending = GroupComparison("h", "t", 0, 5, 5, None)
    found = verdict([_partition()], [ok, behind, pending])
    assert [g.state for g in found.groups] == ["ok", "behind", "not on the target"]
    assert not found.passed
    assert found.problems == (
        "group g t-1: at 6 on the target, before 8 where its source position 5 lands"
        " (2 record(s) would be read twice)",
    )
