"""The consumer and recovery-point checks pass on clean histories and catch skipped records,
re-read records and a wrongly reported recovery point."""

from __future__ import annotations

import pytest
from pyspark.sql import DataFrame, SparkSession
from verify_frames import BASE_TS, Rec, copies, keys, observed, places, produced, workload

from drsvc.verify import checks, consumer_checks, histories

AT = 1_000_000


@pytest.fixture(scope="module")
def source() -> list[Rec]:
    return workload(10, partitions=1)


def expected(spark: SparkSession, source: list[Rec]) -> DataFrame:
    return checks.expectations(
        produced(spark, source),
        places(spark, ("east", "t", "east", "t"), ("east", "t", "west", "east.t")),
    )


def consumed(spark: SparkSession, before: list[int], after: list[int]) -> DataFrame:
    """Group g processed ``before`` on east before the failover at AT, ``after`` on west."""
    rows = [
        histories.ConsumedRecord("g", "m1", "east", "t", 0, seq, "p0", seq, AT - 100 + i)
        for i, seq in enumerate(before)
    ] + [
        histories.ConsumedRecord("g", "m2", "west", "east.t", 0, seq, "p0", seq, AT + i)
        for i, seq in enumerate(after)
    ]
    return spark.createDataFrame(rows, histories.CONSUMED.spark())


def failovers(spark: SparkSession, planned: bool = True) -> DataFrame:
    rows = [histories.FailoverEvent("f1", "g", "east", "west", AT, planned)]
    return spark.createDataFrame(rows, histories.FAILOVERS.spark())


def test_an_exact_failover_neither_skips_nor_re_reads(
    spark: SparkSession, source: list[Rec]
) -> None:
    history = consumed(spark, [0, 1, 2, 3, 4], [5, 6, 7, 8, 9])
    assert consumer_checks.reread_after_failover(history, failovers(spark)).count() == 0
    skipped = consumer_checks.skipped_after_failover(
        expected(spark, source), history, failovers(spark)
    )
    assert skipped.count() == 0


def test_re_read_catches_records_processed_again(spark: SparkSession, source: list[Rec]) -> None:
    history = consumed(spark, [0, 1, 2, 3, 4], [3, 4, 5, 6, 7, 8, 9])
    reread = consumer_checks.reread_after_failover(history, failovers(spark, planned=False))
    assert keys(reread, "failover_id", "group", "planned", "seq") == [
        ("f1", "g", False, 3),
        ("f1", "g", False, 4),
    ]
    first = reread.orderBy("seq").first()
    assert first is not None
    assert (first["before"]["cluster"], first["after"]["cluster"]) == ("east", "west")


def test_skipped_catches_records_jumped_over(spark: SparkSession, source: list[Rec]) -> None:
    history = consumed(spark, [0, 1, 2, 3, 4], [7, 8, 9])
    skipped = consumer_checks.skipped_after_failover(
        expected(spark, source), history, failovers(spark)
    )
    assert keys(skipped, "failover_id", "group", "producer_id", "seq") == [
        ("f1", "g", "p0", 5),
        ("f1", "g", "p0", 6),
    ]


def test_records_not_reached_yet_are_not_skipped(spark: SparkSession, source: list[Rec]) -> None:
    history = consumed(spark, [0, 1, 2, 3, 4], [5, 6])
    skipped = consumer_checks.skipped_after_failover(
        expected(spark, source), history, failovers(spark)
    )
    assert skipped.count() == 0


def recovery(spark: SparkSession, source: list[Rec], replicated: int, reported: int) -> DataFrame:
    """East wrote ``source`` before the switch; ``replicated`` of them reached west by then, and
    drsvc reported ``reported`` records as not replicated."""
    west = observed(spark, copies(source, "east", "t"), "west", "east.t")
    cutoffs = spark.createDataFrame(
        [histories.Cutoff("f1", "west", "east.t", 0, replicated)], histories.CUTOFFS.spark()
    )
    ranges = (
        [histories.Unreplicated("f1", "east", "t", 0, replicated, replicated + reported - 1)]
        if reported
        else []
    )
    unreplicated = spark.createDataFrame(ranges, histories.UNREPLICATED.spark())
    late = spark.createDataFrame(
        [histories.FailoverEvent("f1", "g", "east", "west", 10**15, False)],
        histories.FAILOVERS.spark(),
    )
    return consumer_checks.recovery_point(
        expected(spark, source), west, late, cutoffs, unreplicated
    )


