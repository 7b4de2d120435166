"""Group offset sync decisions, on a fake target cluster and a fake key-value store."""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Collection, Mapping
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from drsvc.errors import ConfigError, CoordinatorUnavailableError
from drsvc.kafka.admin import GroupOffset, PartitionError
from drsvc.runtime.checkpoints.group_sync import (
    GroupOffsetSyncer,
    decide_partition,
    parse_active_value,
)
from drsvc.runtime.checkpoints.sync_origin import SyncOrigin, decode_origin, encode_origin
from drsvc.topology.models import Application, Flow, Topology
from failover.naming import app_active_key

Partition = tuple[str, int]
T0, T1 = ("east.orders", 0), ("east.orders", 1)
LOGGER = "drsvc.runtime.checkpoints.group_sync"


class FakeTarget:
    """The target cluster's groups: committed offsets, log starts, and live members."""

    def __init__(self, earliest: Mapping[Partition, int] | None = None) -> None:
        self.offsets: dict[str, dict[Partition, int]] = {}
        self.metadata: dict[str, dict[Partition, str]] = {}
        self.log_start = dict(earliest or {})
        self.members: dict[str, int] = {}
        self.refuse_with: dict[Partition, str] = {}
        self.calls: list[str] = []

    def committed(
        self, group: str, partitions: Collection[Partition]
    ) -> dict[Partition, GroupOffset]:
        self.calls.append("committed")
        known, notes = self.offsets.get(group, {}), self.metadata.get(group, {})
        return {tp: GroupOffset(known[tp], notes.get(tp, "")) for tp in partitions if tp in known}

    def earliest(self, partitions: Collection[Partition]) -> dict[Partition, int]:
        self.calls.append("earliest")
        return {tp: self.log_start[tp] for tp in partitions if tp in self.log_start}

    def alter(
        self, group: str, offsets: Mapping[Partition, int], metadata: Mapping[Partition, str]
    ) -> dict[Partition, PartitionError | None]:
        self.calls.append("alter")
        if self.members.get(group):
            return dict.fromkeys(offsets, PartitionError("UNKNOWN_MEMBER_ID", "Unknown member"))
        answers: dict[Partition, PartitionError | None] = {}
        for tp, offset in offsets.items():
            if tp in self.refuse_with:
                answers[tp] = PartitionError(self.refuse_with[tp], "refused")
            else:
                self.offsets.setdefault(group, {})[tp] = offset
                self.metadata.setdefault(group, {})[tp] = metadata.get(tp, "")
                answers[tp] = None
        return answers


class FakeKeyValues:
    def __init__(self, values: dict[str, str] | None = None) -> None:
        self.values = dict(values or {})

    def kv_get(self, key: str) -> str | None:
        return self.values.get(key)


class DownKeyValues:
    def kv_get(self, key: str) -> str | None:
        raise CoordinatorUnavailableError(f"Consul: get {key}: connection refused")


def topology(**app_fields: Any) -> Topology:
    return Topology.model_validate(
        {
            "name": "t",
            "clusters": {"east": {}, "west": {}},
            "flows": [{"source": "east", "target": "west"}, {"source": "west", "target": "east"}],
            "applications": [
                {
                    "name": "orders",
                    "groups": ["orders-consumer"],
                    "topics": ["orders"],
                    "preferred": "east",
                    "sync_group_offsets": True,
                    **app_fields,
                },
                {
                    "name": "other",
                    "groups": ["other-consumer"],
                    "topics": ["x"],
                    "preferred": "east",
                },
            ],
        }
    )


def syncer(
    topo: Topology | None = None,
    kv: Any = None,
    target: FakeTarget | None = None,
    flow: tuple[str, str] = ("east", "west"),
) -> tuple[GroupOffsetSyncer, FakeTarget]:
    topo = topo or topology()
    fake = target or FakeTarget()
    return (
        GroupOffsetSyncer(
            topo, topo.flow(*flow), {"bootstrap.servers": "unused:9092"}, kv, target=fake
        ),
        fake,
    )


# -- the active key -------------------------------------------------------------------------------

