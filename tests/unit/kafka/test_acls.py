"""The ACL port's translation between the core's grants and the client's bindings (the calls
themselves run against real brokers in the integration tests)."""

from __future__ import annotations

from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    ResourcePatternType,
    ResourceType,
)

from drsvc.kafka.acls import _binding, _grant
from failover.kafka_acls import (
    CLUSTER_NAME,
    Grant,
    Operation,
    PatternType,
    Permission,
)
from failover.kafka_acls import ResourceType as CoreType


def test_grants_and_bindings_round_trip_the_cluster_resource_included() -> None:
    grants = [
        Grant(
            CoreType.TOPIC,
            PatternType.PREFIXED,
            "east.",
            Operation.WRITE,
            "User:a",
            Permission.DENY,
        ),
        Grant(CoreType.CLUSTER, PatternType.LITERAL, CLUSTER_NAME, Operation.ALTER, "User:s"),
        Grant(CoreType.GROUP, PatternType.LITERAL, "g", Operation.ALL, "User:b", host="10.0.0.1"),
    ]
    for grant in grants:
        assert _grant(_binding(AclBinding, grant)) == grant
    assert (
        _binding(AclBinding, grants[1]).restype is ResourceType.BROKER
    )  # librdkafka's name for CLUSTER
    assert _binding(AclBindingFilter, grants[0]).permission_type is AclPermissionType.DENY


def test_a_binding_the_core_has_no_word_for_is_left_out() -> None:
    unknown = AclBinding(
        ResourceType.TOPIC,
        "t",
        ResourcePatternType.LITERAL,
        "User:a",
        "*",
        AclOperation.UNKNOWN,
        AclPermissionType.ALLOW,
    )
    assert _grant(unknown) is None
