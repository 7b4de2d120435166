"""A flow's topic mirror gets the admin clients of its source and target from a client factory."""

from __future__ import annotations

from fake_kafka import FakeClock
from scripted_admins import ScriptedAdmins

from drsvc.kafka.clock import SystemClock
from drsvc.runtime.replication.settings import worker_settings
from drsvc.runtime.replication.topics import flow_clients, mirror_for
from drsvc.topology import load_topology_text

PAIR = """
name: pair
clusters:
  east: {bootstrap_servers: "127.0.0.1:1"}
  west: {bootstrap_servers: "127.0.0.1:2"}
flows:
  - {source: east, target: west}
"""


def test_the_mirror_uses_the_factory_s_admin_clients_of_the_flow_s_clusters() -> None:
    topology = load_topology_text(PAIR)
    settings = worker_settings(topology, topology.flow("east", "west"), {})
    admins = ScriptedAdmins(topology, lambda alias: f"admin of {alias}")
    mirror = mirror_for(settings, clients=admins)
    assert (mirror.source_admin, mirror.target_admin) == ("admin of east", "admin of west")
    assert mirror.clock is admins.clock


def test_a_flow_s_own_factory_reaches_its_clusters_with_the_worker_s_settings() -> None:
    topology = load_topology_text(PAIR)
    settings = worker_settings(topology, topology.flow("east", "west"), {})
    clock = FakeClock()
    clients = flow_clients(settings, clock)
    assert clients.aliases == {"east", "west"}
    assert clients.config("west")["bootstrap.servers"] == "127.0.0.1:2"
    assert clients.clock is clock
    assert isinstance(flow_clients(settings).clock, SystemClock)
