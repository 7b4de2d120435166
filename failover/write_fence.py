"""Write fencing for producers that are not transactional, without I/O.

A lease stops every client that follows it, but a plain producer that was paused (a stopped
process, a long pause, a partition from Consul) may still send what it had queued once it wakes,
to the cluster it no longer should write. Transactional producers are fenced by their ids
(:mod:`drsvc.runtime.failover.fencing`); a plain one has no such handle. An application that
names its ``principal`` and sets ``fence_writes`` gets one from its ACLs: a failover denies that
principal WRITE on the application's topics on the old cluster, so the broker itself refuses the
late sends, and lifts the same DENY on the new cluster, so a failback restores the write.

The decisions here:

- :func:`with_write_fence` adds the ``fence-writes`` step to a plan, right after the lease is
  waited out (every client that follows the lease has stopped, so no producer still entitled to
  write is refused) and before anything else: the sooner the old cluster refuses, the fewer
  late records can reach it. A planned failover rolls back when the step fails (the old cluster
  answers; an ACL call that fails there is a missing grant or a broken cluster, and the SRE
  gets the application back where it was, writing, rather than moved without its fence). An
  unplanned failover retries it: the old cluster is gone, rolling back to it helps nobody, and
  activation must wait until the DENY on the new cluster is lifted.
- :func:`fence_changes` says what the step changes: in a planned failover, lift on the new
  cluster first, then deny on the old one (a failure between the two leaves nothing to undo on
  the old cluster); in an unplanned one only the lift (the old cluster is lost: ``drsvc
  recover``, which finds it back, does not fence it yet).
- :func:`rollback_changes` says what a rollback undoes before it reactivates the old cluster:
  the DENY there. Removing a binding that is absent changes nothing, so both are idempotent and
  a resumed executor simply does them again.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from failover.errors import PolicyError
from failover.failover_plan import FailoverKind, FailoverPlan, OnFailure, Step, StepName
from failover.kafka_acls import (
    ApplicationShape,
    Grant,
    Operation,
    PatternType,
    Permission,
    Principals,
    ResourceType,
    application_principal,
)

__all__ = [
    "FenceChanges",
    "fence_bindings",
    "fence_changes",
    "rollback_changes",
    "with_write_fence",
]


@dataclass(frozen=True)
class FenceChanges:
    """Bindings to delete, then bindings to create, each on its cluster, in this order."""

    lift: tuple[tuple[str, tuple[Grant, ...]], ...] = ()
    deny: tuple[tuple[str, tuple[Grant, ...]], ...] = ()


def with_write_fence(plan: FailoverPlan, fence_writes: bool) -> FailoverPlan:
    """``plan`` with the ``fence-writes`` step after ``wait-lease`` when the application fences
    its writes; ``plan`` itself otherwise (and when it has the step already)."""
    names = [s.name for s in plan.steps]
    if not fence_writes or StepName.FENCE_WRITES in names:
        return plan
    if StepName.WAIT_LEASE not in names:
        raise PolicyError(f"failover {plan.failover_id}: a plan without wait-lease cannot fence")
    on_failure = OnFailure.ROLL_BACK if plan.kind is FailoverKind.PLANNED else OnFailure.RETRY
    steps: list[Step] = []
    for step in plan.steps:
        steps.append(step)
        if step.name is StepName.WAIT_LEASE:
            steps.append(Step(StepName.FENCE_WRITES, on_failure))
    return replace(plan, steps=tuple(steps))


def fence_bindings(
    app: ApplicationShape, principals: Principals | None = None
) -> tuple[Grant, ...]:
    """The DENY WRITE bindings that fence ``app``: its principal on each of its topics
    (LITERAL, any host). Raises :class:`PolicyError` when the principal is drsvc's own."""
    principal = application_principal(app, principals)
    if principal in (principals if principals is not None else Principals()).services():
        raise PolicyError(
            f"application {app.name}: principal {principal} is one of drsvc's own; fencing it"
            " would stop that role"
        )
    return tuple(
        sorted(
            Grant(
                ResourceType.TOPIC,
                PatternType.LITERAL,
                topic,
                Operation.WRITE,
                principal,
                Permission.DENY,
                why=f"application {app.name}: writes fenced while it is not active here",
            )
            for topic in app.topics
        )
    )


def fence_changes(
    plan: FailoverPlan, app: ApplicationShape, principals: Principals | None = None
) -> FenceChanges:
    """What the ``fence-writes`` step of ``plan`` changes (see the module's docstring)."""
    bindings = fence_bindings(app, principals)
    lift = ((plan.to_cluster, bindings),)
    if plan.kind is FailoverKind.PLANNED:
        return FenceChanges(lift=lift, deny=((plan.from_cluster, bindings),))
    return FenceChanges(lift=lift)


def rollback_changes(
    plan: FailoverPlan, app: ApplicationShape, principals: Principals | None = None
) -> FenceChanges:
    """What a rollback of ``plan`` undoes before the old cluster is active again: the DENY
    there, when the plan fences (nothing otherwise)."""
    if StepName.FENCE_WRITES not in {s.name for s in plan.steps}:
        return FenceChanges()
    return FenceChanges(lift=((plan.from_cluster, fence_bindings(app, principals)),))