ORDERS = Application(name="orders", groups=("g",), topics=("orders",), preferred="east")
KEY = "drsvc/t/apps/orders/active"


@pytest.mark.parametrize(
    ("raw", "alias", "state"),
    [
        (None, "east", "active"),
        ("west", "west", "active"),
        (" west\n", "west", "active"),
        ('"west"', "west", "active"),
        ('{"cluster": "west", "since": 17}', "west", "active"),
        ('{"cluster": null}', None, "switching"),
        ("null", None, "switching"),
        ("", None, "switching"),
        ("none", None, "switching"),
        ("north", None, "unreadable"),
        ('{"active": "west"}', None, "unreadable"),
        ("{west", None, "unreadable"),
        ('{"cluster": 3}', None, "unreadable"),
    ],
)
def test_active_values(raw: str | None, alias: str | None, state: str) -> None:
    active = parse_active_value(raw, ORDERS, {"east", "west"}, KEY)
    assert (active.alias, active.state) == (alias, state)
    assert KEY in active.explanation


def test_an_unreadable_value_says_why() -> None:
    active = parse_active_value("north", ORDERS, {"east", "west"}, KEY)
    assert active.explanation == (
        f"{KEY} = 'north' cannot be used: it names no cluster of the topology (known: east, west)"
    )


# -- one partition --------------------------------------------------------------------------------


S_ID, S_NEW = b"s" * 16, b"S" * 16  # orders on east, and after it was recreated
T_ID, T_NEW = b"t" * 16, b"T" * 16  # east.orders on west, and after it was recreated


def origin(
    source_offset: int,
    source_id: bytes | None = S_ID,
    target_id: bytes | None = T_ID,
    flow: str = "east->west",
    topic: str = "orders",
) -> SyncOrigin:
    return SyncOrigin(flow, topic, source_offset, source_id, target_id)


@pytest.mark.parametrize(
    ("wanted", "committed", "rewound", "mine", "theirs", "decision"),
    [
        # no origins at all: as before
        (5, None, False, None, None, "commit"),
        (5, 3, False, None, None, "commit"),
        (5, 5, False, None, None, "unchanged"),
        (5, 5, True, None, None, "unchanged"),
        (3, 5, False, None, None, "skipped-backwards"),
        (3, 5, True, None, None, "commit"),
        (0, 5, True, None, None, "commit"),
        # forward is always fine
        (7, 5, False, origin(70), origin(50), "commit"),
        (7, 5, False, origin(70), None, "commit"),
        # the same offset: recorded once with its origin, then left alone
        (5, 5, False, origin(50), None, "record-origin"),
        (5, 5, False, origin(50), origin(52), "record-origin"),
        (5, 5, False, origin(50), origin(50), "unchanged"),
        # committed by the sync from a source position ahead of the wanted one: the source group
        # went back since, in whatever round, so the target follows
        (3, 5, False, origin(30), origin(50), "commit"),
        # ... but not from one at or behind it (the target group went ahead by other means)
        (3, 5, False, origin(50), origin(50), "skipped-backwards"),
        (3, 5, False, origin(60), origin(50), "skipped-backwards"),
        # a commit not written by the sync is only moved back when this round saw the rewind
        (3, 5, False, origin(30), None, "skipped-backwards"),
        (3, 5, True, origin(30), None, "commit"),
        # another incarnation of the target topic (recreated, copied again from the start)
        (3, 5, False, origin(50, target_id=T_NEW), origin(50), "commit"),
        # another incarnation of the source topic (its offsets started again)
        (3, 5, False, origin(90, source_id=S_NEW), origin(50), "commit"),
        # ids unknown on one side: offsets decide
        (3, 5, False, origin(50, None, None), origin(50), "skipped-backwards"),
        (3, 5, False, origin(30, None, None), origin(50), "commit"),
        # translated from something else: not comparable, never backwards
        (3, 5, False, origin(30), origin(50, flow="south->west"), "skipped-backwards"),
        (3, 5, False, origin(30), origin(50, topic="other"), "skipped-backwards"),
        # no origin for the wanted offset: nothing to compare with
        (3, 5, False, None, origin(50), "skipped-backwards"),
    ],
)
def test_decide_partition(
    wanted: int,
    committed: int | None,
    rewound: bool,
    mine: SyncOrigin | None,
    theirs: SyncOrigin | None,
    decision: str,
) -> None:
    assert decide_partition(wanted, committed, rewound, mine, theirs).action == decision


