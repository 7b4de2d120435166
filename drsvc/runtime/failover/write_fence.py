"""The ``fence-writes`` step of a failover, and its undoing on a rollback (the decisions:
:mod:`failover.write_fence`).

Both answer an outcome and a detail for the failover's record and never raise for a Kafka or
ACL error: the plan decides what a failure means (a planned failover rolls back, an unplanned
one retries), and an error that escaped the step would stop the executor with the application
active nowhere. An ACL call that is refused (the executor lacks ALTER on the cluster resource)
is a failure like any other here, with the reason in the record.

The ACL calls go through :class:`WriteFenceAcls`, so the executor's logic is unit-tested on a
fake; :func:`write_fence_acls_for` gives the real one for the executor's real clusters.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Protocol

from drsvc.errors import ConfigError, DrsvcError
from drsvc.kafka.acls import create_acls, delete_acls
from drsvc.kafka.admin import admin_client
from drsvc.kafka.errors import translated
from drsvc.kafka.types import AdminClient
from drsvc.runtime.failover.clusters import KafkaFailoverClusters
from drsvc.topology.models import Application
from failover.errors import PolicyError
from failover.failover_plan import FailoverPlan, Outcome
from failover.kafka_acls import Grant
from failover.write_fence import FenceChanges, fence_changes, rollback_changes

__all__ = [
    "WRITE_FENCE_TIMEOUT_S",
    "KafkaWriteFenceAcls",
    "WriteFenceAcls",
    "fence_writes",
    "lift_fence_for_rollback",
    "write_fence_acls_for",
]

log = logging.getLogger(__name__)

#: the bound of each ACL call: the cluster answered moments ago, ACL changes are quick
WRITE_FENCE_TIMEOUT_S = 15.0


class WriteFenceAcls(Protocol):
    """The ACL calls of write fencing; errors are drsvc's (:mod:`drsvc.errors`)."""

    def delete(self, cluster: str, grants: Sequence[Grant]) -> int:
        """Delete exactly these bindings; how many existed."""
        ...

    def create(self, cluster: str, grants: Sequence[Grant]) -> int:
        """Create these bindings (existing ones stay as they are)."""
        ...


class KafkaWriteFenceAcls:
    """:class:`WriteFenceAcls` through each cluster's admin API, with the settings
    ``client_config`` gives for an alias (bootstrap servers and credentials, read per call)."""

    def __init__(self, client_config: Callable[[str], Mapping[str, str]]) -> None:
        self._client_config = client_config

    def delete(self, cluster: str, grants: Sequence[Grant]) -> int:
        return delete_acls(
            self._admin(cluster), grants, cluster=cluster, timeout_s=WRITE_FENCE_TIMEOUT_S
        )

    def create(self, cluster: str, grants: Sequence[Grant]) -> int:
        return create_acls(
            self._admin(cluster), grants, cluster=cluster, timeout_s=WRITE_FENCE_TIMEOUT_S
        )

    def _admin(self, cluster: str) -> AdminClient:
        config = dict(self._client_config(cluster))
        with translated("creating an admin client", cluster):
            return admin_client(config.pop("bootstrap.servers"), config)


class _NoAcls:
    """For executors over clusters that are not Kafka's (tests' fakes given no ACLs): every
    call fails, so a plan that fences rolls back instead of moving without its fence."""

    def delete(self, cluster: str, grants: Sequence[Grant]) -> int:
        raise ConfigError(f"cluster '{cluster}': this executor cannot change ACLs")

    def create(self, cluster: str, grants: Sequence[Grant]) -> int:
        raise ConfigError(f"cluster '{cluster}': this executor cannot change ACLs")


def write_fence_acls_for(clusters: object) -> WriteFenceAcls:
    """The ACL calls for an executor's ``clusters``: through the same clusters' settings when
    they are the topology's real ones."""
    if isinstance(clusters, KafkaFailoverClusters):
        return KafkaWriteFenceAcls(clusters.client_config)
    return _NoAcls()


def fence_writes(plan: FailoverPlan, app: Application, acls: WriteFenceAcls) -> tuple[Outcome, str]:
    """The ``fence-writes`` step: lift the DENY WRITE on the new cluster, then (planned) add it
    on the old one."""
    try:
        changes = fence_changes(plan, app)
    except PolicyError as err:
        return Outcome.FAILED, f"write fence of {app.name}: {err}"
    return _apply(changes, acls, f"write fence of {app.name}")


def lift_fence_for_rollback(
    plan: FailoverPlan, app: Application, acls: WriteFenceAcls, *, fenced: bool
) -> tuple[Outcome, str] | None:
    """Before a rollback reactivates the old cluster: lift the DENY WRITE the failover may have
    added there. None when the plan does not fence.

    ``fenced``: the fence-writes step is recorded done, so the DENY is there. Then a lift that
    fails is the rollback's failure (retried, then resumable): reactivating would give the
    application back a cluster it cannot write. Otherwise the step failed or never ran, most
    likely for the very reason the lift would fail too (a missing grant): the lift is tried,
    its failure reported in the detail, and the old cluster reactivated all the same, since
    waiting on it would keep the application active nowhere."""
    try:
        changes = rollback_changes(plan, app)
    except PolicyError as err:
        return (Outcome.FAILED if fenced else Outcome.OK), f"write fence of {app.name}: {err}"
    if not changes.lift and not changes.deny:
        return None
    outcome, detail = _apply(changes, acls, f"rollback of {app.name}'s write fence")
    if outcome is Outcome.FAILED and not fenced:
        return Outcome.OK, f"{detail}; the fence was never recorded as set: reactivating anyway"
    return outcome, detail


def _apply(changes: FenceChanges, acls: WriteFenceAcls, what: str) -> tuple[Outcome, str]:
    done: list[str] = []
    try:
        for cluster, grants in changes.lift:
            deleted = acls.delete(cluster, grants)
            done.append(f"DENY WRITE lifted on {cluster} ({deleted} of {len(grants)} present)")
        for cluster, grants in changes.deny:
            acls.create(cluster, grants)
            topics = ", ".join(g.resource_name for g in grants)
            principal = grants[0].principal if grants else "nobody"
            done.append(f"DENY WRITE of {principal} on {cluster}: {topics}")
    except DrsvcError as err:
        so_far = f" (done: {'; '.join(done)})" if done else ""
        log.warning("%s failed: %s%s", what, err, so_far)
        return Outcome.FAILED, f"{what} failed: {err}{so_far}"
    return Outcome.OK, f"{what}: " + "; ".join(done)
