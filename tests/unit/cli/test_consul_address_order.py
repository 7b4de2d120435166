"""Which Consul agent commands and the client library talk to, first given wins: the option or
argument, DRSVC_CONSUL_HTTP_ADDR, CONSUL_HTTP_ADDR, the topology's consul.address, then the
local environment's agent."""

from __future__ import annotations

from pathlib import Path

import pytest

from drsvc.adapters.consul_access import first_consul_address
from drsvc.cli.common import resolve_consul
from drsvc.client.application import consul_address
from drsvc.devenv.state import ConsulAgentState, EnvState, StateStore
from drsvc.errors import ConfigError
from drsvc.topology import load_topology_text

TOPOLOGY = """
name: shop
clusters: {east: {bootstrap_servers: "e:9092"}}
consul: {address: "https://topology.example:8501"}
"""


@pytest.fixture
def local(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A local environment whose agent listens on 8501; no Consul variable set."""
    for name in ("DRSVC_CONSUL_HTTP_ADDR", "CONSUL_HTTP_ADDR"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("DRSVC_STATE_DIR", str(tmp_path))
    agent = ConsulAgentState(http_port=8501, server_port=1, serf_lan_port=2, serf_wan_port=3)
    StateStore(tmp_path).save(EnvState(consul=agent))
    return tmp_path


def test_commands_take_the_first_given(local: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    topology = load_topology_text(TOPOLOGY)
    assert resolve_consul(None, local) == "127.0.0.1:8501"
    assert resolve_consul(None, local, topology) == "https://topology.example:8501"
    monkeypatch.setenv("CONSUL_HTTP_ADDR", "https://consul.example:8501")
    assert resolve_consul(None, local, topology) == "https://consul.example:8501"
    monkeypatch.setenv("DRSVC_CONSUL_HTTP_ADDR", "drsvc.example:8500")
    assert resolve_consul(None, local, topology) == "drsvc.example:8500"
    assert resolve_consul("given:1", local, topology) == "given:1"


def test_the_client_takes_the_first_given(local: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert consul_address(None) == "127.0.0.1:8501"
    assert consul_address(None, "https://topology.example:8501") == "https://topology.example:8501"
    monkeypatch.setenv("CONSUL_HTTP_ADDR", "consul.example:8500")
    assert consul_address(None, "https://topology.example:8501") == "consul.example:8500"
    monkeypatch.setenv("DRSVC_CONSUL_HTTP_ADDR", "drsvc.example:8500")
    assert consul_address(None) == "drsvc.example:8500"
    assert consul_address("given:1") == "given:1"


def test_a_malformed_address_names_where_it_came_from() -> None:
    with pytest.raises(ConfigError, match=r"CONSUL_HTTP_ADDR: .*scheme 'unix'"):
        first_consul_address(None, {"CONSUL_HTTP_ADDR": "unix://consul.sock"})
    assert first_consul_address(None, {"CONSUL_HTTP_ADDR": ""}, "t:1") == "t:1"
