"""Each record check passes on a faithful copy and catches its own kind of damage."""

from __future__ import annotations

import pytest
from pyspark.sql import DataFrame, SparkSession
from verify_frames import Rec, copies, keys, observed, places, produced, renumber, workload

from drsvc.verify import checks, histories
from failover import provenance


@pytest.fixture(scope="module")
def source() -> list[Rec]:
    return workload(12, partitions=2, producers=("p0", "p1"))


def expected_on_west(spark: SparkSession, source: list[Rec]) -> DataFrame:
    return checks.expectations(
        produced(spark, source), places(spark, ("east", "t", "west", "east.t"))
    )


def on_west(spark: SparkSession, recs: list[Rec]) -> DataFrame:
    return observed(spark, recs, "west", "east.t")


def test_a_faithful_copy_passes_every_check(spark: SparkSession, source: list[Rec]) -> None:
    expected = expected_on_west(spark, source)
    west = on_west(spark, copies(source, "east", "t"))
    assert west.count() == len(source)
    assert checks.lost(expected, west).count() == 0
    assert checks.duplicates(west).count() == 0
    assert checks.reordered(west).count() == 0
    assert checks.altered(expected, west).collect() == []
    assert checks.aborted_visible(expected, west).count() == 0
    assert checks.loops(west, {"east", "west"}).count() == 0


def test_the_source_itself_is_a_place(spark: SparkSession, source: list[Rec]) -> None:
    expected = checks.expectations(
        produced(spark, source), places(spark, ("east", "t", "east", "t"))
    )
    east = observed(spark, source, "east", "t")
    assert checks.lost(expected, east).count() == 0
    assert checks.altered(expected, east).count() == 0
    missing = [r for r in source if (r.producer_id, r.seq) != ("p1", 4)]
    lost = checks.lost(expected, observed(spark, missing, "east", "t"))
    assert keys(lost, "at_cluster", "producer_id", "seq") == [("east", "p1", 4)]


def test_lost_catches_a_missing_copy(spark: SparkSession, source: list[Rec]) -> None:
    damaged = renumber(
        r for r in copies(source, "east", "t") if (r.producer_id, r.seq) != ("p0", 7)
    )
    lost = checks.lost(expected_on_west(spark, source), on_west(spark, damaged))
    assert keys(lost, "at_cluster", "at_topic", "producer_id", "seq", "partition") == [
        ("west", "east.t", "p0", 7, 1)
    ]


def test_lost_excuses_copies_in_the_reported_recovery_point(
    spark: SparkSession, source: list[Rec]
) -> None:
    missing = next(r for r in source if (r.producer_id, r.seq) == ("p0", 7))
    damaged = renumber(
        r for r in copies(source, "east", "t") if (r.producer_id, r.seq) != ("p0", 7)
    )
    reported = spark.createDataFrame(
        [("f1", "east", "t", missing.partition, missing.offset, missing.offset)],
        histories.UNREPLICATED.spark(),
    )
    expected = checks.excuse_recovery_point(expected_on_west(spark, source), reported)
    assert checks.lost(expected, on_west(spark, damaged)).count() == 0
    # a range that does not hold the record excuses nothing
    elsewhere = spark.createDataFrame(
        [("f1", "east", "t", missing.partition, missing.offset + 1, None)],
        histories.UNREPLICATED.spark(),
    )
    expected = checks.excuse_recovery_point(expected_on_west(spark, source), elsewhere)
    assert checks.lost(expected, on_west(spark, damaged)).count() == 1


def test_lost_catches_a_copy_in_the_wrong_topic(spark: SparkSession, source: list[Rec]) -> None:
    west = observed(spark, copies(source, "east", "t"), "west", "east.other")
    assert checks.lost(expected_on_west(spark, source), west).count() == len(source)


def test_duplicates_counts_a_re_copy(spark: SparkSession, source: list[Rec]) -> None:
    good = copies(source, "east", "t")
    # an at-least-once restart: the last three records of partition 0 are copied again
    again = [r for r in good if r.partition == 0][-3:]
    damaged = renumber([*good, *again])
    west = on_west(spark, damaged)
    dups = checks.duplicates(west)
    assert keys(dups, "producer_id", "seq", "copies") == sorted(
        (r.producer_id, r.seq, 2) for r in again
    )
    assert checks.extra_copies(dups) == 3
    # going back and forth again is duplication, not reordering, and loses nothing
    assert checks.reordered(west).count() == 0
    assert checks.lost(expected_on_west(spark, source), west).count() == 0


def test_reordered_catches_two_swapped_records(spark: SparkSession, source: list[Rec]) -> None:
    good = copies(source, "east", "t")
    p0_part1 = [i for i, r in enumerate(good) if r.producer_id == "p0" and r.partition == 1]
    i, j = p0_part1[1], p0_part1[2]
    swapped = list(good)
    swapped[i], swapped[j] = swapped[j], swapped[i]
    west = on_west(spark, renumber(swapped))
    bad = checks.reordered(west)
    assert keys(bad, "producer_id", "partition", "seq", "after_seq") == [
        ("p0", 1, good[i].seq, good[j].seq)
    ]
    # records of two producers interleaving differently is no reordering
    p1_first = sorted(good, key=lambda r: (r.partition, r.producer_id != "p1"))
    assert checks.reordered(on_west(spark, renumber(p1_first))).count() == 0


