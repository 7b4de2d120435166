from __future__ import annotations

from pathlib import Path

import pytest

from drsvc.devenv.processes import ProcessHandle
from drsvc.devenv.state import BrokerNode, ConsulAgentState, EnvState, KafkaSite, StateStore
from drsvc.errors import LocalEnvError


def sample_state() -> EnvState:
    nodes = [
        BrokerNode(node_id=i, broker_port=9000 + i, controller_port=9100 + i) for i in (1, 2, 3)
    ]
    nodes[0].process = ProcessHandle(pid=123, start_ticks=456)
    return EnvState(
        sites={"east": KafkaSite(alias="east", cluster_id="abc", nodes=nodes)},
        consul=ConsulAgentState(http_port=1, server_port=2, serf_lan_port=3, serf_wan_port=4),
    )


def test_state_round_trips_through_the_file(tmp_path: Path) -> None:
    store = StateStore(tmp_path / "state")
    assert store.load() == EnvState()
    store.save(sample_state())
    assert store.load() == sample_state()
    assert not list((tmp_path / "state").glob("*.tmp"))


def test_bootstrap_servers_list_every_broker_of_the_site() -> None:
    site = sample_state().sites["east"]
    assert site.bootstrap_servers == "127.0.0.1:9001,127.0.0.1:9002,127.0.0.1:9003"


def test_a_corrupt_state_file_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "state.json").write_text("{not json")
    with pytest.raises(LocalEnvError, match="cannot read the environment state"):
        StateStore(tmp_path).load()


def test_a_state_file_of_another_shape_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "state.json").write_text('{"sites": {"east": {"alias": 1}}}')
    with pytest.raises(LocalEnvError, match="incompatible drsvc"):
        StateStore(tmp_path).load()
