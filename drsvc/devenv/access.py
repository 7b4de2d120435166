"""Who each process runs as on a secured local environment, and what it may do (pure).

On a secured environment (``drsvc dev up --secure``) every process of drsvc runs under the
principal of its role, as separate deployments would: one topology file per role, each cluster's
``security`` block naming that role's principal (and the ``consul`` block that role's token), and
``drsvc run`` once per principal with the roles that principal holds. The brokers allow each
principal what :func:`failover.kafka_acls.role_grants` gives its role, nothing more; an
application's producers and consumers run as the application's principal.

The demo (``drsvc demo --secure``) and the chaos suite (``drsvc chaos ... --secure``) both run
so; this module is what they share. On an environment that is not secured every role shares one
topology (:func:`role_topology` with no blocks gives it unchanged) and one ``drsvc run`` runs
every role.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from drsvc.topology.consul import ConsulRole
from failover.kafka_acls import Principals, Role

__all__ = [
    "RUN_ROLES",
    "TOPOLOGY_ROLES",
    "TopologyRole",
    "consul_role",
    "grant_roles",
    "principal_of",
    "role_topology",
    "split_run_roles",
]

#: the roles a topology file is written for
TopologyRole = Literal["replicator", "checkpoints", "executor", "application", "verifier"]
TOPOLOGY_ROLES: tuple[TopologyRole, ...] = (
    "replicator",
    "checkpoints",
    "executor",
    "application",
    "verifier",
)

#: the roles of ``drsvc run`` each principal runs: the heartbeats run as the replicator (whose
#: grants include theirs), the controller as the executor
RUN_ROLES: Mapping[TopologyRole, tuple[str, ...]] = {
    "replicator": ("replicate", "heartbeats"),
    "checkpoints": ("checkpoints",),
    "executor": ("controller",),
}

# the API runs the failover executor: it is the executor's
_ALL_RUN_ROLES: Mapping[TopologyRole, tuple[str, ...]] = {
    **RUN_ROLES,
    "executor": (*RUN_ROLES["executor"], "api"),
}


def principal_of(role: TopologyRole, application: str) -> str:
    """The user name ``role`` runs as (``application``'s own for the application role): the
    names :class:`failover.kafka_acls.Principals` grants to, without the ``User:`` type."""
    principal = Principals().of(role, application if role == "application" else None)
    return principal.partition(":")[2]


def split_run_roles(roles: str) -> dict[TopologyRole, str]:
    """``drsvc run --roles`` of each principal for ``roles`` (a comma separated list, as one
    ``drsvc run`` of every role would take): the principals that have none of them run nothing.
    Raises ValueError for a role no principal runs."""
    wanted = [r.strip() for r in roles.split(",") if r.strip()]
    split: dict[TopologyRole, list[str]] = {}
    for role in wanted:
        owner = next((p for p, held in _ALL_RUN_ROLES.items() if role in held), None)
        if owner is None:
            raise ValueError(f"no principal runs the role {role!r}")
        split.setdefault(owner, []).append(role)
    return {owner: ",".join(held) for owner, held in split.items()}


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


def grant_roles() -> tuple[Role, ...]:
    """The roles whose grants are created on each cluster (the heartbeats' are the
    replicator's: they share its principal)."""
    return ("replicator", "checkpoints", "executor", "application", "verifier")


def consul_role(role: TopologyRole) -> ConsulRole | None:
    """The role's Consul access (None: the verifier reads Kafka only)."""
    return None if role == "verifier" else role
