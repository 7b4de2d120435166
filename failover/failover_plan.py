"""Failover and failback of one application as a pure, resumable state machine.

Moving an application from its active cluster to another is a short sequence of steps, each with
a precondition and a rule for what its failure means. This module decides everything about it
without I/O; the service executes the steps, records every outcome under ``failovers/<id>`` in
Consul and asks :func:`next_step` what comes next, so an executor killed between any two steps
is resumed (or its failover rolled back) by another one reading the same record.

The steps
=========

Planned (the active cluster is reachable; zero loss, zero re-read)::

    deactivate      active: old -> none (the application stops on the old cluster)
    wait-lease      every client that saw the old value has lost it (failover.active)
    wait-caught-up  the application's topics are fully replicated, every group's committed
                    offsets translate exactly, and no group has members left on the old
                    cluster (bounded: on timeout, roll back and say what lagged, naming the
                    members that stayed)
    set-offsets     every group's offsets on the new cluster at the exact translated positions
                    (live members there are a failure, not a skip)
    activate        active: none -> new

Unplanned (the active cluster is gone and the caller asked for ``force``; without ``force``
:func:`check_request` refuses instead of losing what had not crossed): the same without
``wait-caught-up``, and ``set-offsets`` comes before ``wait-lease``: it uses the latest
checkpoints (which a cluster gone from every vantage point no longer moves) and the application's
``on_unknown_translation``, so it runs while the lease runs out instead of after it. The record
reports the recovery point. (A forced failover of a cluster that still answers its clients may
leave them committing on it until their lease lapses: positions set before that are earlier, so
the new cluster re-reads those records; it never skips any.)

A failure of ``deactivate`` changes nothing (the failover ends rolled back); a failure of any
later step before ``activate`` rolls back: ``reactivate`` writes the old cluster again (none ->
old, a new epoch), so the application is never active on two clusters and never left without
one by a failed failover. ``activate`` itself is retried, never rolled back: once the offsets are
set the new cluster is the right place.

Failback is the same machine with the clusters the other way round.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass, replace
from enum import StrEnum

from failover.active import ActiveDocument
from failover.errors import FailoverRefused, PreconditionFailed, SwitchError
from failover.recovery_point import UnreplicatedRange
from failover.requester import UNKNOWN_REQUESTER, RequestedBy
from failover.site_recovery import SiteRecovery

__all__ = [
    "Cutoff",
    "FailoverKind",
    "FailoverPlan",
    "FailoverRecord",
    "FailoverRefused",
    "FailoverRequest",
    "FailoverState",
    "GroupTarget",
    "OnFailure",
    "Outcome",
    "Situation",
    "Step",
    "StepEvent",
    "StepName",
    "check_request",
    "highest_epoch",
    "next_step",
    "plan_failover",
    "record_outcome",
    "request_fingerprint",
]


class FailoverKind(StrEnum):
    PLANNED = "planned"
    UNPLANNED = "unplanned"


class FailoverState(StrEnum):
    RUNNING = "running"
    ROLLING_BACK = "rolling_back"
    COMPLETED = "completed"
    ROLLED_BACK = "rolled_back"


class StepName(StrEnum):
    DEACTIVATE = "deactivate"
    WAIT_LEASE = "wait-lease"
    WAIT_CAUGHT_UP = "wait-caught-up"
    SET_OFFSETS = "set-offsets"
    #: an application's write fence: DENY WRITE off on the new cluster, on on the old one
    FENCE_WRITES = "fence-writes"
    ACTIVATE = "activate"
    #: the rollback: the old cluster active again
    REACTIVATE = "reactivate"


class OnFailure(StrEnum):
    #: nothing changed yet: the failover ends, rolled back
    END = "end"
    #: undo: the old cluster becomes active again
    ROLL_BACK = "roll-back"
    #: try the step again (the record stays running; a resume retries it)
    RETRY = "retry"


@dataclass(frozen=True)
class Step:
    name: StepName
    on_failure: OnFailure
    #: how long the executor may try before the step counts as failed (None: no bound)
    timeout_s: float | None = None


@dataclass(frozen=True)
class FailoverRequest:
    """What an operator (or the controller) asked for."""

    app: str
    to: str
    #: switch without waiting for replication, even if the active cluster answers
    force: bool = False
    #: the caller's id: the same request twice is one failover
    request_id: str | None = None
    #: preconditions from a dry run the caller looked at: refuse (PreconditionFailed) unless the
    #: failover that would run now is of this kind ...
    expect_kind: FailoverKind | None = None
    #: ... and the application's active document still has this epoch
    expect_epoch: int | None = None
    #: who asked (kept in the record; not part of what is asked: a repeat of the same request
    #: id by someone else is still the same request)
    requested_by: RequestedBy = UNKNOWN_REQUESTER


@dataclass(frozen=True)
class Situation:
    """What the executor found before planning."""

    #: the clusters of the topology
    clusters: frozenset[str]
    #: the application's active-cluster document now
    active: ActiveDocument
    #: does the active cluster answer (metadata and a produce)?
    active_reachable: bool
    #: the id of a failover of this application that is still running (None: none)
    running: str | None = None
    #: does a flow copy the application's topics from the active cluster to the requested one?
    replicated_to_target: bool = True
    #: the application's groups that have live members on the requested cluster
    busy_groups: tuple[str, ...] = ()
    #: an unplanned failover away from the requested cluster whose recovery has not completed
    unrecovered: str | None = None


@dataclass(frozen=True)
class FailoverPlan:
    failover_id: str
    app: str
    from_cluster: str
    to_cluster: str
    kind: FailoverKind
    steps: tuple[Step, ...]
    request_id: str | None = None
    #: who asked for it (records from before it was kept: unknown)
    requested_by: RequestedBy = UNKNOWN_REQUESTER

    def step(self, name: StepName) -> Step:
        for step in self.steps:
            if step.name is name:
                return step
        if name is StepName.REACTIVATE:
            return _REACTIVATE
        raise KeyError(name)


class Outcome(StrEnum):
    OK = "ok"
    FAILED = "failed"


@dataclass(frozen=True)
class StepEvent:
    """One step's outcome, as recorded."""

    step: StepName
    outcome: Outcome
    at_ms: int
    detail: str = ""


