"""Group offset translation on fake clusters: routing, directions, refusals and exactness.

The fakes stand in for real clusters at the :class:`ClusterView` boundary. Their syncs go through
the same record handling as the real reader (encoded, then decoded by ``SyncTopicRead``). The
exactness tests simulate a worker that copies a source log with transaction markers, aborted
records and an at-least-once re-copy, then check every committed offset by brute force: a consumer
starting at the translated offset reads exactly what the group had not read.
"""

from __future__ import annotations

import json
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from rich.console import Console

from drsvc.cli.main import main
from drsvc.cli.translate import render
from drsvc.errors import ConfigError, PermanentError
from drsvc.runtime.translation.cluster_view import ClusterView, CommittedOffset
from drsvc.runtime.translation.group_translation import (
    SYNC_CONFLICT,
    TOPIC_MISSING,
    GroupTranslation,
    select_flows,
    translate_group,
    translate_groups,
)
from drsvc.runtime.translation.sync_reader import SyncTopicRead
from drsvc.topology import Topology, load_topology_text
from failover.offset_syncs import OffsetSync, Segment, SyncBuilder, TopicPartition, encode_sync

EAST_ORDERS = b"E" * 16
WEST_COPY = b"W" * 16  # east.orders on west
WEST_PAYMENTS = b"P" * 16
EAST_COPY = b"Q" * 16  # west.payments on east

ONE_WAY = """
name: one-way
clusters:
  east: {bootstrap_servers: "127.0.0.1:1"}
  west: {bootstrap_servers: "127.0.0.1:2"}
flows:
  - {source: east, target: west}
applications:
  - {name: shop, groups: [g], topics: [orders], preferred: east}
"""

BOTH_WAYS = """
name: both-ways
clusters:
  east: {bootstrap_servers: "127.0.0.1:1"}
  west: {bootstrap_servers: "127.0.0.1:2"}
flows:
  - {source: east, target: west, topics: {include: ["orders", "west\\\\..*"]}}
  - {source: west, target: east}
"""

CHAIN = """
name: chain
clusters:
  a: {bootstrap_servers: "127.0.0.1:1"}
  b: {bootstrap_servers: "127.0.0.1:2"}
  c: {bootstrap_servers: "127.0.0.1:3"}
flows:
  - {source: a, target: b}
  - {source: b, target: c}
"""


def topology(text: str) -> Topology:
    return load_topology_text(text, "test.yaml")


# -- fakes ----------------------------------------------------------------------------------------


@dataclass
class FakeCluster:
    """A cluster as translation sees it: groups' offsets, topic ids, end offsets, sync records."""

    alias: str
    commits: dict[str, dict[TopicPartition, CommittedOffset]] = field(default_factory=dict)
    ids: dict[str, bytes] = field(default_factory=dict)
    ends: dict[TopicPartition, int] = field(default_factory=dict)
    sync_records: dict[str, list[tuple[bytes | None, bytes | None]]] = field(default_factory=dict)
    calls: list[str] = field(default_factory=list)

    def write_syncs(self, sync_topic: str, syncs: list[OffsetSync]) -> None:
        self.sync_records.setdefault(sync_topic, []).extend(encode_sync(s) for s in syncs)

    def committed(self, group: str) -> dict[TopicPartition, CommittedOffset]:
        self.calls.append("committed")
        return dict(self.commits.get(group, {}))

    def topic_ids(self, topics: Collection[str]) -> dict[str, bytes]:
        self.calls.append("ids")
        return {t: self.ids[t] for t in topics if t in self.ids}

    def end_offsets(self, partitions: Collection[TopicPartition]) -> dict[TopicPartition, int]:
        self.calls.append("ends")
        return {tp: self.ends[tp] for tp in partitions if tp in self.ends}

    def read_syncs(self, sync_topic: str, topics: Collection[str]) -> SyncTopicRead:
        self.calls.append("syncs")
        read = SyncTopicRead(cluster=self.alias, topic=sync_topic)
        if sync_topic not in self.sync_records:
            read.exists = False
            return read
        for offset, (key, value) in enumerate(self.sync_records[sync_topic]):
            read.add_record(0, offset, key, value, topics)
        return read


