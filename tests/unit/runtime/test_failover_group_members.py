"""The members of a consumer group on a real cluster, on a fake admin client (who a planned
failover waits for, and names when they do not leave)."""

from __future__ import annotations

from concurrent.futures import Future
from types import SimpleNamespace
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException
from scripted_admins import ScriptedAdmins
from test_failover_clusters import TOPOLOGY

from drsvc.errors import ConfigError, KafkaUnavailableError
from drsvc.runtime.failover.clusters import GroupMember, KafkaFailoverClusters


class GroupsAdmin:
    """An admin client that describes groups: ``members`` per group, or an error."""

    def __init__(self, groups: dict[str, list[tuple[str, str, str]] | KafkaError]) -> None:
        self.groups = groups

    def describe_consumer_groups(
        self, names: list[str], request_timeout: float
    ) -> dict[str, Future[Any]]:
        answers: dict[str, Future[Any]] = {}
        for name in names:
            future: Future[Any] = Future()
            found = self.groups[name]
            if isinstance(found, KafkaError):
                future.set_exception(KafkaException(found))
            else:
                members = [SimpleNamespace(member_id=m, client_id=c, host=h) for m, c, h in found]
                future.set_result(SimpleNamespace(members=members))
            answers[name] = future
        return answers


def test_a_group_s_members_come_with_their_client_ids_and_hosts() -> None:
    admin = GroupsAdmin(
        {
            "g1": [("c-1-4f2a", "orders-app", "/10.1.2.3")],
            "gone": KafkaError(KafkaError.GROUP_ID_NOT_FOUND),
            "busy": KafkaError(KafkaError.COORDINATOR_LOAD_IN_PROGRESS),
            "secret": KafkaError(KafkaError.GROUP_AUTHORIZATION_FAILED),
        }
    )
    clusters = KafkaFailoverClusters(TOPOLOGY, clients=ScriptedAdmins(TOPOLOGY, lambda _a: admin))
    assert clusters.group_members("east", "g1") == [
        GroupMember("c-1-4f2a", "orders-app", "/10.1.2.3")
    ]
    assert str(clusters.group_members("east", "g1")[0]) == (
        "c-1-4f2a (client id orders-app, host /10.1.2.3)"
    )
    assert clusters.group_members("east", "gone") == []
    with pytest.raises(
        KafkaUnavailableError, match="cluster 'east': describing consumer group 'busy'"
    ):
        clusters.group_members("east", "busy")
    # no retry can help: someone must grant the ACL
    with pytest.raises(ConfigError, match=r"describing consumer group 'secret'.*ACL"):
        clusters.group_members("east", "secret")
