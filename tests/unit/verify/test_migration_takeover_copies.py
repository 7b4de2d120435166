"""After taking over from MirrorMaker 2, its copies (no provenance header) below the takeover
start are matched to their source records by content, in offset order; copies drsvc made keep
their provenance, and records written on the target afterwards stay target-only."""

from __future__ import annotations

from decimal import Decimal

from pyspark.sql import DataFrame, SparkSession

from drsvc.verify.migration_job import _with_mirror_maker_copies, taken_over_starts

SOURCE = "topic string, partition int, src_offset long, sfp decimal(38,0)"
COPIES = "topic string, partition int, target_offset long, src_offset long, tfp decimal(38,0)"


def frame(spark: SparkSession, schema: str, rows: list[tuple[object, ...]]) -> DataFrame:
    return spark.createDataFrame(
        [(*r[:-1], Decimal(r[-1])) for r in rows],
        schema,
    )


def matched(found: DataFrame) -> list[tuple[int, int | None]]:
    return sorted(
        (r["target_offset"], r["src_offset"]) for r in found.collect() if r["topic"] == "t"
    )


def test_mirror_maker_copies_are_matched_by_content_in_offset_order(spark: SparkSession) -> None:
    # Source t-0: fingerprints 7, 8, 7, 9 at 0..3; drsvc took over at 3.
    source = frame(spark, SOURCE, [("t", 0, o, fp) for o, fp in enumerate([7, 8, 7, 9])])
    copies = frame(
        spark,
        COPIES,
        [
            ("t", 0, 0, None, 7),  # MirrorMaker's copy of 0
            ("t", 0, 1, None, 8),  # ... of 1
            ("t", 0, 2, None, 7),  # ... of 2: the second record with fingerprint 7
            ("t", 0, 3, 3, 9),  # drsvc's copy of 3, with provenance
            ("t", 0, 4, None, 5),  # written on the target after a cutover
        ],
    )
    found = _with_mirror_maker_copies(spark, source, copies, {("t", 0): 3})
    assert matched(found) == [(0, 0), (1, 1), (2, 2), (3, 3), (4, None)]


def test_without_a_takeover_records_without_provenance_stay_unmatched(
    spark: SparkSession,
) -> None:
    source = frame(spark, SOURCE, [("t", 0, 0, 7)])
    copies = frame(spark, COPIES, [("t", 0, 0, None, 7)])
    assert matched(_with_mirror_maker_copies(spark, source, copies, {})) == [(0, None)]
    # a copy of a record at or past the takeover start is drsvc's to make, never MirrorMaker's
    assert matched(_with_mirror_maker_copies(spark, source, copies, {("t", 0): 0})) == [(0, None)]


def test_takeover_starts_come_from_the_migration_state() -> None:
    assert taken_over_starts({"t": {0: 3, 1: 5}}) == {("t", 0): 3, ("t", 1): 5}
    assert taken_over_starts(None) == {}