def views(*clusters: FakeCluster) -> dict[str, ClusterView]:
    return {c.alias: c for c in clusters}


def sync(
    topic: str,
    begin: int,
    end: int,
    segments: list[tuple[int, int, int]],
    source_id: bytes = EAST_ORDERS,
    target_id: bytes = WEST_COPY,
    partition: int = 0,
) -> OffsetSync:
    return OffsetSync(
        topic, partition, source_id, target_id, 0, begin, end, tuple(Segment(*s) for s in segments)
    )


def shifted_pair() -> tuple[FakeCluster, FakeCluster]:
    """east ``orders``-0 starts at 500 (older records deleted), copied to west from offset 0."""
    east = FakeCluster("east", ids={"orders": EAST_ORDERS})
    west = FakeCluster("west", ids={"east.orders": WEST_COPY})
    west.write_syncs(
        "drsvc.offset-syncs.east",
        [sync("orders", 500, 800, [(500, 0, 300)]), sync("orders", 800, 1000, [(800, 300, 200)])],
    )
    east.ends[TopicPartition("orders", 0)] = 1200  # 200 offsets not replicated yet
    west.ends[TopicPartition("east.orders", 0)] = 500
    return east, west


def commit(cluster: FakeCluster, group: str, topic: str, offsets: dict[int, int]) -> None:
    cluster.commits.setdefault(group, {}).update(
        {TopicPartition(topic, p): CommittedOffset(o) for p, o in offsets.items()}
    )


# -- downstream and upstream ----------------------------------------------------------------------


def test_failover_translates_through_the_forward_flow_and_reports_what_is_missing() -> None:
    east, west = shifted_pair()
    commit(east, "g", "orders", {0: 650})
    result = translate_group(topology(ONE_WAY), "g", "east", "west", views(east, west))
    assert result.application == "shop"
    [p] = result.partitions
    assert (p.direction, p.flow, p.source_topic, p.topic) == (
        "downstream",
        "east->west",
        "orders",
        "east.orders",
    )
    assert (p.source_offset, p.target_offset, p.exact, p.reason) == (650, 150, True, "exact")
    assert (p.source_end, p.source_lag, p.target_end, p.target_lag) == (1200, 550, 500, 350)
    assert p.not_replicated == 200  # east offsets 1000..1199 are not on west yet
    assert result.exact


def test_failover_ahead_of_the_syncs_is_known_but_not_exact() -> None:
    east, west = shifted_pair()
    commit(east, "g", "orders", {0: 1100})
    [p] = translate_group(topology(ONE_WAY), "g", "east", "west", views(east, west)).partitions
    # Consumed 1000..1099 on east, which west does not have yet: start after what it has, and
    # say that up to 100 offsets will be read again once they arrive.
    assert (p.target_offset, p.reason, p.pending, p.exact) == (500, "ahead-of-syncs", 100, False)


def test_failback_translates_through_the_reverse_flows_syncs_on_the_group_cluster() -> None:
    east, west = shifted_pair()
    commit(west, "g", "east.orders", {0: 150})
    result = translate_group(topology(ONE_WAY), "g", "west", "east", views(west, east))
    [p] = result.partitions
    assert (p.direction, p.source_topic, p.topic) == ("upstream", "east.orders", "orders")
    assert (p.source_offset, p.target_offset, p.exact) == (150, 650, True)
    assert (p.source_end, p.target_end, p.target_lag) == (500, 1200, 550)
    assert p.not_replicated is None
    # The syncs were read on west, where the flow east->west keeps them.
    assert "syncs" in west.calls and "syncs" not in east.calls


