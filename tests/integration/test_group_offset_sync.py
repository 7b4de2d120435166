"""Group offset sync against real clusters and a real Consul agent.

Every test works on a copy topic ``east.<name>`` on west (the flow east->west) and a consumer group
of its own on west, and checks the committed offsets on west afterwards. The refusals of groups
with live members are the broker's own: the tests start real classic and consumer-protocol
(KIP-848) members and check which error the broker answers with.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import pytest
from confluent_kafka import Consumer, TopicPartition
from replication_support import create, produce, sequence_records, wait_for

from drsvc.adapters.consul_client import ConsulClient
from drsvc.devenv.environment import EnvironmentInfo
from drsvc.kafka.admin import (
    admin_client,
    committed_offsets_with_metadata,
    describe_group,
)
from drsvc.runtime.checkpoints.group_sync import GroupOffsetSyncer
from drsvc.runtime.checkpoints.sync_origin import SyncOrigin, decode_origin
from drsvc.topology.models import Topology
from failover.naming import app_active_key

pytestmark = pytest.mark.timeout(120)

PARTITIONS = 2
RECORDS = 20  # ten per partition: offsets 0..9


@dataclass(frozen=True)
class Setup:
    """One test's topology, topic and syncer on the shared clusters."""

    west: str
    consul: ConsulClient
    topology: Topology
    topic: str
    syncer: GroupOffsetSyncer

    def tp(self, partition: int) -> tuple[str, int]:
        return (self.topic, partition)

    def committed(self, group: str) -> dict[int, int]:
        return committed_on(self.west, group, self.topic)


@pytest.fixture(scope="module")
def consul(cluster_pair: EnvironmentInfo) -> ConsulClient:
    assert cluster_pair.consul_http_addr is not None
    return ConsulClient(cluster_pair.consul_http_addr)


def make_setup(
    cluster_pair: EnvironmentInfo,
    consul: ConsulClient,
    applications: list[dict[str, object]],
    *,
    with_consul: bool = True,
) -> Setup:
    suffix = uuid.uuid4().hex[:8]
    east, west = cluster_pair.clusters["east"], cluster_pair.clusters["west"]
    topology = Topology.model_validate(
        {
            "name": "group-sync",
            "namespace": f"gsync-{suffix}",
            "clusters": {"east": {"bootstrap_servers": east}, "west": {"bootstrap_servers": west}},
            "flows": [{"source": "east", "target": "west"}],
            "applications": applications,
        }
    )
    topic = f"east.orders-{suffix}"
    create(west, topic, PARTITIONS)
    produce(west, topic, sequence_records(RECORDS, PARTITIONS))
    syncer = GroupOffsetSyncer(
        topology,
        topology.flow("east", "west"),
        {"bootstrap.servers": west},
        consul if with_consul else None,
    )
    return Setup(west, consul, topology, topic, syncer)


def app(name: str, group: str, **fields: object) -> dict[str, object]:
    return {
        "name": name,
        "groups": [group],
        "topics": ["orders"],
        "preferred": "east",
        "sync_group_offsets": True,
        **fields,
    }


def committed_on(bootstrap: str, group: str, topic: str) -> dict[int, int]:
    """The group's committed offsets (-1001 when none), read without joining the group."""
    reader = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        wanted = [TopicPartition(topic, p) for p in range(PARTITIONS)]
        return {tp.partition: tp.offset for tp in reader.committed(wanted, timeout=15)}
    finally:
        reader.close()


@contextmanager
def member(bootstrap: str, group: str, topic: str, protocol: str) -> Iterator[Consumer]:
    """A live member of ``group`` (``classic`` or ``consumer`` protocol) owning ``topic``."""
    config: dict[str, object] = {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "group.protocol": protocol,
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
    }
    consumer = Consumer(config)
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + 60
        while len(consumer.assignment()) < PARTITIONS:
            assert time.monotonic() < deadline, f"{group} never got its partitions"
            consumer.poll(0.2)
        yield consumer
    finally:
        consumer.close()


def idle_classic_group(bootstrap: str, group: str, topic: str, offsets: dict[int, int]) -> None:
    """A classic group that had a member, committed ``offsets`` and is empty now."""
    with member(bootstrap, group, topic, "classic") as consumer:
        consumer.commit(
            offsets=[TopicPartition(topic, p, o) for p, o in offsets.items()], asynchronous=False
        )
    wait_for(
        lambda: describe_group(admin_client(bootstrap), group).state == "empty",
        30,
        f"{group} to become empty",
    )


# -- (a) an idle classic group is synced ----------------------------------------------------------