def test_a_move_back_says_why() -> None:
    assert decide_partition(3, 5, False, origin(30), origin(50)).why == (
        "moved back: the source group went back (from 50 to 30) since the target's commit"
    )
    assert decide_partition(3, 5, False, origin(50, target_id=T_NEW), origin(50)).why == (
        "moved back: the target topic was recreated since the target's commit"
    )
    assert "committed by someone else" in decide_partition(3, 5, False, origin(30), None).why


@given(
    st.integers(0, 100),
    st.integers(0, 100),
    st.integers(0, 100),
    st.integers(0, 100),
    st.booleans(),
)
def test_within_one_incarnation_only_a_source_rewind_moves_a_group_back(
    wanted: int, committed: int, source_now: int, source_then: int, rewound: bool
) -> None:
    """Same topics, same ids: a lower offset is committed exactly when the source group went back
    since the target's commit, or this round says it rewound."""
    decision = decide_partition(wanted, committed, rewound, origin(source_now), origin(source_then))
    if wanted < committed:
        went_back = rewound or source_then > source_now
        assert (decision.action == "commit") == went_back
        assert decision.action in ("commit", "skipped-backwards")
    elif wanted > committed:
        assert decision.action == "commit"
    else:
        assert decision.action == ("unchanged" if source_now == source_then else "record-origin")


# -- the origin recorded with each commit ---------------------------------------------------------


def test_origins_round_trip_through_commit_metadata() -> None:
    for value in (origin(7), origin(0, None, None), origin(1 << 62, S_NEW, T_NEW, "a->b", "é")):
        text = encode_origin(value)
        assert len(text.encode()) < 4096
        assert decode_origin(text) == value
    assert json.loads(encode_origin(origin(7))) == {
        "drsvc-group-sync": 1,
        "flow": "east->west",
        "source_topic": "orders",
        "source_offset": 7,
        "source_topic_id": "73" * 16,
        "target_topic_id": "74" * 16,
    }


@pytest.mark.parametrize(
    "metadata",
    [
        None,
        "",
        "m1",
        "{not json",
        "[1]",
        '{"flow": "east->west", "source_topic": "orders", "source_offset": 1}',
        '{"drsvc-group-sync": 2, "flow": "east->west", "source_topic": "o", "source_offset": 1}',
        '{"drsvc-group-sync": 1, "flow": "east->west", "source_topic": "o", "source_offset": -1}',
        '{"drsvc-group-sync": 1, "flow": "east->west", "source_topic": "o", "source_offset": true}',
        '{"drsvc-group-sync": 1, "flow": 3, "source_topic": "o", "source_offset": 1}',
        '{"drsvc-group-sync": 1, "flow": "e->w", "source_topic": "o", "source_offset": 1,'
        ' "source_topic_id": "zz"}',
    ],
)
def test_metadata_that_is_not_a_known_origin_reads_as_none(metadata: str | None) -> None:
    assert decode_origin(metadata) is None


# -- which groups are synced ----------------------------------------------------------------------


def test_an_opted_in_passive_group_is_synced() -> None:
    sync, target = syncer(kv=FakeKeyValues())
    target.offsets["orders-consumer"] = {T0: 2}
    result = sync.sync("orders-consumer", {T0: 5, T1: 7})
    assert result.status == "synced"
    assert result.application == "orders"
    assert result.flow == "east->west"
    assert [(p.action, p.committed, p.offset) for p in result.partitions] == [
        ("synced", 2, 5),
        ("synced", None, 7),
    ]
    assert target.offsets["orders-consumer"] == {T0: 5, T1: 7}
    json.dumps(result.as_dict())


