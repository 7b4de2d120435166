"""Spark's Kafka source options from a cluster's librdkafka settings.

:func:`spark_kafka_options` is pure; :func:`cluster_read_options` gives every cluster of a
topology its options, reading the secrets its security block names (as any client does).

``drsvc verify`` reads clusters with Spark's Kafka source, which runs Kafka's Java client; the
topology gives librdkafka settings (:meth:`drsvc.topology.models.Cluster.client_config`). The
two name the same things differently:

- ``security.protocol`` is the same word (``kafka.security.protocol``);
- SASL: librdkafka's ``sasl.mechanism``, ``sasl.username`` and ``sasl.password`` become
  ``kafka.sasl.mechanism`` and a JAAS line, ``kafka.sasl.jaas.config``, with the PLAIN or SCRAM
  login module; the Java client reads the line with a tokenizer in which a backslash escapes
  the next character and a quoted value ends at a line break, so backslashes and quotes are
  escaped and line breaks refused;
- TLS: the CA file (PEM) becomes a PEM trust store (``kafka.ssl.truststore.type=PEM``, Kafka
  2.7 and later); a client certificate becomes a PEM key store, which the Java client reads
  from **one** file holding the private key (PKCS#8, ``BEGIN PRIVATE KEY`` or ``BEGIN
  ENCRYPTED PRIVATE KEY``) and the certificate chain. librdkafka takes the two as separate
  files; a topology that names one file for both works for both clients, separate files cannot
  be mapped here.

Spark's consumers get the group prefix :data:`failover.naming.VERIFY_GROUP_PREFIX`, which the
verifier's ACLs name. Anything this cannot map is refused with a :class:`ConfigError` naming
the setting (never its value, which may be a secret).
"""

from __future__ import annotations

from collections.abc import Mapping

from drsvc.errors import ConfigError
from drsvc.topology.models import Topology
from failover.naming import VERIFY_GROUP_PREFIX

__all__ = ["LOGIN_MODULES", "cluster_read_options", "spark_kafka_options"]

#: the Java client's login module of each SASL mechanism drsvc's topologies allow
LOGIN_MODULES: Mapping[str, str] = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
}

_PROTOCOLS = frozenset({"PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"})
#: set by the Kafka source from the cluster's address, not from these options
_PASSED_ELSEWHERE = frozenset({"bootstrap.servers"})
_SASL_KEYS = frozenset({"sasl.mechanism", "sasl.mechanisms", "sasl.username", "sasl.password"})
_TLS_KEYS = frozenset(
    {"ssl.ca.location", "ssl.certificate.location", "ssl.key.location", "ssl.key.password"}
)


def spark_kafka_options(client_config: Mapping[str, str]) -> dict[str, str]:
    """The Spark Kafka source options (``kafka.*`` and ``groupIdPrefix``) that reach a cluster
    the way ``client_config`` (librdkafka settings) does.

    Raises :class:`ConfigError` naming the setting for a protocol or mechanism the Java client
    is not given here (GSSAPI, OAUTHBEARER), a missing user name or password, a certificate and
    key in separate files, a setting that does not belong to the protocol, and any setting not
    listed in the module's docstring.
    """
    unknown = sorted(set(client_config) - _PASSED_ELSEWHERE - _SASL_KEYS - _TLS_KEYS)
    unknown = [key for key in unknown if key != "security.protocol"]
    if unknown:
        raise ConfigError(
            f"cannot give Spark's Kafka source the setting {unknown[0]!r}: only"
            " security.protocol, sasl.mechanism, sasl.username, sasl.password, ssl.ca.location,"
            " ssl.certificate.location, ssl.key.location and ssl.key.password are mapped"
        )
    protocol = client_config.get("security.protocol", "PLAINTEXT").upper()
    if protocol not in _PROTOCOLS:
        raise ConfigError(
            f"security.protocol: {protocol!r} is not one of {', '.join(sorted(_PROTOCOLS))}"
        )
    uses_sasl = protocol.startswith("SASL_")
    uses_tls = protocol in {"SSL", "SASL_SSL"}
    for key in sorted(client_config):
        if key in _SASL_KEYS and not uses_sasl:
            raise ConfigError(f"{key} is set but security.protocol is {protocol}")
        if key in _TLS_KEYS and not uses_tls:
            raise ConfigError(f"{key} is set but security.protocol is {protocol}")
    options = {"kafka.security.protocol": protocol, "groupIdPrefix": VERIFY_GROUP_PREFIX}
    if uses_sasl:
        options.update(_sasl_options(client_config))
    if uses_tls:
        options.update(_tls_options(client_config))
    return options


