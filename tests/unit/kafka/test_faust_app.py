"""faust apps from the port: a cluster's security settings become faust's broker credentials,
the consumer reads committed records, and the faust and aiokafka internals that patch relies on
are still the ones it was checked against.

No broker is needed: the apps' clients are built (which loads their TLS material) but never
started. The TLS files are made with the openssl command (a CA certificate, and a client
certificate whose key is encrypted), because a TLS context refuses files it cannot load; that
refusal is what shows the files reached it.
"""

from __future__ import annotations

import asyncio
import importlib.metadata
import inspect
import json
import ssl
import textwrap
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import aiokafka
import faust
import pytest
from certificates import KEY_PASSWORD, make_pems
from faust.transport.drivers import aiokafka as faust_aiokafka

from drsvc.errors import ConfigError
from drsvc.kafka.clients import KafkaClients
from drsvc.kafka.faust_app import (
    PATCH_CHECKED_AGAINST,
    READ_COMMITTED,
    broker_credentials,
    broker_urls,
    new_app,
)
from drsvc.topology import Topology, load_topology_text

NOWHERE = "127.0.0.1:9"
USER = "drsvc-user"
PASSWORD = "user-s3cret"
ENV = {"KEY_PASSWORD": KEY_PASSWORD, "SASL_USER": USER, "SASL_PASSWORD": PASSWORD}


