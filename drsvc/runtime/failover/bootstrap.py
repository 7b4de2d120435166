"""Every application's active-cluster document, created from the topology when drsvc starts.

An absent key means "active on the preferred cluster, under the configured lease"
(:mod:`failover.active`); that meaning rests on every client and executor reading the same
topology. Writing the document once, at its preferred cluster with the configured lease, makes
the lease and the epoch something clients read from Consul instead of something each of them
assumes. A key that exists is never touched: it is created with a compare-and-set on index 0,
so a failover that wrote it first (or an operator) always wins.
"""

from __future__ import annotations

import logging
import time

from drsvc.adapters.coordination import Coordinator
from drsvc.adapters.record_store import read_records
from drsvc.topology.models import Topology
from failover import naming
from failover.active import ActiveDocument
from failover.failover_plan import FailoverRecord, highest_epoch

__all__ = ["ensure_active_documents"]

log = logging.getLogger(__name__)


def ensure_active_documents(
    topology: Topology, coordinator: Coordinator, *, now_ms: int | None = None
) -> list[str]:
    """Create the active document of each application of ``topology`` whose key is absent:
    its preferred cluster, the configured lease, and an epoch above any its failover records
    hold (a key deleted by hand does not take the epoch back). Returns the names of the
    applications whose document it created."""
    namespace = topology.namespace
    written_ms = int(time.time() * 1000) if now_ms is None else now_ms
    records: list[FailoverRecord] | None = None
    created = []
    for app in topology.applications:
        key = naming.app_active_key(namespace, app.name)
        if coordinator.get(key) is not None:
            continue
        if records is None:
            records = _records(coordinator, namespace)
        document = ActiveDocument(
            app.preferred,
            highest_epoch(records, app.name) + 1,
            None,  # no failover wrote it
            written_ms,
            lease_ms=int(app.lease_s * 1000),
        )
        if coordinator.put(key, document.encode(), index=0):
            log.info(
                "application %s: active document created on %s (epoch %d, lease %gs)",
                app.name,
                app.preferred,
                document.epoch,
                app.lease_s,
            )
            created.append(app.name)
    return created


def _records(coordinator: Coordinator, namespace: str) -> list[FailoverRecord]:
    return read_records(
        coordinator,
        namespace,
        lambda key, err: log.warning("skipping unreadable failover record %s: %s", key, err),
    )
