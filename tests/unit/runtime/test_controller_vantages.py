"""The controller refuses to start when it could never see a cluster from enough independent
places (issue 32): its own probe and a cluster's own heartbeats read by it are one place."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from drsvc.errors import ConfigError, CredentialsRefusedError, KafkaUnavailableError
from drsvc.runtime.controller.observe import ConsulHealth, DirectProbe, HeartbeatArrivals
from drsvc.runtime.controller.vantages import (
    Vantage,
    require_independent_vantages,
    watched_clusters,
)
from drsvc.topology.loader import load_topology_text

PAIR = """
name: shop
clusters:
  east: {bootstrap_servers: "127.0.0.1:1"}
  west: {bootstrap_servers: "127.0.0.1:2"}
  south: {bootstrap_servers: "127.0.0.1:3"}
flows:
  - {source: east, target: west}
  - {source: west, target: east}
applications:
  - {name: orders, groups: [g], topics: [orders], preferred: east, auto_failover: true}
  - {name: report, groups: [r], topics: [report], preferred: south}
"""

ONE_WAY = PAIR.replace("  - {source: west, target: east}\n", "")


class FakeConsul:
    """What ConsulHealth asks of Consul: the health entries of a service."""

    def __init__(self, checked: set[str]) -> None:
        self.checked = checked

    def service_health(self, service: str) -> list[dict[str, Any]]:
        alias = service.removeprefix("kafka-")
        if alias not in self.checked:
            return []
        return [{"Checks": [{"Status": "passing"}]}]


def vantages(consul_checks: set[str], carries: dict[str, set[str]]) -> list[Vantage]:
    """What ``drsvc controller`` configures: its probe, Consul's checks, heartbeats read on
    every cluster (each with the clusters whose heartbeats a flow copies there)."""
    return [
        DirectProbe("c1", lambda cluster: True),
        ConsulHealth(lambda: FakeConsul(consul_checks)),  # type: ignore[arg-type,return-value]
        *(
            HeartbeatArrivals(alias, dict, fresh_within_s=3.0, carries=sources)
            for alias, sources in sorted(carries.items())
        ),
    ]


HEARTBEATS_BOTH_WAYS = {"east": {"west"}, "west": {"east"}, "south": set()}


def test_the_clusters_watched_are_those_an_opted_in_application_can_be_active_on() -> None:
    # orders starts on east and can move to west; report (south) is not opted in.
    assert watched_clusters(load_topology_text(PAIR)) == ["east", "west"]


def test_heartbeats_copied_both_ways_give_each_cluster_a_second_vantage_point() -> None:
    seen = require_independent_vantages(
        load_topology_text(PAIR), vantages(set(), HEARTBEATS_BOTH_WAYS), 2
    )
    assert seen["east"] == {
        "controller": ["probe@c1", "heartbeats@east"],
        "heartbeats@west": ["heartbeats@west"],
    }


def test_only_the_controllers_own_connectivity_is_refused_with_what_would_help() -> None:
    # One flow, east -> west: west's heartbeats reach no other cluster, and no Consul checks.
    carries = {"east": set(), "west": {"east"}, "south": set()}
    with pytest.raises(ConfigError) as refused:
        require_independent_vantages(load_topology_text(ONE_WAY), vantages(set(), carries), 2)
    message = str(refused.value)
    assert "needs 2 independent vantage points" in message
    assert "west is seen from 1 (controller: heartbeats@west, probe@c1)" in message
    assert "east is seen from" not in message  # east: the controller and heartbeats@west
    assert "register the Consul service kafka-<cluster>" in message
    assert "controller.min_vantages" in message


def test_consul_checks_of_the_cluster_are_a_vantage_point_of_their_own() -> None:
    carries = {"east": set(), "west": {"east"}, "south": set()}
    seen = require_independent_vantages(load_topology_text(ONE_WAY), vantages({"west"}, carries), 2)
    assert set(seen["west"]) == {"controller", "consul"}


def test_without_heartbeats_or_consul_nothing_but_the_probe_is_left() -> None:
    with pytest.raises(ConfigError, match=r"east is seen from 1 .*west is seen from 1"):
        require_independent_vantages(
            load_topology_text(PAIR), [DirectProbe("c1", lambda cluster: True)], 2
        )


def _raises(error: Exception) -> Callable[[str], bool]:
    def probe(cluster: str) -> bool:
        raise error

    return probe


def test_a_probe_whose_credentials_are_refused_abstains_instead_of_voting_down() -> None:
    refused = DirectProbe("c1", _raises(CredentialsRefusedError("cluster 'east' refused")))
    assert refused("east", 100.0) is None
    # an unreachable cluster is still a vote: "not reached"
    gone = DirectProbe("c1", _raises(KafkaUnavailableError("cluster 'east' does not answer")))
    seen = gone("east", 100.0)
    assert seen is not None and seen.reachable is False
