"""Spark's Kafka source options from librdkafka settings: each protocol, escaping, refusals."""

from __future__ import annotations

import pytest

from drsvc.errors import ConfigError
from drsvc.verify.kafka_options import spark_kafka_options

SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule"
PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule"


def test_plaintext() -> None:
    assert spark_kafka_options({"bootstrap.servers": "b:9092"}) == {
        "kafka.security.protocol": "PLAINTEXT",
        "groupIdPrefix": "drsvc-verify",
    }


@pytest.mark.parametrize(
    ("mechanism", "module"),
    [("SCRAM-SHA-512", SCRAM), ("SCRAM-SHA-256", SCRAM), ("PLAIN", PLAIN)],
)
def test_sasl_ssl_with_a_ca(mechanism: str, module: str) -> None:
    options = spark_kafka_options(
        {
            "bootstrap.servers": "b:9093",
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": mechanism,
            "sasl.username": "drsvc-verifier",
            "sasl.password": "s3cret",
            "ssl.ca.location": "/etc/drsvc/ca.pem",
        }
    )

    assert options == {
        "kafka.security.protocol": "SASL_SSL",
        "groupIdPrefix": "drsvc-verify",
        "kafka.sasl.mechanism": mechanism,
        "kafka.sasl.jaas.config": f'{module} required username="drsvc-verifier" password="s3cret";',
        "kafka.ssl.truststore.type": "PEM",
        "kafka.ssl.truststore.location": "/etc/drsvc/ca.pem",
    }


def test_quotes_and_backslashes_are_escaped_in_the_jaas_line() -> None:
    options = spark_kafka_options(
        {
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanisms": "scram-sha-512",
            "sasl.username": 'we"ird',
            "sasl.password": 'a\\b"c;',
        }
    )

    assert options["kafka.sasl.mechanism"] == "SCRAM-SHA-512"
    assert options["kafka.sasl.jaas.config"] == (
        f'{SCRAM} required username="we\\"ird" password="a\\\\b\\"c;";'
    )
    assert "kafka.ssl.truststore.location" not in options


def test_mutual_tls_from_one_pem_file() -> None:
    options = spark_kafka_options(
        {
            "security.protocol": "SSL",
            "ssl.ca.location": "ca.pem",
            "ssl.certificate.location": "client.pem",
            "ssl.key.location": "client.pem",
            "ssl.key.password": "kp",
        }
    )

    assert options == {
        "kafka.security.protocol": "SSL",
        "groupIdPrefix": "drsvc-verify",
        "kafka.ssl.truststore.type": "PEM",
        "kafka.ssl.truststore.location": "ca.pem",
        "kafka.ssl.keystore.type": "PEM",
        "kafka.ssl.keystore.location": "client.pem",
        "kafka.ssl.key.password": "kp",
    }


def test_ssl_without_a_ca_uses_the_java_default_trust() -> None:
    assert spark_kafka_options({"security.protocol": "SSL"}) == {
        "kafka.security.protocol": "SSL",
        "groupIdPrefix": "drsvc-verify",
    }


@pytest.mark.parametrize(
    ("config", "named"),
    [
        (
            {
                "security.protocol": "SSL",
                "ssl.certificate.location": "c.crt",
                "ssl.key.location": "c.key",
            },
            "separate files",
        ),
        ({"security.protocol": "SSL", "ssl.key.location": "c.pem"}, "ssl.certificate.location"),
        ({"security.protocol": "SSL", "ssl.key.password": "x"}, "ssl.key.password"),
        (
            {"security.protocol": "SASL_SSL", "sasl.username": "u", "sasl.password": "p"},
            "sasl.mechanism",
        ),
        (
            {"security.protocol": "SASL_SSL", "sasl.mechanism": "GSSAPI", "sasl.username": "u"},
            "GSSAPI",
        ),
        (
            {"security.protocol": "SASL_SSL", "sasl.mechanism": "OAUTHBEARER"},
            "OAUTHBEARER",
        ),
        (
            {"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN", "sasl.username": "u"},
            "sasl.password",
        ),
        (
            {
                "security.protocol": "SASL_SSL",
                "sasl.mechanism": "PLAIN",
                "sasl.mechanisms": "SCRAM-SHA-512",
            },
            "differ",
        ),
        (
            {
                "security.protocol": "SASL_SSL",
                "sasl.mechanism": "PLAIN",
                "sasl.username": "u",
                "sasl.password": "line\nbreak",
            },
            "sasl.password contains a line break",
        ),
        ({"security.protocol": "PLAINTEXT", "sasl.username": "u"}, "sasl.username is set"),
        (
            {"security.protocol": "SASL_PLAINTEXT", "ssl.ca.location": "ca"},
            "ssl.ca.location is set",
        ),
        ({"security.protocol": "KERBEROS"}, "security.protocol"),
        ({"ssl.keystore.location": "k.p12", "security.protocol": "SSL"}, "ssl.keystore.location"),
    ],
)
def test_what_cannot_be_mapped_is_refused_by_name(config: dict[str, str], named: str) -> None:
    with pytest.raises(ConfigError, match=named):
        spark_kafka_options(config)


def test_a_refusal_never_shows_a_secret() -> None:
    with pytest.raises(ConfigError) as caught:
        spark_kafka_options(
            {
                "security.protocol": "SASL_SSL",
                "sasl.mechanism": "PLAIN",
                "sasl.username": "u",
                "sasl.password": "hunter2\n",
            }
        )

    assert "hunter2" not in str(caught.value)