def test_an_idle_classic_group_is_synced(
    cluster_pair: EnvironmentInfo, consul: ConsulClient
) -> None:
    group = f"idle-{uuid.uuid4().hex[:8]}"
    setup = make_setup(cluster_pair, consul, [app("orders", group)])
    idle_classic_group(setup.west, group, setup.topic, {0: 2, 1: 2})
    description = describe_group(admin_client(setup.west), group)
    assert (description.group_type, description.state, description.members) == (
        "classic",
        "empty",
        0,
    )

    result = setup.syncer.sync(group, {setup.tp(0): 5, setup.tp(1): 7})

    assert result.status == "synced", result.reason
    assert result.actions() == {setup.tp(0): "synced", setup.tp(1): "synced"}
    assert [(p.committed, p.offset, p.origin) for p in result.partitions] == [
        (2, 5, "translated"),
        (2, 7, "translated"),
    ]
    assert setup.committed(group) == {0: 5, 1: 7}

    again = setup.syncer.sync(group, {setup.tp(0): 5, setup.tp(1): 7})
    assert again.status == "unchanged"
    assert again.actions() == {setup.tp(0): "unchanged", setup.tp(1): "unchanged"}


def test_a_group_with_no_offsets_on_the_target_yet_is_synced(
    cluster_pair: EnvironmentInfo, consul: ConsulClient
) -> None:
    group = f"new-{uuid.uuid4().hex[:8]}"
    setup = make_setup(cluster_pair, consul, [app("orders", group)])

    result = setup.syncer.sync(group, {setup.tp(0): 3, setup.tp(1): 4})

    assert result.status == "synced", result.reason
    assert [p.committed for p in result.partitions] == [None, None]
    assert setup.committed(group) == {0: 3, 1: 4}