def test_a_group_at_the_start_of_partitions_fails_over_and_straight_back_exactly() -> None:
    # As a group reset to earliest is: at 0 of partitions 0 and 1, in the middle of partition 2.
    # Each copy starts with source 0 at west's offset 0; partition 1 is copied in transactions
    # (a commit marker after every 10 copies).
    east = FakeCluster("east", ids={"orders": EAST_ORDERS})
    west = FakeCluster("west", ids={"east.orders": WEST_COPY})
    syncs = [sync("orders", 0, 100, [(0, 0, 100)], partition=p) for p in (0, 2)]
    syncs += [
        sync("orders", 10 * k, 10 * k + 10, [(10 * k, 11 * k, 10)], partition=1) for k in range(10)
    ]
    west.write_syncs("drsvc.offset-syncs.east", syncs)
    for p, west_end in ((0, 100), (1, 110), (2, 100)):
        east.ends[TopicPartition("orders", p)] = 100
        west.ends[TopicPartition("east.orders", p)] = west_end
    at_first = {0: 0, 1: 0, 2: 40}
    commit(east, "g", "orders", at_first)

    over = translate_group(topology(ONE_WAY), "g", "east", "west", views(east, west))
    assert over.exact
    assert {p.partition: p.target_offset for p in over.partitions} == {0: 0, 1: 0, 2: 40}
    commit(west, "g", "east.orders", {p.partition: p.target_offset or 0 for p in over.partitions})

    back = translate_group(topology(ONE_WAY), "g", "west", "east", views(west, east))
    assert [(p.direction, p.reason) for p in back.partitions] == [("upstream", "exact")] * 3
    assert back.exact
    assert {p.partition: p.target_offset for p in back.partitions} == at_first


@pytest.mark.parametrize(
    ("delivery", "policy", "reason"),
    [
        ("exactly-once", "prefix", "exact"),
        ("at-least-once", "prefix", "ahead-of-syncs"),
        ("exactly-once", "identity", "ahead-of-syncs"),
    ],
)
def test_failback_past_the_copies_trailing_transaction_marker(
    delivery: str, policy: str, reason: str
) -> None:
    # West's copy ends with a transaction marker at offset 500, after the last copy (499): a
    # group that read everything committed 501, one past what the syncs describe. Exactly once,
    # copies and syncs commit together, so the end read before the syncs seals them.
    east, west = shifted_pair()
    copy = "east.orders" if policy == "prefix" else "orders"
    west.ids = {copy: WEST_COPY}
    west.ends = {TopicPartition(copy, 0): 501}
    commit(west, "g", copy, {0: 501})
    text = ONE_WAY.replace(
        "{source: east, target: west}",
        f"{{source: east, target: west, delivery: {delivery}, policy: {policy}}}",
    )
    result = translate_group(topology(text), "g", "west", "east", views(west, east))
    [p] = result.partitions
    assert (p.direction, p.target_offset, p.reason) == ("upstream", 1000, reason)
    if reason == "exact":
        assert west.calls.index("ends") < west.calls.index("syncs")


def test_syncs_are_read_before_end_offsets() -> None:
    east, west = shifted_pair()
    commit(east, "g", "orders", {0: 650})
    translate_group(topology(ONE_WAY), "g", "east", "west", views(east, west))
    assert west.calls.index("syncs") < west.calls.index("ends")
    assert "ends" in east.calls


def test_several_groups_read_each_sync_topic_once_between_their_other_reads() -> None:
    east, west = shifted_pair()
    commit(east, "g", "orders", {0: 650})
    commit(east, "h", "orders", {0: 1000})
    found = translate_groups(
        topology(ONE_WAY), ["g", "ghost", "h"], "east", "west", views(east, west)
    )

    assert found["ghost"] is None
    assert [p.target_offset for p in found["g"].partitions] == [150]  # type: ignore[union-attr]
    assert [p.target_offset for p in found["h"].partitions] == [500]  # type: ignore[union-attr]
    alone = translate_group(topology(ONE_WAY), "g", "east", "west", views(east, west))
    assert found["g"] is not None and found["g"].partitions == alone.partitions
    assert west.calls.count("syncs") == 2  # once for the three groups, once for the single one
    first_syncs = west.calls.index("syncs")
    # Every group's commits before the syncs, every end offset after them.
    assert east.calls[:3] == ["committed"] * 3 and "ends" not in west.calls[:first_syncs]


