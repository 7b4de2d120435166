from __future__ import annotations

from pathlib import Path

import pytest

from drsvc.dev_endpoints import LocalEndpoints
from drsvc.devenv.environment import LocalEnvironment
from drsvc.devenv.link_plan import plan_listeners
from drsvc.devenv.processes import ProcessHandle
from drsvc.devenv.state import (
    BrokerNode,
    ConsulAgentState,
    ConsulLayout,
    EnvState,
    KafkaSite,
    LinksState,
    StateStore,
)
from drsvc.errors import LocalEnvError
from drsvc.settings import Settings


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


def recorded_environment(layout: ConsulLayout) -> EnvState:
    """A state with everything the environment records: processes (not running), a site on
    another host, broker overrides, links, and the agents of ``layout``."""
    gone = ProcessHandle(pid=2**22 + 17, start_ticks=1)
    east = sample_state().sites["east"]
    west = KafkaSite(
        alias="west",
        host="127.0.0.2",
        cluster_id="def",
        nodes=[BrokerNode(node_id=1, broker_port=9201, controller_port=9301, process=gone)],
        broker_overrides={"offsets.retention.minutes": "5"},
    )
    links = LinksState(
        sites=["east", "west"],
        api_port=8474,
        listeners=plan_listeners({"east": [1, 2, 3], "west": [1]}, range(7000, 7100)),
        process=gone,
    )

    def agent(site: str | None, port: int) -> ConsulAgentState:
        ports = {"server_port": port + 1, "serf_lan_port": port + 2, "serf_wan_port": port + 3}
        return ConsulAgentState(site=site, http_port=port, process=gone, **ports)

    if layout == "single":
        return EnvState(sites={"east": east, "west": west}, consul=agent(None, 8500), links=links)
    servers = [agent("east", 8510), agent("west", 8520), agent("witness", 8530)]
    return EnvState(
        sites={"east": east, "west": west},
        consul_layout="per-site",
        consul_servers=servers,
        links=links,
    )


@pytest.mark.parametrize(
    ("layout", "consul"), [("single", "127.0.0.1:8500"), ("per-site", "127.0.0.1:8510")]
)
def test_what_the_store_writes_the_endpoint_reader_reads(
    tmp_path: Path, layout: ConsulLayout, consul: str
) -> None:
    # Clients read the file without devenv: the reader must understand all the store writes.
    StateStore(tmp_path).save(recorded_environment(layout))
    endpoints = LocalEndpoints(tmp_path)
    assert endpoints.bootstrap_servers("east") == "127.0.0.1:9001,127.0.0.1:9002,127.0.0.1:9003"
    assert endpoints.bootstrap_servers("west") == "127.0.0.2:9201"
    # no agent runs: the first recorded one, as `drsvc dev info` reports it
    assert endpoints.consul_http_addr() == consul
    env = LocalEnvironment(Settings(state_dir=tmp_path, cache_dir=tmp_path))
    assert env.info().consul_http_addr == consul
    assert env.bootstrap_servers("west") == "127.0.0.2:9201"
