"""The active-cluster document: its format (new and legacy values) and the switch rules."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from failover.active import (
    ActiveDocument,
    decode_active,
    lease_deadline_s,
    lease_wait_s,
    switch,
    usable_cluster,
)
from failover.errors import ActiveFormatError, SwitchError


def test_an_absent_key_means_the_preferred_cluster_at_epoch_zero_under_the_given_lease() -> None:
    assert decode_active(None, "east") == ActiveDocument("east", 0, versioned=False)
    absent = decode_active(None, "east", lease_ms=2_000)
    assert (absent.cluster, absent.epoch, absent.lease_ms) == ("east", 0, 2_000)


@pytest.mark.parametrize(
    ("raw", "cluster"),
    [("west", "west"), (' "west" ', "west"), ("none", None), ("", None), ("null", None)],
)
def test_plain_values_written_by_hand_still_read(raw: str, cluster: str | None) -> None:
    assert decode_active(raw, "east") == ActiveDocument(cluster, 0, versioned=False)


def test_a_document_round_trips() -> None:
    doc = ActiveDocument("west", 7, "f-1", 1_795_556_180_117)
    assert decode_active(doc.encode(), "east") == doc
    assert decode_active(ActiveDocument(None, 8, "f-1", 5).encode(), "east").switching


@pytest.mark.parametrize(
    ("raw", "why"),
    [
        ("{", "not valid JSON"),
        ("[1]", "expected a JSON object"),
        ('{"epoch": 1}', "no 'cluster' field"),
        ('{"cluster": 3}', "'cluster' must be an alias or null"),
        ('{"cluster": "west", "epoch": -1}', "'epoch' must be a non-negative integer"),
        ('{"cluster": "west", "epoch": true}', "'epoch' must be a non-negative integer"),
        ('{"cluster": "west", "failover_id": 5}', "'failover_id' must be a string"),
        ('{"v": 2, "cluster": "west"}', "format version 2"),
    ],
)
def test_unreadable_documents_say_what_is_wrong(raw: str, why: str) -> None:
    with pytest.raises(ActiveFormatError, match=why):
        decode_active(raw, "east")


def test_a_switch_goes_through_none_and_the_epoch_grows() -> None:
    start = decode_active(None, "east")
    none = switch(start, None, "f-1", 100)
    assert none == ActiveDocument(None, 1, "f-1", 100)
    west = switch(none, "west", "f-1", 200)
    assert west == ActiveDocument("west", 2, "f-1", 200)


@pytest.mark.parametrize(
    ("current", "to", "why"),
    [
        (ActiveDocument("east", 3), "west", "straight to 'west'"),
        (ActiveDocument("east", 3), "east", "straight to 'east'"),
        (ActiveDocument(None, 3), None, "already switching"),
        (ActiveDocument(None, 3), " ", "an alias or none"),
    ],
)
def test_forbidden_switches_are_refused(current: ActiveDocument, to: str | None, why: str) -> None:
    with pytest.raises(SwitchError, match=why):
        switch(current, to, "f-1", 0)


def test_every_write_names_its_failover() -> None:
    with pytest.raises(SwitchError, match="name its failover"):
        switch(ActiveDocument("east"), None, "", 0)


@given(st.lists(st.sampled_from(["east", "west", "north"]), min_size=1, max_size=20))
def test_any_sequence_of_allowed_switches_only_grows_the_epoch(targets: list[str]) -> None:
    doc = ActiveDocument("east")
    epochs = [doc.epoch]
    for number, target in enumerate(targets):
        doc = switch(doc, None, f"f-{number}", number)
        epochs.append(doc.epoch)
        doc = switch(doc, target, f"f-{number}", number)
        epochs.append(doc.epoch)
        assert decode_active(doc.encode(), "east") == doc
    assert epochs == sorted(set(epochs))


def test_the_wait_after_none_outlasts_the_lease() -> None:
    assert lease_wait_s(15.0) > 15.0
    assert lease_wait_s(15.0) < 20.0
    with pytest.raises(SwitchError, match="positive"):
        lease_wait_s(0)


def test_the_lease_travels_with_the_document() -> None:
    doc = switch(ActiveDocument("east"), None, "f-1", 5, lease_ms=2_000)
    assert doc.lease_ms == 2_000
    assert decode_active(doc.encode(), "east") == doc
    assert switch(doc, "west", "f-1", 9).lease_ms == 2_000
    with pytest.raises(ActiveFormatError, match="lease_ms"):
        decode_active('{"v":1,"cluster":"east","lease_ms":0}', "east")


def test_a_cluster_is_usable_only_while_the_lease_from_the_last_answer_holds() -> None:
    doc = ActiveDocument("west", 3, "f-1", 0, lease_ms=2000)
    assert lease_deadline_s(doc, 100.0) == 102.0
    assert usable_cluster(doc, 100.0, 100.0) == "west"
    assert usable_cluster(doc, 100.0, 101.999) == "west"
    assert usable_cluster(doc, 100.0, 102.0) is None  # lapsed: stop at the deadline itself
    assert usable_cluster(ActiveDocument(None, 4, "f-1", 0), 100.0, 100.0) is None
    assert usable_cluster(None, 100.0, 100.0) is None
    assert usable_cluster(doc, None, 100.0) is None  # never heard: never usable
