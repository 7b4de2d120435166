"""Where every application stands (its active cluster and epoch) and which controller replica
leads: what ``drsvc status``, ``drsvc apps`` and the API show, read from Consul only (fast: no
cluster is asked anything)."""

from __future__ import annotations

from typing import Any

from drsvc.adapters.coordination import Coordinator
from drsvc.topology.models import Topology
from failover import naming
from failover.active import decode_active
from failover.errors import FormatError

__all__ = ["application_states", "controller_leader"]


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
