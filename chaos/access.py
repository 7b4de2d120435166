"""Who each process of a scenario is on secured clusters, and what it may do (pure).

On a secured environment every process runs under the principal of its role, as separate
deployments would: a scenario writes one topology file per role, each cluster's ``security``
block naming that role's principal (and the ``consul`` block that role's token, once the
environment gives one), and ``drsvc run`` runs once per principal with the roles that principal
holds. The brokers allow each principal what :func:`failover.kafka_acls.role_grants` gives its
role, nothing more; the workload's producers and consumers run as the application's principal,
which :func:`workload_grants` also lets write and read the scenario's other topics.

On an environment that is not secured, every role shares the one topology of old
(:func:`role_topology` with no blocks gives it unchanged) and one ``drsvc run`` runs every role.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from failover.kafka_acls import Grant, Operation, PatternType, Principals, ResourceType, Role

#: the roles a scenario writes a topology for
TopologyRole = Literal["replicator", "checkpoints", "executor", "application", "verifier"]
TOPOLOGY_ROLES: tuple[TopologyRole, ...] = (
    "replicator",
    "checkpoints",
    "executor",
    "application",
    "verifier",
)

#: the roles of ``drsvc run`` each principal runs: the heartbeats run as the replicator (whose
#: grants include theirs), the controller and the API as the executor
RUN_ROLES: Mapping[TopologyRole, tuple[str, ...]] = {
    "replicator": ("replicate", "heartbeats"),
    "checkpoints": ("checkpoints",),
    "executor": ("controller",),
}

#: the transactional ids of the workload's producers start with this
WORKLOAD_TRANSACTIONAL_PREFIX = "chaos-"


def principal_of(role: TopologyRole, application: str) -> str:
    """The user name ``role`` runs as (``application``'s own for the application role): the
    names :class:`failover.kafka_acls.Principals` grants to, without the ``User:`` type."""
    principal = Principals().of(role, application if role == "application" else None)
    return principal.partition(":")[2]


def split_run_roles(roles: str) -> dict[TopologyRole, str]:
    """``drsvc run --roles`` of each principal for the roles a scenario runs (``roles``: a comma
    separated list, as one ``drsvc run`` of every role would take): the principals that have
    none of them run nothing. Raises ValueError for a role no principal runs."""
    wanted = [r.strip() for r in roles.split(",") if r.strip()]
    split: dict[TopologyRole, list[str]] = {}
    for role in wanted:
        owner = next((p for p, held in _ALL_RUN_ROLES.items() if role in held), None)
        if owner is None:
            raise ValueError(f"no principal runs the role {role!r}")
        split.setdefault(owner, []).append(role)
    return {owner: ",".join(held) for owner, held in split.items()}


# the API runs the failover executor: it is the executor's
_ALL_RUN_ROLES: Mapping[TopologyRole, tuple[str, ...]] = {
    **RUN_ROLES,
    "executor": (*RUN_ROLES["executor"], "api"),
}


def role_topology(
    document: Mapping[str, Any],
    security: Mapping[str, object] | None,
    consul: Mapping[str, object] | None,
) -> dict[str, Any]:
    """``document`` (a topology) with ``security`` as every cluster's security block and
    ``consul`` as its Consul block; a block that is None is left out."""
    rendered = dict(document)
    if security is not None:
        rendered["clusters"] = {
            alias: {**cluster, "security": dict(security)}
            for alias, cluster in document["clusters"].items()
        }
    if consul is not None:
        rendered["consul"] = dict(consul)
    return rendered


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


def grant_roles() -> tuple[Role, ...]:
    """The roles whose grants a scenario creates on each cluster."""
    return ("replicator", "checkpoints", "executor", "application", "verifier")