def test_active_active_routes_each_topic_its_own_way() -> None:
    east, west = shifted_pair()
    west.ids["payments"] = WEST_PAYMENTS
    east.ids["west.payments"] = EAST_COPY
    east.write_syncs(
        "drsvc.offset-syncs.west",
        [sync("payments", 0, 40, [(0, 0, 10), (12, 10, 28)], WEST_PAYMENTS, EAST_COPY)],
    )
    commit(east, "g", "orders", {0: 700})
    commit(east, "g", "west.payments", {0: 10})
    commit(east, "g", "tmp", {0: 3, 1: 4})
    commit(east, "g", "audit", {0: 3})
    result = translate_group(topology(BOTH_WAYS), "g", "east", "west", views(east, west))
    by_topic = {p.source_topic: p for p in result.partitions}
    assert set(by_topic) == {"orders", "west.payments"}
    assert (by_topic["orders"].direction, by_topic["orders"].target_offset) == ("downstream", 200)
    payments = by_topic["west.payments"]
    assert (payments.direction, payments.flow, payments.topic) == (
        "upstream",
        "west->east",
        "payments",
    )
    # Read target 0..9 = source 0..9: continue at 10 (10 and 11 hold no record, 12 is next).
    assert (payments.target_offset, payments.exact) == (10, True)
    unrouted = {u.topic: u for u in result.unrouted}
    assert set(unrouted) == {"audit", "tmp"}
    assert unrouted["tmp"].partitions == (0, 1)
    assert "matches no topics.include pattern" in unrouted["audit"].reason
    assert "west->east" in unrouted["tmp"].reason
    assert not result.exact  # some committed topics cannot follow the group


def test_identity_flow_routes_failback_by_the_same_name() -> None:
    text = ONE_WAY.replace("target: west}", "target: west, policy: identity}")
    east = FakeCluster("east", ids={"orders": EAST_ORDERS})
    west = FakeCluster("west", ids={"orders": WEST_COPY})
    west.write_syncs("drsvc.offset-syncs.east", [sync("orders", 5, 9, [(5, 0, 4)])])
    commit(west, "g", "orders", {0: 2})
    [p] = translate_group(topology(text), "g", "west", "east", views(west, east)).partitions
    assert (p.direction, p.source_topic, p.topic, p.target_offset) == (
        "upstream",
        "orders",
        "orders",
        7,
    )


ACTIVE_PASSIVE = """
name: active-passive
clusters:
  east: {bootstrap_servers: "127.0.0.1:1"}
  west: {bootstrap_servers: "127.0.0.1:2"}
flows:
  - {source: east, target: west, policy: identity}
  - {source: west, target: east, policy: identity, standby: true}
"""


@pytest.mark.parametrize(
    ("on_west", "on_east", "direction"),
    [(4, 104, "upstream"), (12, 112, "downstream"), (10, 110, "downstream")],
)
def test_an_identity_pair_translates_positions_before_the_way_back_upstream(
    on_west: int, on_east: int, direction: str
) -> None:
    """east orders 100..109 were copied to west 0..9 before the failover; after it, the way
    back copied west 10..14 to east 110..114. A group on west fails back exactly either side."""
    east = FakeCluster("east", ids={"orders": EAST_ORDERS})
    west = FakeCluster("west", ids={"orders": WEST_COPY})
    west.write_syncs("drsvc.offset-syncs.east", [sync("orders", 100, 110, [(100, 0, 10)])])
    east.write_syncs(
        "drsvc.offset-syncs.west",
        [sync("orders", 10, 15, [(10, 110, 5)], WEST_COPY, EAST_ORDERS)],
    )
    commit(west, "g", "orders", {0: on_west})
    [p] = translate_group(
        topology(ACTIVE_PASSIVE), "g", "west", "east", views(west, east)
    ).partitions
    assert (p.direction, p.target_offset, p.exact) == (direction, on_east, True)


# -- what cannot be translated --------------------------------------------------------------------


def test_missing_remote_topic_and_recreated_topics_are_unknown_never_guessed() -> None:
    east, west = shifted_pair()
    commit(east, "g", "orders", {0: 650})
    del west.ids["east.orders"]
    [p] = translate_group(topology(ONE_WAY), "g", "east", "west", views(east, west)).partitions
    assert (p.target_offset, p.reason, p.exact) == (None, TOPIC_MISSING, False)

    east, west = shifted_pair()
    commit(east, "g", "orders", {0: 650})
    east.ids["orders"] = b"N" * 16  # deleted and recreated since the syncs were written
    [p] = translate_group(topology(ONE_WAY), "g", "east", "west", views(east, west)).partitions
    assert (p.target_offset, p.reason) == (None, "topic-mismatch")