@dataclass(frozen=True, order=True)
class GroupTarget:
    """Where one group starts on the new cluster, partition by partition (set-offsets)."""

    group: str
    #: the topic on the new cluster
    topic: str
    partition: int
    target_offset: int
    #: zero skipped and zero re-read
    exact: bool
    #: the topic and offset on the old cluster it was translated from (-1: unknown)
    source_topic: str = ""
    source_offset: int = -1
    #: the translation's verdict (``exact``, ``ahead-of-syncs``, ``earliest`` ...)
    reason: str = ""


@dataclass(frozen=True, order=True)
class Cutoff:
    """The end offset of a remote copy on the new cluster at the switch: consumers drain the
    copy up to here before they read what is written on the new cluster itself."""

    topic: str
    partition: int
    offset: int


@dataclass(frozen=True)
class FailoverRecord:
    """A failover as persisted: its plan, every step's outcome so far, and what the steps found
    (the groups' new positions, the cut-offs, the recovery point)."""

    plan: FailoverPlan
    state: FailoverState = FailoverState.RUNNING
    events: tuple[StepEvent, ...] = ()
    #: when the failover was planned (wall clock, ms)
    created_ms: int = 0
    groups: tuple[GroupTarget, ...] = ()
    cutoffs: tuple[Cutoff, ...] = ()
    unreplicated: tuple[UnreplicatedRange, ...] = ()
    #: after an unplanned failover: what became of the old cluster's records that never
    #: crossed, once it returned (:mod:`failover.site_recovery`)
    recovery: SiteRecovery | None = None
    #: the highest epoch this failover wrote to the application's active key (0: none yet); the
    #: records keep the application's epochs, so a value written by hand cannot take them back
    epoch: int = 0

    def done(self, name: StepName) -> bool:
        return any(e.step is name and e.outcome is Outcome.OK for e in self.events)

    @property
    def finished(self) -> bool:
        return self.state in (FailoverState.COMPLETED, FailoverState.ROLLED_BACK)

    @property
    def awaits_recovery(self) -> bool:
        """An unplanned failover whose old cluster's records that never crossed have not been
        dealt with yet (the old cluster has not returned, or nobody ran the recovery)."""
        return (
            self.plan.kind is FailoverKind.UNPLANNED
            and self.state is FailoverState.COMPLETED
            and (self.recovery is None or not self.recovery.completed)
        )