def cluster_read_options(
    topology: Topology,
    bootstrap: Mapping[str, str],
    env: Mapping[str, str] | None = None,
) -> dict[str, dict[str, str]]:
    """Per cluster alias of ``bootstrap``: the Spark Kafka source options that read it with the
    security of the topology's cluster (its secrets read now, from ``env`` and files).

    Raises :class:`ConfigError` naming the cluster, for a cluster the topology does not have
    and for anything :func:`spark_kafka_options` refuses.
    """
    options: dict[str, dict[str, str]] = {}
    for alias, servers in sorted(bootstrap.items()):
        cluster = topology.clusters.get(alias)
        if cluster is None:
            raise ConfigError(f"cluster '{alias}' is not in topology '{topology.name}'")
        try:
            options[alias] = spark_kafka_options(cluster.client_config(servers, env=env))
        except ConfigError as err:
            raise ConfigError(f"cluster '{alias}': {err}") from err
    return options


def _sasl_options(config: Mapping[str, str]) -> dict[str, str]:
    mechanism = _mechanism(config)
    module = LOGIN_MODULES.get(mechanism)
    if module is None:
        raise ConfigError(
            f"sasl.mechanism: {mechanism!r} is not mapped for Spark's Kafka source (only"
            f" {', '.join(sorted(LOGIN_MODULES))})"
        )
    values = {}
    for key in ("sasl.username", "sasl.password"):
        value = config.get(key)
        if not value:
            raise ConfigError(f"{key} is missing: SASL {mechanism} needs a user name and password")
        values[key] = _jaas_quoted(value, key)
    jaas = (
        f"{module} required username={values['sasl.username']} password={values['sasl.password']};"
    )
    return {"kafka.sasl.mechanism": mechanism, "kafka.sasl.jaas.config": jaas}


def _mechanism(config: Mapping[str, str]) -> str:
    # librdkafka takes both spellings; the topology writes sasl.mechanism.
    given = {
        key: config[key].strip().upper()
        for key in ("sasl.mechanism", "sasl.mechanisms")
        if key in config
    }
    if len(set(given.values())) > 1:
        raise ConfigError("sasl.mechanism and sasl.mechanisms are both set, and differ")
    if not given:
        raise ConfigError("sasl.mechanism is missing: a SASL protocol needs a mechanism")
    mechanism = next(iter(given.values()))
    if "," in mechanism or " " in mechanism:
        raise ConfigError("sasl.mechanism: give one mechanism, not a list")
    return mechanism


def _jaas_quoted(value: str, key: str) -> str:
    """``value`` as a double-quoted JAAS option value."""
    if "\n" in value or "\r" in value:
        # The Java client's tokenizer ends a quoted value at a line break.
        raise ConfigError(f"{key} contains a line break, which a JAAS option cannot hold")
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _tls_options(config: Mapping[str, str]) -> dict[str, str]:
    options: dict[str, str] = {}
    ca = config.get("ssl.ca.location")
    if ca:
        options["kafka.ssl.truststore.type"] = "PEM"
        options["kafka.ssl.truststore.location"] = ca
    cert = config.get("ssl.certificate.location")
    key = config.get("ssl.key.location")
    if cert is None and key is None:
        if "ssl.key.password" in config:
            raise ConfigError("ssl.key.password is set but there is no ssl.key.location")
        return options
    if cert is None or key is None:
        missing = "ssl.certificate.location" if cert is None else "ssl.key.location"
        raise ConfigError(f"{missing} is missing: mutual TLS needs a certificate and its key")
    if cert != key:
        raise ConfigError(
            "ssl.certificate.location and ssl.key.location name separate files; Spark's Kafka"
            " client reads a PEM key store from one file holding the private key (PKCS#8:"
            " 'BEGIN PRIVATE KEY' or 'BEGIN ENCRYPTED PRIVATE KEY') followed by the"
            " certificate chain. Write that file and name it as both cert_file and key_file"
            " in the cluster's tls block"
        )
    options["kafka.ssl.keystore.type"] = "PEM"
    options["kafka.ssl.keystore.location"] = cert
    password = config.get("ssl.key.password")
    if password:
        options["kafka.ssl.key.password"] = password
    return options