@pytest.mark.parametrize(
    ("group", "why"),
    [
        ("stranger", "group 'stranger' belongs to no application of topology 't'"),
        ("other-consumer", "application 'other' does not set sync_group_offsets"),
    ],
)
def test_groups_that_did_not_opt_in_are_not_touched(group: str, why: str) -> None:
    sync, target = syncer()
    result = sync.sync(group, {T0: 5})
    assert (result.status, result.reason, result.partitions) == ("not-opted-in", why, ())
    assert target.calls == []


def test_a_group_the_flow_does_not_translate_is_not_touched() -> None:
    topo = Topology.model_validate(
        {
            "name": "t",
            "clusters": {"east": {}, "west": {}, "south": {}},
            "flows": [
                {"source": "east", "target": "west"},
                {"source": "south", "target": "west", "groups": {"exclude": ["orders-.*"]}},
            ],
            "applications": [
                {
                    "name": "orders",
                    "groups": ["orders-consumer"],
                    "topics": ["orders"],
                    "preferred": "east",
                    "sync_group_offsets": True,
                }
            ],
        }
    )
    sync, target = syncer(topo, flow=("south", "west"))
    result = sync.sync("orders-consumer", {("south.orders", 0): 5})
    assert result.status == "not-opted-in"
    assert result.reason == "the groups filter of flow south->west excludes 'orders-consumer'"
    assert target.calls == []


@pytest.mark.parametrize(
    ("value", "status"),
    [
        ("west", "active-on-target"),
        ('{"cluster": "west"}', "active-on-target"),
        ("null", "no-active-cluster"),
        ("north", "active-unreadable"),
    ],
)
def test_the_active_key_can_stop_the_sync(value: str, status: str) -> None:
    sync, target = syncer(kv=FakeKeyValues({app_active_key("t", "orders"): value}))
    result = sync.sync("orders-consumer", {T0: 5})
    assert (result.status, result.partitions) == (status, ())
    assert target.calls == []


def test_without_the_key_the_preferred_cluster_is_active() -> None:
    preferred_west = topology(preferred="west")
    sync, target = syncer(preferred_west, kv=FakeKeyValues())
    result = sync.sync("orders-consumer", {T0: 5})
    assert result.status == "active-on-target"
    assert target.calls == []
    assert "drsvc/t/apps/orders/active is not set: its preferred cluster" in result.reason
    back, _ = syncer(preferred_west, kv=FakeKeyValues(), flow=("west", "east"))
    assert back.sync("orders-consumer", {("west.orders", 0): 5}).status == "synced"


def test_without_consul_the_preferred_cluster_is_active() -> None:
    sync, _ = syncer(topology(preferred="west"), kv=None)
    assert sync.sync("orders-consumer", {T0: 5}).status == "active-on-target"
    sync, _ = syncer(kv=None)
    assert sync.sync("orders-consumer", {T0: 5}).status == "synced"


def test_consul_unavailable_is_raised_not_guessed() -> None:
    sync, target = syncer(kv=DownKeyValues())
    with pytest.raises(CoordinatorUnavailableError, match="connection refused"):
        sync.sync("orders-consumer", {T0: 5})
    assert target.calls == []


# -- partitions -----------------------------------------------------------------------------------


def test_never_backwards_unless_rewound() -> None:
    sync, target = syncer()
    target.offsets["orders-consumer"] = {T0: 8, T1: 8}
    result = sync.sync("orders-consumer", {T0: 5, T1: 8})
    assert result.actions() == {T0: "skipped-backwards", T1: "unchanged"}
    assert result.status == "unchanged"
    assert target.calls == ["committed"]
    rewound = sync.sync("orders-consumer", {T0: 5, T1: 8}, rewound=[T0])
    assert rewound.actions() == {T0: "synced", T1: "unchanged"}
    assert rewound.partitions[0].detail == "moved back: the source group rewound"
    assert target.offsets["orders-consumer"] == {T0: 5, T1: 8}