#: the bound of the planned wait for replication, unless the executor is told otherwise
DEFAULT_CATCH_UP_TIMEOUT_S = 120.0

_REACTIVATE = Step(StepName.REACTIVATE, OnFailure.RETRY)


def plan_failover(
    request: FailoverRequest,
    situation: Situation,
    failover_id: str,
    catch_up_timeout_s: float = DEFAULT_CATCH_UP_TIMEOUT_S,
) -> FailoverPlan:
    """The plan of ``request`` in ``situation``; raises :class:`FailoverRefused` saying why
    when it must not start. A request repeated with the same request id is answered by the
    caller with the record it started, before planning."""
    active = situation.active.cluster
    if request.to not in situation.clusters:
        known = ", ".join(sorted(situation.clusters))
        raise FailoverRefused(f"unknown cluster {request.to!r} (the topology has: {known})")
    if situation.running is not None:
        raise FailoverRefused(
            f"failover {situation.running} of application {request.app} is still running: "
            "resume it or wait for it to end"
        )
    if active is None:
        raise FailoverRefused(
            f"application {request.app} has no active cluster (a switch did not finish, "
            f"failover {situation.active.failover_id}): resume that failover first"
        )
    if active == request.to:
        raise FailoverRefused(f"application {request.app} is already active on {request.to}")
    if not situation.replicated_to_target:
        raise FailoverRefused(
            f"no flow copies application {request.app}'s topics from {active} to {request.to}"
        )
    if situation.unrecovered is not None:
        raise FailoverRefused(
            f"failover {situation.unrecovered} moved application {request.app} away from "
            f"{request.to} without the records that had not crossed yet: recover them first "
            f"(drsvc recover --app {request.app}, once {request.to} is back), so they are "
            "dealt with by the application's on_recovery policy instead of mixed in"
        )
    if situation.busy_groups:
        raise FailoverRefused(
            f"consumer group(s) {', '.join(sorted(situation.busy_groups))} of application "
            f"{request.app} have live members on {request.to}: their offsets cannot be set "
            "while they run there; stop those consumers first (a member left over from before "
            f"an outage of {request.to} leaves by itself once its session times out)"
        )
    planned = situation.active_reachable and not request.force
    steps = [Step(StepName.DEACTIVATE, OnFailure.END)]
    if planned:
        steps += [
            Step(StepName.WAIT_LEASE, OnFailure.ROLL_BACK),
            Step(StepName.WAIT_CAUGHT_UP, OnFailure.ROLL_BACK, catch_up_timeout_s),
            Step(StepName.SET_OFFSETS, OnFailure.ROLL_BACK),
        ]
    else:
        steps += [
            Step(StepName.SET_OFFSETS, OnFailure.ROLL_BACK),
            Step(StepName.WAIT_LEASE, OnFailure.ROLL_BACK),
        ]
    steps.append(Step(StepName.ACTIVATE, OnFailure.RETRY))
    return FailoverPlan(
        failover_id=failover_id,
        app=request.app,
        from_cluster=active,
        to_cluster=request.to,
        kind=FailoverKind.PLANNED if planned else FailoverKind.UNPLANNED,
        steps=tuple(steps),
        request_id=request.request_id,
        requested_by=request.requested_by,
    )


