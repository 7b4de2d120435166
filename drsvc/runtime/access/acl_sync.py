"""``drsvc acls sync``: mirror the source's topic ACLs onto the copies of the flows that set
``sync_acls``, as MirrorMaker 2 does (the rules: :mod:`failover.acl_sync`).

One pass, per flow: list the source's topic bindings and the target's, let the core say which
mirrored bindings are missing, create them, and log what it created and what it skipped. It
only ever adds. The loop runs a pass every interval and survives a failed one (a cluster away,
an ACL missing): it logs the error and tries again at the next interval.

The principal that runs it needs DESCRIBE on the source's cluster resource and ALTER on the
target's (the ``acl-sync`` role of :func:`failover.kafka_acls.role_grants`).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from drsvc.errors import ConfigError, DrsvcError
from drsvc.kafka.acls import create_acls, describe_acls
from drsvc.kafka.clients import KafkaClients
from drsvc.topology.models import Flow, Topology
from failover.acl_sync import SkippedBinding, plan_acl_sync
from failover.errors import PolicyError
from failover.kafka_acls import Grant, Principals, ResourceType

__all__ = ["AclSyncResult", "run_acl_sync", "sync_flow", "sync_pass", "synced_flows"]

log = logging.getLogger("drsvc.acls.sync")


@dataclass(frozen=True)
class AclSyncResult:
    """What one pass did for one flow."""

    flow: str
    created: tuple[Grant, ...]
    present: int
    skipped: tuple[SkippedBinding, ...]


def synced_flows(topology: Topology, flow_id: str | None = None) -> tuple[Flow, ...]:
    """The flows a sync covers: ``flow_id`` alone (it must set ``sync_acls``), or every flow
    that sets it. Raises :class:`ConfigError` naming what is wrong."""
    if flow_id is not None:
        flow = next((f for f in topology.flows if f.id == flow_id), None)
        if flow is None:
            known = ", ".join(f.id for f in topology.flows) or "none"
            raise ConfigError(
                f"topology '{topology.name}' has no flow {flow_id!r} (flows: {known})"
            )
        if not flow.sync_acls:
            raise ConfigError(
                f"topology '{topology.name}': flow {flow_id} does not set sync_acls: true,"
                " so its ACLs are not mirrored"
            )
        return (flow,)
    chosen = tuple(f for f in topology.flows if f.sync_acls)
    if not chosen:
        raise ConfigError(
            f"topology '{topology.name}': no flow sets sync_acls: true, so there is nothing to"
            " mirror"
        )
    return chosen


def sync_flow(
    topology: Topology,
    flow: Flow,
    clients: KafkaClients,
    *,
    principals: Principals | None = None,
    timeout_s: float = 30.0,
) -> AclSyncResult:
    """One pass for ``flow``: create on its target the mirrored bindings that are missing."""
    source = describe_acls(
        clients.admin(flow.source), ResourceType.TOPIC, cluster=flow.source, timeout_s=timeout_s
    )
    target = describe_acls(
        clients.admin(flow.target), ResourceType.TOPIC, cluster=flow.target, timeout_s=timeout_s
    )
    try:
        plan = plan_acl_sync(topology, flow, source, target, principals)
    except PolicyError as err:
        raise ConfigError(f"topology '{topology.name}': flow {flow.id}: {err}") from err
    create_acls(clients.admin(flow.target), plan.missing, cluster=flow.target, timeout_s=timeout_s)
    for grant in plan.missing:
        log.info(
            "flow %s: created %s %s on %s %r for %s (host %s): %s",
            flow.id,
            grant.permission.value,
            grant.operation.value,
            grant.pattern_type.value,
            grant.resource_name,
            grant.principal,
            grant.host,
            grant.why,
        )
    for skipped in plan.skipped:
        binding = skipped.binding
        log.debug(
            "flow %s: skipped %s %s on %s %r for %s: %s",
            flow.id,
            binding.permission.value,
            binding.operation.value,
            binding.pattern_type.value,
            binding.resource_name,
            binding.principal,
            skipped.reason,
        )
    result = AclSyncResult(
        flow.id, plan.missing, len(plan.wanted) - len(plan.missing), plan.skipped
    )
    log.info(
        "flow %s: ACL sync created %d binding(s), %d already present, %d skipped",
        flow.id,
        len(result.created),
        result.present,
        len(result.skipped),
    )
    return result


def sync_pass(
    topology: Topology,
    flows: Sequence[Flow],
    clients: KafkaClients,
    *,
    principals: Principals | None = None,
    timeout_s: float = 30.0,
) -> tuple[AclSyncResult, ...]:
    """One pass over ``flows``, in order; the first error stops it."""
    return tuple(
        sync_flow(topology, flow, clients, principals=principals, timeout_s=timeout_s)
        for flow in flows
    )


def run_acl_sync(
    topology: Topology,
    flows: Sequence[Flow],
    clients: KafkaClients,
    *,
    interval_s: float,
    stop: threading.Event,
    principals: Principals | None = None,
    on_pass: Callable[[tuple[AclSyncResult, ...]], None] | None = None,
) -> int:
    """A pass every ``interval_s`` until ``stop`` is set; return how many passes failed. A
    failed pass is logged and the next one runs on time: a cluster that is away, or an ACL the
    principal lacks, must not end the loop."""
    failed = 0
    while not stop.is_set():
        try:
            results = sync_pass(topology, flows, clients, principals=principals)
        except DrsvcError as err:
            failed += 1
            log.error("ACL sync pass failed (next in %.0f s): %s", interval_s, err)
        else:
            if on_pass is not None:
                on_pass(results)
        stop.wait(interval_s)
    return failed
