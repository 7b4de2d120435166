"""The failover's view of a real cluster, on a fake admin client: whether it answers."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException
from fake_kafka import FakeCluster, FakeKafkaClients
from scripted_admins import ScriptedAdmins

from drsvc.errors import KafkaUnavailableError
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
def admins() -> ScriptedAdmins:
    return ScriptedAdmins(TOPOLOGY, lambda _alias: SlowAdmin(late=2))


def test_a_cluster_whose_first_answers_are_late_still_answers(admins: ScriptedAdmins) -> None:
    clusters = KafkaFailoverClusters(TOPOLOGY, probe_timeout_s=0.01, clients=admins)
    assert clusters.reachable("east")
    # One client, asked three times: its connections outlive each probe.
    assert [(alias, a.asked) for alias, a in admins.built] == [("east", 3)]
    assert clusters.reachable("east")
    assert [(alias, a.asked) for alias, a in admins.built] == [("east", 4)]


def test_a_cluster_that_never_answers_in_time_does_not(admins: ScriptedAdmins) -> None:
    clusters = KafkaFailoverClusters(TOPOLOGY, probe_timeout_s=0.01, clients=admins)
    assert not clusters.reachable("east", tries=2)
    assert [(alias, a.asked) for alias, a in admins.built] == [("east", 2)]


def test_a_cluster_that_answers_but_has_partitions_without_a_leader_cannot_serve_them() -> None:
    east = FakeCluster("east")
    east.create_topic("orders", 2)
    east.lose_leader("orders", 1)
    admin = SimpleNamespace(list_topics=lambda timeout: east.metadata())
    clusters = KafkaFailoverClusters(TOPOLOGY, clients=ScriptedAdmins(TOPOLOGY, lambda _a: admin))
    with pytest.raises(KafkaUnavailableError, match=r"east answers but 1 partition\(s\).*orders-1"):
        clusters.serves("east", ["orders", "not-there"])
    east.elect_leader("orders", 1)
    assert clusters.serves("east", ["orders", "not-there"])


def test_fencing_uses_the_factory_s_producers_and_fences_a_paused_one() -> None:
    east = FakeCluster("east")
    east.create_topic("orders")
    fakes = FakeKafkaClients(east, FakeCluster("west", east.clock))
    zombie = fakes.producer("east", {"transactional.id": "orders-tx"})
    zombie.init_transactions(5)
    zombie.begin_transaction()
    zombie.produce("orders", b"queued before the pause", partition=0)
    clusters = KafkaFailoverClusters(TOPOLOGY, clients=fakes)

    report = clusters.fence("east", ["orders-tx", "never-used"], timeout_s=5)

    assert report.fenced == ("orders-tx", "never-used") and report.complete
    fencing = [p for p in fakes.producers if p.config.get("client.id") == "drsvc-fencing"]
    assert sorted(p.transactional_id or "" for p in fencing) == ["never-used", "orders-tx"]
    assert all(p.config["bootstrap.servers"] == east.bootstrap for p in fencing)
    with pytest.raises(KafkaException):
        zombie.commit_transaction(5)
    assert east.values("orders", 0) == []