def check_request(request: FailoverRequest, plan: FailoverPlan, active: ActiveDocument) -> None:
    """Raise unless ``plan`` is the failover ``request`` asked for.

    Without ``force`` a failover is planned or does not run: an active cluster that does not
    answer is a :class:`FailoverRefused` (never a silent switch to an unplanned failover, which
    loses what had not crossed). The caller's preconditions from a dry run (``expect_epoch``,
    ``expect_kind``) that no longer hold are a :class:`PreconditionFailed`."""
    if plan.kind is FailoverKind.UNPLANNED and not request.force:
        raise FailoverRefused(
            f"application {request.app}'s active cluster {plan.from_cluster} does not answer, "
            "so a planned failover (nothing lost, nothing read twice) cannot run; --force "
            f"runs an unplanned failover to {plan.to_cluster}, which leaves the records that "
            f"had not crossed on {plan.from_cluster} for drsvc recover"
        )
    if request.expect_epoch is not None and request.expect_epoch != active.epoch:
        raise PreconditionFailed(
            f"application {request.app} is at epoch {active.epoch}, not {request.expect_epoch} "
            "as expected: it changed since the plan was shown; look at the plan again"
        )
    if request.expect_kind is not None and request.expect_kind is not plan.kind:
        raise PreconditionFailed(
            f"the failover of application {request.app} would be {plan.kind.value} now, not "
            f"{request.expect_kind.value} as expected; look at the plan again"
        )


def request_fingerprint(request: FailoverRequest) -> str:
    """A digest of what ``request`` asks (application, target, force, preconditions), kept with
    its request id: the same id with another request is a different request, not a repeat."""
    asked = {
        "app": request.app,
        "to": request.to,
        "force": request.force,
        "expect_kind": None if request.expect_kind is None else request.expect_kind.value,
        "expect_epoch": request.expect_epoch,
    }
    text = json.dumps(asked, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def highest_epoch(records: Iterable[FailoverRecord], app: str) -> int:
    """The highest epoch any of ``records`` wrote to application ``app``'s active key."""
    return max((r.epoch for r in records if r.plan.app == app), default=0)


def next_step(record: FailoverRecord) -> Step | None:
    """The step to execute now (None: the failover has ended)."""
    if record.finished:
        return None
    if record.state is FailoverState.ROLLING_BACK:
        return _REACTIVATE
    for step in record.plan.steps:
        if not record.done(step.name):
            return step
    return None


def record_outcome(
    record: FailoverRecord, step: StepName, outcome: Outcome, at_ms: int, detail: str = ""
) -> FailoverRecord:
    """The record after ``step`` ended with ``outcome``. Raises :class:`SwitchError` for an
    outcome of a step that is not the one :func:`next_step` asked for (a confused executor)."""
    expected = next_step(record)
    if expected is None or expected.name is not step:
        wanted = "nothing (the failover has ended)" if expected is None else expected.name.value
        raise SwitchError(
            f"failover {record.plan.failover_id}: an outcome of {step.value} arrived, but the "
            f"next step is {wanted}"
        )
    events = (*record.events, StepEvent(step, outcome, at_ms, detail))
    state = record.state
    if outcome is Outcome.OK:
        if step is StepName.REACTIVATE:
            state = FailoverState.ROLLED_BACK
        elif step is StepName.ACTIVATE:
            state = FailoverState.COMPLETED
    elif expected.on_failure is OnFailure.END:
        state = FailoverState.ROLLED_BACK
    elif expected.on_failure is OnFailure.ROLL_BACK:
        state = FailoverState.ROLLING_BACK
    return replace(record, state=state, events=events)
