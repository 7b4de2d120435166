"""Exactly-once slots: a stable partition-to-slot mapping and the progress format."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from failover.errors import PolicyError
from failover.slots import SlotNames, SlotProgress, slot_of

TOPIC_ID = bytes.fromhex("00112233445566778899aabbccddeeff")


def test_mapping_is_fixed_forever() -> None:
    # Golden values: a change here would move partitions between transactional ids of running
    # flows, so two producers could write one partition. Never update them to make this pass.
    assert [slot_of("orders", p, 8) for p in range(6)] == [6, 7, 0, 1, 2, 3]
    assert slot_of("east.orders", 3, 16) == 1


@given(st.text(min_size=1, max_size=40), st.integers(0, 10_000), st.integers(1, 1024))
def test_every_partition_has_a_slot_in_range(topic: str, partition: int, slots: int) -> None:
    assert 0 <= slot_of(topic, partition, slots) < slots


def test_partitions_of_one_topic_spread_evenly() -> None:
    counts = Counter(slot_of("payments", p, 8) for p in range(64))
    assert set(counts.values()) == {8}


@pytest.mark.parametrize("slots", [0, -1])
def test_no_slots_is_refused(slots: int) -> None:
    with pytest.raises(PolicyError, match="slots must be at least 1"):
        slot_of("orders", 0, slots)


def test_names_on_the_target() -> None:
    names = SlotNames("east", "west")
    assert names.slots_topic == "drsvc.slots.east-west.internal"
    assert names.membership_group == "drsvc-slots.east-west"
    assert names.progress_group == "drsvc-replicator.east-west"
    assert names.transactional_id(3) == "drsvc.east-west.3"


def test_progress_format_version_1_is_stable() -> None:
    encoded = SlotProgress(12345, TOPIC_ID).encode()
    assert encoded == '{"v":1,"next":12345,"source_topic_id":"00112233445566778899aabbccddeeff"}'
    assert SlotProgress.decode(encoded) == SlotProgress(12345, TOPIC_ID)


@given(st.integers(0, 2**62), st.binary(min_size=16, max_size=16))
def test_progress_round_trips(offset: int, topic_id: bytes) -> None:
    assert SlotProgress.decode(SlotProgress(offset, topic_id).encode()) == SlotProgress(
        offset, topic_id
    )


@pytest.mark.parametrize(
    ("metadata", "message"),
    [
        ("", "not JSON"),
        ("[1]", "not a JSON object"),
        ('{"v":2,"next":1,"source_topic_id":"00"}', "format version 2"),
        ('{"v":1,"next":-1,"source_topic_id":"00"}', "incomplete"),
        ('{"v":1,"source_topic_id":"00"}', "incomplete"),
        ('{"v":1,"next":1,"source_topic_id":"zz"}', "malformed topic id"),
    ],
)
def test_unreadable_progress_names_the_problem(metadata: str, message: str) -> None:
    with pytest.raises(PolicyError, match=message):
        SlotProgress.decode(metadata)
