"""The failover state machine: plans, refusals, outcomes, rollbacks and resumes.

The property test plays an executor that may be killed after any step and resumed from the
record, with any step failing, and checks the invariant the whole design exists for: the
application's active document goes old -> none -> (new or old), never straight from one cluster
to another, and a finished failover leaves it active on exactly one cluster.
"""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from failover.active import ActiveDocument, switch
from failover.errors import FailoverRefused, PreconditionFailed, SwitchError
from failover.failover_plan import (
    FailoverKind,
    FailoverRecord,
    FailoverRequest,
    FailoverState,
    Outcome,
    Situation,
    StepName,
    check_request,
    next_step,
    plan_failover,
    record_outcome,
    request_fingerprint,
)

CLUSTERS = frozenset({"east", "west", "north"})


def situation(**changes: object) -> Situation:
    values: dict[str, object] = {
        "clusters": CLUSTERS,
        "active": ActiveDocument("east", 4),
        "active_reachable": True,
    }
    values.update(changes)
    return Situation(**values)  # type: ignore[arg-type]


def names(record_or_plan: object) -> list[str]:
    steps = getattr(record_or_plan, "steps")  # noqa: B009 (plans and records alike)
    return [step.name.value for step in steps]


def test_a_planned_failover_waits_for_replication_before_it_moves_offsets() -> None:
    plan = plan_failover(FailoverRequest("orders", "west"), situation(), "f-1")
    assert plan.kind is FailoverKind.PLANNED
    assert (plan.from_cluster, plan.to_cluster) == ("east", "west")
    assert names(plan) == ["deactivate", "wait-lease", "wait-caught-up", "set-offsets", "activate"]
    assert plan.step(StepName.WAIT_CAUGHT_UP).timeout_s is not None


@pytest.mark.parametrize(
    ("request_", "reachable"),
    [(FailoverRequest("orders", "west"), False), (FailoverRequest("orders", "west", True), True)],
)
def test_an_unplanned_failover_does_not_wait_for_a_source_that_is_gone(
    request_: FailoverRequest, reachable: bool
) -> None:
    plan = plan_failover(request_, situation(active_reachable=reachable), "f-1")
    assert plan.kind is FailoverKind.UNPLANNED
    # The positions are set while the lease runs out.
    assert names(plan) == ["deactivate", "set-offsets", "wait-lease", "activate"]


@pytest.mark.parametrize(
    ("request_", "changes", "why"),
    [
        (FailoverRequest("orders", "south"), {}, r"unknown cluster 'south' \(the topology has"),
        (FailoverRequest("orders", "east"), {}, "already active on east"),
        (FailoverRequest("orders", "west"), {"running": "f-0"}, "failover f-0 .* still running"),
        (
            FailoverRequest("orders", "west"),
            {"active": ActiveDocument(None, 5, "f-0")},
            "no active cluster .* failover f-0",
        ),
        (
            FailoverRequest("orders", "west"),
            {"replicated_to_target": False},
            "no flow copies .* from east to west",
        ),
    ],
)
def test_refusals_say_why(request_: FailoverRequest, changes: dict[str, object], why: str) -> None:
    with pytest.raises(FailoverRefused, match=why):
        plan_failover(request_, situation(**changes), "f-1")


def run(record: FailoverRecord, outcomes: dict[StepName, Outcome]) -> FailoverRecord:
    at = 0
    while (step := next_step(record)) is not None:
        at += 1
        record = record_outcome(record, step.name, outcomes.get(step.name, Outcome.OK), at)
    return record


def test_every_step_done_completes_the_failover() -> None:
    record = run(FailoverRecord(plan_failover(FailoverRequest("o", "west"), situation(), "f")), {})
    assert record.state is FailoverState.COMPLETED
    assert [e.step.value for e in record.events] == [
        "deactivate",
        "wait-lease",
        "wait-caught-up",
        "set-offsets",
        "activate",
    ]


def test_replication_that_does_not_catch_up_rolls_the_failover_back() -> None:
    plan = plan_failover(FailoverRequest("o", "west"), situation(), "f")
    record = run(FailoverRecord(plan), {StepName.WAIT_CAUGHT_UP: Outcome.FAILED})
    assert record.state is FailoverState.ROLLED_BACK
    assert [e.step.value for e in record.events][-2:] == ["wait-caught-up", "reactivate"]


def test_a_failed_deactivation_changes_nothing_and_ends() -> None:
    plan = plan_failover(FailoverRequest("o", "west"), situation(), "f")
    record = run(FailoverRecord(plan), {StepName.DEACTIVATE: Outcome.FAILED})
    assert record.state is FailoverState.ROLLED_BACK
    assert [e.step.value for e in record.events] == ["deactivate"]


def test_a_failed_activation_is_retried_never_rolled_back() -> None:
    plan = plan_failover(FailoverRequest("o", "west"), situation(), "f")
    record = FailoverRecord(plan)
    for name in ("deactivate", "wait-lease", "wait-caught-up", "set-offsets"):
        record = record_outcome(record, StepName(name), Outcome.OK, 1)
    record = record_outcome(record, StepName.ACTIVATE, Outcome.FAILED, 2, "Consul unreachable")
    assert record.state is FailoverState.RUNNING
    step = next_step(record)
    assert step is not None and step.name is StepName.ACTIVATE


