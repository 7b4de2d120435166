"""The client factory: the topology's bootstrap and security settings reach every client and
no overlay can change them; real confluent-kafka clients come back.

Building a confluent-kafka client loads its TLS material but needs no broker, so these tests
run without one: the clusters' bootstrap servers point at a closed local port. The TLS files
are made with the openssl command (a real CA certificate, and a client certificate whose key
is encrypted), because librdkafka refuses to build a client whose files it cannot load; that
refusal is what shows the settings reached each client.
"""

from __future__ import annotations

import json
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import confluent_kafka
import confluent_kafka.admin
import pytest
from certificates import KEY_PASSWORD, make_pems

from drsvc.errors import ConfigError
from drsvc.kafka.clients import CLIENT_DEFAULTS, KafkaClients, is_protected_setting
from drsvc.kafka.clock import SystemClock
from drsvc.topology import Topology, load_topology_text

#: port 9 (discard): nothing listens there, so a client's connection attempts fail at once
NOWHERE = "127.0.0.1:9"
EAST_PASSWORD = "east-s3cret"


@pytest.fixture(scope="module")
def pems(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A CA certificate, and a client certificate with its key encrypted by KEY_PASSWORD."""
    return make_pems(tmp_path_factory.mktemp("pems"))


def _topology(pems: Path, password_file: Path, ca_file: Path | None = None) -> Topology:
    """east: SASL_SSL with SCRAM (user from the environment, password from a file); west: mutual
    TLS with an encrypted key, and no bootstrap servers in the file."""
    ca = json.dumps(str(ca_file or pems / "ca.pem"))
    text = f"""
        name: secured
        clusters:
          east:
            bootstrap_servers: "{NOWHERE}"
            security:
              protocol: SASL_SSL
              tls: {{ca_file: {ca}}}
              sasl:
                mechanism: SCRAM-SHA-512
                username_env: EAST_USER
                password_file: {json.dumps(str(password_file))}
          west:
            security:
              protocol: SSL
              tls:
                ca_file: {ca}
                cert_file: {json.dumps(str(pems / "client.pem"))}
                key_file: {json.dumps(str(pems / "client.key"))}
                key_password_env: WEST_KEY_PASSWORD
    """
    # Loading needs no secret: they are read when a client is built.
    return load_topology_text(textwrap.dedent(text), "secured.yaml", env={})


ENV = {"EAST_USER": "drsvc-east", "WEST_KEY_PASSWORD": KEY_PASSWORD}


@pytest.fixture
def password_file(tmp_path: Path) -> Path:
    path = tmp_path / "east.password"
    path.write_text(EAST_PASSWORD + "\n")
    return path


@pytest.fixture
def clients(pems: Path, password_file: Path) -> KafkaClients:
    return KafkaClients(_topology(pems, password_file), {"west": NOWHERE}, env=ENV)


def _east_reach(pems: Path) -> dict[str, Any]:
    return {
        "bootstrap.servers": NOWHERE,
        "security.protocol": "SASL_SSL",
        "ssl.ca.location": str(pems / "ca.pem"),
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "drsvc-east",
        "sasl.password": EAST_PASSWORD,
    }


def _west_reach(pems: Path) -> dict[str, Any]:
    return {
        "bootstrap.servers": NOWHERE,
        "security.protocol": "SSL",
        "ssl.ca.location": str(pems / "ca.pem"),
        "ssl.certificate.location": str(pems / "client.pem"),
        "ssl.key.location": str(pems / "client.key"),
        "ssl.key.password": KEY_PASSWORD,
    }


# -- configs ------------------------------------------------------------------------------------


def test_a_config_is_the_defaults_then_the_overlay_then_the_clusters_reach(
    clients: KafkaClients, pems: Path
) -> None:
    overlay = {"group.id": "drsvc-test", "enable.auto.commit": False}
    assert clients.config("east", overlay) == {
        **CLIENT_DEFAULTS,
        **overlay,
        **_east_reach(pems),
    }
    assert clients.config("west", overlay) == {
        **CLIENT_DEFAULTS,
        **overlay,
        **_west_reach(pems),
    }
    assert clients.config("east") == {**CLIENT_DEFAULTS, **_east_reach(pems)}


def test_the_defaults_are_quiet_and_quick_to_give_up_a_connection() -> None:
    assert dict(CLIENT_DEFAULTS) == {"log_level": 2, "socket.connection.setup.timeout.ms": 3000}


def test_an_overlay_may_change_the_defaults(clients: KafkaClients) -> None:
    config = clients.config("east", {"log_level": 4, "socket.connection.setup.timeout.ms": 10_000})
    assert config["log_level"] == 4
    assert config["socket.connection.setup.timeout.ms"] == 10_000


PROTECTED = [
    "security.protocol",
    "sasl.mechanism",
    "sasl.mechanisms",
    "sasl.username",
    "sasl.password",
    "sasl.oauthbearer.config",
    "ssl.ca.location",
    "ssl.key.password",
    "ssl.endpoint.identification.algorithm",
    "ssl_key",
    "enable.ssl.certificate.verification",
    "enable.sasl.oauthbearer.unsecure.jwt",
    "https.ca.location",
    "oauthbearer_token_refresh_cb",
    "oauth_cb",
    "bootstrap.servers",
    "metadata.broker.list",
    "SSL.CA.Location",
    " security.protocol",
]


@pytest.mark.parametrize("key", PROTECTED)
def test_an_overlay_cannot_set_the_clusters_reach(clients: KafkaClients, key: str) -> None:
    assert is_protected_setting(key)
    overlay = {"group.id": "drsvc-test", key: "PLAINTEXT"}
    pattern = rf"cluster 'east': a client's settings may not set '{key}'"
    for build in (clients.config, clients.consumer, clients.producer):
        with pytest.raises(ConfigError, match=pattern):
            build("east", overlay)


def test_every_refused_key_is_named(clients: KafkaClients) -> None:
    overlay = {"ssl.ca.location": "/elsewhere", "security.protocol": "PLAINTEXT", "acks": "all"}
    with pytest.raises(ConfigError) as refused:
        clients.config("west", overlay)
    assert "'security.protocol', 'ssl.ca.location':" in str(refused.value)
    assert "'acks'" not in str(refused.value)


@pytest.mark.parametrize(
    "key", ["group.id", "client.id", "acks", "isolation.level", "log_level", "error_cb"]
)
def test_role_settings_are_not_protected(key: str) -> None:
    assert not is_protected_setting(key)


def test_secrets_are_read_again_for_every_client(
    clients: KafkaClients, password_file: Path
) -> None:
    assert clients.config("east")["sasl.password"] == EAST_PASSWORD
    password_file.write_text("rotated\n")
    assert clients.config("east")["sasl.password"] == "rotated"


def test_a_cluster_without_bootstrap_servers_needs_them_given(
    pems: Path, password_file: Path
) -> None:
    clients = KafkaClients(_topology(pems, password_file), env=ENV)
    with pytest.raises(ConfigError, match="cluster 'west': no bootstrap_servers"):
        clients.config("west")


def test_given_bootstrap_servers_win_over_the_topologys(pems: Path, password_file: Path) -> None:
    clients = KafkaClients(
        _topology(pems, password_file), {"east": "127.0.0.1:19", "west": NOWHERE}, env=ENV
    )
    assert clients.config("east")["bootstrap.servers"] == "127.0.0.1:19"


# -- unknown aliases ----------------------------------------------------------------------------


def test_an_unknown_alias_is_a_config_error(clients: KafkaClients) -> None:
    pattern = r"topology 'secured' has no cluster 'north' \(known: east, west\)"
    for build in (clients.config, clients.consumer, clients.producer):
        with pytest.raises(ConfigError, match=pattern):
            build("north", {"group.id": "drsvc-test"})
    with pytest.raises(ConfigError, match=pattern):
        clients.admin("north")


def test_bootstrap_servers_for_an_unknown_alias_are_refused(
    pems: Path, password_file: Path
) -> None:
    with pytest.raises(
        ConfigError, match=r"given for 'north', which topology 'secured' does not have"
    ):
        KafkaClients(_topology(pems, password_file), {"north": NOWHERE, "west": NOWHERE})


# -- real clients -------------------------------------------------------------------------------


@pytest.fixture
def built() -> Iterator[list[confluent_kafka.Consumer | confluent_kafka.Producer]]:
    """Consumers and producers a test built; closed afterwards, so no threads linger."""
    made: list[confluent_kafka.Consumer | confluent_kafka.Producer] = []
    yield made
    for client in made:
        client.close()


@pytest.mark.parametrize("alias", ["east", "west"])
def test_real_confluent_clients_come_back(
    clients: KafkaClients,
    alias: str,
    built: list[confluent_kafka.Consumer | confluent_kafka.Producer],
) -> None:
    consumer = clients.consumer(alias, {"group.id": "drsvc-test"})
    built.append(consumer)
    producer = clients.producer(alias, {"acks": "all"})
    built.append(producer)
    assert type(consumer) is confluent_kafka.Consumer
    assert type(producer) is confluent_kafka.Producer
    assert type(clients.admin(alias)) is confluent_kafka.admin.AdminClient


def test_one_admin_client_per_cluster(clients: KafkaClients) -> None:
    east = clients.admin("east")
    assert clients.admin("east") is east
    assert clients.admin("west") is not east


def test_each_consumer_and_producer_is_new(
    clients: KafkaClients, built: list[confluent_kafka.Consumer | confluent_kafka.Producer]
) -> None:
    first = clients.producer("west")
    built.append(first)
    second = clients.producer("west")
    built.append(second)
    assert first is not second


# What shows that the security settings reach each kind of client: librdkafka loads the TLS
# files when it builds a client, and refuses to build one when they are wrong.


@pytest.mark.parametrize("kind", ["consumer", "producer", "admin"])
def test_every_client_kind_gets_the_sasl_ssl_clusters_tls_settings(
    pems: Path, password_file: Path, tmp_path: Path, kind: str
) -> None:
    not_a_ca = tmp_path / "not-a-ca.pem"
    not_a_ca.write_text("not a certificate\n")
    clients = KafkaClients(
        _topology(pems, password_file, ca_file=not_a_ca), {"west": NOWHERE}, env=ENV
    )
    with pytest.raises(ConfigError, match=rf"^cluster 'east': creating a.* {kind}.*ssl\.ca"):
        _build(clients, kind, "east")


@pytest.mark.parametrize("kind", ["consumer", "producer", "admin"])
def test_every_client_kind_gets_the_mutual_tls_clusters_key_password(
    pems: Path, password_file: Path, kind: str
) -> None:
    wrong = {**ENV, "WEST_KEY_PASSWORD": "not-the-password"}
    clients = KafkaClients(_topology(pems, password_file), {"west": NOWHERE}, env=wrong)
    with pytest.raises(ConfigError, match=rf"^cluster 'west': creating a.* {kind}.*ssl\.key"):
        _build(clients, kind, "west")


def _build(clients: KafkaClients, kind: str, alias: str) -> object:
    if kind == "consumer":
        return clients.consumer(alias, {"group.id": "drsvc-test"})
    if kind == "producer":
        return clients.producer(alias)
    return clients.admin(alias)


# -- the clock ----------------------------------------------------------------------------------


def test_the_clients_carry_the_clock_they_were_given(pems: Path, password_file: Path) -> None:
    topology = _topology(pems, password_file)
    clock = SystemClock()
    assert KafkaClients(topology, {"west": NOWHERE}, clock=clock).clock is clock
    assert isinstance(KafkaClients(topology, {"west": NOWHERE}).clock, SystemClock)


def test_a_factory_of_resolved_settings_merges_them_like_the_topologys() -> None:
    resolved = {
        "bootstrap.servers": NOWHERE,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "replicator",
        "sasl.password": "pw",
    }
    clients = KafkaClients.for_configs({"east": resolved})
    assert clients.aliases == frozenset({"east"})
    config = clients.config("east", {"group.id": "g", "log_level": 6})
    assert config == {**CLIENT_DEFAULTS, "group.id": "g", "log_level": 6, **resolved}
    with pytest.raises(ConfigError, match=r"may not set 'sasl\.password'"):
        clients.config("east", {"sasl.password": "other"})
    with pytest.raises(ConfigError, match="no settings for cluster 'west'"):
        clients.config("west")