def test_partition_without_syncs_and_a_flow_that_never_ran() -> None:
    east, west = shifted_pair()
    commit(east, "g", "orders", {0: 650, 1: 3})
    [p0, p1] = translate_group(topology(ONE_WAY), "g", "east", "west", views(east, west)).partitions
    assert p0.exact and (p1.target_offset, p1.reason) == (None, "unknown-partition")

    west.sync_records.clear()
    result = translate_group(topology(ONE_WAY), "g", "east", "west", views(east, west))
    assert {p.reason for p in result.partitions} == {"unknown-partition"}
    assert any("never copied anything" in note for note in result.notes)


def test_a_position_at_the_start_of_partitions_that_never_held_a_record_is_exact() -> None:
    # Java consumers commit 0 for every empty partition they are assigned: an empty remote copy
    # whose origin is empty too needs no sync (none can exist), in either direction.
    east, west = shifted_pair()
    commit(east, "g", "orders", {0: 650, 1: 0})
    east.ends[TopicPartition("orders", 1)] = 0
    west.ends[TopicPartition("east.orders", 1)] = 0
    [p0, p1] = translate_group(topology(ONE_WAY), "g", "east", "west", views(east, west)).partitions
    assert p0.exact and (p1.target_offset, p1.reason, p1.would_lose) == (0, "exact", 0)
    # Only when both sides never held a record: a copy that lags is not exact.
    east.ends[TopicPartition("orders", 1)] = 5
    [_, lagging] = translate_group(
        topology(ONE_WAY), "g", "east", "west", views(east, west)
    ).partitions
    assert (lagging.target_offset, lagging.reason) == (None, "unknown-partition")
    # Nor a position past 0 (the partition's records were deleted, or its syncs lost).
    commit(east, "g", "orders", {1: 3})
    east.ends[TopicPartition("orders", 1)] = 0
    [_, past] = translate_group(
        topology(ONE_WAY), "g", "east", "west", views(east, west)
    ).partitions
    assert past.reason == "unknown-partition"


def test_contradicting_syncs_make_their_partition_untrusted() -> None:
    east, west = shifted_pair()
    # A second writer claims target offsets 100.. for other source offsets.
    west.write_syncs("drsvc.offset-syncs.east", [sync("orders", 700, 750, [(700, 100, 50)])])
    west.write_syncs("drsvc.offset-syncs.east", [sync("orders", 0, 10, [(0, 0, 10)], partition=1)])
    commit(east, "g", "orders", {0: 650, 1: 10})
    result = translate_group(topology(ONE_WAY), "g", "east", "west", views(east, west))
    p0, p1 = result.partitions
    assert (p0.target_offset, p0.reason) == (None, SYNC_CONFLICT)
    assert p1.exact  # other partitions are not affected
    assert any("orders-0" in note for note in result.notes)


def test_each_partition_says_whether_waiting_for_replication_can_make_it_exact() -> None:
    # A planned failover checks this before deactivating: only what replication catching up can
    # fix is worth waiting for.
    east, west = shifted_pair()
    # Partition 1: two writers claim west's offsets 0..9 for different source offsets.
    west.write_syncs(
        "drsvc.offset-syncs.east",
        [
            sync("orders", 0, 10, [(0, 0, 10)], partition=1),
            sync("orders", 50, 60, [(50, 5, 10)], partition=1),
        ],
    )
    commit(east, "g", "orders", {0: 1100, 1: 5, 2: 5})
    ahead, conflict, unknown = translate_group(
        topology(ONE_WAY), "g", "east", "west", views(east, west)
    ).partitions
    assert (ahead.reason, conflict.reason, unknown.reason) == (
        "ahead-of-syncs",
        SYNC_CONFLICT,
        "unknown-partition",
    )
    assert ahead.waits_can_fix and unknown.waits_can_fix
    assert not conflict.waits_can_fix

    east, west = shifted_pair()
    commit(east, "g", "orders", {0: 100})  # before the first sync: east's log started at 500
    [before] = translate_group(topology(ONE_WAY), "g", "east", "west", views(east, west)).partitions
    del west.ids["east.orders"]
    [missing] = translate_group(
        topology(ONE_WAY), "g", "east", "west", views(east, west)
    ).partitions
    assert (before.reason, missing.reason) == ("before-syncs", TOPIC_MISSING)
    assert not before.waits_can_fix
    assert missing.waits_can_fix


