"""With a Consul ACL token, an absent active key is a refusal until shown otherwise: Consul
answers a read the token may not make with 404, as for a key that does not exist, so the client
stops and names the key instead of going to the preferred cluster. Without a token, an absent key
still means the preferred cluster (``test_active_cluster.py``)."""

from __future__ import annotations

from pathlib import Path

import pytest
from following_fakes import KEY, topology, write
from memory_coordination import FakeClock, MemoryCoordinator

from drsvc.adapters.consul_access import ConsulAccess, TokenSource
from drsvc.adapters.coordination import Delete
from drsvc.client.active_cluster import ActiveCluster
from drsvc.errors import ConfigError
from drsvc.topology.loader import load_topology_text

pytest_plugins = ["failover_fixtures"]

LEASE_S = 4
SECRET = "0e7d-application-secret"

WITH_TOKEN = ConsulAccess(token=TokenSource("CONSUL_HTTP_TOKEN", value=SECRET))


def follower(store: MemoryCoordinator, clock: FakeClock, access: ConsulAccess) -> ActiveCluster:
    return ActiveCluster(
        "orders",
        topology(LEASE_S),
        consul_access=access,
        coordinator=store,
        clock=clock.monotonic,
    )


def test_with_a_token_an_absent_key_stops_the_client_and_names_the_key(
    store: MemoryCoordinator, clock: FakeClock
) -> None:
    active = follower(store, clock, WITH_TOKEN)
    with pytest.raises(ConfigError) as refused:
        active.watch_once()
    message = str(refused.value)
    assert KEY in message
    assert "may not read" in message and "start drsvc" in message
    assert "CONSUL_HTTP_TOKEN" in message and SECRET not in message
    state = active.state()
    assert (state.cluster, state.reason) == (None, "unreadable")
    assert active.rejected_values["unreadable"] == 1
    # once drsvc wrote the key (or the token may read it), the client follows it
    write(store, "west", 1, LEASE_S * 1000)
    active.watch_once()
    assert active.cluster == "west"


def test_with_a_token_a_key_that_disappears_stops_the_client(
    store: MemoryCoordinator, clock: FakeClock
) -> None:
    active = follower(store, clock, WITH_TOKEN)
    write(store, "east", 2, LEASE_S * 1000)
    active.watch_once()
    assert active.cluster == "east"
    # the key reads as absent: deleted, or the token lost read on it (Consul cannot tell which)
    store.write([Delete(KEY)])
    with pytest.raises(ConfigError, match="cannot read"):
        active.watch_once()
    assert active.cluster is None


def test_without_a_token_an_absent_key_still_means_the_preferred_cluster(
    store: MemoryCoordinator, clock: FakeClock
) -> None:
    active = follower(store, clock, ConsulAccess())
    active.watch_once()
    assert (active.cluster, active.state().epoch) == ("east", 0)


def test_the_client_resolves_its_access_from_the_environment_and_the_topology(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    for name in ("CONSUL_HTTP_TOKEN", "CONSUL_HTTP_TOKEN_FILE", "DRSVC_CONSUL_HTTP_ADDR"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("CONSUL_HTTP_ADDR", raising=False)
    secured = load_topology_text(f"""
name: shop
clusters: {{east: {{}}, west: {{}}}}
consul:
  address: https://consul.example:8501
  token_file: {tmp_path / "general.token"}
  tokens: {{application: {{token_env: ORDERS_CONSUL_TOKEN}}}}
applications:
  - {{name: orders, groups: [g], topics: [orders], preferred: east, lease_s: {LEASE_S}}}
""")
    monkeypatch.setenv("ORDERS_CONSUL_TOKEN", SECRET)
    active = ActiveCluster("orders", secured)
    assert active._absent_is_unreadable
    api = active.coordinator._api  # type: ignore[attr-defined]
    # the application role's token, sent to the topology's agent over https (no request made)
    assert api._consul.token == SECRET
    assert api.endpoint.url == "https://consul.example:8501"
    # the environment's token wins over the topology's, and the explicit address over both
    monkeypatch.setenv("CONSUL_HTTP_TOKEN", "from-env")
    other = ActiveCluster("orders", secured, consul="127.0.0.1:8500")
    other_api = other.coordinator._api  # type: ignore[attr-defined]
    assert other_api._consul.token == "from-env"
    assert other_api.endpoint.url == "https://127.0.0.1:8500"  # the topology asks for https
    reader = other.reader()._api  # type: ignore[attr-defined]
    assert reader._consul.token == "from-env"
