"""What commands share: a topology's missing bootstrap servers and the default Consul address
come from the local environment of the state directory (``--state-dir``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from drsvc.cli.common import load_with_bootstraps, resolve_consul
from drsvc.devenv.state import BrokerNode, ConsulAgentState, EnvState, KafkaSite, StateStore
from drsvc.errors import ConfigError

TOPOLOGY = """
name: shop
clusters:
  east: {}
  west: {bootstrap_servers: "west.example:9092"}
"""


def local_state(state_dir: Path) -> None:
    nodes = [BrokerNode(node_id=1, broker_port=9001, controller_port=9101)]
    agent = ConsulAgentState(http_port=8501, server_port=1, serf_lan_port=2, serf_wan_port=3)
    east = KafkaSite(alias="east", cluster_id="e", nodes=nodes)
    StateStore(state_dir).save(EnvState(sites={"east": east}, consul=agent))


def test_bootstrap_servers_the_topology_omits_are_the_local_environments(tmp_path: Path) -> None:
    local_state(tmp_path / "state")
    path = tmp_path / "t.yaml"
    path.write_text(TOPOLOGY)
    topology, bootstrap = load_with_bootstraps(path, tmp_path / "state")
    assert topology.namespace == "shop"
    assert bootstrap == {"east": "127.0.0.1:9001", "west": "west.example:9092"}
    with pytest.raises(ConfigError, match="drsvc dev up --clusters east"):
        load_with_bootstraps(path, tmp_path / "elsewhere")


def test_the_default_consul_is_the_local_agent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    local_state(tmp_path)
    monkeypatch.delenv("DRSVC_CONSUL_HTTP_ADDR", raising=False)
    monkeypatch.delenv("CONSUL_HTTP_ADDR", raising=False)
    assert resolve_consul(None, tmp_path) == "127.0.0.1:8501"
    assert resolve_consul(None, tmp_path / "elsewhere") is None
    assert resolve_consul("given:1", tmp_path) == "given:1"
    monkeypatch.setenv("DRSVC_CONSUL_HTTP_ADDR", "consul.example:8500")
    assert resolve_consul(None, tmp_path) == "consul.example:8500"
