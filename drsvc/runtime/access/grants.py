"""The grants of a role, computed by the core (:mod:`failover.kafka_acls`,
:mod:`failover.consul_policies`) for a loaded topology, with the core's refusals as drsvc's
:class:`~drsvc.errors.ConfigError` naming the topology."""

from __future__ import annotations

from drsvc.errors import ConfigError
from drsvc.topology.models import Topology
from failover.consul_policies import role_rules
from failover.errors import PolicyError
from failover.kafka_acls import Grant, Role, role_grants


def kafka_grants(
    topology: Topology, role: Role, cluster: str, application: str | None = None
) -> tuple[Grant, ...]:
    """The ACL bindings ``role`` needs on ``cluster`` (:func:`failover.kafka_acls.role_grants`)."""
    try:
        return role_grants(topology, role, cluster, application=application)
    except PolicyError as err:
        raise ConfigError(f"topology '{topology.name}': {err}") from err


def consul_policy(topology: Topology, role: str, application: str | None = None) -> str:
    """The Consul policy (HCL) of ``role`` (see :func:`failover.consul_policies.role_rules`)."""
    try:
        return role_rules(topology, role, application=application)
    except PolicyError as err:
        raise ConfigError(f"topology '{topology.name}': {err}") from err
