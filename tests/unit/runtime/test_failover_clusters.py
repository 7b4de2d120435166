"""The failover's view of a real cluster, on a fake admin client: whether it answers."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException

import drsvc.kafka.clients as clients_module
from drsvc.runtime.failover.clusters import KafkaFailoverClusters
from drsvc.topology.models import Topology

TOPOLOGY = Topology.model_validate(
    {
        "name": "probe",
        "clusters": {
            "east": {"bootstrap_servers": "e:9092"},
            "west": {"bootstrap_servers": "w:9092"},
        },
        "flows": [{"source": "east", "target": "west"}],
    }
)


class SlowAdmin:
    """An admin client whose first ``late`` metadata requests get no answer in time."""

    def __init__(self, late: int) -> None:
        self.late = late
        self.asked = 0

    def list_topics(self, timeout: float) -> Any:
        self.asked += 1
        if self.asked <= self.late:
            raise KafkaException(KafkaError(KafkaError._TIMED_OUT))
        return SimpleNamespace(brokers={1: object()}, topics={})


@pytest.fixture
def admins(monkeypatch: pytest.MonkeyPatch) -> list[SlowAdmin]:
    built: list[SlowAdmin] = []

    def admin_client(_config: object) -> SlowAdmin:
        admin = SlowAdmin(late=2 if not built else 0)
        built.append(admin)
        return admin

    # Every admin client comes from the port's factory (which keeps one per cluster).
    monkeypatch.setattr(clients_module, "AdminClient", admin_client)
    return built


def test_a_cluster_whose_first_answers_are_late_still_answers(admins: list[SlowAdmin]) -> None:
    clusters = KafkaFailoverClusters(TOPOLOGY, probe_timeout_s=0.01)
    assert clusters.reachable("east")
    # One client, asked three times: its connections outlive each probe.
    assert [a.asked for a in admins] == [3]
    assert clusters.reachable("east")
    assert [a.asked for a in admins] == [4]


def test_a_cluster_that_never_answers_in_time_does_not(admins: list[SlowAdmin]) -> None:
    clusters = KafkaFailoverClusters(TOPOLOGY, probe_timeout_s=0.01)
    assert not clusters.reachable("east", tries=2)
    assert [a.asked for a in admins] == [2]
