"""Kafka ACL bindings through the admin API: create the grants a role needs
(:func:`failover.kafka_acls.role_grants`).

Creating a binding that exists changes nothing (Kafka treats it as done), so applying the same
grants again is safe.
"""

from __future__ import annotations

from collections.abc import Iterable

from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)

from drsvc.kafka.errors import translated
from failover.kafka_acls import Grant


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
