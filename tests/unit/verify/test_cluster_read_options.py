"""Every cluster of a topology read by Spark with its own security block."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from drsvc.errors import ConfigError
from drsvc.topology import load_topology_text
from drsvc.topology.models import Topology
from drsvc.verify.kafka_options import cluster_read_options

SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule"


def _topology(east_security: dict[str, object] | None) -> Topology:
    east: dict[str, object] = {"bootstrap_servers": "127.0.0.1:9093"}
    if east_security is not None:
        east["security"] = east_security
    document = {
        "name": "verify",
        "clusters": {"east": east, "west": {"bootstrap_servers": "127.0.0.1:9094"}},
        "flows": [{"source": "east", "target": "west", "topics": {"include": [".*"]}}],
    }
    return load_topology_text(json.dumps(document))


def _sasl_ssl(tmp_path: Path) -> dict[str, object]:
    ca = tmp_path / "ca.pem"
    ca.write_text("not read here\n")
    password = tmp_path / "verifier.password"
    password.write_text("s3cret\n")
    return {
        "protocol": "SASL_SSL",
        "tls": {"ca_file": str(ca)},
        "sasl": {
            "mechanism": "SCRAM-SHA-512",
            "username": "drsvc-verifier",
            "password_file": str(password),
        },
    }


def test_each_cluster_gets_the_options_of_its_security_block(tmp_path: Path) -> None:
    topology = _topology(_sasl_ssl(tmp_path))

    options = cluster_read_options(topology, {"east": "127.0.0.1:9093", "west": "127.0.0.1:9094"})

    assert options["west"] == {
        "kafka.security.protocol": "PLAINTEXT",
        "groupIdPrefix": "drsvc-verify",
    }
    assert options["east"] == {
        "kafka.security.protocol": "SASL_SSL",
        "groupIdPrefix": "drsvc-verify",
        "kafka.sasl.mechanism": "SCRAM-SHA-512",
        "kafka.sasl.jaas.config": (
            f'{SCRAM} required username="drsvc-verifier" password="s3cret";'
        ),
        "kafka.ssl.truststore.type": "PEM",
        "kafka.ssl.truststore.location": str(tmp_path / "ca.pem"),
    }


def test_the_bootstrap_servers_are_not_an_option() -> None:
    options = cluster_read_options(_topology(None), {"east": "elsewhere:9092"})

    assert set(options) == {"east"}
    assert not any("bootstrap" in key for key in options["east"])


def test_a_password_read_from_the_environment_given(tmp_path: Path) -> None:
    security = _sasl_ssl(tmp_path)
    security["sasl"] = {"mechanism": "PLAIN", "username": "v", "password_env": "VERIFY_PW"}

    options = cluster_read_options(
        _topology(security), {"east": "127.0.0.1:9093"}, env={"VERIFY_PW": "from-env"}
    )

    assert 'password="from-env"' in options["east"]["kafka.sasl.jaas.config"]


def test_a_missing_password_names_the_cluster_not_the_secret(tmp_path: Path) -> None:
    security = _sasl_ssl(tmp_path)
    security["sasl"] = {"mechanism": "PLAIN", "username": "v", "password_env": "VERIFY_PW"}

    with pytest.raises(ConfigError, match="east") as raised:
        cluster_read_options(_topology(security), {"east": "127.0.0.1:9093"}, env={})
    assert "VERIFY_PW" in str(raised.value)


def test_a_cluster_the_topology_does_not_have_is_refused() -> None:
    with pytest.raises(ConfigError, match="cluster 'north' is not in topology 'verify'"):
        cluster_read_options(_topology(None), {"north": "127.0.0.1:9095"})


def test_what_spark_cannot_be_given_is_refused_naming_the_cluster(tmp_path: Path) -> None:
    cert = tmp_path / "client.crt"
    key = tmp_path / "client.key"
    for path in (cert, key):
        path.write_text("pem\n")
    security = {
        "protocol": "SSL",
        "tls": {"ca_file": str(cert), "cert_file": str(cert), "key_file": str(key)},
    }

    with pytest.raises(ConfigError, match=r"^cluster 'east': ssl\.certificate\.location and"):
        cluster_read_options(_topology(security), {"east": "127.0.0.1:9093"})
