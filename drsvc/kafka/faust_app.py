"""faust apps and workers, built from the port: the one place drsvc imports faust.

A faust app talks to one cluster. :func:`new_app` builds it from what the client factory's
:meth:`KafkaClients.config <drsvc.kafka.clients.KafkaClients.config>` gives for that cluster,
so that the bootstrap servers and the security settings are still computed in one place (the
topology) and only translated here: librdkafka's keys become faust's broker URLs and its
``broker_credentials``, which faust hands to its consumer, its producer and the topic creation
alike.

* ``PLAINTEXT``: no credentials.
* ``SSL``: a TLS context that checks the brokers' certificates and host names against the CA
  file (or the system's CAs), with the client certificate and key for mutual TLS.
* ``SASL_PLAINTEXT`` and ``SASL_SSL``: user name and password for ``PLAIN``, ``SCRAM-SHA-256``
  or ``SCRAM-SHA-512``, with the same TLS context for ``SASL_SSL``.

Anything else (another mechanism such as ``OAUTHBEARER`` or ``GSSAPI``, a security setting
faust is not given, TLS files that do not load) is a :class:`~drsvc.errors.ConfigError` naming
the cluster, raised when the app is built rather than a connection failing later. A TLS
context is always built by drsvc: faust's ``SSLCredentials()`` without one raises.

**Read committed.** faust's aiokafka driver reads ``read_uncommitted`` unless the app itself
processes exactly once (``processing_guarantee``), and offers no setting for the isolation
level. drsvc's faust apps follow topics that are written in transactions (the offset syncs of
exactly-once flows): reading them uncommitted would see records of aborted transactions. So
every app built here gets a transport whose consumer thread sets the isolation level on the
aiokafka consumer after faust created it and before it starts (aiokafka hands the attribute to
its fetcher in ``start()``). That patches faust's and aiokafka's internals: it was checked
against the versions in :data:`PATCH_CHECKED_AGAINST`, and a unit test fails when the installed
versions differ or when the code it relies on changed shape.

**No static member id.** The apps built here use none, and their users should not set one:
aiokafka 0.14 never notices a new topic or partition after a static member rejoined without a
rebalance, and crashes when a static member rejoins subscribed to other topics (after a
topology change).

faust and its libraries log every service start and stop at INFO; :func:`set_client_log_level`
and :func:`ignore_missing_topics` keep the process's log readable.

faust is untyped: apps and workers are typed ``Any``.
"""

from __future__ import annotations

import logging
import ssl
from collections.abc import Iterable, Mapping
from types import MappingProxyType
from typing import Any

import faust
from faust.transport.drivers import aiokafka as faust_aiokafka

from drsvc.errors import ConfigError
from drsvc.kafka.clients import KafkaClients, is_protected_setting

__all__ = [
    "CLIENT_LOGGERS",
    "PATCH_CHECKED_AGAINST",
    "READ_COMMITTED",
    "broker_credentials",
    "broker_urls",
    "ignore_missing_topics",
    "new_app",
    "new_worker",
    "set_client_log_level",
]

#: The distributions whose internals the read-committed transport relies on, at the versions it
#: was checked against (pinned in the project's dependencies).
PATCH_CHECKED_AGAINST: Mapping[str, str] = MappingProxyType(
    {"faust-streaming": "0.15.3", "aiokafka": "0.14.0"}
)

READ_COMMITTED = "read_committed"

#: The loggers of faust, its service library and its Kafka client.
CLIENT_LOGGERS = ("faust", "mode", "aiokafka")

#: faust settings only this module gives: where the cluster is, how to authenticate to it, and
#: the transport (which carries the read-committed consumer).
_PORT_SETTINGS = frozenset(
    {"broker", "broker_consumer", "broker_producer", "broker_credentials", "ssl_context"}
)

