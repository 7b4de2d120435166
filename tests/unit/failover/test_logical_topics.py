"""Logical topics: which topics of a cluster make one up, where a record came from, and which
local partitions wait for remote copies after a switch."""

from __future__ import annotations

import re

import pytest

from failover import provenance
from failover.errors import PolicyError
from failover.logical_topics import LogicalTopic, Origin, drain_blockers, drained, origin
from failover.replication_policy import IdentityPolicy, PrefixPolicy

PREFIX = PrefixPolicy.for_aliases(["east", "west", "central"])
ORDERS = LogicalTopic("orders", PREFIX)


def test_members_are_the_topic_and_its_copies_from_any_alias() -> None:
    topics = [
        "orders", "east.orders", "west.orders", "west.east.orders", "orders.v2", "payments",
        "east.payments", "other.orders", "eastorders",
    ]  # fmt: skip
    assert ORDERS.members(topics) == ["east.orders", "orders", "west.east.orders", "west.orders"]


def test_identity_has_one_member_the_topic_itself() -> None:
    logical = LogicalTopic("orders", IdentityPolicy())
    assert logical.members(["orders", "east.orders"]) == ["orders"]
    assert logical.pattern() == "^orders$"


@pytest.mark.parametrize(
    ("topic", "matches"),
    [
        ("orders", True), ("east.orders", True), ("central.orders", True),
        ("eastXorders", False), ("orders.v2", False), ("north.orders", False),
        ("xorders", False), ("east.orders2", False),
    ],
)  # fmt: skip
def test_the_pattern_matches_copies_created_later_and_nothing_else(
    topic: str, matches: bool
) -> None:
    # librdkafka reads the pattern as a POSIX extended regex: the subset used is Python's too.
    assert ORDERS.pattern() == "^(orders|(central|east|west)[.]orders)$"
    assert bool(re.fullmatch(ORDERS.pattern(), topic)) is matches


def test_a_name_that_is_no_topic_is_refused() -> None:
    with pytest.raises(PolicyError):
        LogicalTopic("no such/topic", PREFIX)


def test_a_copy_s_origin_is_the_first_hop_of_its_provenance() -> None:
    first = provenance.encode(provenance.Provenance("east", "orders", 1, 41))
    second = provenance.encode(provenance.Provenance("west", "east.orders", 1, 7))
    headers = [
        ("h", b"1"),
        (provenance.PROVENANCE_HEADER, first),
        (provenance.PROVENANCE_HEADER, second),
    ]
    assert origin("central", "west.east.orders", 1, 3, headers) == Origin("east", "orders", 1, 41)


def test_a_local_record_s_origin_is_where_it_was_read() -> None:
    assert origin("west", "orders", 0, 9, [("h", None)]) == Origin("west", "orders", 0, 9)
    assert origin(None, "orders", 0, 9, None) == Origin(None, "orders", 0, 9)


CUTOFFS = {("east.orders", 0): 40, ("east.orders", 1): 12, ("east.payments", 0): 5}


def test_a_local_partition_waits_for_the_copies_of_the_same_partition() -> None:
    assert drain_blockers(("orders", 0), CUTOFFS, ORDERS) == {("east.orders", 0): 40}
    assert drain_blockers(("orders", 1), CUTOFFS, ORDERS) == {("east.orders", 1): 12}
    assert drain_blockers(("orders", 2), CUTOFFS, ORDERS) == {}


def test_a_copy_never_waits_so_two_copies_cannot_wait_on_each_other() -> None:
    cutoffs = {("east.orders", 0): 40, ("central.orders", 0): 3}
    assert drain_blockers(("east.orders", 0), cutoffs, ORDERS) == {}
    assert drain_blockers(("central.orders", 0), cutoffs, ORDERS) == {}
    assert drain_blockers(("orders", 0), cutoffs, ORDERS) == cutoffs


def test_identity_names_one_log_so_nothing_waits() -> None:
    logical = LogicalTopic("orders", IdentityPolicy())
    assert drain_blockers(("orders", 0), {("orders", 0): 40}, logical) == {}


def test_drained_once_every_blocker_reached_its_cutoff() -> None:
    blockers = {("east.orders", 0): 40, ("central.orders", 0): 3}
    assert not drained(blockers, {("east.orders", 0): 40})  # one position unknown
    assert not drained(blockers, {("east.orders", 0): 39, ("central.orders", 0): 3})
    assert drained(blockers, {("east.orders", 0): 40, ("central.orders", 0): 9})
    assert drained({}, {})