@pytest.fixture(scope="module")
def pems(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A CA certificate, and a client certificate with its key encrypted by KEY_PASSWORD."""
    return make_pems(tmp_path_factory.mktemp("pems"))


def _topology(pems: Path) -> Topology:
    """One cluster per supported combination of protocol and mechanism."""
    ca = json.dumps(str(pems / "ca.pem"))
    mtls = (
        f"{{ca_file: {ca}, cert_file: {json.dumps(str(pems / 'client.pem'))},"
        f" key_file: {json.dumps(str(pems / 'client.key'))}, key_password_env: KEY_PASSWORD}}"
    )
    user = "username_env: SASL_USER, password_env: SASL_PASSWORD"
    text = f"""
        name: secured
        clusters:
          plain: {{bootstrap_servers: "{NOWHERE}"}}
          ssl_ca:
            bootstrap_servers: "{NOWHERE}"
            security: {{protocol: SSL, tls: {{ca_file: {ca}}}}}
          ssl_system_cas:
            bootstrap_servers: "{NOWHERE}"
            security: {{protocol: SSL}}
          mtls:
            bootstrap_servers: "{NOWHERE}"
            security: {{protocol: SSL, tls: {mtls}}}
          sasl_plain:
            bootstrap_servers: "{NOWHERE}"
            security: {{protocol: SASL_PLAINTEXT, sasl: {{mechanism: PLAIN, {user}}}}}
          sasl_scram512:
            bootstrap_servers: "{NOWHERE}"
            security: {{protocol: SASL_PLAINTEXT, sasl: {{mechanism: SCRAM-SHA-512, {user}}}}}
          sasl_ssl_scram512:
            bootstrap_servers: "SASL_SSL://{NOWHERE}"
            security:
              protocol: SASL_SSL
              tls: {{ca_file: {ca}}}
              sasl: {{mechanism: SCRAM-SHA-512, {user}}}
          sasl_ssl_scram256_mtls:
            bootstrap_servers: "{NOWHERE}"
            security:
              protocol: SASL_SSL
              tls: {mtls}
              sasl: {{mechanism: SCRAM-SHA-256, {user}}}
    """
    return load_topology_text(textwrap.dedent(text), "secured.yaml", env={})


@pytest.fixture(scope="module")
def clients(pems: Path) -> KafkaClients:
    return KafkaClients(_topology(pems), env=ENV)


def _credentials(clients: KafkaClients, alias: str) -> Any:
    return broker_credentials(alias, clients.config(alias))


def _ca_names(context: ssl.SSLContext) -> list[Any]:
    return [cert["subject"] for cert in context.get_ca_certs()]


def _checks_the_brokers(context: ssl.SSLContext) -> None:
    """As librdkafka does by default: the certificate must verify, and name the broker."""
    assert context.verify_mode == ssl.CERT_REQUIRED
    assert context.check_hostname


def test_plaintext_needs_no_credentials(clients: KafkaClients) -> None:
    assert _credentials(clients, "plain") is None
    assert broker_credentials("x", {"bootstrap.servers": NOWHERE}) is None


def test_ssl_with_a_ca_file(clients: KafkaClients) -> None:
    credentials = _credentials(clients, "ssl_ca")
    assert isinstance(credentials, faust.SSLCredentials)
    assert credentials.protocol.value == "SSL"
    _checks_the_brokers(credentials.context)
    assert _ca_names(credentials.context) == [((("commonName", "test CA"),),)]


def test_ssl_without_a_ca_file_trusts_the_system_cas(clients: KafkaClients) -> None:
    credentials = _credentials(clients, "ssl_system_cas")
    assert isinstance(credentials, faust.SSLCredentials)
    _checks_the_brokers(credentials.context)
    assert ((("commonName", "test CA"),),) not in _ca_names(credentials.context)


def test_mutual_tls_loads_the_client_certificate_and_its_encrypted_key(
    clients: KafkaClients, pems: Path
) -> None:
    credentials = _credentials(clients, "mtls")
    assert isinstance(credentials, faust.SSLCredentials)
    _checks_the_brokers(credentials.context)
    # The key's password reached the context: without it, or with another, loading fails.
    config = clients.config("mtls")
    for password in ({}, {"ssl.key.password": "wrong"}):
        settings = {k: v for k, v in config.items() if k != "ssl.key.password"} | password
        with pytest.raises(ConfigError, match="cluster 'mtls': cannot load client certificate"):
            broker_credentials("mtls", settings)


@pytest.mark.parametrize(
    ("alias", "mechanism"), [("sasl_plain", "PLAIN"), ("sasl_scram512", "SCRAM-SHA-512")]
)
def test_sasl_plaintext(clients: KafkaClients, alias: str, mechanism: str) -> None:
    credentials = _credentials(clients, alias)
    assert isinstance(credentials, faust.SASLCredentials)
    assert credentials.protocol.value == "SASL_PLAINTEXT"
    assert credentials.mechanism.value == mechanism
    assert (credentials.username, credentials.password) == (USER, PASSWORD)
    assert credentials.ssl_context is None
    assert PASSWORD not in repr(credentials)


@pytest.mark.parametrize(
    ("alias", "mechanism"),
    [("sasl_ssl_scram512", "SCRAM-SHA-512"), ("sasl_ssl_scram256_mtls", "SCRAM-SHA-256")],
)
def test_sasl_ssl(clients: KafkaClients, alias: str, mechanism: str) -> None:
    credentials = _credentials(clients, alias)
    assert isinstance(credentials, faust.SASLCredentials)
    assert credentials.protocol.value == "SASL_SSL"
    assert credentials.mechanism.value == mechanism
    assert (credentials.username, credentials.password) == (USER, PASSWORD)
    _checks_the_brokers(credentials.ssl_context)
    assert _ca_names(credentials.ssl_context) == [((("commonName", "test CA"),),)]


@pytest.mark.parametrize(
    ("settings", "problem"),
    [
        (
            {"security.protocol": "SASL_SSL", "sasl.mechanism": "OAUTHBEARER"},
            "SASL mechanism OAUTHBEARER is not supported",
        ),
        (
            {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "GSSAPI"},
            "SASL mechanism GSSAPI is not supported",
        ),
        (
            {"security.protocol": "SASL_PLAINTEXT", "sasl.username": "u", "sasl.password": "p"},
            r"SASL mechanism GSSAPI \(the default\) is not supported",
        ),
        (
            {
                "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": "PLAIN",
                "sasl.username": "u",
            },
            "SASL PLAIN needs sasl.password",
        ),
        (
            {
                "security.protocol": "SASL_SSL",
                "sasl.mechanism": "OAUTHBEARER",
                "sasl.oauthbearer.config": "principal=u",
            },
            "support no 'sasl.oauthbearer.config' with security.protocol SASL_SSL",
        ),
        (
            {"security.protocol": "SASL_PLAINTEXT", "sasl.kerberos.service.name": "kafka"},
            "support no 'sasl.kerberos.service.name'",
        ),
        (
            {"security.protocol": "SSL", "ssl.endpoint.identification.algorithm": "none"},
            "support no 'ssl.endpoint.identification.algorithm' with security.protocol SSL",
        ),
        (
            {"security.protocol": "SSL", "ssl.keystore.location": "client.p12"},
            "support no 'ssl.keystore.location'",
        ),
        (
            {"ssl.ca.location": "ca.pem"},
            r"support no 'ssl.ca.location' with security.protocol PLAINTEXT \(supported: none\)",
        ),
        (
            {"security.protocol": "SASL_PLAINTEXT", "ssl.ca.location": "ca.pem"},
            "support no 'ssl.ca.location' with security.protocol SASL_PLAINTEXT",
        ),
        ({"security.protocol": "SSLv3"}, "security.protocol 'SSLV3' is not supported"),
        (
            {"security.protocol": "SSL", "ssl.ca.location": "/nonexistent/ca.pem"},
            "cannot load CA file /nonexistent/ca.pem",
        ),
        (
            {"security.protocol": "SSL", "ssl.certificate.location": "c.pem"},
            "ssl.certificate.location and ssl.key.location go together",
        ),
    ],
)
def test_unsupported_settings_are_refused_naming_the_cluster(
    settings: Mapping[str, str], problem: str
) -> None:
    clients = KafkaClients.for_configs({"west": {"bootstrap.servers": NOWHERE, **settings}})
    with pytest.raises(ConfigError, match=f"^cluster 'west': .*{problem}"):
        new_app(clients, "west", "drsvc-test")


def test_broker_urls() -> None:
    assert broker_urls("west", {"bootstrap.servers": "a:1, SASL_SSL://b:2,"}) == [
        "kafka://a:1",
        "kafka://b:2",
    ]
    with pytest.raises(ConfigError, match="cluster 'west': no bootstrap servers"):
        broker_urls("west", {"bootstrap.servers": " , "})


@pytest.mark.parametrize("setting", ["broker", "broker_credentials", "ssl_context"])
def test_an_app_cannot_set_its_brokers_or_credentials(setting: str) -> None:
    clients = KafkaClients.for_configs({"west": {"bootstrap.servers": NOWHERE}})
    with pytest.raises(
        ConfigError, match=f"cluster 'west': a faust app's settings may not set '{setting}'"
    ):
        new_app(clients, "west", "drsvc-test", **{setting: None})


def test_the_credentials_reach_the_consumer_and_the_producer(
    clients: KafkaClients, tmp_path: Path
) -> None:
    """faust hands ``broker_credentials`` to the aiokafka clients it builds (topics are created
    through the consumer's and the producer's connections)."""

    async def built() -> tuple[Any, aiokafka.AIOKafkaConsumer, aiokafka.AIOKafkaProducer]:
        app = new_app(clients, "sasl_ssl_scram512", "drsvc-test", datadir=str(tmp_path))
        consumer = app.consumer._thread._create_worker_consumer(app.transport)
        producer = app.producer._new_producer()
        return app, consumer, producer

    app, consumer, producer = asyncio.run(built())
    assert app.conf.broker == [faust.utils.urls.URL(f"kafka://{NOWHERE}")]
    context = app.conf.broker_credentials.ssl_context
    for client in (consumer._client, producer.client):
        assert client._security_protocol == "SASL_SSL"
        assert client._sasl_mechanism == "SCRAM-SHA-512"
        assert (client._sasl_plain_username, client._sasl_plain_password) == (USER, PASSWORD)
        assert client._ssl_context is context
    assert consumer._isolation_level == READ_COMMITTED


def test_the_consumer_reads_committed_records(tmp_path: Path) -> None:
    clients = KafkaClients.for_configs({"west": {"bootstrap.servers": NOWHERE}})

    async def created_consumer() -> aiokafka.AIOKafkaConsumer:
        app = new_app(clients, "west", "drsvc-test", datadir=str(tmp_path))
        consumer: aiokafka.AIOKafkaConsumer = app.consumer._thread._create_worker_consumer(
            app.transport
        )
        return consumer

    consumer = asyncio.run(created_consumer())
    assert consumer._isolation_level == READ_COMMITTED
    assert consumer._client._security_protocol == "PLAINTEXT"


# The read-committed transport patches faust's and aiokafka's internals. These tests fail when
# an upgrade may have broken it: check the patch against the new code, then update
# PATCH_CHECKED_AGAINST.


def test_faust_and_aiokafka_are_the_versions_the_patch_was_checked_against() -> None:
    installed = {name: importlib.metadata.version(name) for name in PATCH_CHECKED_AGAINST}
    assert installed == dict(PATCH_CHECKED_AGAINST)


def test_faust_still_has_no_setting_for_the_isolation_level(tmp_path: Path) -> None:
    """If it gains one, use it and drop the patch."""
    app = faust.App("drsvc-test", datadir=str(tmp_path))
    assert not [name for name in dir(app.conf) if "isolation" in name.lower()]
    worker_consumer = inspect.getsource(
        faust_aiokafka.AIOKafkaConsumerThread._create_worker_consumer
    )
    # read_committed only for an exactly-once app, passed straight to the consumer it returns
    assert 'isolation_level: str = "read_uncommitted"' in worker_consumer
    assert "if self.consumer.in_transaction:" in worker_consumer
    assert "return aiokafka.AIOKafkaConsumer(" in worker_consumer
    assert "isolation_level=isolation_level," in worker_consumer


def test_the_code_the_patch_relies_on_has_the_shape_it_relies_on() -> None:
    # faust builds its consumer thread in this one method, with these arguments (the patch's
    # consumer builds its own thread the same way).
    new_thread = inspect.getsource(faust_aiokafka.Consumer._new_consumer_thread)
    assert "return AIOKafkaConsumerThread(self, loop=self.loop, beacon=self.beacon)" in new_thread
    # aiokafka keeps the isolation level in an attribute until start() hands it to the fetcher:
    # setting the attribute between construction and start() is what the patch does.
    init = inspect.getsource(aiokafka.AIOKafkaConsumer.__init__)
    assert "self._isolation_level = isolation_level" in init
    assert "isolation_level=self._isolation_level" in inspect.getsource(
        aiokafka.AIOKafkaConsumer.start
    )
    # faust gives broker_credentials to the consumer and the producer through this one function.
    auth = inspect.getsource(faust_aiokafka.credentials_to_aiokafka_auth)
    assert '"sasl_plain_username": credentials.username' in auth
    assert "credentials_to_aiokafka_auth(\n            conf.broker_credentials" in (
        inspect.getsource(faust_aiokafka.AIOKafkaConsumerThread._create_worker_consumer)
    )
    assert "credentials_to_aiokafka_auth(self.credentials" in inspect.getsource(
        faust_aiokafka.Producer._settings_auth
    )