def test_a_record_that_is_not_a_sync_stops_the_read() -> None:
    east, west = shifted_pair()
    west.sync_records["drsvc.offset-syncs.east"].append((b"junk", b"junk"))
    commit(east, "g", "orders", {0: 650})
    with pytest.raises(PermanentError, match=r"record 2 of drsvc.offset-syncs.east-0 on west"):
        translate_group(topology(ONE_WAY), "g", "east", "west", views(east, west))


def test_syncs_of_other_topics_are_not_indexed() -> None:
    read = SyncTopicRead(cluster="west", topic="drsvc.offset-syncs.east")
    for offset, s in enumerate([sync("orders", 0, 5, [(0, 0, 5)]), sync("other", 0, 5, [])]):
        read.add_record(0, offset, *encode_sync(s), ["orders"])
    assert read.index.partitions() == [TopicPartition("orders", 0)]
    assert (read.records, read.applied, read.index.resume_offsets) == (2, 1, {0: 2})


# -- refusals -------------------------------------------------------------------------------------


def test_unknown_group_names_the_group_and_the_cluster() -> None:
    east, west = shifted_pair()
    with pytest.raises(ConfigError, match=r"group 'ghost' has no committed offsets on .*'east'"):
        translate_group(topology(ONE_WAY), "ghost", "east", "west", views(east, west))


