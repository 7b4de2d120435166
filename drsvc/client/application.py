"""What a client needs to know of its application: the topology's view of it, where Consul is,
and what the failover that made a cluster active recorded (its cut-offs)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from drsvc.adapters.consul_access import first_consul_address
from drsvc.adapters.coordination import Coordinator
from drsvc.adapters.record_store import read_record
from drsvc.dev_endpoints import LocalEndpoints
from drsvc.errors import ConfigError
from drsvc.kafka.clients import KafkaClients, is_protected_setting
from drsvc.settings import Settings
from drsvc.topology.loader import load_topology
from drsvc.topology.models import Application, Topology
from failover.errors import FormatError
from failover.logical_topics import LogicalTopic
from failover.naming import app_active_key
from failover.replication_policy import IdentityPolicy, ReplicationPolicy

__all__ = ["ClientApplication", "consul_address", "resolve_topology"]

#: librdkafka settings the client sets itself from the active cluster
_MANAGED_SETTINGS = ("bootstrap.servers", "metadata.broker.list")
#: what an application's clients start from, before its own settings: librdkafka's own log level
#: (the port's quieter default suits drsvc's roles, which report every failure as an error, not
#: an application that may rely on librdkafka's log lines)
_APPLICATION_DEFAULTS: Mapping[str, Any] = {"log_level": 6}


def resolve_topology(topology: Topology | str | Path) -> Topology:
    """A loaded topology, from itself or from its file."""
    if isinstance(topology, Topology):
        return topology
    return load_topology(topology)


def consul_address(consul: str | None, configured: str | None = None) -> str:
    """The Consul HTTP address the client talks to: the argument, else DRSVC_CONSUL_HTTP_ADDR,
    else CONSUL_HTTP_ADDR, else ``configured`` (the topology's ``consul.address``), else the
    local ``drsvc dev`` environment's agent (as the CLI finds it)."""
    address = first_consul_address(consul, os.environ, configured)
    if address:
        return address
    address = _local_endpoints().consul_http_addr()
    if not address:
        raise ConfigError(
            "no Consul address: pass consul='host:port', set DRSVC_CONSUL_HTTP_ADDR or "
            "CONSUL_HTTP_ADDR, give the topology a consul.address, or start the local "
            "environment with 'drsvc dev up'"
        )
    return address


@dataclass(frozen=True)
class ClientApplication:
    """An application of a topology, as its clients see it."""

    topology: Topology
    application: Application

    @classmethod
    def of(cls, app: str, topology: Topology | str | Path) -> ClientApplication:
        loaded = resolve_topology(topology)
        return cls(loaded, loaded.application(app))

    @property
    def name(self) -> str:
        return self.application.name

    @property
    def active_key(self) -> str:
        return app_active_key(self.topology.namespace, self.application.name)

    def client_settings(self, config: Mapping[str, Any]) -> dict[str, Any]:
        """The application's own librdkafka settings ``config`` as the overlay of its clients
        (see :class:`~drsvc.kafka.clients.KafkaClients`): where a cluster is and how to
        authenticate to it come from the topology.

        Raises :class:`ConfigError` for settings that name servers, and for security settings
        (``security.protocol``, ``sasl.*``, ``ssl.*``...) that differ from what the topology
        gives the preferred cluster; a security setting equal to the topology's is dropped, so
        an application that passes the same settings as the topology keeps working.
        """
        managed = sorted(k for k in _MANAGED_SETTINGS if k in config)
        if managed:
            raise ConfigError(
                f"client configuration of application '{self.name}' sets {', '.join(managed)}: "
                "leave it out, the client connects to the application's active cluster"
            )
        protected = [key for key in config if is_protected_setting(key)]
        if not protected:
            return {**_APPLICATION_DEFAULTS, **config}
        preferred = self.application.preferred
        given = self.kafka_clients(preferred).config(preferred)
        differing = sorted(
            key for key in protected if key not in given or str(config[key]) != str(given[key])
        )
        if differing:
            # Names only: the values may be secrets.
            raise ConfigError(
                f"client configuration of application '{self.name}' sets"
                f" {', '.join(differing)}, which the topology gives cluster '{preferred}'"
                " otherwise or not at all: leave it out, the security settings of every"
                " cluster come from the topology"
            )
        own = {key: value for key, value in config.items() if key not in protected}
        return {**_APPLICATION_DEFAULTS, **own}

    def kafka_clients(self, cluster: str) -> KafkaClients:
        """The factory of the application's clients of ``cluster``: the topology's settings,
        with the local ``drsvc dev`` environment's bootstrap servers where the topology names
        none."""
        overrides: dict[str, str] = {}
        if self.topology.cluster(cluster).bootstrap_servers is None:
            overrides[cluster] = _local_endpoints().bootstrap_servers(cluster)
        return KafkaClients(self.topology, overrides)

    def client_config(self, cluster: str, config: Mapping[str, Any]) -> dict[str, Any]:
        """The librdkafka settings of a client of ``cluster`` with the application's own
        ``config`` (:meth:`client_settings`): what the port's factory builds it with."""
        return self.kafka_clients(cluster).config(cluster, self.client_settings(config))

    def policy_on(self, cluster: str) -> ReplicationPolicy:
        """How copies are named on ``cluster``: the policy of the flows into it (identity when
        none copies there)."""
        flows = self.topology.flows_into(cluster)
        prefix = [f for f in flows if f.policy != "identity"]
        if prefix:
            return self.topology.policy_for(prefix[0])
        return IdentityPolicy()

    def logical_topics(self, names: list[str], cluster: str) -> list[LogicalTopic]:
        policy = self.policy_on(cluster)
        return [LogicalTopic(name, policy) for name in names]

    def cutoffs(
        self, coordinator: Coordinator, failover_id: str | None
    ) -> dict[tuple[str, int], int]:
        """The cut-offs failover ``failover_id`` recorded (remote topic partition -> its end at
        the switch); none when the cluster was not made active by a failover."""
        if failover_id is None:
            return {}
        try:
            record = read_record(coordinator, self.topology.namespace, failover_id)
        except FormatError as err:
            raise ConfigError(f"failover record {failover_id}: {err}") from err
        if record is None:
            raise ConfigError(
                f"the active key of application '{self.name}' names failover {failover_id}, "
                "whose record is not in Consul"
            )
        return {(c.topic, c.partition): c.offset for c in record.cutoffs}


def _local_endpoints() -> LocalEndpoints:
    """The local environment of DRSVC_STATE_DIR, as the CLI finds it."""
    return LocalEndpoints(Settings.from_env().state_dir)
