"""The flow's settings reach the librdkafka configs of its worker's clients."""

from __future__ import annotations

from drsvc.runtime.replication.client_configs import producer_config, slot_producer_config
from drsvc.runtime.replication.settings import WorkerSettings, worker_settings
from drsvc.topology import load_topology_text

TOPOLOGY = """
name: pair
clusters:
  east: {bootstrap_servers: "127.0.0.1:1"}
  west: {bootstrap_servers: "127.0.0.1:2"}
flows:
  - {source: east, target: west%s}
"""


def settings(flow_extra: str = "") -> WorkerSettings:
    topology = load_topology_text(TOPOLOGY % flow_extra)
    return worker_settings(topology, topology.flow("east", "west"), {})


def test_the_target_producer_lingers_5_ms_unless_the_flow_says_otherwise() -> None:
    assert producer_config(settings())["linger.ms"] == 5
    tuned = settings(", linger_ms: 100")
    assert producer_config(tuned)["linger.ms"] == 100
    assert slot_producer_config(tuned, 0)["linger.ms"] == 100


def test_an_explicit_override_wins_over_the_flow() -> None:
    topology = load_topology_text(TOPOLOGY % ", linger_ms: 100")
    overridden = worker_settings(topology, topology.flow("east", "west"), {}, linger_ms=20)
    assert producer_config(overridden)["linger.ms"] == 20
