"""Kafka ACL bindings through the admin API: create the grants a role needs
(:func:`failover.kafka_acls.role_grants`), list a cluster's bindings, and delete bindings (the
write fencing of a planned failover removes what it added).

Creating a binding that exists changes nothing (Kafka treats it as done), and deleting one that
is absent deletes nothing, so applying the same grants again, or removing them again, is safe.
Bindings travel as :class:`~failover.kafka_acls.Grant` values; a listed binding the core has no
word for (a resource type such as a delegation token) is left out of the answer.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TypeVar

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
from failover import kafka_acls as core
from failover.kafka_acls import Grant

__all__ = ["create_acls", "delete_acls", "describe_acls"]

#: librdkafka calls Kafka's CLUSTER resource type BROKER (the same code on the wire)
_CLIENT_TYPE_NAMES = {core.ResourceType.CLUSTER: "BROKER"}
_CORE_TYPES = {_CLIENT_TYPE_NAMES.get(t, t.value): t for t in core.ResourceType}


_B = TypeVar("_B", AclBinding, AclBindingFilter)


def _client_type(resource_type: core.ResourceType) -> ResourceType:
    return ResourceType[_CLIENT_TYPE_NAMES.get(resource_type, resource_type.value)]


def _binding(kind: type[_B], grant: Grant) -> _B:
    """``grant`` as the client's binding, or as a filter that matches exactly that binding."""
    return kind(
        _client_type(grant.resource_type),
        grant.resource_name,
        ResourcePatternType[grant.pattern_type.value],
        grant.principal,
        grant.host,
        AclOperation[grant.operation.value],
        AclPermissionType[grant.permission.value],
    )


def _name(value: object) -> str:
    # A binding the client built holds its enums; the stubs also allow the str and int forms.
    return str(getattr(value, "name", value))


def _grant(binding: AclBinding) -> Grant | None:
    """The core's value of a listed binding, or None when the core has no word for a part."""
    resource_type = _CORE_TYPES.get(_name(binding.restype))
    try:
        pattern = core.PatternType(_name(binding.resource_pattern_type))
        operation = core.Operation(_name(binding.operation))
        permission = core.Permission(_name(binding.permission_type))
    except ValueError:
        return None
    if resource_type is None:
        return None
    return Grant(
        resource_type,
        pattern,
        binding.name,
        operation,
        binding.principal,
        permission,
        binding.host,
    )


def create_acls(
    admin: AdminClient,
    grants: Iterable[Grant],
    *,
    cluster: str | None = None,
    timeout_s: float = 30.0,
) -> int:
    """Create every binding of ``grants``; return how many were asked for."""
    bindings = sorted({_binding(AclBinding, g) for g in grants}, key=str)
    if not bindings:
        return 0
    with translated("creating ACLs", cluster):
        futures = admin.create_acls(bindings, request_timeout=timeout_s)
    for binding, future in futures.items():
        with translated(f"creating the ACL {binding}", cluster):
            future.result(timeout=timeout_s)
    return len(bindings)


def describe_acls(
    admin: AdminClient,
    resource_type: core.ResourceType,
    *,
    principal: str | None = None,
    cluster: str | None = None,
    timeout_s: float = 30.0,
) -> tuple[Grant, ...]:
    """Every binding on resources of ``resource_type`` (of ``principal`` only, when given),
    LITERAL and PREFIXED, ALLOW and DENY, sorted. Listing needs DESCRIBE on the cluster."""
    # None matches any name, principal or host (the stubs ask for str; the client takes None).
    wanted = AclBindingFilter(
        _client_type(resource_type),
        None,  # type: ignore[arg-type]
        ResourcePatternType.ANY,
        principal,  # type: ignore[arg-type]
        None,  # type: ignore[arg-type]
        AclOperation.ANY,
        AclPermissionType.ANY,
    )
    with translated("listing ACLs", cluster):
        future = admin.describe_acls(wanted, request_timeout=timeout_s)
    with translated("listing ACLs", cluster):
        bindings = future.result(timeout=timeout_s)
    grants = (_grant(b) for b in bindings)
    return tuple(sorted({g for g in grants if g is not None}))


def delete_acls(
    admin: AdminClient,
    grants: Iterable[Grant],
    *,
    cluster: str | None = None,
    timeout_s: float = 30.0,
) -> int:
    """Delete exactly the bindings of ``grants`` (each filter matches one binding, never a
    wider one); return how many existed and were deleted."""
    filters = sorted({_binding(AclBindingFilter, g) for g in grants}, key=str)
    if not filters:
        return 0
    with translated("deleting ACLs", cluster):
        futures = admin.delete_acls(filters, request_timeout=timeout_s)
    deleted = 0
    for acl_filter, future in futures.items():
        with translated(f"deleting the ACL {acl_filter}", cluster):
            deleted += len(future.result(timeout=timeout_s))
    return deleted
