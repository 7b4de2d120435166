"""The JSON documents of failovers, plans, recoveries and applications.

One shape for every interface: ``drsvc failover --json`` prints them and the API answers with
them, so a failover through either reads the same.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from drsvc.runtime.failover.executor import FailoverExecutor
from drsvc.runtime.translation.group_translation import iso_time
from failover.failover_plan import FailoverPlan, FailoverRecord, GroupTarget
from failover.failover_record import (
    group_target_fields,
    record_fields,
    recovery_fields,
    recovery_point,
)
from failover.stale_epochs import StaleEntry

__all__ = ["app_document", "plan_document", "record_document", "recovery_document"]


def record_document(
    record: FailoverRecord, stale: Sequence[tuple[str, StaleEntry]] | None = None
) -> dict[str, Any]:
    """A failover record: its plan, every step's outcome, the groups' new positions and what
    was not replicated (the recovery point); with ``stale`` (the views of one failover), the
    records written on the old cluster under an older epoch after the switch."""
    fields = record_fields(record)
    ended = record.events[-1].at_ms if record.finished and record.events else None
    duration = (ended or int(time.time() * 1000)) - record.created_ms
    ranges = record.unreplicated
    lost, exact, measured = recovery_point(record)
    return {
        "id": fields["id"],
        "app": fields["app"],
        "from": fields["from"],
        "to": fields["to"],
        "kind": fields["kind"],
        "state": fields["state"],
        "request_id": fields["request_id"],
        "requested_by": fields["requested_by"],
        "groups": fields["groups"],
        "cutoffs": fields["cutoffs"],
        "unreplicated": [
            {
                "topic": u.topic,
                "partition": u.partition,
                "first_offset": u.first_offset,
                "last_offset": u.last_offset,
                "records": u.records,
                "exact": u.exact,
            }
            for u in ranges
        ],
        "rpo_records": lost,
        "rpo_exact": exact,
        "rpo_measured_by": measured,
        "events": [
            {
                "step": e["step"],
                "outcome": e["outcome"],
                "at": iso_time(e["at_ms"]),
                "at_ms": e["at_ms"],
                "detail": e["detail"],
            }
            for e in fields["events"]
        ],
        "duration_s": round(max(0, duration) / 1000, 3),
        "recovery": fields["recovery"],
        **({} if stale is None else {"stale_records": [_stale_entry(f, e) for f, e in stale]}),
    }


def _stale_entry(flow: str, entry: StaleEntry) -> dict[str, Any]:
    return {
        "flow": flow,
        "topic": entry.topic,
        "partition": entry.partition,
        "below_epoch": entry.epoch,
        "records": entry.count,
        "offsets": list(entry.offsets),
    }


def plan_document(plan: FailoverPlan, targets: list[GroupTarget], note: str) -> dict[str, Any]:
    """A dry run: the steps a failover would take and where its groups would start now."""
    return {
        "dry_run": True,
        "app": plan.app,
        "from": plan.from_cluster,
        "to": plan.to_cluster,
        "kind": plan.kind.value,
        "state": "planned",
        "steps": [
            {"name": s.name.value, "on_failure": s.on_failure.value, "timeout_s": s.timeout_s}
            for s in plan.steps
        ],
        "groups": [group_target_fields(g) for g in targets],
        "note": note,
    }


def recovery_document(record: FailoverRecord, dry_run: bool) -> dict[str, Any]:
    """The recovery of a returned site after an unplanned failover."""
    recovery = record.recovery
    assert recovery is not None
    fields = recovery_fields(recovery)
    return {
        "id": record.plan.failover_id,
        "app": record.plan.app,
        "dry_run": dry_run,
        "state": "completed" if recovery.completed else ("planned" if dry_run else "running"),
        **fields,
        "records": recovery.records,
    }


def app_document(executor: FailoverExecutor, name: str, *, exposure: bool = True) -> dict[str, Any]:
    """An application's active cluster and epoch, its running failover, and (with
    ``exposure``) per group what a failover to each other cluster right now would lose and
    re-read."""
    app = executor.application(name)
    active = executor.active(app)
    groups: list[dict[str, Any]] = []
    if exposure and active.cluster is not None:
        # A cluster that is gone would make every group's translation wait out Kafka's
        # timeouts: one short probe of each first, and "unknown" with the reason if one of the
        # two does not answer.
        answers: dict[str, bool] = {}
        for other in executor.failover_targets(app, active.cluster):
            silent = [
                c for c in (active.cluster, other)
                if not answers.setdefault(c, executor.answers(c))
            ]  # fmt: skip
            for group in app.groups:
                if not silent:
                    groups.append(executor.exposure(group, active.cluster, other))
                    continue
                groups.append(
                    {"group": group, "from": active.cluster, "to": other, "lag": None,
                     "would_lose": None, "would_reread": None,
                     "note": f"{' and '.join(silent)} does not answer"}
                )  # fmt: skip
    return {
        "app": app.name,
        "active": active.cluster,
        "epoch": active.epoch,
        "failover_id": active.failover_id,
        "preferred": app.preferred,
        "auto_failover": app.auto_failover,
        "running": executor.running(app),
        "groups": groups,
    }