def test_altered_catches_changed_bytes(spark: SparkSession, source: list[Rec]) -> None:
    good = copies(source, "east", "t")
    # one damaged copy per kind of damage, each on another record of p0
    changes: dict[int, tuple[dict[str, object], str]] = {
        1: ({"key": b"other"}, "key"),
        2: ({"value": b"p0:2:tampered"}, "value"),
        3: ({"headers": (("h", b"3"), ("null", b""), ("empty", None))}, "headers"),  # null/empty
        4: ({"headers": (("h", b"44"),)}, "headers"),
        5: ({"headers": ()}, "headers"),
        6: ({"timestamp_ms": 1}, "timestamp"),
    }
    damaged = []
    for r in good:
        if r.producer_id != "p0" or r.seq not in changes:
            damaged.append(r)
            continue
        change, _field = changes[r.seq]
        if "headers" in change:  # keep the provenance header: only the record's own differ
            change = {"headers": (*change["headers"], r.headers[-1])}  # type: ignore[misc]
        damaged.append(r.at(r.offset, **change))
    bad = checks.altered(expected_on_west(spark, source), on_west(spark, damaged)).collect()
    assert sorted((r["producer_id"], r["seq"]) for r in bad) == [("p0", s) for s in changes]
    for row in bad:
        assert changes[row["seq"]][1] in row["fields"], row
    stamped = next(r for r in bad if r["seq"] == 6)
    assert stamped["found_timestamp_ms"] == 1
    assert stamped["acknowledged_timestamp_ms"] != 1


def test_altered_catches_a_copy_in_another_partition(
    spark: SparkSession, source: list[Rec]
) -> None:
    good = copies(source, "east", "t")
    damaged = [r.at(r.offset, partition=1 - r.partition) if r.seq == 2 else r for r in good]
    bad = checks.altered(expected_on_west(spark, source), on_west(spark, renumber(damaged)))
    assert {(r["seq"], tuple(r["fields"])) for r in bad.collect()} == {(2, ("partition",))}


def test_aborted_records_must_stay_invisible(spark: SparkSession, source: list[Rec]) -> None:
    with_aborts = [r.at(r.offset, aborted=r.seq in (3, 4)) for r in source]
    expected = expected_on_west(spark, with_aborts)
    committed_only = renumber(r for r in copies(source, "east", "t") if r.seq not in (3, 4))
    # an aborted record missing is right, not lost
    assert checks.lost(expected, on_west(spark, committed_only)).count() == 0
    assert checks.aborted_visible(expected, on_west(spark, committed_only)).count() == 0
    # a read_committed reader that sees them is wrong
    seen = checks.aborted_visible(expected, on_west(spark, copies(source, "east", "t")))
    assert keys(seen, "producer_id", "seq") == [("p0", 3), ("p0", 4), ("p1", 3), ("p1", 4)]


def test_loops_catches_records_back_at_their_origin(spark: SparkSession, source: list[Rec]) -> None:
    aliases = {"east", "west"}
    there = copies(source[:3], "east", "t")
    back = copies(there, "west", "east.t")  # copied on from west back to east
    back_on_east = observed(spark, back, "east", "west.east.t")
    bad = checks.loops(back_on_east, aliases)
    assert bad.count() == 3
    assert {r["reason"] for r in bad.collect()} == {"back at a cluster it came from"}
    assert bad.first()["hops"] == ["east", "west"]  # type: ignore[index]
    assert bad.first()["prefixes"] == ["west", "east"]  # type: ignore[index]


def test_loops_catches_a_loop_shown_by_provenance_alone(
    spark: SparkSession, source: list[Rec]
) -> None:
    # identity policy: names say nothing, the provenance header still does
    back = copies(copies(source[:2], "east", "t"), "west", "t")
    bad = checks.loops(observed(spark, back, "east", "t"), {"east", "west"})
    assert bad.count() == 2


def test_loops_catches_a_double_prefix(spark: SparkSession, source: list[Rec]) -> None:
    aliases = {"east", "west", "south"}
    twice = observed(spark, source[:2], "west", "south.east.t")
    assert {r["reason"] for r in checks.loops(twice, aliases).collect()} == {"more than 1 hop(s)"}
    assert checks.loops(twice, aliases, max_hops=2).count() == 0
    same = observed(spark, source[:2], "south", "east.east.t")
    assert {r["reason"] for r in checks.loops(same, aliases, max_hops=3).collect()} == {
        "through one cluster twice"
    }
    # a topic merely named like an alias is no prefix
    assert checks.loops(observed(spark, source[:2], "west", "east"), aliases).count() == 0


def test_observed_reads_identity_headers_and_hops(spark: SparkSession) -> None:
    hop = provenance.encode(provenance.Provenance("east", "t", 0, 41))
    rec = Rec("p9", 77, 0, 3, b"k", b"p9:77:pad", (("a", None), ("drsvc.provenance", hop)), 5)
    foreign = Rec("x", 0, 0, 4, None, b"not a workload record", (), 6)
    rows = observed(spark, [rec, foreign], "west", "east.t").orderBy("offset").collect()
    assert rows[0]["producer_id"] == "p9" and rows[0]["seq"] == 77
    assert rows[0]["headers"] == [("a", None)]
    assert rows[0]["hops"] == ["east"]
    assert rows[0]["timestamp_ms"] == 5
    assert rows[1]["producer_id"] is None and rows[1]["seq"] is None
    assert rows[1]["headers"] == [] and rows[1]["hops"] == []