def test_commits_record_their_origin_and_a_later_rewind_is_followed_whatever_happened_between() -> (
    None
):
    """The source group went back from 50 to 30 while the sync could not run (members on the
    target); later calls do not say "rewound", yet the target follows: its commit says it was
    translated from 50."""
    sync, target = syncer()
    first = sync.sync("orders-consumer", {T0: 5}, origins={T0: origin(50)})
    assert first.actions() == {T0: "synced"}
    assert decode_origin(target.metadata["orders-consumer"][T0]) == origin(50)

    target.members["orders-consumer"] = 1
    refused = sync.sync("orders-consumer", {T0: 3}, rewound=[T0], origins={T0: origin(30)})
    assert refused.status == "active-here"
    target.members["orders-consumer"] = 0

    later = sync.sync("orders-consumer", {T0: 3}, origins={T0: origin(30)})
    assert later.actions() == {T0: "synced"}
    assert later.partitions[0].detail == (
        "moved back: the source group went back (from 50 to 30) since the target's commit"
    )
    assert target.offsets["orders-consumer"] == {T0: 3}
    assert decode_origin(target.metadata["orders-consumer"][T0]) == origin(30)
    # Once there, nothing moves it back again without a new rewind.
    assert sync.sync("orders-consumer", {T0: 3}, origins={T0: origin(30)}).status == "unchanged"


def test_an_offset_already_there_gets_its_origin_recorded_once() -> None:
    sync, target = syncer()
    target.offsets["orders-consumer"] = {T0: 5}  # committed by a consumer on the target
    first = sync.sync("orders-consumer", {T0: 5}, origins={T0: origin(50)})
    assert (first.status, first.actions()) == ("unchanged", {T0: "unchanged"})
    assert first.partitions[0].detail == "its origin recorded"
    assert decode_origin(target.metadata["orders-consumer"][T0]) == origin(50)
    target.calls.clear()
    sync.sync("orders-consumer", {T0: 5}, origins={T0: origin(50)})
    assert target.calls == ["committed"]


def test_a_consumers_own_commit_ahead_is_kept_without_a_rewind_this_round() -> None:
    sync, target = syncer()
    target.offsets["orders-consumer"] = {T0: 8}
    target.metadata["orders-consumer"] = {T0: "consumer's own"}
    result = sync.sync("orders-consumer", {T0: 5}, origins={T0: origin(50)})
    assert result.actions() == {T0: "skipped-backwards"}
    assert "committed by someone else" in result.partitions[0].detail


def test_a_group_with_members_is_refused_by_the_broker_and_left_alone() -> None:
    sync, target = syncer()
    target.offsets["orders-consumer"] = {T0: 2}
    target.members["orders-consumer"] = 1
    result = sync.sync("orders-consumer", {T0: 5, T1: 7})
    assert result.status == "active-here"
    assert result.actions() == {T0: "refused-active", T1: "refused-active"}
    assert result.reason == (
        "the group is active on 'west': the group has members on the target (UNKNOWN_MEMBER_ID)"
    )
    # The sync did not ask who the members are: it read offsets and tried to commit.
    assert target.calls == ["committed", "alter"]
    assert target.offsets["orders-consumer"] == {T0: 2}


def test_other_broker_refusals_are_failures_named_per_partition() -> None:
    sync, target = syncer()
    target.refuse_with[T1] = "UNKNOWN_TOPIC_OR_PART"
    result = sync.sync("orders-consumer", {T0: 5, T1: 7})
    assert result.status == "failed"
    assert result.actions() == {T0: "synced", T1: "failed"}
    assert result.partitions[1].detail == "UNKNOWN_TOPIC_OR_PART: refused"
    assert result.reason == "1 synced, 1 failed; UNKNOWN_TOPIC_OR_PART: refused"


def test_nothing_given_is_nothing_done() -> None:
    sync, target = syncer()
    assert sync.sync("orders-consumer", {}).status == "unchanged"
    assert target.calls == []


@pytest.mark.parametrize(
    ("offsets", "unknown", "error"),
    [
        ({T0: 5}, {T0: "before-syncs"}, "east.orders-0 is given both a translated offset and"),
        ({T0: -1}, {}, "translated offset of east.orders-0 is negative (-1)"),
    ],
)
def test_contradictory_input_is_refused(
    offsets: dict[Partition, int], unknown: dict[Partition, str], error: str
) -> None:
    sync, _ = syncer()
    with pytest.raises(ConfigError, match=re.escape(error)):
        sync.sync("orders-consumer", offsets, unknown=unknown)


