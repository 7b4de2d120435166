from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from drsvc.devenv import kafka_node, secure
from drsvc.devenv.components import KafkaInstall
from drsvc.devenv.kafka_node import last_error_line, server_properties
from drsvc.devenv.state import BrokerNode, KafkaSite
from drsvc.errors import ConfigError


def site_of(count: int) -> KafkaSite:
    nodes = [
        BrokerNode(node_id=i + 1, broker_port=9000 + i, controller_port=9100 + i)
        for i in range(count)
    ]
    return KafkaSite(alias="east", cluster_id="cid", nodes=nodes)


def parse(text: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in text.splitlines())


@pytest.mark.parametrize(("count", "replicas", "min_isr"), [(1, "1", "1"), (3, "3", "2")])
def test_replication_settings_follow_the_cluster_size(
    count: int, replicas: str, min_isr: str
) -> None:
    site = site_of(count)
    props = parse(server_properties(site, site.nodes[0], Path("/data")))
    assert props["default.replication.factor"] == replicas
    assert props["offsets.topic.replication.factor"] == replicas
    assert props["transaction.state.log.replication.factor"] == replicas
    assert props["min.insync.replicas"] == min_isr
    assert props["transaction.state.log.min.isr"] == min_isr


def test_every_node_knows_every_controller_voter() -> None:
    site = site_of(3)
    for node in site.nodes:
        props = parse(server_properties(site, node, Path("/data")))
        assert props["node.id"] == str(node.node_id)
        assert props["controller.quorum.voters"] == (
            "1@127.0.0.1:9100,2@127.0.0.1:9101,3@127.0.0.1:9102"
        )
        assert props["advertised.listeners"] == f"PLAINTEXT://127.0.0.1:{node.broker_port}"


def test_brokers_are_tuned_for_a_small_machine() -> None:
    site = site_of(1)
    props = parse(server_properties(site, site.nodes[0], Path("/data")))
    assert props["group.initial.rebalance.delay.ms"] == "0"
    assert int(props["num.io.threads"]) <= 2
    assert int(props["offsets.topic.num.partitions"]) <= 4
    assert props["auto.create.topics.enable"] == "false"


def test_last_error_line_quotes_the_latest_error(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text(
        "[t] INFO fine\n[t] ERROR first problem\n[t] INFO more\n[t] ERROR second problem\n"
    )
    assert last_error_line(log) == "[t] ERROR second problem"
    assert last_error_line(tmp_path / "missing.log") is None


def test_a_cluster_id_starting_with_a_dash_is_passed_as_one_argument(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    site = site_of(1).model_copy(update={"cluster_id": "-starts-with-dash"})
    calls: list[list[str]] = []

    def fake_run(cmd: list[str], **_: object) -> subprocess.CompletedProcess[str]:
        calls.append(cmd)
        return subprocess.CompletedProcess(cmd, 0, "", "")

    monkeypatch.setattr(kafka_node.subprocess, "run", fake_run)
    kafka_node.prepare(
        tmp_path, site, site.nodes[0], "java", KafkaInstall(version="4", libs=tmp_path)
    )
    assert "--cluster-id=-starts-with-dash" in calls[0]


def test_a_secured_site_has_no_plaintext_listener_and_authorizes_every_request(
    tmp_path: Path,
) -> None:
    files = secure.prepare(tmp_path)
    nodes = [BrokerNode(node_id=1, broker_port=9001, controller_port=9002, mtls_port=9003)]
    site = KafkaSite(alias="east", cluster_id="c", nodes=nodes, secure=True)
    props = parse(
        server_properties(site, nodes[0], tmp_path, secured=secure.broker_properties(files))
    )
    assert "PLAINTEXT" not in props["listeners"] + props["listener.security.protocol.map"]
    assert props["listeners"] == (
        "SASL_SSL://127.0.0.1:9001,SSL://127.0.0.1:9003,CONTROLLER://127.0.0.1:9002"
    )
    assert props["listener.security.protocol.map"] == "SASL_SSL:SASL_SSL,SSL:SSL,CONTROLLER:SSL"
    assert props["inter.broker.listener.name"] == "SSL"
    assert props["listener.name.ssl.ssl.client.auth"] == "required"
    assert props["listener.name.controller.ssl.client.auth"] == "required"
    assert props["allow.everyone.if.no.acl.found"] == "false"
    assert props["super.users"] == "User:broker;User:drsvc-admin"
    assert props["sasl.enabled.mechanisms"] == "SCRAM-SHA-512"
    assert props["ssl.keystore.location"] == str(files.certificate("broker").bundle)


def test_a_secured_site_without_its_settings_is_refused(tmp_path: Path) -> None:
    nodes = [BrokerNode(node_id=1, broker_port=9001, controller_port=9002, mtls_port=9003)]
    site = KafkaSite(alias="east", cluster_id="c", nodes=nodes, secure=True)
    with pytest.raises(ConfigError, match="secured"):
        server_properties(site, nodes[0], tmp_path)


def test_the_authorization_of_a_secured_site_cannot_be_overridden() -> None:
    with pytest.raises(ConfigError, match=r"super\.users"):
        kafka_node.check_broker_overrides("east", {"super.users": "User:ANONYMOUS"})
