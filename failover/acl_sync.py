"""Which topic ACLs of a flow's source to mirror onto its copies, as MirrorMaker 2 users know it.

A flow that sets ``sync_acls`` gives the copies of its topics the read access the originals
have, so that a consumer that moves to the other cluster (a failover, a read-only replica) is
allowed to read there what it read at home. :func:`plan_acl_sync` takes the source's topic ACL
bindings and the target's, as plain :class:`~failover.kafka_acls.Grant` values, and says which
bindings the target should have, which of them are missing, and what it left out and why.

The rules, first match wins for each source binding:

- only TOPIC bindings, and none of drsvc's own principals (:meth:`Principals.services`);
- READ and DESCRIBE are mirrored as they are, ALL becomes READ (READ implies DESCRIBE); WRITE,
  CREATE, DELETE, ALTER and the rest never are: a copy has one writer, its flow, and stays
  read-only for applications (their role grants deny WRITE under the copies' prefix as well);
- DENY bindings of READ, DESCRIBE or ALL are mirrored as DENY READ and DENY DESCRIBE. MirrorMaker
  2 skips them, but then a principal that a DENY keeps from one topic under a prefix it may
  read would read that topic's copy: mirroring the DENY keeps the target no more open than the
  source. A DENY for a wildcard principal (``User:*``) is skipped, since it would also stop
  drsvc's own roles on the copies;
- a LITERAL name goes through the flow's rules (include and exclude, internal topics,
  heartbeats, loops, multi-hop) to its remote name, and is skipped when the flow does not copy
  it; the LITERAL wildcard ``*`` is skipped (it names every topic, drsvc's own included);
- a PREFIXED name ``p`` becomes ``<source><separator>p`` under the prefix policy, when the flow
  may copy some topic under ``p`` and the remote prefix reaches none of drsvc's internal topics
  on the target (``<source>.checkpoints.internal``, heartbeats copies...). Under the identity
  policy a prefix would also name the target's own topics, so it is skipped.

Like MirrorMaker 2 this only ever adds: a binding removed at the source stays on the target
until an operator removes it (a DENY that stays is stricter, an ALLOW that stays is not; see
``docs/security.md``). Nothing here does I/O.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from failover import naming
from failover.kafka_acls import (
    WILDCARD,
    FlowShape,
    Grant,
    Operation,
    PatternType,
    Permission,
    Principals,
    Resource,
    ResourceType,
    TopologyShape,
    copy_name,
    flow_source_resources,
    heartbeats_topics,
)

__all__ = [
    "MIRRORED_OPERATIONS",
    "AclSyncPlan",
    "SkippedBinding",
    "plan_acl_sync",
    "remote_binding",
]

#: the operations a mirrored binding may name: read access only, never write
MIRRORED_OPERATIONS = frozenset({Operation.READ, Operation.DESCRIBE})


@dataclass(frozen=True)
class SkippedBinding:
    """A source binding left out, and why."""

    binding: Grant
    reason: str


@dataclass(frozen=True)
class AclSyncPlan:
    """One flow's mirrored bindings: ``wanted`` on the target, the ``missing`` part of them to
    create, and the source bindings ``skipped``."""

    flow: str
    wanted: tuple[Grant, ...]
    missing: tuple[Grant, ...]
    skipped: tuple[SkippedBinding, ...]


def plan_acl_sync(
    topology: TopologyShape,
    flow: FlowShape,
    source_bindings: Iterable[Grant],
    target_bindings: Iterable[Grant],
    principals: Principals | None = None,
) -> AclSyncPlan:
    """What to create on ``flow``'s target so its copies carry the source's read ACLs. A flow
    that does not set ``sync_acls`` wants nothing."""
    flow_id = f"{flow.source}->{flow.target}"
    if not flow.sync_acls:
        return AclSyncPlan(flow_id, (), (), ())
    who = principals if principals is not None else Principals()
    wanted: dict[Grant, Grant] = {}
    skipped: list[SkippedBinding] = []
    for binding in sorted(set(source_bindings)):
        mirrored = remote_binding(topology, flow, binding, who)
        if isinstance(mirrored, str):
            skipped.append(SkippedBinding(binding, mirrored))
            continue
        for grant in mirrored:
            wanted.setdefault(grant, grant)
    existing = set(target_bindings)
    ordered = tuple(sorted(wanted))
    return AclSyncPlan(
        flow_id,
        ordered,
        tuple(g for g in ordered if g not in existing),
        tuple(skipped),
    )


def remote_binding(
    topology: TopologyShape, flow: FlowShape, binding: Grant, principals: Principals
) -> tuple[Grant, ...] | str:
    """The bindings ``binding`` (of ``flow``'s source) becomes on the target, or why none."""
    if binding.resource_type is not ResourceType.TOPIC:
        return f"a {binding.resource_type.value} binding: only topic ACLs are mirrored"
    if binding.principal in principals.services():
        return f"{binding.principal} is one of drsvc's own principals"
    operations = _mirrored_operations(binding)
    if not operations:
        return (
            f"{binding.operation.value} is never mirrored: only READ and DESCRIBE (ALL as READ);"
            " a copy has one writer, its flow"
        )
    if binding.permission is Permission.DENY and _is_wildcard_principal(binding.principal):
        return "a DENY for every principal would also stop drsvc's own roles on the copies"
    resource = _remote_resource(topology, flow, binding.resource)
    if isinstance(resource, str):
        return resource
    source_text = (
        f"{binding.permission.value} {binding.operation.value} on {binding.pattern_type.value}"
        f" {binding.resource_name!r}"
    )
    return tuple(
        Grant(
            resource.type,
            resource.pattern,
            resource.name,
            operation,
            binding.principal,
            binding.permission,
            binding.host,
            why=f"flow {flow.source}->{flow.target}: mirrors {source_text} of {flow.source}",
        )
        for operation in operations
    )


def _mirrored_operations(binding: Grant) -> tuple[Operation, ...]:
    if binding.operation in MIRRORED_OPERATIONS:
        return (binding.operation,)
    if binding.operation is Operation.ALL:
        if binding.permission is Permission.ALLOW:
            return (Operation.READ,)  # READ implies DESCRIBE
        return (Operation.READ, Operation.DESCRIBE)
    return ()


def _is_wildcard_principal(principal: str) -> bool:
    return principal == WILDCARD or principal.partition(":")[2] == WILDCARD


def _remote_resource(
    topology: TopologyShape, flow: FlowShape, resource: Resource
) -> Resource | str:
    if resource.pattern is PatternType.LITERAL:
        if resource.name == WILDCARD:
            return (
                "the wildcard '*' names every topic, drsvc's own included; grant on the copies"
                " by hand"
            )
        if resource.name in heartbeats_topics(topology, flow.source):
            return f"{resource.name!r} is drsvc's heartbeats topic"
        copied = flow_source_resources(topology, flow)
        remote = copy_name(topology, flow, resource.name)
        if remote is None or not any(r.covers(resource.name) for r in copied):
            return f"flow {flow.source}->{flow.target} does not copy {resource.name!r}"
        return Resource(ResourceType.TOPIC, PatternType.LITERAL, remote)
    if flow.policy == "identity":
        return (
            f"prefix {resource.name!r}: under the identity policy it would also name"
            f" {flow.target}'s own topics"
        )
    if not any(_may_overlap(resource.name, r) for r in flow_source_resources(topology, flow)):
        return f"flow {flow.source}->{flow.target} copies no topic under {resource.name!r}"
    remote_prefix = f"{flow.source}{flow.separator}{resource.name}"
    for internal in sorted(_internal_topics_on_target(topology, flow.target)):
        if internal.startswith(remote_prefix):
            return f"the remote prefix {remote_prefix!r} would reach drsvc's topic {internal!r}"
    return Resource(ResourceType.TOPIC, PatternType.PREFIXED, remote_prefix)


def _may_overlap(prefix: str, copied: Resource) -> bool:
    """Whether some name under ``prefix`` may be one the resource ``copied`` covers."""
    if copied.pattern is PatternType.LITERAL:
        return copied.name == WILDCARD or copied.name.startswith(prefix)
    return copied.name.startswith(prefix) or prefix.startswith(copied.name)


def _internal_topics_on_target(topology: TopologyShape, target: str) -> set[str]:
    names = topology.internal_names()
    found = set(heartbeats_topics(topology, target))
    for flow in topology.flows:
        if flow.target == target:
            found.add(names.checkpoints_topic(flow.source))
            found.add(names.offset_syncs_topic(flow.source))
            found.add(naming.slots_topic(flow.source, flow.target))
    return found