def test_a_flow_of_another_topology_is_refused() -> None:
    stranger = Flow(source="east", target="west", policy="identity")
    with pytest.raises(ConfigError, match="flow east->west is not part of topology 't'"):
        GroupOffsetSyncer(topology(), stranger, {"bootstrap.servers": "x:1"}, None)


# -- unknown translations -------------------------------------------------------------------------


def test_unknown_with_earliest_starts_at_the_log_start() -> None:
    sync, target = syncer(
        topology(on_unknown_translation="earliest"), target=FakeTarget({T0: 40, T1: 0})
    )
    result = sync.sync("orders-consumer", {T1: 7}, unknown={T0: "before-syncs"})
    assert result.status == "synced"
    assert [(p.action, p.offset, p.origin) for p in result.partitions] == [
        ("synced", 40, "earliest"),
        ("synced", 7, "translated"),
    ]
    assert result.partitions[0].detail.startswith("earliest retained offset (before-syncs: ")
    assert target.offsets["orders-consumer"] == {T0: 40, T1: 7}


def test_unknown_with_earliest_never_moves_a_group_backwards() -> None:
    sync, target = syncer(topology(on_unknown_translation="earliest"), target=FakeTarget({T0: 40}))
    target.offsets["orders-consumer"] = {T0: 90}
    result = sync.sync("orders-consumer", {}, unknown={T0: "unknown-partition"})
    assert result.actions() == {T0: "skipped-backwards"}
    assert target.offsets["orders-consumer"] == {T0: 90}


def test_unknown_with_refuse_leaves_the_whole_group_alone() -> None:
    sync, target = syncer()  # refuse is the default
    result = sync.sync("orders-consumer", {T1: 7}, unknown={T0: "log-truncated"})
    assert result.status == "refused-unknown"
    assert result.actions() == {T0: "refused-unknown", T1: "refused-unknown"}
    assert result.reason == (
        "group 'orders-consumer': east.orders-0 has no known translation (log-truncated: the"
        " source log was truncated past the committed offset); on_unknown_translation is"
        " 'refuse'"
    )
    assert result.partitions[1].detail == (
        "not synced: other partitions of the group have no usable translation"
    )
    assert target.calls == []


def test_unknown_with_earliest_refuses_a_partition_missing_on_the_target() -> None:
    sync, target = syncer(topology(on_unknown_translation="earliest"), target=FakeTarget({}))
    result = sync.sync("orders-consumer", {T1: 7}, unknown={T0: "topic-missing"})
    assert result.status == "refused-unknown"
    assert "no earliest retained offset" in result.reason
    assert target.calls == ["earliest"]


# -- logs -----------------------------------------------------------------------------------------


def messages(caplog: pytest.LogCaptureFixture, level: int) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == LOGGER and r.levelno == level]


def test_state_changes_are_logged_once(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger=LOGGER)
    sync, target = syncer()
    sync.sync("orders-consumer", {T0: 1})
    sync.sync("orders-consumer", {T0: 2})
    target.members["orders-consumer"] = 1
    for offset in (3, 4, 5):
        sync.sync("orders-consumer", {T0: offset})
    target.members["orders-consumer"] = 0
    sync.sync("orders-consumer", {T0: 6})
    assert messages(caplog, logging.INFO) == [
        "group orders-consumer: syncing its offsets onto west",
        "group orders-consumer: not syncing its offsets onto west: the group is active on"
        " 'west': the group has members on the target (UNKNOWN_MEMBER_ID)",
        "group orders-consumer: syncing its offsets onto west (was: active-here)",
    ]
    assert messages(caplog, logging.WARNING) == []
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


def test_refusals_by_policy_are_warnings(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger=LOGGER)
    sync, _ = syncer()
    for _ in range(3):
        sync.sync("orders-consumer", {T1: 7}, unknown={T0: "before-syncs"})
    warnings = messages(caplog, logging.WARNING)
    assert len(warnings) == 1
    assert "east.orders-0 has no known translation" in warnings[0]
