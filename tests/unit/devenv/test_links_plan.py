"""The pure part of the links between sites: listeners, proxies, toxics, conditions."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from drsvc.devenv.kafka_node import server_properties
from drsvc.devenv.link_plan import (
    LinkCondition,
    bandwidth_toxics,
    blackhole_toxics,
    check_pair,
    check_sites,
    latency_toxics,
    link_pairs,
    listener_name,
    plan_listeners,
    ports_needed,
    proxy_config,
    proxy_name,
)
from drsvc.devenv.state import BrokerNode, EnvState, KafkaSite, LinkListener, LinksState, StateStore
from drsvc.errors import ConfigError


def parse(text: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in text.splitlines() if line)


def test_listener_names_are_upper_case_and_plain() -> None:
    assert listener_name("west") == "FROM_WEST"
    assert listener_name("eu-central_1") == "FROM_EU_CENTRAL_1"


@pytest.mark.parametrize(
    ("sites", "message"),
    [
        (["east"], "two or more sites"),
        ([], "two or more sites"),
        (["eu-1", "eu_1"], "would share the broker listener FROM_EU_1"),
    ],
)
def test_sites_that_cannot_be_linked_are_refused(sites: list[str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        check_sites(sites)


def test_every_broker_gets_a_listener_per_other_site() -> None:
    node_ids = {"east": [1, 2, 3], "west": [1, 2, 3], "south": [1]}
    needed = ports_needed(node_ids)
    planned = plan_listeners(node_ids, range(1000, 1000 + needed))
    # 7 brokers, each reached from the two other sites, two ports each
    assert needed == 2 * 7 * 2
    assert len(planned) == 14
    keys = {(li.client_site, li.server_site, li.node_id) for li in planned}
    assert len(keys) == len(planned)
    assert all(li.client_site != li.server_site for li in planned)
    ports = [p for li in planned for p in (li.listener_port, li.proxy_port)]
    assert sorted(ports) == list(range(1000, 1000 + needed))
    assert {(li.client_site, li.node_id) for li in planned if li.server_site == "south"} == {
        ("east", 1),
        ("west", 1),
    }


def test_planning_needs_enough_ports() -> None:
    with pytest.raises(ValueError, match="not enough ports"):
        plan_listeners({"east": [1], "west": [1]}, [1, 2, 3])


def test_a_proxy_forwards_its_port_to_the_brokers_listener() -> None:
    li = LinkListener(
        client_site="west", server_site="east", node_id=2, listener_port=7001, proxy_port=7002
    )
    assert proxy_name(li) == "link.west.east.2"
    assert proxy_config(li, "127.0.0.1") == {
        "name": "link.west.east.2",
        "listen": "127.0.0.1:7002",
        "upstream": "127.0.0.1:7001",
        "enabled": True,
    }


def test_pairs_are_each_unordered_pair_once() -> None:
    assert list(link_pairs(["east", "west", "south"])) == [
        ("east", "west"),
        ("east", "south"),
        ("west", "south"),
    ]


@pytest.mark.parametrize(
    ("a", "b", "message"),
    [("east", "east", "two different sites"), ("east", "north", "'north' is not a linked site")],
)
def test_a_pair_names_two_linked_sites(a: str, b: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        check_pair(["east", "west"], a, b)


def test_latency_goes_both_ways() -> None:
    toxics = latency_toxics(20, 5)
    assert [(t["name"], t["stream"], t["type"]) for t in toxics] == [
        ("latency_upstream", "upstream", "latency"),
        ("latency_downstream", "downstream", "latency"),
    ]
    assert all(t["attributes"] == {"latency": 20, "jitter": 5} for t in toxics)


@pytest.mark.parametrize(
    ("latency", "jitter", "message"),
    [(-1, 0, "milliseconds >= 0"), (10, -1, "milliseconds >= 0"), (5, 10, "may not exceed")],
)
def test_bad_latencies_are_refused(latency: int, jitter: int, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        latency_toxics(latency, jitter)


def test_bandwidth_must_be_positive() -> None:
    assert [t["attributes"] for t in bandwidth_toxics(64)] == [{"rate": 64}, {"rate": 64}]
    with pytest.raises(ConfigError, match="to cut the link use cut"):
        bandwidth_toxics(0)


def test_a_condition_is_read_back_from_the_toxics_it_became() -> None:
    toxics = [*latency_toxics(30, 2), *bandwidth_toxics(128)]
    condition = LinkCondition.of_proxy({"enabled": True, "toxics": toxics})
    assert condition == LinkCondition(latency_ms=30, jitter_ms=2, kilobytes_per_s=128)
    assert LinkCondition.of_proxy({"enabled": False, "toxics": []}) == LinkCondition(cut=True)
    held = LinkCondition.of_proxy({"enabled": True, "toxics": blackhole_toxics()})
    assert held == LinkCondition(cut=True, blackhole=True)
    assert LinkCondition.of_proxy({"enabled": True}) == LinkCondition()
    assert json.dumps(condition.to_json_dict())


def _site(alias: str) -> KafkaSite:
    return KafkaSite(
        alias=alias,
        cluster_id="c",
        nodes=[BrokerNode(node_id=1, broker_port=9001, controller_port=9002)],
    )


def test_a_linked_broker_advertises_the_proxies_of_the_other_sites() -> None:
    east = _site("east")
    links = [
        LinkListener(
            client_site="west", server_site="east", node_id=1, listener_port=7001, proxy_port=7002
        ),
        LinkListener(
            client_site="south", server_site="east", node_id=1, listener_port=7003, proxy_port=7004
        ),
    ]
    props = parse(server_properties(east, east.nodes[0], Path("/data"), links))
    assert props["listeners"] == (
        "PLAINTEXT://127.0.0.1:9001,FROM_WEST://127.0.0.1:7001,FROM_SOUTH://127.0.0.1:7003,"
        "CONTROLLER://127.0.0.1:9002"
    )
    assert props["advertised.listeners"] == (
        "PLAINTEXT://127.0.0.1:9001,FROM_WEST://127.0.0.1:7002,FROM_SOUTH://127.0.0.1:7004"
    )
    assert props["listener.security.protocol.map"] == (
        "PLAINTEXT:PLAINTEXT,FROM_WEST:PLAINTEXT,FROM_SOUTH:PLAINTEXT,CONTROLLER:PLAINTEXT"
    )
    # brokers of a site still talk to each other directly
    assert props["inter.broker.listener.name"] == "PLAINTEXT"


def test_without_links_a_broker_has_its_one_listener() -> None:
    east = _site("east")
    props = parse(server_properties(east, east.nodes[0], Path("/data")))
    assert props["listeners"] == "PLAINTEXT://127.0.0.1:9001,CONTROLLER://127.0.0.1:9002"
    assert props["advertised.listeners"] == "PLAINTEXT://127.0.0.1:9001"
    assert props["listener.security.protocol.map"] == "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT"


def test_links_are_kept_in_the_state_and_old_states_still_load(tmp_path: Path) -> None:
    store = StateStore(tmp_path)
    store.save(EnvState(sites={"east": _site("east")}))
    document = json.loads(store.path.read_text())
    del document["links"]  # as written before links existed
    store.path.write_text(json.dumps(document))
    assert store.load().links is None

    listeners = plan_listeners({"east": [1], "west": [1]}, range(7000, 7004))
    state = EnvState(links=LinksState(sites=["east", "west"], api_port=8474, listeners=listeners))
    store.save(state)
    loaded = store.load()
    assert loaded == state
    assert loaded.links is not None
    assert [li.node_id for li in loaded.links.between("west", "east")] == [1]
    assert loaded.links.listeners_of("east", 1) == loaded.links.between("west", "east")