@pytest.mark.parametrize(
    ("text", "source", "target", "message"),
    [
        (ONE_WAY, "east", "north", r"has no cluster 'north' \(known: east, west\)"),
        (ONE_WAY, "east", "east", r"both 'east'"),
        (CHAIN, "a", "c", r"more than one hop is not supported; 'a' and 'c' .* a -> b -> c"),
        (CHAIN, "c", "a", r"more than one hop is not supported; 'c' and 'a' .* a -> b -> c"),
        (
            ONE_WAY.replace("flows:\n  - {source: east, target: west}", "flows: []"),
            "east",
            "west",
            r"no flow between 'east' and 'west' \(flows: none\)",
        ),
    ],
)
def test_requests_that_cannot_be_translated(
    text: str, source: str, target: str, message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        select_flows(topology(text), "g", source, target)


GROUP_FILTERS = """
name: filters
clusters:
  east: {bootstrap_servers: "127.0.0.1:1"}
  west: {bootstrap_servers: "127.0.0.1:2"}
flows:
  - {source: east, target: west, groups: {include: [other]}}
  - {source: west, target: east, groups: {include: [".*"], exclude: ["secret-.*"]}}
"""


def test_groups_filter_of_the_flows() -> None:
    choice = select_flows(topology(GROUP_FILTERS), "g", "east", "west")
    assert choice.downstream is None and choice.upstream is not None
    assert "flow east->west does not translate group 'g'" in choice.notes[0]
    with pytest.raises(ConfigError, match="group 'secret-x' is excluded by the groups filter"):
        select_flows(topology(GROUP_FILTERS), "secret-x", "east", "west")


# -- exactness, by brute force --------------------------------------------------------------------


@dataclass
class SimulatedCopy:
    """A source partition with markers and aborted records, copied in runs with a re-copy."""

    readable: list[bool]  # per source offset: does a read_committed consumer get a record there
    target: list[int] = field(default_factory=list)  # per target offset: the source offset copied
    syncs: list[OffsetSync] = field(default_factory=list)

    def run(self, begin: int, end: int) -> None:
        builder = SyncBuilder(
            TopicPartition("orders", 0),
            source_topic_id=EAST_ORDERS,
            target_topic_id=WEST_COPY,
            source_begin=begin,
        )
        for s in range(begin, end):
            if self.readable[s]:
                builder.add(s, len(self.target))
                self.target.append(s)
        self.syncs.extend(builder.build(end))


def simulated() -> SimulatedCopy:
    unreadable = {10, 14, 15, 16, 17, 24, 29}  # commit markers, an aborted transaction, its marker
    copy = SimulatedCopy([s not in unreadable for s in range(30)])
    copy.run(0, 12)
    copy.run(12, 21)
    copy.run(12, 25)  # at-least-once: a restarted worker copies 12..24 again
    copy.run(25, 30)  # ends past the trailing marker at 29
    return copy


def test_every_downstream_translation_skips_nothing_and_rereads_nothing() -> None:
    copy = simulated()
    east = FakeCluster("east", ids={"orders": EAST_ORDERS})
    west = FakeCluster("west", ids={"east.orders": WEST_COPY})
    west.write_syncs("drsvc.offset-syncs.east", copy.syncs)
    for c in range(31):
        commit(east, f"g{c}", "orders", {0: c})
        [p] = translate_group(
            topology(ONE_WAY), f"g{c}", "east", "west", views(east, west)
        ).partitions
        assert p.exact and p.target_offset is not None, (c, p)
        read_after = copy.target[p.target_offset :]
        unread = [s for s in range(c, 30) if copy.readable[s]]
        # The newest pass from there on: each unread record once, in order, nothing consumed.
        assert sorted(set(read_after)) == unread, (c, p.target_offset, read_after)
        assert all(s >= c for s in read_after), (c, p.target_offset, read_after)


def test_every_upstream_translation_skips_nothing_and_rereads_nothing() -> None:
    copy = simulated()
    east = FakeCluster("east", ids={"orders": EAST_ORDERS})
    west = FakeCluster("west", ids={"east.orders": WEST_COPY})
    west.write_syncs("drsvc.offset-syncs.east", copy.syncs)
    for t in range(1, len(copy.target) + 1):
        commit(west, f"g{t}", "east.orders", {0: t})
        result = translate_group(topology(ONE_WAY), f"g{t}", "west", "east", views(west, east))
        [p] = result.partitions
        assert p.exact and p.target_offset is not None, (t, p)
        read = set(copy.target[:t])
        after = {s for s in range(p.target_offset, 30) if copy.readable[s]}
        assert not read & after, (t, p.target_offset)  # zero re-read
        assert {s for s in range(30) if copy.readable[s]} - read <= after  # zero skipped


# -- output ---------------------------------------------------------------------------------------


def test_json_and_table_say_the_same() -> None:
    east, west = shifted_pair()
    commit(east, "g", "orders", {0: 650, 1: 0})
    commit(east, "g", "audit", {2: 1})
    text = ONE_WAY.replace("target: west}", "target: west, topics: {include: [orders]}}")
    result = translate_group(topology(text), "g", "east", "west", views(east, west))
    document = json.loads(json.dumps(result.as_dict()))
    assert {k: document[k] for k in ("group", "from", "to", "exact")} == {
        "group": "g",
        "from": "east",
        "to": "west",
        "exact": False,
    }
    first = document["partitions"][0]
    assert {k: first[k] for k in ("topic", "partition", "source_topic", "source_offset")} == {
        "topic": "east.orders",
        "partition": 0,
        "source_topic": "orders",
        "source_offset": 650,
    }
    assert (first["target_offset"], first["exact"], first["reason"], first["direction"]) == (
        150,
        True,
        "exact",
        "downstream",
    )
    assert document["partitions"][1]["target_offset"] is None
    assert document["not_translated"][0]["topic"] == "audit"

    console = Console(record=True, width=240, force_terminal=False)
    render(result, console)
    shown = console.export_text()
    assert "CURRENT-OFFSET" in shown and "TRANSLATED-OFFSET" in shown
    assert "exact (downstream)" in shown and "unknown-partition (downstream)" in shown
    assert "1 of 2 partition(s) translate exactly" in shown
    assert "not translated: audit [2]" in shown


def test_empty_result_is_not_exact() -> None:
    assert not GroupTranslation("g", "east", "west", partitions=()).exact


def test_cli_refuses_bad_requests_before_connecting(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "chain.yaml"
    path.write_text(CHAIN)
    for args, message in (
        (["--from", "a", "--to", "c"], "more than one hop is not supported"),
        (["--from", "a", "--to", "z"], "has no cluster 'z'"),
    ):
        with pytest.raises(SystemExit) as exit_info:
            main(["translate", "-t", str(path), "--group", "g", *args])
        assert exit_info.value.code == 2
        assert message in capsys.readouterr().err
