"""Write fencing's decisions: where the step goes in a plan, what it changes, what a rollback
undoes."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from failover.errors import PolicyError
from failover.failover_plan import (
    FailoverKind,
    FailoverPlan,
    OnFailure,
    Step,
    StepName,
)
from failover.kafka_acls import Operation, Permission
from failover.write_fence import (
    fence_bindings,
    fence_changes,
    rollback_changes,
    with_write_fence,
)


@dataclass(frozen=True)
class App:
    name: str = "orders"
    groups: tuple[str, ...] = ("g",)
    topics: tuple[str, ...] = ("orders", "audit")
    preferred: str = "east"
    transactional_ids: tuple[str, ...] = ()
    sync_group_offsets: bool = False
    on_recovery: str = "quarantine"
    principal: str | None = "User:orders-service"
    fence_writes: bool = True


def _plan(kind: FailoverKind) -> FailoverPlan:
    names = (
        [StepName.DEACTIVATE, StepName.WAIT_LEASE, StepName.WAIT_CAUGHT_UP, StepName.SET_OFFSETS]
        if kind is FailoverKind.PLANNED
        else [StepName.DEACTIVATE, StepName.SET_OFFSETS, StepName.WAIT_LEASE]
    )
    steps = tuple(Step(n, OnFailure.ROLL_BACK) for n in names)
    return FailoverPlan(
        "f-1", "orders", "east", "west", kind, (*steps, Step(StepName.ACTIVATE, OnFailure.RETRY))
    )


def test_the_step_follows_the_lease_rolls_back_when_planned_and_retries_when_not() -> None:
    planned = with_write_fence(_plan(FailoverKind.PLANNED), True)
    assert [s.name for s in planned.steps][1:3] == [StepName.WAIT_LEASE, StepName.FENCE_WRITES]
    assert planned.step(StepName.FENCE_WRITES).on_failure is OnFailure.ROLL_BACK
    unplanned = with_write_fence(_plan(FailoverKind.UNPLANNED), True)
    assert [s.name for s in unplanned.steps][-2:] == [StepName.FENCE_WRITES, StepName.ACTIVATE]
    assert unplanned.step(StepName.FENCE_WRITES).on_failure is OnFailure.RETRY
    assert with_write_fence(planned, True) == planned  # once
    assert with_write_fence(_plan(FailoverKind.PLANNED), False) == _plan(FailoverKind.PLANNED)


def test_deny_write_on_each_topic_for_the_named_principal() -> None:
    bindings = fence_bindings(App())
    assert [(g.resource_name, g.operation, g.permission, g.principal) for g in bindings] == [
        ("audit", Operation.WRITE, Permission.DENY, "User:orders-service"),
        ("orders", Operation.WRITE, Permission.DENY, "User:orders-service"),
    ]
    default = fence_bindings(App(principal=None))
    assert {g.principal for g in default} == {"User:app-orders"}
    with pytest.raises(PolicyError, match="drsvc's own"):
        fence_bindings(App(principal="User:drsvc-replicator"))


def test_planned_lifts_on_the_new_cluster_first_then_denies_on_the_old() -> None:
    planned = with_write_fence(_plan(FailoverKind.PLANNED), True)
    changes = fence_changes(planned, App())
    assert [c for c, _ in changes.lift] == ["west"]
    assert [c for c, _ in changes.deny] == ["east"]
    unplanned = fence_changes(with_write_fence(_plan(FailoverKind.UNPLANNED), True), App())
    assert ([c for c, _ in unplanned.lift], unplanned.deny) == (["west"], ())


def test_a_rollback_lifts_the_deny_on_the_old_cluster_only_when_the_plan_fences() -> None:
    planned = with_write_fence(_plan(FailoverKind.PLANNED), True)
    undo = rollback_changes(planned, App())
    assert ([c for c, _ in undo.lift], undo.deny) == (["east"], ())
    assert rollback_changes(_plan(FailoverKind.PLANNED), App()).lift == ()
