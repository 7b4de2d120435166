"""SiteLinks against an in-memory Toxiproxy, and how an environment hands out links."""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path

import pytest

from drsvc.devenv.environment import EnvironmentInfo, LocalEnvironment
from drsvc.devenv.link_plan import plan_listeners, proxy_config
from drsvc.devenv.links import SiteLinks
from drsvc.devenv.processes import ProcessHandle
from drsvc.devenv.state import BrokerNode, EnvState, KafkaSite, LinksState, StateStore
from drsvc.devenv.toxiproxy import Proxy
from drsvc.errors import ConfigError, LocalEnvError
from drsvc.settings import Settings

SITES = ["east", "west", "south"]


class FakeToxiproxy:
    """Toxiproxy's API as SiteLinks uses it, with its semantics: a toxic name exists once."""

    def __init__(self, links: LinksState) -> None:
        self.state: dict[str, Proxy] = {}
        for li in links.listeners:
            proxy = proxy_config(li, links.host)
            proxy["toxics"] = []
            self.state[str(proxy["name"])] = proxy

    def toxics(self, proxy: str) -> list[Proxy]:
        found = self.state[proxy]["toxics"]
        assert isinstance(found, list)
        return found

    def proxies(self) -> dict[str, Proxy]:
        return copy.deepcopy(self.state)

    def set_enabled(self, proxy: str, enabled: bool) -> None:
        self.state[proxy]["enabled"] = enabled

    def put_toxic(self, proxy: str, toxic: Proxy, exists: bool) -> None:
        toxics = self.toxics(proxy)
        named = [t for t in toxics if t["name"] == toxic["name"]]
        assert bool(named) == exists, "created twice or updated before it existed"
        if named:
            named[0]["attributes"] = dict(toxic["attributes"])  # type: ignore[call-overload]
        else:
            toxics.append(copy.deepcopy(toxic))

    def remove_toxic(self, proxy: str, toxic: str) -> None:
        toxics = self.toxics(proxy)
        assert any(t["name"] == toxic for t in toxics), f"{toxic} is not on {proxy}"
        self.state[proxy]["toxics"] = [t for t in toxics if t["name"] != toxic]

    def reset(self) -> None:
        for proxy in self.state.values():
            proxy["enabled"] = True
            proxy["toxics"] = []


def links_state() -> LinksState:
    node_ids = {"east": [1, 2, 3], "west": [1, 2, 3], "south": [1]}
    return LinksState(
        sites=SITES, api_port=8474, listeners=plan_listeners(node_ids, range(7000, 7100))
    )


@pytest.fixture
def fake() -> FakeToxiproxy:
    return FakeToxiproxy(links_state())


@pytest.fixture
def links(fake: FakeToxiproxy) -> SiteLinks:
    return SiteLinks(links_state(), fake)


def by_pair(links: SiteLinks) -> dict[tuple[str, ...], dict[str, object]]:
    return {tuple(d["sites"]): d for d in links.describe()}  # type: ignore[arg-type]


def test_a_fresh_environment_has_every_link_up(links: SiteLinks) -> None:
    described = by_pair(links)
    assert list(described) == [("east", "west"), ("east", "south"), ("west", "south")]
    east_west = described[("east", "west")]
    assert east_west["cut"] is False
    assert east_west["latency_ms"] == 0
    assert east_west["kilobytes_per_s"] is None
    assert east_west["consistent"] is True
    # three brokers each way
    proxies = east_west["proxies"]
    assert isinstance(proxies, list)
    assert sorted((p["from"], p["to"], p["node_id"]) for p in proxies) == [
        ("east", "west", 1),
        ("east", "west", 2),
        ("east", "west", 3),
        ("west", "east", 1),
        ("west", "east", 2),
        ("west", "east", 3),
    ]


def test_cut_takes_both_directions_of_that_link_only(links: SiteLinks) -> None:
    links.cut("west", "east")
    described = by_pair(links)
    assert described[("east", "west")]["cut"] is True
    assert described[("east", "west")]["blackhole"] is False
    assert described[("east", "west")]["consistent"] is True
    assert described[("east", "south")]["cut"] is False
    assert described[("west", "south")]["cut"] is False
    links.heal("east", "west")
    assert not any(d["cut"] for d in links.describe())