# -- (b), (c) a live member on the target: the broker refuses -------------------------------------


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_a_group_with_a_live_member_is_refused_by_the_broker(
    cluster_pair: EnvironmentInfo,
    consul: ConsulClient,
    protocol: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    group = f"live-{protocol}-{uuid.uuid4().hex[:8]}"
    setup = make_setup(cluster_pair, consul, [app("orders", group)])
    caplog.set_level(logging.INFO, logger="drsvc.runtime.checkpoints.group_sync")

    with member(setup.west, group, setup.topic, protocol) as consumer:
        consumer.commit(
            offsets=[TopicPartition(setup.topic, p, 2) for p in range(PARTITIONS)],
            asynchronous=False,
        )
        description = describe_group(admin_client(setup.west), group)
        assert (description.group_type, description.members) == (protocol, 1)

        first = setup.syncer.sync(group, {setup.tp(0): 5, setup.tp(1): 7})
        second = setup.syncer.sync(group, {setup.tp(0): 6, setup.tp(1): 8})

        for result in (first, second):
            assert result.status == "active-here", result.reason
            assert set(result.actions().values()) == {"refused-active"}
            # What Kafka 4.1 answers to a commit without a member id, for both group types.
            assert all("UNKNOWN_MEMBER_ID" in p.detail for p in result.partitions)
        assert setup.committed(group) == {0: 2, 1: 2}

    refusals = [r for r in caplog.records if "not syncing" in r.getMessage()]
    assert len(refusals) == 1, "the refusal is logged once per state change"
    assert refusals[0].levelno == logging.INFO

    # Once the member has left, the next round syncs.
    wait_for(
        lambda: describe_group(admin_client(setup.west), group).state == "empty",
        30,
        f"{group} to become empty",
    )
    after = setup.syncer.sync(group, {setup.tp(0): 6, setup.tp(1): 8})
    assert after.status == "synced", after.reason
    assert setup.committed(group) == {0: 6, 1: 8}
    assert any("syncing its offsets" in r.getMessage() for r in caplog.records)


# -- (d) never backwards unless the source group rewound ------------------------------------------


def test_offsets_never_move_backwards_unless_the_source_group_rewound(
    cluster_pair: EnvironmentInfo, consul: ConsulClient
) -> None:
    group = f"back-{uuid.uuid4().hex[:8]}"
    setup = make_setup(cluster_pair, consul, [app("orders", group)])
    idle_classic_group(setup.west, group, setup.topic, {0: 8, 1: 8})

    result = setup.syncer.sync(group, {setup.tp(0): 5, setup.tp(1): 9})

    assert result.actions() == {setup.tp(0): "skipped-backwards", setup.tp(1): "synced"}
    assert setup.committed(group) == {0: 8, 1: 9}

    rewound = setup.syncer.sync(group, {setup.tp(0): 5, setup.tp(1): 9}, rewound={setup.tp(0)})

    assert rewound.actions() == {setup.tp(0): "synced", setup.tp(1): "unchanged"}
    assert setup.committed(group) == {0: 5, 1: 9}


# -- (e) the application is active on the target ---------------------------------------------------


def test_an_application_active_on_the_target_is_not_synced(
    cluster_pair: EnvironmentInfo, consul: ConsulClient
) -> None:
    group = f"active-{uuid.uuid4().hex[:8]}"
    setup = make_setup(cluster_pair, consul, [app("orders", group)])
    idle_classic_group(setup.west, group, setup.topic, {0: 1, 1: 1})
    key = app_active_key(setup.topology.namespace, "orders")

    consul.kv_put(key, "west")
    result = setup.syncer.sync(group, {setup.tp(0): 5, setup.tp(1): 5})
    assert (result.status, result.partitions) == ("active-on-target", ())
    assert f"{key} = 'west'" in result.reason

    consul.kv_put(key, "null")
    switching = setup.syncer.sync(group, {setup.tp(0): 5, setup.tp(1): 5})
    assert switching.status == "no-active-cluster"
    assert setup.committed(group) == {0: 1, 1: 1}

    consul.kv_put(key, '{"cluster": "east", "since": "2025-01-01T00:00:00Z"}')
    synced = setup.syncer.sync(group, {setup.tp(0): 5, setup.tp(1): 5})
    assert synced.status == "synced", synced.reason
    assert setup.committed(group) == {0: 5, 1: 5}


def test_groups_of_applications_that_did_not_opt_in_are_left_alone(
    cluster_pair: EnvironmentInfo, consul: ConsulClient
) -> None:
    group = f"optout-{uuid.uuid4().hex[:8]}"
    setup = make_setup(
        cluster_pair, consul, [app("orders", group, sync_group_offsets=False)], with_consul=False
    )
    idle_classic_group(setup.west, group, setup.topic, {0: 1, 1: 1})

    result = setup.syncer.sync(group, {setup.tp(0): 5, setup.tp(1): 5})

    assert result.status == "not-opted-in"
    assert setup.committed(group) == {0: 1, 1: 1}


# -- (f) unknown translations follow the application's policy -------------------------------------


def delete_before(bootstrap: str, topic: str, partition: int, offset: int) -> None:
    admin = admin_client(bootstrap)
    futures = admin.delete_records([TopicPartition(topic, partition, offset)], request_timeout=15)
    for future in futures.values():
        future.result(timeout=15)


def test_unknown_translations_follow_the_policy(
    cluster_pair: EnvironmentInfo, consul: ConsulClient
) -> None:
    suffix = uuid.uuid4().hex[:8]
    early, careful = f"early-{suffix}", f"careful-{suffix}"
    setup = make_setup(
        cluster_pair,
        consul,
        [
            app("audit", early, on_unknown_translation="earliest"),
            app("billing", careful),  # the default: refuse
        ],
    )
    delete_before(setup.west, setup.topic, 0, 4)  # partition 0 now starts at offset 4
    idle_classic_group(setup.west, careful, setup.topic, {0: 1, 1: 1})
    unknown = {setup.tp(0): "before-syncs"}

    earliest = setup.syncer.sync(early, {setup.tp(1): 6}, unknown=unknown)

    assert earliest.status == "synced", earliest.reason
    assert [(p.action, p.offset, p.origin) for p in earliest.partitions] == [
        ("synced", 4, "earliest"),
        ("synced", 6, "translated"),
    ]
    assert "before-syncs" in earliest.partitions[0].detail
    assert committed_on(setup.west, early, setup.topic) == {0: 4, 1: 6}

    refused = setup.syncer.sync(careful, {setup.tp(1): 6}, unknown=unknown)

    assert refused.status == "refused-unknown"
    assert set(refused.actions().values()) == {"refused-unknown"}
    assert f"group '{careful}': {setup.topic}-0 has no known translation" in refused.reason
    assert "before-syncs" in refused.reason
    assert committed_on(setup.west, careful, setup.topic) == {0: 1, 1: 1}


def test_a_commit_the_sync_made_from_a_later_source_position_is_moved_back_in_a_later_round(
    cluster_pair: EnvironmentInfo, consul: ConsulClient
) -> None:
    """The broker keeps the origin the sync commits as metadata; a later round, not told that the
    source group rewound, reads it back and moves the group back. A consumer's own commit ahead of
    the translation stays."""
    group = f"origin-{uuid.uuid4().hex[:8]}"
    setup = make_setup(cluster_pair, consul, [app("orders", group)])

    def origin(offset: int) -> SyncOrigin:
        return SyncOrigin("east->west", "orders", offset, b"s" * 16, b"t" * 16)

    first = setup.syncer.sync(group, {setup.tp(0): 8}, origins={setup.tp(0): origin(80)})
    assert first.status == "synced", first.reason
    read = committed_offsets_with_metadata({"bootstrap.servers": setup.west}, group, [setup.tp(0)])
    assert decode_origin(read[setup.tp(0)].metadata) == origin(80)

    back = setup.syncer.sync(group, {setup.tp(0): 3}, origins={setup.tp(0): origin(30)})
    assert back.actions() == {setup.tp(0): "synced"}, back.partitions
    assert setup.committed(group)[0] == 3

    idle_classic_group(setup.west, group, setup.topic, {0: 9, 1: 9})  # a consumer's own commit
    kept = setup.syncer.sync(group, {setup.tp(0): 3}, origins={setup.tp(0): origin(20)})
    assert kept.actions() == {setup.tp(0): "skipped-backwards"}
    assert setup.committed(group)[0] == 9
