"""failover.stale_epochs: which records a watch judges, how watches move, and the flow's list."""

from __future__ import annotations

import pytest

from failover import provenance
from failover.epoch_header import EPOCH_HEADER, encode_epoch
from failover.errors import FormatError
from failover.stale_epochs import (
    MAX_LISTED_OFFSETS,
    EpochWatch,
    StaleEntry,
    StaleRecords,
    record_epoch,
    watch_after_switch,
    watches_from_json,
    watches_to_json,
)

COPY = (provenance.PROVENANCE_HEADER, provenance.encode(provenance.Provenance("west", "o", 0, 1)))


@pytest.mark.parametrize(
    ("headers", "epoch"),
    [
        (None, None),
        ([], None),
        ([("app", b"x")], None),
        ([(EPOCH_HEADER, encode_epoch(7))], 7),
        ([("app", b"x"), (EPOCH_HEADER, b"12")], 12),
        ([(EPOCH_HEADER, b"-1")], None),
        ([(EPOCH_HEADER, b"seven")], None),
        ([(EPOCH_HEADER, None)], None),
        # a copy is judged on the cluster its record was written on, wherever the hop sits
        ([(EPOCH_HEADER, b"3"), COPY], None),
        ([COPY, (EPOCH_HEADER, b"3")], None),
    ],
)
def test_record_epoch_reads_only_records_written_on_this_cluster(
    headers: list[tuple[str, bytes | None]] | None, epoch: int | None
) -> None:
    assert record_epoch(headers) == epoch


def test_a_switch_watches_each_topic_from_its_ends_and_a_higher_epoch_wins() -> None:
    first = watch_after_switch({}, "orders-app", 4, {("orders", 0): 10, ("orders", 1): 20})
    assert first == {"orders": EpochWatch("orders-app", 4, {0: 10, 1: 20})}
    assert first["orders"].boundary(1) == 20
    assert first["orders"].boundary(2) is None

    later = watch_after_switch(first, "orders-app", 6, {("orders", 0): 15, ("refunds", 0): 3})
    assert later["orders"] == EpochWatch("orders-app", 6, {0: 15})
    assert later["refunds"] == EpochWatch("orders-app", 6, {0: 3})

    # A write that arrives late (a resumed step) never takes a watch back to an older epoch.
    assert watch_after_switch(later, "orders-app", 5, {("orders", 0): 99}) == later


def test_watches_survive_json_and_bad_ones_are_named() -> None:
    watches = {"orders": EpochWatch("orders-app", 6, {0: 15, 3: 2})}
    assert watches_from_json(watches_to_json(watches)) == watches
    assert watches_from_json({}) == {}
    with pytest.raises(ValueError, match="epoch_watch must be an object"):
        watches_from_json([])
    with pytest.raises(ValueError, match=r"epoch_watch\.orders\.epoch"):
        watches_from_json({"orders": {"app": "a", "epoch": -1, "from": {}}})
    with pytest.raises(ValueError, match=r"epoch_watch\.orders\.app"):
        watches_from_json({"orders": {"epoch": 1, "from": {}}})
    with pytest.raises(ValueError, match=r"epoch_watch\.orders\.from: 'x'"):
        watches_from_json({"orders": {"app": "a", "epoch": 1, "from": {"x": 3}}})
    with pytest.raises(ValueError, match=r"epoch_watch\.orders\.from: '0': True"):
        watches_from_json({"orders": {"app": "a", "epoch": 1, "from": {"0": True}}})


def test_merging_findings_is_idempotent_and_keeps_apps_and_epochs_apart() -> None:
    a = StaleEntry("orders-app", "orders", 0, 6, (10, 11))
    listed = StaleRecords().merged([a])
    # The same partition read twice (a restarted worker) counts each record once.
    again = listed.merged([StaleEntry("orders-app", "orders", 0, 6, (11, 12))])
    assert again.of("orders-app", 6) == [StaleEntry("orders-app", "orders", 0, 6, (10, 11, 12))]
    assert again.merged([a]) == again
    other = again.merged([StaleEntry("orders-app", "orders", 0, 8, (40,))])
    assert [e.count for e in other.of("orders-app", 6)] == [3]
    assert [e.offsets for e in other.of("orders-app", 8)] == [(40,)]
    assert other.of("payments", 6) == []
    assert StaleRecords.decode(other.encode()) == other


def test_the_list_is_capped_and_counts_on() -> None:
    many = tuple(range(MAX_LISTED_OFFSETS + 5))
    listed = StaleRecords().merged([StaleEntry("a", "t", 0, 2, many)])
    (entry,) = listed.entries
    assert len(entry.offsets) == MAX_LISTED_OFFSETS
    assert entry.count == MAX_LISTED_OFFSETS + 5


@pytest.mark.parametrize("text", ["", "{}", '{"entries": [{"app": "a"}]}', "[1]"])
def test_an_unreadable_list_is_a_format_error(text: str) -> None:
    with pytest.raises(FormatError, match="stale-records document"):
        StaleRecords.decode(text)
