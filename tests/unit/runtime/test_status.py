"""Flow status on fake clusters: covered partitions, progress of both delivery modes, lag rules,
owners, and per-flow errors.

The fakes stand in for real clusters at the :class:`ClusterReader` boundary and log what was
asked, so the order of reads (progress before end offsets) is checked too.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field

import pytest

from drsvc.errors import KafkaUnavailableError
from drsvc.runtime.status.cluster_reader import Commit, GroupMember
from drsvc.runtime.status.flow_status import (
    covered_partitions,
    flow_status,
    next_source_offset,
    status_of,
)
from drsvc.runtime.status.report import PartitionStatus, partition_lag
from drsvc.topology import Topology, load_topology_text
from failover.offset_syncs import TopicPartition
from failover.slots import SlotNames, SlotProgress, slot_of

TOPOLOGY = """
name: status
clusters:
  east: {bootstrap_servers: "127.0.0.1:1"}
  west: {bootstrap_servers: "127.0.0.1:2"}
flows:
  - {source: east, target: west, topics: {include: ["orders", "payments", "west\\\\..*"]}}
  - {source: west, target: east, delivery: exactly-once}
"""


def tp(topic: str, partition: int) -> TopicPartition:
    return TopicPartition(topic, partition)


@dataclass
class FakeCluster:
    alias: str
    topics: dict[str, int] = field(default_factory=dict)
    commits: dict[str, dict[TopicPartition, Commit]] = field(default_factory=dict)
    starts: dict[TopicPartition, int] = field(default_factory=dict)
    ends: dict[TopicPartition, int] = field(default_factory=dict)
    at_times: dict[TopicPartition, int | None] = field(default_factory=dict)
    members: dict[str, list[GroupMember]] = field(default_factory=dict)
    unreachable: bool = False
    reads: list[str] = field(default_factory=list)

    def _read(self, what: str) -> None:
        if self.unreachable:
            raise KafkaUnavailableError(f"cluster '{self.alias}': {what}: transport failure")
        self.reads.append(what)

    def partition_counts(self) -> dict[str, int]:
        self._read("topics")
        return dict(self.topics)

    def committed(
        self, group: str, partitions: Collection[TopicPartition]
    ) -> dict[TopicPartition, Commit]:
        self._read(f"committed {group}")
        found = self.commits.get(group, {})
        return {p: found[p] for p in partitions if p in found}

    def log_starts(self, partitions: Collection[TopicPartition]) -> dict[TopicPartition, int]:
        self._read("starts")
        return {p: self.starts.get(p, 0) for p in partitions}

    def log_ends(self, partitions: Collection[TopicPartition]) -> dict[TopicPartition, int]:
        self._read("ends")
        return {p: self.ends[p] for p in partitions if p in self.ends}

    def offsets_at(
        self, partitions: Collection[TopicPartition], timestamp_ms: int
    ) -> dict[TopicPartition, int | None]:
        self._read(f"offsets at {timestamp_ms}")
        return {p: self.at_times.get(p) for p in partitions}

    def group_members(self, group: str) -> list[GroupMember]:
        self._read(f"members {group}")
        return list(self.members.get(group, []))


def member(name: str, *partitions: TopicPartition) -> GroupMember:
    return GroupMember(
        f"{name}-id", f"{name}-client", f"/10.0.0.{len(name)}", frozenset(partitions)
    )


@pytest.fixture
def topology() -> Topology:
    return load_topology_text(TOPOLOGY)


def rows(partitions: tuple[PartitionStatus, ...]) -> dict[tuple[str, int], PartitionStatus]:
    return {(p.topic, p.partition): p for p in partitions}


def test_covered_partitions_follow_the_flows_topic_rules(topology: Topology) -> None:
    counts = {
        "orders": 2,
        "payments": 1,
        "audit": 3,  # not included
        "west.orders": 1,  # came from the target: copying it back would loop
        "__consumer_offsets": 50,
        "drsvc.offset-syncs.west": 1,
    }
    covered = covered_partitions(topology, topology.flows[0], counts)
    assert covered == [
        (tp("orders", 0), "east.orders"),
        (tp("orders", 1), "east.orders"),
        (tp("payments", 0), "east.payments"),
    ]


def test_at_least_once_progress_lag_and_owners_come_from_the_source_group(
    topology: Topology,
) -> None:
    group = "drsvc-replicator.east-west"
    east = FakeCluster(
        "east",
        topics={"orders": 2, "payments": 1},
        commits={group: {tp("orders", 0): Commit(40), tp("payments", 0): Commit(3)}},
        starts={tp("orders", 1): 10, tp("payments", 0): 5},
        ends={tp("orders", 0): 100, tp("orders", 1): 50, tp("payments", 0): 9},
        members={group: [member("worker-a", tp("orders", 0), tp("orders", 1))]},
    )
    west = FakeCluster("west")

    status = flow_status(topology, topology.flows[0], east, west)

    assert status.error is None
    assert (status.progress_group, status.progress_cluster) == (group, "east")
    by_partition = rows(status.partitions)
    orders0 = by_partition[("orders", 0)]
    assert (orders0.progress, orders0.replicated_offset, orders0.lag) == ("committed", 40, 60)
    assert orders0.owner is not None and orders0.owner.member_id == "worker-a-id"
    assert orders0.owner.client_id == "worker-a-client"
    orders1 = by_partition[("orders", 1)]
    # Never copied: everything from the log start is still to copy.
    assert (orders1.progress, orders1.replicated_offset, orders1.lag) == ("none", None, 40)
    payments = by_partition[("payments", 0)]
    # Retention overtook the progress: records gone from the source are not lag.
    assert (payments.replicated_offset, payments.log_start_offset, payments.lag) == (3, 5, 4)
    assert payments.owner is None
    assert status.lag == 104
    assert west.reads == []
    assert east.reads.index(f"committed {group}") < east.reads.index("ends")


def test_exactly_once_progress_is_the_metadata_of_target_commits(topology: Topology) -> None:
    names = SlotNames("west", "east")
    flow = topology.flows[1]
    west = FakeCluster(
        "west",
        topics={"payments": 3, "east.orders": 1},
        ends={tp("payments", 0): 70, tp("payments", 1): 30, tp("payments", 2): 20},
    )
    slots = 4
    owned_slot = slot_of("payments", 0, slots)
    east = FakeCluster(
        "east",
        topics={names.slots_topic: slots, "west.payments": 3},
        commits={
            names.progress_group: {
                # keyed by the remote topic; the offset is a target offset, the metadata says
                # the next source offset
                tp("west.payments", 0): Commit(999, SlotProgress(60, b"S" * 16).encode()),
                tp("west.payments", 1): Commit(5, None),
            }
        },
        members={names.membership_group: [member("eos-a", tp(names.slots_topic, owned_slot))]},
    )

    status = flow_status(topology, flow, west, east)

    assert status.error is None
    assert (status.delivery, status.progress_cluster) == ("exactly-once", "east")
    assert [p.topic for p in status.partitions] == ["payments"] * 3  # east.orders would loop
    by_partition = rows(status.partitions)
    p0, p1, p2 = (by_partition[("payments", n)] for n in range(3))
    assert (p0.progress, p0.replicated_offset, p0.lag) == ("committed", 60, 10)
    assert p0.owner is not None and p0.owner.member_id == "eos-a-id"
    assert (p1.progress, p1.replicated_offset, p1.lag) == ("unknown", None, None)
    assert (p2.progress, p2.lag) == ("none", 20)
    for other in (p1, p2):
        owned = slot_of("payments", other.partition, slots) == owned_slot
        assert (other.owner is not None) == owned
    assert status.lag == 30
    assert status.unknown_partitions == 1


def test_exactly_once_flow_that_never_ran_has_no_owners(topology: Topology) -> None:
    west = FakeCluster("west", topics={"payments": 1}, ends={tp("payments", 0): 8})
    east = FakeCluster("east", topics={})
    status = flow_status(topology, topology.flows[1], west, east)
    (only,) = status.partitions
    assert (only.owner, only.lag, only.progress) == (None, 8, "none")
    assert not [read for read in east.reads if read.startswith("members")]


@pytest.mark.parametrize(
    ("start", "expected_lag"),
    [
        ("earliest", 90),
        ("latest", 0),
        ("{timestamp: 1700000000000}", 25),
    ],
)
def test_never_copied_partitions_count_from_where_the_flow_would_start(
    start: str, expected_lag: int
) -> None:
    topology = load_topology_text(
        TOPOLOGY.replace('"west\\\\..*"]}}', f'"west\\\\..*"]}}, start: {start}}}')
    )
    assert topology.flows[0].start.kind in {"earliest", "latest", "timestamp"}
    east = FakeCluster(
        "east",
        topics={"orders": 1},
        starts={tp("orders", 0): 10},
        ends={tp("orders", 0): 100},
        at_times={tp("orders", 0): 75},
    )
    status = flow_status(topology, topology.flows[0], east, FakeCluster("west"))
    assert status.partitions[0].lag == expected_lag


def test_a_timestamp_newer_than_every_record_means_nothing_to_copy() -> None:
    topology = load_topology_text(
        TOPOLOGY.replace('"west\\\\..*"]}}', '"west\\\\..*"]}, start: {timestamp: 1}}')
    )
    east = FakeCluster(
        "east", topics={"orders": 1}, ends={tp("orders", 0): 100}, at_times={tp("orders", 0): None}
    )
    status = flow_status(topology, topology.flows[0], east, FakeCluster("west"))
    assert status.partitions[0].lag == 0


def test_an_unreachable_cluster_is_an_error_entry_and_the_other_flows_still_report(
    topology: Topology,
) -> None:
    east = FakeCluster("east", topics={"orders": 1}, ends={tp("orders", 0): 4})
    west = FakeCluster("west", unreachable=True)
    report = status_of(topology, topology.flows, {"east": east, "west": west})
    by_flow = {flow.flow: flow for flow in report.flows}
    assert by_flow["east->west"].error is None
    assert by_flow["east->west"].lag == 4
    failed = by_flow["west->east"]
    assert failed.error == "cluster 'west': topics: transport failure"
    assert failed.lag is None
    assert report.failed
    document = report.as_dict()
    assert [f["error"] for f in document["flows"]] == [  # type: ignore[attr-defined]
        None,
        "cluster 'west': topics: transport failure",
    ]


def test_clusters_that_cannot_be_set_up_fail_only_their_flows(topology: Topology) -> None:
    east = FakeCluster("east", topics={})
    report = status_of(
        topology,
        topology.flows,
        {"east": east},
        problems={"west": "cluster 'west': no bootstrap_servers"},
    )
    assert [flow.error for flow in report.flows] == [
        "cluster 'west': no bootstrap_servers",
        "cluster 'west': no bootstrap_servers",
    ]


def test_json_shape_of_a_partition(topology: Topology) -> None:
    group = "drsvc-replicator.east-west"
    east = FakeCluster(
        "east",
        topics={"orders": 1},
        commits={group: {tp("orders", 0): Commit(7)}},
        ends={tp("orders", 0): 7},
        members={group: [member("w", tp("orders", 0))]},
    )
    report = status_of(topology, [topology.flows[0]], {"east": east, "west": FakeCluster("west")})
    document = report.as_dict()
    assert set(document) == {"as_of", "flows"}
    (flow,) = document["flows"]  # type: ignore[misc]
    assert flow["flow"] == "east->west"
    assert flow["delivery"] == "at-least-once"
    assert flow["lag"] == 0
    assert flow["error"] is None
    assert flow["partitions"] == [
        {
            "topic": "orders",
            "partition": 0,
            "remote_topic": "east.orders",
            "replicated_offset": 7,
            "source_end_offset": 7,
            "log_start_offset": 0,
            "lag": 0,
            "progress": "committed",
            "owner": "w-id",
            "owner_host": "/10.0.0.1",
            "owner_client_id": "w-client",
        }
    ]


def test_lag_rules() -> None:
    assert partition_lag(40, "committed", 0, 100, None) == 60
    assert partition_lag(40, "committed", 50, 100, None) == 50
    assert partition_lag(120, "committed", 0, 100, None) == 0
    assert partition_lag(None, "none", 0, 100, 30) == 70
    assert partition_lag(None, "none", 0, 100, None) is None
    assert partition_lag(None, "unknown", 0, 100, 0) is None
    assert partition_lag(40, "committed", 0, None, None) is None


def test_unreadable_exactly_once_metadata_is_unknown_not_zero() -> None:
    assert next_source_offset(SlotProgress(12, b"x" * 16).encode()) == 12
    assert next_source_offset(None) is None
    assert next_source_offset("") is None
    assert next_source_offset("not json") is None
    assert next_source_offset('{"v": 1}') is None