def test_a_black_hole_holds_connections_instead_of_refusing_them(
    links: SiteLinks, fake: FakeToxiproxy
) -> None:
    links.cut("east", "south", blackhole=True)
    links.cut("east", "south", blackhole=True)  # again: the toxics are updated, not duplicated
    described = by_pair(links)[("east", "south")]
    assert described["cut"] is True
    assert described["blackhole"] is True
    assert fake.state["link.east.south.1"]["enabled"] is True
    links.heal("south", "east")
    assert by_pair(links)[("east", "south")]["cut"] is False
    assert fake.toxics("link.east.south.1") == []


def test_delay_is_set_changed_and_removed(links: SiteLinks, fake: FakeToxiproxy) -> None:
    links.delay("east", "west", 20, 5)
    assert by_pair(links)[("east", "west")]["latency_ms"] == 20
    links.delay("east", "west", 40)
    east_west = by_pair(links)[("east", "west")]
    assert (east_west["latency_ms"], east_west["jitter_ms"]) == (40, 0)
    assert len(fake.toxics("link.west.east.2")) == 2  # one per stream
    assert by_pair(links)[("west", "south")]["latency_ms"] == 0
    links.delay("east", "west", 0)
    assert by_pair(links)[("east", "west")]["latency_ms"] == 0
    assert fake.toxics("link.west.east.2") == []


def test_limit_and_heal(links: SiteLinks) -> None:
    links.limit("west", "south", 100)
    links.delay("west", "south", 10)
    links.cut("west", "south")
    west_south = by_pair(links)[("west", "south")]
    assert (west_south["cut"], west_south["latency_ms"], west_south["kilobytes_per_s"]) == (
        True,
        10,
        100,
    )
    links.heal("west", "south")
    west_south = by_pair(links)[("west", "south")]
    assert (west_south["cut"], west_south["latency_ms"], west_south["kilobytes_per_s"]) == (
        False,
        0,
        None,
    )


def test_heal_all(links: SiteLinks) -> None:
    links.cut("east", "west")
    links.delay("east", "south", 5)
    links.heal_all()
    assert all(not d["cut"] and d["latency_ms"] == 0 for d in links.describe())


def test_a_link_whose_proxies_differ_is_reported_inconsistent(
    links: SiteLinks, fake: FakeToxiproxy
) -> None:
    fake.set_enabled("link.west.east.3", False)
    assert by_pair(links)[("east", "west")]["consistent"] is False
    del fake.state["link.east.south.1"]
    east_south = by_pair(links)[("east", "south")]
    assert east_south["consistent"] is False
    assert any(p.get("missing") for p in east_south["proxies"])  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("a", "b", "message"),
    [("east", "east", "two different sites"), ("east", "agg", "'agg' is not a linked site")],
)
def test_unknown_or_equal_sites_are_refused(
    links: SiteLinks, fake: FakeToxiproxy, a: str, b: str, message: str
) -> None:
    before = fake.proxies()
    acts: tuple[Callable[[], None], ...] = (
        lambda: links.cut(a, b),
        lambda: links.heal(a, b),
        lambda: links.delay(a, b, 10),
        lambda: links.limit(a, b, 10),
    )
    for act in acts:
        with pytest.raises(ConfigError, match=message):
            act()
    assert fake.proxies() == before


# ---------------------------------------------------------------- the environment's side


def _site(alias: str, port: int) -> KafkaSite:
    return KafkaSite(
        alias=alias,
        cluster_id="c",
        nodes=[BrokerNode(node_id=1, broker_port=port, controller_port=port + 1)],
    )


def _env(tmp_path: Path, state: EnvState) -> LocalEnvironment:
    StateStore(tmp_path).save(state)
    return LocalEnvironment(Settings(state_dir=tmp_path, cache_dir=tmp_path))


