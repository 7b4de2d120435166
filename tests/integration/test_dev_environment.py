"""The embedded local environment against real brokers and a real Consul agent."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from drsvc.adapters.consul_client import ConsulClient
from drsvc.devenv.environment import EnvironmentInfo, LocalEnvironment
from drsvc.devenv.processes import is_alive
from drsvc.devenv.smoke import consul_round_trip, kafka_round_trip
from drsvc.devenv.state import ConsulAgentState, EnvState, StateStore
from drsvc.errors import PortInUseError
from drsvc.kafka.admin import admin_client, broker_ids, create_topic
from drsvc.settings import Settings

DRSVC = [sys.executable, "-m", "drsvc.cli.main"]


def test_a_record_goes_through_each_cluster_of_the_pair(cluster_pair: EnvironmentInfo) -> None:
    assert set(cluster_pair.clusters) >= {"east", "west"}
    for alias in ("east", "west"):
        result = kafka_round_trip(alias, cluster_pair.clusters[alias])
        assert result.cluster == alias


def test_each_cluster_is_a_healthy_consul_service(cluster_pair: EnvironmentInfo) -> None:
    assert cluster_pair.consul_http_addr is not None
    client = ConsulClient(cluster_pair.consul_http_addr)
    for alias in ("east", "west"):
        entries = client.service_health(f"kafka-{alias}")
        assert len(entries) == 1
        service = entries[0]["Service"]
        assert service["Meta"]["bootstrap_servers"] == cluster_pair.clusters[alias]
        assert f"site-{alias}" in service["Tags"]
        statuses = [check["Status"] for check in entries[0]["Checks"]]
        assert statuses and all(s == "passing" for s in statuses), statuses
    consul_round_trip(cluster_pair.consul_http_addr)


def test_the_clusters_are_independent(cluster_pair: EnvironmentInfo) -> None:
    east, west = cluster_pair.clusters["east"], cluster_pair.clusters["west"]
    assert east != west
    topic = f"only-on-east-{os.getpid()}"
    assert create_topic(admin_client(east), topic, partitions=1)
    assert topic in admin_client(east).list_topics(timeout=5).topics
    assert topic not in admin_client(west).list_topics(timeout=5).topics


def test_up_again_is_idempotent(local_env: LocalEnvironment, cluster_pair: EnvironmentInfo) -> None:
    before = local_env.status()
    again = local_env.up(["east", "west"])
    after = local_env.status()
    assert again.clusters["east"] == cluster_pair.clusters["east"]
    assert [(p.role, p.pid) for p in before.processes] == [(p.role, p.pid) for p in after.processes]
    assert after.all_running


def test_the_cli_prints_exactly_one_json_object(
    local_env: LocalEnvironment, cluster_pair: EnvironmentInfo
) -> None:
    out = subprocess.run(
        [
            *DRSVC,
            "dev",
            "up",
            "--clusters",
            "east,west",
            "--json",
            "--state-dir",
            str(local_env.state_dir),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    document = json.loads(out.stdout)
    assert document["clusters"]["east"] == {"bootstrap_servers": cluster_pair.clusters["east"]}
    assert document["clusters"]["west"] == {"bootstrap_servers": cluster_pair.clusters["west"]}
    assert document["consul"] == {
        "http_addr": cluster_pair.consul_http_addr,
        "sites": cluster_pair.consul_sites,
    }

    status = subprocess.run(
        [*DRSVC, "dev", "status", "--json", "--state-dir", str(local_env.state_dir)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    report = json.loads(status.stdout)
    assert report["all_running"] is True
    sites = {(p["site"], p["role"]) for p in report["processes"]}
    # The session runs Consul per site: a server on east, on west and on the witness.
    assert {("east", "consul"), ("west", "consul"), ("witness", "consul")} <= sites
    assert {site for site, _role in sites} >= {"east", "west"}


def test_aggregation_trio_has_three_sources_and_an_aggregate(
    aggregation_trio: EnvironmentInfo,
) -> None:
    assert set(aggregation_trio.clusters) >= {"east", "west", "south", "agg"}
    for alias in ("south", "agg"):
        kafka_round_trip(alias, aggregation_trio.clusters[alias])


def _pids_of(env: LocalEnvironment) -> list[int]:
    return [p.pid for p in env.status().processes if p.pid is not None]


def test_lifecycle_down_leaves_nothing_and_consul_keeps_its_data(tmp_path: Path) -> None:
    """A separate one-cluster environment: up, write KV, down, up again on the same ports."""
    env = LocalEnvironment(Settings.from_env(state_dir=tmp_path / "state"))
    try:
        info = env.up(["solo"], brokers=1)
        assert info.consul_http_addr is not None
        state = StateStore(env.state_dir).load()
        handles = [n.process for n in state.sites["solo"].nodes if n.process is not None]
        assert state.consul is not None and state.consul.process is not None
        handles.append(state.consul.process)
        ConsulClient(info.consul_http_addr).kv_put("drsvc/test/survives", "yes")

        assert env.down() == 2
        assert not any(is_alive(h) for h in handles)
        assert not _pids_of(env)
        host, port = info.clusters["solo"].split(":")
        with socket.socket() as probe:
            assert probe.connect_ex((host, int(port))) != 0

        again = env.up(["solo"])
        assert again == info
        assert ConsulClient(info.consul_http_addr).kv_get("drsvc/test/survives") == "yes"
        assert len(broker_ids(admin_client(again.clusters["solo"]))) == 1
    finally:
        env.down(purge=True)
    assert not (tmp_path / "state").exists()


def test_a_taken_port_is_named_and_nothing_starts(tmp_path: Path) -> None:
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        taken = squatter.getsockname()[1]
        store = StateStore(tmp_path)
        store.save(
            EnvState(
                consul=ConsulAgentState(
                    http_port=taken, server_port=1, serf_lan_port=2, serf_wan_port=3
                )
            )
        )
        env = LocalEnvironment(Settings.from_env(state_dir=tmp_path))
        with pytest.raises(PortInUseError) as caught:
            env.up(["east"])
    assert caught.value.port == taken
    assert "Consul HTTP API" in str(caught.value)
    assert not _pids_of(env)
