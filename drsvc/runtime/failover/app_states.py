"""Where every application stands (its active cluster and epoch) and which controller replica
leads: what ``drsvc status``, ``drsvc apps`` and the API show, read from Consul only (fast: no
cluster is asked anything)."""

from __future__ import annotations

from typing import Any

from drsvc.adapters.coordination import Coordinator
from drsvc.adapters.record_store import read_records
from drsvc.topology.models import Topology
from failover import naming
from failover.active import decode_active
from failover.errors import FormatError

__all__ = ["application_states", "controller_leader", "held_for_recovery"]


def controller_leader(topology: Topology, coordinator: Coordinator) -> str | None:
    """The controller replica holding the leader lock (None: no controller leads)."""
    entry = coordinator.get(naming.controller_lock_key(topology.namespace))
    if entry is None or entry.session is None:
        return None
    return entry.value or None


def application_states(topology: Topology, coordinator: Coordinator) -> dict[str, Any]:
    apps = []
    for app in topology.applications:
        entry = coordinator.get(naming.app_active_key(topology.namespace, app.name))
        row: dict[str, Any] = {
            "app": app.name,
            "preferred": app.preferred,
            "auto_failover": app.auto_failover,
        }
        try:
            active = decode_active(None if entry is None else entry.value, app.preferred)
        except FormatError as err:
            apps.append({**row, "active": None, "epoch": None, "error": str(err)})
            continue
        apps.append(
            {
                **row,
                "active": active.cluster,
                "epoch": active.epoch,
                "failover_id": active.failover_id,
                "error": None,
            }
        )
    return {"controller_leader": controller_leader(topology, coordinator), "applications": apps}


def held_for_recovery(
    topology: Topology, coordinator: Coordinator, source: str, target: str
) -> dict[str, str]:
    """Topics the flow ``source -> target`` must not copy yet: those of applications that an
    unplanned failover moved from ``source`` to ``target`` while records had not crossed,
    until ``drsvc recover`` deals with them. By topic, the failover that holds it."""
    held: dict[str, str] = {}
    for record in read_records(coordinator, topology.namespace):
        plan = record.plan
        if not record.awaits_recovery or (plan.from_cluster, plan.to_cluster) != (source, target):
            continue
        app = next((a for a in topology.applications if a.name == plan.app), None)
        for topic in app.topics if app is not None else ():
            held[topic] = plan.failover_id
    return held
