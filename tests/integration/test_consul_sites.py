"""Consul that survives a site: the per-site layout (east, west and a witness, one quorum) loses
east's server, which is the Raft leader at that moment, and keeps working through the other two.

The test runs its own environment in its own state directory (not the session's, whose Consul
other tests use) and starts Consul alone: the brokers play no part in Consul's quorum.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import pytest
import requests

from drsvc.adapters.consul_client import ConsulClient
from drsvc.adapters.consul_coordination import ConsulCoordinator
from drsvc.adapters.coordination import Put
from drsvc.devenv.environment import LocalEnvironment
from drsvc.devenv.processes import is_alive
from drsvc.devenv.state import StateStore
from drsvc.errors import ConfigError, CoordinatorUnavailableError
from drsvc.settings import Settings

SITES = ["east", "west"]
#: how long the two surviving servers may take to elect a leader and serve again
SURVIVAL_TIMEOUT_S = 20.0

T = TypeVar("T")


@pytest.fixture
def per_site_env(tmp_path: Path) -> Iterator[LocalEnvironment]:
    env = LocalEnvironment(
        Settings.from_env(state_dir=tmp_path / "drsvc-state", consul_layout="per-site")
    )
    try:
        yield env
    finally:
        env.down()


def _eventually(attempt: Callable[[], T], timeout_s: float = SURVIVAL_TIMEOUT_S) -> T:
    """``attempt()``'s result once it stops failing because Consul is (still) unavailable."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return attempt()
        except (CoordinatorUnavailableError, AssertionError):
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def _server_addr(env: LocalEnvironment, site: str) -> str:
    """The Raft address (host:server port) of a site's server, as /v1/status/leader names it."""
    agent = env.store.load().consul_agent_of(site)
    assert agent is not None
    return f"{agent.host}:{agent.server_port}"


def _make_leader(http_addr: str, site: str) -> None:
    """Hand Raft leadership to ``site``'s server (so that killing it kills the leader)."""
    config = requests.get(f"http://{http_addr}/v1/operator/raft/configuration", timeout=5).json()
    server = next(s for s in config["Servers"] if s["Node"] == f"drsvc-{site}")
    if server["Leader"]:
        return
    answer = requests.post(
        f"http://{http_addr}/v1/operator/raft/transfer-leader",
        params={"id": server["ID"]},
        timeout=10,
    )
    answer.raise_for_status()


def _leader_is(client: ConsulClient, server_addr: str) -> None:
    assert client.leader() == server_addr


def _has_a_leader_and_peers(client: ConsulClient, count: int) -> None:
    assert client.leader() and len(client.peers()) == count


def test_losing_a_sites_consul_server_leaves_consul_working(
    per_site_env: LocalEnvironment,
) -> None:
    started = time.monotonic()
    info = per_site_env.up(SITES, consul_only=True)
    assert set(info.consul_sites) == {"east", "west", "witness"}
    assert info.consul_http_addr == info.consul_sites["east"]
    clients = {site: ConsulClient(addr) for site, addr in info.consul_sites.items()}
    for client in clients.values():
        _has_a_leader_and_peers(client, 3)
    assert StateStore(per_site_env.state_dir).load().consul_layout == "per-site"
    print(f"three servers, one leader after {time.monotonic() - started:.1f}s")

    # The layout is part of the environment: asking for the other one starts nothing.
    with pytest.raises(ConfigError, match=r"'per-site', not 'single'.*drsvc dev down"):
        per_site_env.up(SITES, consul_layout="single", consul_only=True)

    key = f"drsvc-test/sites-{uuid.uuid4().hex[:12]}/"
    clients["east"].kv_put(key + "before", "written-through-east")
    assert clients["west"].kv_get(key + "before") == "written-through-east"

    _make_leader(info.consul_sites["west"], "east")
    _eventually(lambda: _leader_is(clients["west"], _server_addr(per_site_env, "east")))

    per_site_env.stop_consul_site("east")
    lost = time.monotonic()
    east_agent = per_site_env.store.load().consul_agent_of("east")
    assert east_agent is not None and east_agent.process is None
    # With east's agent dead, the default address is a live one (the first site's is gone).
    assert per_site_env.info().consul_http_addr in (
        info.consul_sites["west"],
        info.consul_sites["witness"],
    )

    _eventually(lambda: clients["west"].kv_put(key + "after", "written-through-west"))
    assert _eventually(lambda: clients["witness"].kv_get(key + "after")) == "written-through-west"
    _eventually(lambda: clients["witness"].kv_put(key + "witness", "written-through-witness"))
    assert clients["west"].kv_get(key + "witness") == "written-through-witness"
    assert clients["west"].leader() not in ("", _server_addr(per_site_env, "east"))
    print(f"writes and reads through west and the witness {time.monotonic() - lost:.1f}s later")

    coordinator = ConsulCoordinator(info.consul_sites["west"])
    try:
        lock = _eventually(lambda: coordinator.try_lock(key + "lock", "west", ttl_s=2))
        assert lock is not None and lock.held()
        coordinator.write([Put(key + "under-lock", "west")], lock=lock)
        lock.release()
    finally:
        coordinator.close()

    # up brings east back; it waits until east is a Raft peer again and has caught up.
    again = per_site_env.up(SITES, consul_only=True)
    assert again.consul_http_addr == info.consul_sites["east"]
    east_agent = per_site_env.store.load().consul_agent_of("east")
    assert east_agent is not None and east_agent.process is not None
    assert is_alive(east_agent.process)
    for client in clients.values():
        _has_a_leader_and_peers(client, 3)
    assert _eventually(lambda: clients["east"].kv_get(key + "under-lock")) == "west"
    consul_rows = [p for p in per_site_env.status().processes if p.role == "consul"]
    assert sorted(p.site for p in consul_rows) == ["east", "west", "witness"]
    assert all(p.running and p.listening for p in consul_rows)