_SASL_MECHANISMS = frozenset({"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"})
_TLS_KEYS = frozenset(
    {"ssl.ca.location", "ssl.certificate.location", "ssl.key.location", "ssl.key.password"}
)
_SASL_KEYS = frozenset({"sasl.mechanism", "sasl.username", "sasl.password"})
#: per protocol, the security settings it uses besides ``security.protocol``
_KEYS_OF_PROTOCOL: Mapping[str, frozenset[str]] = MappingProxyType(
    {
        "PLAINTEXT": frozenset(),
        "SSL": _TLS_KEYS,
        "SASL_PLAINTEXT": _SASL_KEYS,
        "SASL_SSL": _TLS_KEYS | _SASL_KEYS,
    }
)


def new_app(clients: KafkaClients, alias: str, app_id: str, **settings: Any) -> Any:
    """A ``faust.App`` named ``app_id`` on cluster ``alias`` of ``clients``, reading committed
    records; ``settings`` are faust's own (store, timeouts...).

    Raises :class:`ConfigError` when ``settings`` name the broker, the credentials or the TLS
    context (those come from the topology only), or when the cluster's security settings have
    no faust equivalent (see the module's docstring).
    """
    refused = sorted(_PORT_SETTINGS.intersection(settings))
    if refused:
        raise ConfigError(
            f"cluster '{alias}': a faust app's settings may not set"
            f" {', '.join(repr(key) for key in refused)}: the brokers and the security settings"
            " come from the topology only"
        )
    config = clients.config(alias)
    app: Any = faust.App(
        app_id,
        broker=broker_urls(alias, config),
        broker_credentials=broker_credentials(alias, config),
        **settings,
    )
    # Before any topic, agent or consumer exists: they are built from the app's transport.
    app.transport = _ReadCommittedTransport(app.conf.broker_consumer, app)
    return app


def new_worker(apps: Iterable[Any], *, verbose: bool) -> Any:
    """A ``faust.Worker`` running ``apps`` in one event loop; its ``execute_from_commandline()``
    runs them until SIGTERM or SIGINT and exits the process (0 when stopped by a signal)."""
    first, *others = apps
    worker: Any = faust.Worker(
        first,
        *others,
        loglevel="DEBUG" if verbose else "WARNING",
        override_logging=False,  # the process's own logging (text or JSON) stays in place
        redirect_stdouts=False,
        quiet=True,
    )
    worker.spinner = None  # a terminal progress spinner has no place in a service's output
    return worker


def broker_urls(alias: str, config: Mapping[str, Any]) -> list[str]:
    """The ``kafka://host:port`` URLs faust takes for the bootstrap servers of ``config`` (a
    listener name such as ``SASL_SSL://`` in front of a server is dropped: faust's scheme names
    its driver, and the protocol comes from the credentials)."""
    servers = [s.strip().split("://", 1)[-1] for s in str(config["bootstrap.servers"]).split(",")]
    urls = [f"kafka://{server}" for server in servers if server]
    if not urls:
        raise ConfigError(f"cluster '{alias}': no bootstrap servers")
    return urls


def broker_credentials(alias: str, config: Mapping[str, Any]) -> Any:
    """faust's ``broker_credentials`` for the librdkafka settings ``config`` of cluster
    ``alias``: ``None`` for ``PLAINTEXT``, else a ``faust.SSLCredentials`` or a
    ``faust.SASLCredentials`` (see the module's docstring)."""
    security = {
        key: str(value)
        for key, value in config.items()
        if is_protected_setting(key) and key != "bootstrap.servers"
    }
    protocol = security.pop("security.protocol", "PLAINTEXT").upper()
    used = _KEYS_OF_PROTOCOL.get(protocol)
    if used is None:
        raise ConfigError(f"cluster '{alias}': security.protocol {protocol!r} is not supported")
    unsupported = sorted(set(security) - used)
    if unsupported:
        raise ConfigError(
            f"cluster '{alias}': the faust apps support no"
            f" {', '.join(repr(key) for key in unsupported)} with security.protocol {protocol}"
            f" (supported: {', '.join(sorted(used)) or 'none'})"
        )
    context = _tls_context(alias, security) if protocol in ("SSL", "SASL_SSL") else None
    if not protocol.startswith("SASL_"):
        return None if context is None else faust.SSLCredentials(context)
    mechanism = security.get("sasl.mechanism", "").upper()
    if mechanism not in _SASL_MECHANISMS:
        # librdkafka's default mechanism, when none is set, is GSSAPI.
        raise ConfigError(
            f"cluster '{alias}': SASL mechanism {mechanism or 'GSSAPI (the default)'} is not"
            f" supported by the faust apps (supported: {', '.join(sorted(_SASL_MECHANISMS))})"
        )
    missing = [key for key in ("sasl.username", "sasl.password") if not security.get(key)]
    if missing:
        raise ConfigError(f"cluster '{alias}': SASL {mechanism} needs {' and '.join(missing)}")
    return faust.SASLCredentials(
        username=security["sasl.username"],
        password=security["sasl.password"],
        mechanism=mechanism,
        ssl_context=context,  # faust makes the protocol SASL_SSL when there is one
    )


