"""The client factory: every Kafka client drsvc builds, for a cluster of a topology.

A role asks :class:`KafkaClients` for a consumer, a producer or the admin client of a cluster
alias and gives only its own settings (an *overlay*: group id, isolation, linger...). Where the
cluster is and how to authenticate to it come from the topology, merged in one place,
:meth:`KafkaClients.config`, and an overlay cannot change them: a role that tried to set
``security.protocol``, a ``sasl.*`` or ``ssl.*`` key, or the bootstrap servers would either
undo the cluster's security or send its credentials to another cluster.

The clients returned are confluent-kafka's own objects, unwrapped: the replication engine
spends about a microsecond per record and must not pay for a wrapper around ``produce``.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from functools import partial
from types import MappingProxyType
from typing import Any

from confluent_kafka import Consumer, KafkaError, Producer
from confluent_kafka.admin import AdminClient

from drsvc.errors import ConfigError
from drsvc.kafka.clock import Clock, SystemClock
from drsvc.kafka.errors import refuses_credentials, translated
from drsvc.kafka.reader import ReadLimits, TopicReader, reader_settings
from drsvc.topology.models import Topology

__all__ = ["CLIENT_DEFAULTS", "KafkaClients", "is_protected_setting"]

#: librdkafka settings every client starts from; a role's overlay may change them. Log critical
#: problems only: every failure that matters reaches the caller as an error naming the cluster,
#: and a client retrying a connection would otherwise log a line every 50 ms. Give up a
#: connection attempt (TCP, TLS and SASL handshakes) after 3 s instead of 30 s, so that a
#: broker that is down is tried again, or reported, soon.
CLIENT_DEFAULTS: Mapping[str, Any] = MappingProxyType(
    {"log_level": 2, "socket.connection.setup.timeout.ms": 3000}
)

#: settings that only the topology gives: where the cluster is, and how a client proves who it
#: is and checks whom it talks to. Beyond ``security.*``, ``sasl.*`` and ``ssl.*`` that is
#: librdkafka's other names for the same things (``metadata.broker.list``, ``ssl_key``...),
#: switches that weaken them (``enable.ssl.certificate.verification``), and the OAUTHBEARER
#: token settings and callbacks, which replace the credentials.
_PROTECTED_KEYS = frozenset({"bootstrap.servers", "metadata.broker.list", "oauth_cb"})
_PROTECTED_PREFIXES = (
    "security.",
    "sasl.",
    "ssl.",
    "ssl_",
    "enable.ssl.",
    "enable.sasl.",
    "https.",
    "oauthbearer",
)


def is_protected_setting(key: str) -> bool:
    """Whether ``key`` is a setting only the topology may give (see the module's docstring)."""
    name = key.strip().lower()
    return name in _PROTECTED_KEYS or name.startswith(_PROTECTED_PREFIXES)


class KafkaClients:
    """Builds the Kafka clients of one topology's clusters, by alias.

    ``bootstraps`` maps aliases to bootstrap servers that win over the topology's (the dev
    environment's, for clusters whose file names none). ``env`` is where secrets named by the
    topology are read (default: the process environment, read again for every client, so that a
    rotated secret reaches the next client). ``clock`` is the time the port's users share.
    """

    def __init__(
        self,
        topology: Topology,
        bootstraps: Mapping[str, str] | None = None,
        *,
        clock: Clock | None = None,
        env: Mapping[str, str] | None = None,
    ) -> None:
        overrides = dict(bootstraps or {})
        unknown = sorted(set(overrides) - topology.aliases)
        if unknown:
            known = ", ".join(sorted(topology.aliases))
            raise ConfigError(
                f"bootstrap servers given for {', '.join(repr(a) for a in unknown)}, which"
                f" topology '{topology.name}' does not have (known: {known})"
            )
        self.topology: Topology | None = topology
        self.clock: Clock = SystemClock() if clock is None else clock
        self._bootstraps = overrides
        self._env = env
        #: per alias, the settings of a factory built from resolved settings (for_configs)
        self._resolved: dict[str, dict[str, Any]] | None = None
        self._admins: dict[str, AdminClient] = {}
        self._admins_lock = threading.Lock()
        self._refusals: dict[str, str] = {}

    @classmethod
    def for_configs(
        cls, configs: Mapping[str, Mapping[str, Any]], *, clock: Clock | None = None
    ) -> KafkaClients:
        """A factory for roles that were handed a cluster's resolved settings instead of the
        topology: ``configs`` maps an alias to what :meth:`Cluster.client_config
        <drsvc.topology.models.Cluster.client_config>` gave (bootstrap servers and security
        settings, secrets read). The security settings are still computed in that one place
        and merged here like any other; only the moment the secrets are read differs (when
        the settings were resolved, not for every client)."""
        clients = cls.__new__(cls)
        clients.topology = None
        clients.clock = SystemClock() if clock is None else clock
        clients._bootstraps = {}
        clients._env = None
        clients._resolved = {alias: dict(config) for alias, config in configs.items()}
        clients._admins = {}
        clients._admins_lock = threading.Lock()
        clients._refusals = {}
        return clients

    @property
    def aliases(self) -> frozenset[str]:
        """The clusters this factory builds clients of."""
        if self._resolved is not None:
            return frozenset(self._resolved)
        assert self.topology is not None
        return frozenset(self.topology.aliases)

    def _reach(self, alias: str) -> dict[str, Any]:
        """Where cluster ``alias`` is and how to authenticate to it, secrets read now."""
        if self._resolved is not None:
            reach = self._resolved.get(alias)
            if reach is None:
                known = ", ".join(sorted(self._resolved)) or "none"
                raise ConfigError(f"no settings for cluster '{alias}' (known: {known})")
            return dict(reach)
        assert self.topology is not None
        cluster = self.topology.cluster(alias)
        return cluster.client_config(self._bootstraps.get(alias), env=self._env)

    def config(self, alias: str, overlay: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """The librdkafka settings of a client of cluster ``alias``: :data:`CLIENT_DEFAULTS`,
        then ``overlay``, then the cluster's bootstrap servers and security settings with its
        secrets read now.

        Raises :class:`ConfigError` for an alias the topology does not have, a missing secret,
        or an overlay that sets a protected key (:func:`is_protected_setting`).
        """
        settings = dict(overlay or {})
        refused = sorted(key for key in settings if is_protected_setting(key))
        if refused:
            raise ConfigError(
                f"cluster '{alias}': a client's settings may not set"
                f" {', '.join(repr(key) for key in refused)}: the bootstrap servers and the"
                " security settings come from the topology only"
            )
        reach = self._reach(alias)
        # The cluster's own settings last: nothing above may replace them.
        return {**CLIENT_DEFAULTS, **settings, **reach}

    def consumer(self, alias: str, overlay: Mapping[str, Any] | None = None) -> Consumer:
        """A new consumer of cluster ``alias`` (``overlay`` must give a ``group.id``); the caller
        owns it and closes it."""
        config = self.config(alias, overlay)
        with translated("creating a consumer", alias):
            consumer = Consumer(config)
        return consumer

    def producer(self, alias: str, overlay: Mapping[str, Any] | None = None) -> Producer:
        """A new producer for cluster ``alias``; the caller owns it and flushes it."""
        config = self.config(alias, overlay)
        with translated("creating a producer", alias):
            producer = Producer(config)
        return producer

    def reader(
        self,
        alias: str,
        topic: str,
        *,
        what: str,
        group: str,
        committed: bool,
        limits: ReadLimits | None = None,
    ) -> TopicReader:
        """A :class:`~drsvc.kafka.reader.TopicReader` of ``topic`` on cluster ``alias``, over a
        new consumer that it owns: assigned only, named ``group`` but never joining it, never
        committing. ``what`` names the topic's role in its messages (``"checkpoints topic"``).
        ``committed`` chooses ``read_committed`` or ``read_uncommitted`` and has no default:
        drsvc's own topics are read committed, but a scan for the copies a crashed worker left,
        or of MM2's topics, must see what is not. The reader's clock is this factory's."""
        consumer = self.consumer(alias, reader_settings(group, committed=committed))
        return TopicReader(
            consumer, topic, cluster=alias, what=what, clock=self.clock, limits=limits
        )

    def admin(self, alias: str) -> AdminClient:
        """The admin client of cluster ``alias``, built on first use and shared afterwards (one
        per cluster: each holds connections to every broker). Its secrets are those read when
        it was built."""
        with self._admins_lock:
            admin = self._admins.get(alias)
            if admin is None:
                config = {**self.config(alias), "error_cb": partial(self._on_admin_error, alias)}
                with translated("creating an admin client", alias):
                    admin = AdminClient(config)
                self._admins[alias] = admin
            return admin

    def _on_admin_error(self, alias: str, error: KafkaError) -> None:
        if refuses_credentials(error):
            self._refusals[alias] = f"{error.name()}: {error.str()}"

    def credentials_refused(self, alias: str) -> str | None:
        """Why cluster ``alias`` refused its admin client's credentials (or the client its
        certificate) since the last call, or None. Call it after a request failed: a refusal
        reaches the client only as an event, which this serves.

        A refused admin client is dropped, so the next one reads its secrets again (a rotated
        password file is picked up without a restart)."""
        with self._admins_lock:
            admin = self._admins.get(alias)
            if admin is not None:
                admin.poll(0)
            refusal = self._refusals.pop(alias, None)
            if refusal is not None:
                self._admins.pop(alias, None)
            return refusal