def test_a_truly_reported_recovery_point_passes(spark: SparkSession, source: list[Rec]) -> None:
    rows = recovery(spark, source, replicated=7, reported=3)
    assert keys(rows, "cluster", "topic", "partition", "actual", "reported") == [
        ("east", "t", 0, 3, 3)
    ]
    assert consumer_checks.rpo_mismatches(rows).count() == 0
    nothing = recovery(spark, source, replicated=10, reported=0)
    assert nothing.count() == 0


def test_rpo_catches_an_under_reported_loss(spark: SparkSession, source: list[Rec]) -> None:
    rows = recovery(spark, source, replicated=6, reported=3)
    bad = consumer_checks.rpo_mismatches(rows)
    assert keys(bad, "partition", "actual", "reported") == [(0, 4, 3)]


def test_a_record_the_old_cluster_wrote_without_acknowledging_counts_in_the_recovery_point(
    spark: SparkSession, source: list[Rec]
) -> None:
    # East wrote all ten records, but its acknowledgement of the last was lost as it went down;
    # nine crossed. drsvc sees east's log, so it reports the tenth: the truth, not an over-report.
    acknowledged, written = source[:9], source
    west = observed(spark, copies(acknowledged, "east", "t"), "west", "east.t")
    everywhere = west.unionByName(observed(spark, written, "east", "t"))
    cutoffs = spark.createDataFrame(
        [histories.Cutoff("f1", "west", "east.t", 0, 9)], histories.CUTOFFS.spark()
    )

    def rows(reported: bool, at_ms: int) -> DataFrame:
        ranges = [histories.Unreplicated("f1", "east", "t", 0, 9, 9)] if reported else []
        switch = histories.FailoverEvent("f1", "g", "east", "west", at_ms, False)
        return consumer_checks.recovery_point(
            expected(spark, acknowledged),
            everywhere,
            spark.createDataFrame([switch], histories.FAILOVERS.spark()),
            cutoffs,
            spark.createDataFrame(ranges, histories.UNREPLICATED.spark()),
        )

    after_all = BASE_TS + 10**6
    assert keys(rows(True, after_all), "partition", "actual", "reported") == [(0, 1, 1)]
    assert keys(consumer_checks.rpo_mismatches(rows(False, after_all)), "actual") == [(1,)]
    # written at or after the switch: not part of the recovery point
    assert consumer_checks.rpo_mismatches(rows(False, source[9].timestamp_ms)).count() == 0


def test_records_reported_as_not_replicated_are_the_recovery_point_not_skipped(
    spark: SparkSession, source: list[Rec]
) -> None:
    # east's records 5 and 6 never crossed; drsvc reported them, and after failing back the
    # group goes on past them (they are quarantined): the recovery point, not a skip
    history = consumed(spark, [0, 1, 2, 3, 4], [7, 8, 9])
    offsets = {r.seq: r.offset for r in source}

    def reported(first: int, last: int | None) -> DataFrame:
        row = histories.Unreplicated("f1", "east", "t", 0, offsets[first], last)
        return spark.createDataFrame([row], histories.UNREPLICATED.spark())

    def skipped(unreplicated: DataFrame) -> list[tuple[object, ...]]:
        found = consumer_checks.skipped_after_failover(
            expected(spark, source), history, failovers(spark), unreplicated
        )
        return keys(found, "seq")

    assert skipped(reported(5, offsets[6])) == []
    # only what was reported is excused; an open range excuses nothing
    assert skipped(reported(5, offsets[5])) == [(6,)]
    assert skipped(reported(5, None)) == [(5,), (6,)]