def _tls_context(alias: str, security: Mapping[str, str]) -> ssl.SSLContext:
    """A client TLS context as librdkafka builds it from the same settings: the brokers'
    certificates checked against the CA file (or the system's CAs) with their host names, and
    the client certificate for mutual TLS."""
    ca_file = security.get("ssl.ca.location")
    cert_file = security.get("ssl.certificate.location")
    key_file = security.get("ssl.key.location")
    if (cert_file is None) != (key_file is None):
        raise ConfigError(
            f"cluster '{alias}': ssl.certificate.location and ssl.key.location go together"
        )
    try:
        context = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=ca_file)
    except (OSError, ssl.SSLError) as err:
        raise ConfigError(f"cluster '{alias}': cannot load CA file {ca_file}: {err}") from err
    if cert_file is not None:
        try:
            context.load_cert_chain(cert_file, key_file, security.get("ssl.key.password"))
        except (OSError, ssl.SSLError) as err:
            raise ConfigError(
                f"cluster '{alias}': cannot load client certificate {cert_file} with key"
                f" {key_file}: {err}"
            ) from err
    return context


def set_client_log_level(*, verbose: bool) -> None:
    """faust, its service library and its Kafka client log every start and stop at INFO (and
    every request at DEBUG): they speak up at WARNING, or at INFO when ``verbose``."""
    for name in CLIENT_LOGGERS:
        logging.getLogger(name).setLevel(logging.INFO if verbose else logging.WARNING)


def ignore_missing_topics(topics: Iterable[str]) -> None:
    """Drop the Kafka client's "topic not found" lines about ``topics``: it repeats them at
    every metadata refresh, for topics the caller knows not to exist yet (and said so once)."""
    quiet = _MissingTopicFilter(frozenset(topics))
    for name in ("aiokafka.cluster", "aiokafka.coordinator.assignors.roundrobin"):
        logging.getLogger(name).addFilter(quiet)


class _MissingTopicFilter(logging.Filter):
    def __init__(self, topics: frozenset[str]) -> None:
        super().__init__()
        self._topics = topics

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        return not (
            ("not found in cluster metadata" in message or "No partition metadata" in message)
            and any(topic in message for topic in self._topics)
        )


class _ReadCommittedConsumerThread(faust_aiokafka.AIOKafkaConsumerThread):
    def _create_worker_consumer(self, transport: Any) -> Any:
        consumer = super()._create_worker_consumer(transport)
        consumer._isolation_level = READ_COMMITTED
        return consumer


class _ReadCommittedConsumer(faust_aiokafka.Consumer):
    def _new_consumer_thread(self) -> Any:
        return _ReadCommittedConsumerThread(self, loop=self.loop, beacon=self.beacon)


class _ReadCommittedTransport(faust_aiokafka.Transport):
    """The aiokafka transport with a ``read_committed`` consumer (see the module's docstring)."""

    Consumer = _ReadCommittedConsumer
