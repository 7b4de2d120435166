"""Who each process of a scenario is on secured clusters, and what the chaos workload may do
(pure).

Who runs as which principal, the per-role topologies and the split of ``drsvc run`` by principal
are the secured local environment's, shared with ``drsvc demo --secure``
(:mod:`drsvc.devenv.access`, re-exported here). What is the suite's own: the workload's producers
and consumers run as the application's principal, which :func:`workload_grants` also lets write
and read the scenario's other topics.
"""

from __future__ import annotations

from drsvc.devenv.access import (
    RUN_ROLES,
    TOPOLOGY_ROLES,
    TopologyRole,
    grant_roles,
    principal_of,
    role_topology,
    split_run_roles,
)
from failover.kafka_acls import Grant, Operation, PatternType, ResourceType

__all__ = [
    "RUN_ROLES",
    "TOPOLOGY_ROLES",
    "WORKLOAD_TRANSACTIONAL_PREFIX",
    "TopologyRole",
    "grant_roles",
    "principal_of",
    "role_topology",
    "split_run_roles",
    "workload_grants",
]

#: the transactional ids of the workload's producers start with this
WORKLOAD_TRANSACTIONAL_PREFIX = "chaos-"


def workload_grants(principal: str, prefix: str) -> tuple[Grant, ...]:
    """What the workload needs beyond its application's grants: to write and read every topic
    named ``prefix``..., commit in every group named so, and run its transactional producers."""
    user = f"User:{principal}"
    why = "the chaos workload's producers and consumers"
    rows: list[tuple[ResourceType, str, Operation]] = [
        (ResourceType.TOPIC, prefix, Operation.WRITE),
        (ResourceType.TOPIC, prefix, Operation.READ),
        (ResourceType.GROUP, prefix, Operation.READ),
        (ResourceType.TRANSACTIONAL_ID, WORKLOAD_TRANSACTIONAL_PREFIX, Operation.WRITE),
    ]
    return tuple(
        Grant(kind, PatternType.PREFIXED, name, operation, user, why=why)
        for kind, name, operation in rows
    )
