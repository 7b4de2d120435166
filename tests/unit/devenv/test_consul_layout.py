"""The per-site Consul layout: one quorum of a server per site and a witness, decided once."""

from __future__ import annotations

from pathlib import Path

import pytest

from drsvc.devenv import consul_agent
from drsvc.devenv.environment import _choose_layout
from drsvc.devenv.state import EnvState, StateStore
from drsvc.errors import ConfigError


def test_per_site_makes_a_server_per_site_and_a_witness_with_distinct_ports() -> None:
    state = EnvState()
    _choose_layout(state, "per-site", ["east", "west"], explicit="per-site")
    assert state.consul_layout == "per-site" and state.consul is None
    assert [a.site for a in state.consul_agents()] == ["east", "west", "witness"]
    ports = [
        p
        for a in state.consul_servers
        for p in (a.http_port, a.server_port, a.serf_lan_port, a.serf_wan_port)
    ]
    assert len(set(ports)) == len(ports) == 12
    assert state.consul_agent_of("west") is state.consul_servers[1]
    assert state.consul_agent_of("south") is None


def test_each_server_expects_all_and_joins_the_others(tmp_path: Path) -> None:
    state = EnvState()
    _choose_layout(state, "per-site", ["east", "west"], explicit="per-site")
    east, west, witness = state.consul_servers
    config = consul_agent.agent_config(east, tmp_path, [west, witness])
    assert config["node_name"] == "drsvc-east"
    assert config["bootstrap_expect"] == 3
    assert config["retry_join"] == [
        f"127.0.0.1:{west.serf_lan_port}",
        f"127.0.0.1:{witness.serf_lan_port}",
    ]
    assert consul_agent.agent_dir(tmp_path, witness) == tmp_path / "consul" / "witness"
    single = consul_agent.agent_config(east.model_copy(update={"site": None}), tmp_path)
    assert single["bootstrap_expect"] == 1 and "retry_join" not in single


def test_the_layout_survives_the_state_file(tmp_path: Path) -> None:
    state = EnvState()
    _choose_layout(state, "per-site", ["east", "west"], explicit="per-site")
    store = StateStore(tmp_path)
    store.save(state)
    assert store.load() == state


def test_another_layout_for_a_running_environment_is_refused_naming_both() -> None:
    state = EnvState()
    _choose_layout(state, "per-site", ["east", "west"], explicit="per-site")
    with pytest.raises(ConfigError, match=r"'per-site', not 'single'.*drsvc dev down"):
        _choose_layout(state, "single", ["east"], explicit="single")
    _choose_layout(state, "single", ["east", "west", "south"], explicit=None)  # keeps its own
    assert state.consul_layout == "per-site" and len(state.consul_servers) == 3


@pytest.mark.parametrize(
    ("aliases", "names"),
    [(["east"], "two or more clusters"), (["east", "witness"], "'witness' names")],
)
def test_per_site_needs_two_sites_and_keeps_the_witness_name(
    aliases: list[str], names: str
) -> None:
    with pytest.raises(ConfigError, match=names):
        _choose_layout(EnvState(), "per-site", aliases, explicit="per-site")
