"""Without a Consul address or bootstrap servers of its own, a client finds those of the local
``drsvc dev`` environment named by DRSVC_STATE_DIR: its running Consul agent, its clusters."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from drsvc.client.application import ClientApplication, consul_address
from drsvc.devenv.processes import ProcessHandle, spawn, stop
from drsvc.devenv.state import BrokerNode, ConsulAgentState, EnvState, KafkaSite, StateStore
from drsvc.errors import ConfigError
from drsvc.topology.loader import load_topology_text

# east and west name no bootstrap servers: they are the local environment's
TOPOLOGY = """
name: shop
clusters:
  east: {}
  west: {}
flows:
  - {source: east, target: west}
applications:
  - {name: orders, groups: [g], topics: [orders], preferred: east}
"""


def site(alias: str, *ports: int) -> KafkaSite:
    nodes = [
        BrokerNode(node_id=i, broker_port=p, controller_port=p + 100) for i, p in enumerate(ports)
    ]
    return KafkaSite(alias=alias, cluster_id=alias, nodes=nodes)


def agent(
    site: str | None, http_port: int, process: ProcessHandle | None = None
) -> ConsulAgentState:
    return ConsulAgentState(
        site=site,
        http_port=http_port,
        server_port=1,
        serf_lan_port=2,
        serf_wan_port=3,
        process=process,
    )


@pytest.fixture
def state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("DRSVC_STATE_DIR", str(tmp_path))
    monkeypatch.delenv("DRSVC_CONSUL_HTTP_ADDR", raising=False)
    monkeypatch.delenv("CONSUL_HTTP_ADDR", raising=False)
    return tmp_path


@pytest.fixture
def running(tmp_path: Path) -> Iterator[ProcessHandle]:
    """A process that runs while the test does (a recorded agent that is up)."""
    handle, _ = spawn(
        [sys.executable, "-c", "import time; time.sleep(60)"], tmp_path / "p.log", tmp_path
    )
    try:
        yield handle
    finally:
        stop(handle, grace_s=5)


def test_the_local_agent_is_the_default_consul(
    state_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    StateStore(state_dir).save(
        EnvState(sites={"east": site("east", 9001)}, consul=agent(None, 8501))
    )
    assert consul_address(None) == "127.0.0.1:8501"
    monkeypatch.setenv("DRSVC_CONSUL_HTTP_ADDR", "consul.example:8500")
    assert consul_address(None) == "consul.example:8500"
    assert consul_address("given:1") == "given:1"


def test_per_site_a_running_agent_is_chosen_else_the_first(
    state_dir: Path, running: ProcessHandle
) -> None:
    dead = ProcessHandle(pid=running.pid, start_ticks=running.start_ticks + 1)
    servers = [agent("east", 8501, dead), agent("west", 8502, running), agent("witness", 8503)]
    state = EnvState(consul_layout="per-site", consul_servers=servers)
    StateStore(state_dir).save(state)
    assert consul_address(None) == "127.0.0.1:8502"
    state.consul_servers[1].process = dead
    StateStore(state_dir).save(state)
    assert consul_address(None) == "127.0.0.1:8501"


def test_without_a_local_environment_there_is_no_default_consul(state_dir: Path) -> None:
    with pytest.raises(ConfigError, match="drsvc dev up"):
        consul_address(None)


def test_clusters_without_servers_are_the_local_environments(state_dir: Path) -> None:
    StateStore(state_dir).save(EnvState(sites={"east": site("east", 9001, 9002)}))
    app = ClientApplication.of("orders", load_topology_text(TOPOLOGY))
    config = app.client_config("east", {"group.id": "g"})
    assert config["bootstrap.servers"] == "127.0.0.1:9001,127.0.0.1:9002"
    assert config["group.id"] == "g"
    with pytest.raises(ConfigError, match="'west' is not part of the local environment"):
        app.client_config("west", {})