def test_an_outcome_of_another_step_is_refused() -> None:
    record = FailoverRecord(plan_failover(FailoverRequest("o", "west"), situation(), "f"))
    with pytest.raises(SwitchError, match="outcome of activate arrived, but the next step is"):
        record_outcome(record, StepName.ACTIVATE, Outcome.OK, 1)
    finished = run(record, {})
    with pytest.raises(SwitchError, match="the failover has ended"):
        record_outcome(finished, StepName.ACTIVATE, Outcome.OK, 1)


# ---------------------------------------------------------------------------------- the invariant


def apply_to_active(doc: ActiveDocument, record: FailoverRecord, step: StepName) -> ActiveDocument:
    """What an executor writes to the active key for a step, idempotently: a step repeated by a
    resumed executor finds its own write there and writes nothing."""
    plan = record.plan
    targets = {
        StepName.DEACTIVATE: None,
        StepName.ACTIVATE: plan.to_cluster,
        StepName.REACTIVATE: plan.from_cluster,
    }
    if step not in targets:
        return doc
    target = targets[step]
    if doc.failover_id == plan.failover_id and doc.cluster == target:
        return doc
    return switch(doc, target, plan.failover_id, 0)


@given(
    reachable=st.booleans(),
    force=st.booleans(),
    # for each step execution: does it fail, and is the executor killed after recording it
    script=st.lists(st.tuples(st.booleans(), st.booleans()), max_size=30),
)
def test_killed_and_resumed_executors_never_leave_two_active_clusters(
    reachable: bool, force: bool, script: list[tuple[bool, bool]]
) -> None:
    doc = ActiveDocument("east", 4)
    plan = plan_failover(
        FailoverRequest("orders", "west", force), situation(active_reachable=reachable), "f-9"
    )
    record = FailoverRecord(plan)
    history = [doc.cluster]
    moves = iter(script)
    at = 0
    while (step := next_step(record)) is not None:
        fails, killed = next(moves, (False, False))
        at += 1
        if not fails:
            doc = apply_to_active(doc, record, step.name)
            history.append(doc.cluster)
            if killed:
                # Killed after the effect, before the record: the resumed executor is asked
                # for the same step again and repeats it.
                again = next_step(record)
                assert again is not None and again.name is step.name
                doc = apply_to_active(doc, record, again.name)
                history.append(doc.cluster)
        record = record_outcome(record, step.name, Outcome.FAILED if fails else Outcome.OK, at)
    assert record.finished
    # Never from one cluster straight to another; at the end, active on exactly one.
    changes = [c for i, c in enumerate(history) if i == 0 or c != history[i - 1]]
    for before, after in itertools.pairwise(changes):
        assert before is None or after is None
    assert doc.cluster == ("west" if record.state is FailoverState.COMPLETED else "east")


def test_without_force_an_unplanned_plan_is_refused_and_says_how_to_force_it() -> None:
    request = FailoverRequest("orders", "west")
    plan = plan_failover(request, situation(active_reachable=False), "f-1")
    with pytest.raises(FailoverRefused, match=r"east does not answer.*--force runs an unplanned"):
        check_request(request, plan, ActiveDocument("east", 4))
    forced = FailoverRequest("orders", "west", force=True)
    check_request(
        forced,
        plan_failover(forced, situation(active_reachable=False), "f-1"),
        ActiveDocument("east", 4),
    )


@pytest.mark.parametrize(
    ("kind", "epoch", "why"),
    [
        (FailoverKind.UNPLANNED, None, "would be planned now, not unplanned"),
        (None, 3, "at epoch 4, not 3"),
        (FailoverKind.PLANNED, 5, "at epoch 4, not 5"),
    ],
)
def test_preconditions_that_no_longer_hold_are_refused(
    kind: FailoverKind | None, epoch: int | None, why: str
) -> None:
    request = FailoverRequest("orders", "west", expect_kind=kind, expect_epoch=epoch)
    plan = plan_failover(request, situation(), "f-1")
    with pytest.raises(PreconditionFailed, match=why):
        check_request(request, plan, ActiveDocument("east", 4))
    held = FailoverRequest("orders", "west", expect_kind=FailoverKind.PLANNED, expect_epoch=4)
    check_request(held, plan_failover(held, situation(), "f-1"), ActiveDocument("east", 4))


def test_a_request_s_fingerprint_covers_what_it_asks_but_not_its_id() -> None:
    base = FailoverRequest("orders", "west", request_id="r-1")
    same = request_fingerprint(base)
    assert request_fingerprint(FailoverRequest("orders", "west", request_id="r-2")) == same
    for other in (
        FailoverRequest("payments", "west"),
        FailoverRequest("orders", "north"),
        FailoverRequest("orders", "west", force=True),
        FailoverRequest("orders", "west", expect_kind=FailoverKind.PLANNED),
        FailoverRequest("orders", "west", expect_epoch=4),
    ):
        assert request_fingerprint(other) != same