def test_without_links_every_site_reaches_a_cluster_directly(tmp_path: Path) -> None:
    env = _env(tmp_path, EnvState(sites={"east": _site("east", 9000), "west": _site("west", 9100)}))
    assert env.bootstrap_from("west", "east") == "127.0.0.1:9000"
    assert env.clusters_from("east") == {"east": "127.0.0.1:9000", "west": "127.0.0.1:9100"}
    with pytest.raises(LocalEnvError, match="not brought up with links"):
        env.links()
    with pytest.raises(ConfigError, match="cluster 'north' is not part"):
        env.bootstrap_from("east", "north")
    # nothing about links in what `dev up --json` prints
    assert "links" not in env.info().to_json_dict()


def test_with_links_other_sites_go_through_their_proxies(tmp_path: Path) -> None:
    listeners = plan_listeners({"east": [1], "west": [1]}, range(7000, 7004))
    links = LinksState(sites=["east", "west"], api_port=8474, listeners=listeners)
    state = EnvState(sites={"east": _site("east", 9000), "west": _site("west", 9100)}, links=links)
    env = _env(tmp_path, state)
    west_to_east = links.between("west", "east")[0]
    assert env.bootstrap_from("west", "east") == f"127.0.0.1:{west_to_east.proxy_port}"
    assert env.bootstrap_from("east", "east") == "127.0.0.1:9000"
    assert env.clusters_from("east")["west"] == (
        f"127.0.0.1:{links.between('east', 'west')[0].proxy_port}"
    )
    with pytest.raises(ConfigError, match="'witness' is not a linked site"):
        env.bootstrap_from("witness", "east")
    info = env.info()
    assert info.bootstrap_from["west"]["east"] == env.bootstrap_from("west", "east")
    document = info.to_json_dict()
    assert document["links"] == {
        "api": "127.0.0.1:8474",
        "bootstrap_from": {"east": env.clusters_from("east"), "west": env.clusters_from("west")},
    }
    # recorded, but its Toxiproxy does not run (a dead pid)
    with pytest.raises(LocalEnvError, match="does not run"):
        env.links()
    links.process = ProcessHandle(pid=2**22 + 17, start_ticks=1)
    StateStore(tmp_path).save(state)
    with pytest.raises(LocalEnvError, match="does not run"):
        env.links()


def test_links_are_chosen_when_the_environment_is_created(tmp_path: Path) -> None:
    env = LocalEnvironment(Settings(state_dir=tmp_path, cache_dir=tmp_path))
    fresh = EnvState()
    env._choose_links(fresh, None, ["east", "west"], None)
    assert fresh.links is None
    env._choose_links(fresh, True, ["east", "west"], 3)
    assert fresh.links is not None
    assert fresh.links.sites == ["east", "west"]
    assert len(fresh.links.listeners) == 6  # 3 brokers x 2 sites, each reached from the other
    ports = [fresh.links.api_port] + [
        p for li in fresh.links.listeners for p in (li.listener_port, li.proxy_port)
    ]
    assert len(set(ports)) == len(ports)
    env._choose_links(fresh, None, ["west"], None)  # a restart of some of its sites
    with pytest.raises(ConfigError, match="south cannot join an environment with links"):
        env._choose_links(fresh, None, ["east", "south"], None)
    with pytest.raises(ConfigError, match="brought up with links"):
        env._choose_links(fresh, False, ["east", "west"], None)

    unlinked = EnvState(sites={"east": _site("east", 9000)})
    with pytest.raises(ConfigError, match="brought up without links"):
        env._choose_links(unlinked, True, ["east", "west"], None)
    with pytest.raises(ConfigError, match="two or more sites"):
        env._choose_links(EnvState(), True, ["east"], None)


def test_info_without_links_is_unchanged() -> None:
    info = EnvironmentInfo(clusters={"east": "127.0.0.1:1"}, consul_http_addr="127.0.0.1:2")
    assert info.to_json_dict() == {
        "clusters": {"east": {"bootstrap_servers": "127.0.0.1:1"}},
        "consul": {"http_addr": "127.0.0.1:2", "sites": {}},
    }
