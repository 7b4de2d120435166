"""Kafka ACL bindings through the admin API: create the grants a role needs
(:func:`failover.kafka_acls.role_grants`), list and remove them.

Creating a binding that exists changes nothing (Kafka treats it as done), so applying the same
grants again is safe; removing takes exactly the bindings named, never a broader filter, so a
binding an operator made by hand is never touched.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)

from drsvc.kafka.errors import translated
from failover.kafka_acls import Grant, Operation, PatternType, Permission
from failover.kafka_acls import ResourceType as GrantResource


def _binding(grant: Grant) -> AclBinding:
    return AclBinding(
        ResourceType[grant.resource_type.value],
        grant.resource_name,
        ResourcePatternType[grant.pattern_type.value],
        grant.principal,
        grant.host,
        AclOperation[grant.operation.value],
        AclPermissionType[grant.permission.value],
    )


def create_acls(
    admin: AdminClient,
    grants: Iterable[Grant],
    *,
    cluster: str | None = None,
    timeout_s: float = 30.0,
) -> int:
    """Create every binding of ``grants``; return how many were asked for."""
    bindings = sorted({_binding(g) for g in grants}, key=str)
    if not bindings:
        return 0
    with translated("creating ACLs", cluster):
        futures = admin.create_acls(bindings, request_timeout=timeout_s)
    for binding, future in futures.items():
        with translated(f"creating the ACL {binding}", cluster):
            future.result(timeout=timeout_s)
    return len(bindings)


def delete_acls(
    admin: AdminClient,
    grants: Iterable[Grant],
    *,
    cluster: str | None = None,
    timeout_s: float = 30.0,
) -> int:
    """Delete exactly the bindings of ``grants`` (each filter matches one binding); return how
    many bindings Kafka deleted."""
    filters = [
        AclBindingFilter(
            ResourceType[g.resource_type.value],
            g.resource_name,
            ResourcePatternType[g.pattern_type.value],
            g.principal,
            g.host,
            AclOperation[g.operation.value],
            AclPermissionType[g.permission.value],
        )
        for g in dict.fromkeys(grants)
    ]
    if not filters:
        return 0
    deleted = 0
    with translated("deleting ACLs", cluster):
        futures = admin.delete_acls(filters, request_timeout=timeout_s)
    for found_filter, future in futures.items():
        with translated(f"deleting the ACL {found_filter}", cluster):
            deleted += len(future.result(timeout=timeout_s))
    return deleted


def principal_grants(
    admin: AdminClient, principal: str, *, cluster: str | None = None, timeout_s: float = 30.0
) -> list[Grant]:
    """Every binding of ``principal`` on the cluster of a kind drsvc grants (topics, groups,
    transactional ids)."""
    # None matches any name and any host (the client's annotations say str only).
    query = AclBindingFilter(
        ResourceType.ANY,
        None,  # type: ignore[arg-type]
        ResourcePatternType.ANY,
        principal,
        None,  # type: ignore[arg-type]
        AclOperation.ANY,
        AclPermissionType.ANY,
    )
    with translated("listing ACLs", cluster):
        found: list[Any] = admin.describe_acls(query, request_timeout=timeout_s).result(
            timeout=timeout_s
        )
    grants = []
    kinds = {r.value for r in GrantResource}
    operations = {o.value for o in Operation}
    for binding in found:
        if binding.restype.name not in kinds or binding.operation.name not in operations:
            continue
        grants.append(
            Grant(
                resource_type=GrantResource(binding.restype.name),
                pattern_type=PatternType(binding.resource_pattern_type.name),
                resource_name=binding.name,
                operation=Operation(binding.operation.name),
                principal=binding.principal,
                permission=Permission(binding.permission_type.name),
                host=binding.host,
            )
        )
    return grants
