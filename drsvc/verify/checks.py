"""Checks of the records on the clusters against what producers had acknowledged.

Each check is a pure function from DataFrames to a DataFrame of violations, one row per violation
(an empty frame: the check passed). The inputs:

*expected*
    The ``produced`` history joined to the places where each record must be found
    (:func:`expectations`): the ``produced`` columns plus ``at_cluster`` and ``at_topic``.
*observed*
    Records read from those places, in the shape of :func:`drsvc.verify.records.observed`.

Records are matched by the identity the workload puts in their value (producer id, sequence) at
their place (cluster and topic), never by offset: copies land at other offsets than their
originals, and a re-copy lands twice.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

PLACE_COLUMNS = ("cluster", "topic", "at_cluster", "at_topic")


def expectations(produced: DataFrame, places: DataFrame) -> DataFrame:
    """Every acknowledged record once per place it must be found at. ``places`` has the columns
    ``cluster``, ``topic`` (where a record was produced) and ``at_cluster``, ``at_topic`` (where
    it must be found: the topic itself, and its copies on each flow's target)."""
    return produced.join(places.select(*PLACE_COLUMNS), ["cluster", "topic"])


def identified(observed: DataFrame) -> DataFrame:
    """The observed records that carry a workload identity (producer id and sequence)."""
    return observed.where(F.col("producer_id").isNotNull() & F.col("seq").isNotNull())


def _found(observed: DataFrame) -> DataFrame:
    return identified(observed).select(
        F.col("cluster").alias("at_cluster"),
        F.col("topic").alias("at_topic"),
        "producer_id",
        "seq",
    )


_MATCH = ["at_cluster", "at_topic", "producer_id", "seq"]
_EXPECTED_OUT = (
    "at_cluster",
    "at_topic",
    "producer_id",
    "seq",
    "cluster",
    "topic",
    "partition",
    "offset",
    "ack_ms",
)


def lost(expected: DataFrame, observed: DataFrame) -> DataFrame:
    """Acknowledged records (not aborted) missing at a place they must be found at."""
    committed = expected.where(~F.col("aborted"))
    return committed.join(_found(observed).distinct(), _MATCH, "left_anti").select(*_EXPECTED_OUT)


def reported_ranges(unreplicated: DataFrame, closed_only: bool = False) -> tuple[DataFrame, Column]:
    """The ranges drsvc reported as never replicated, and the condition that a row of
    ``expected`` (its ``cluster``, ``topic``, ``partition``, ``offset``) lies inside one of them
    (``closed_only``: only ranges with a last offset, an open one ends nowhere)."""
    if closed_only:
        unreplicated = unreplicated.where(F.col("last_offset").isNotNull())
    ranges = unreplicated.select(
        F.col("cluster").alias("u_cluster"),
        F.col("topic").alias("u_topic"),
        F.col("partition").alias("u_partition"),
        "first_offset",
        "last_offset",
    ).distinct()
    inside = (
        (F.col("cluster") == F.col("u_cluster"))
        & (F.col("topic") == F.col("u_topic"))
        & (F.col("partition") == F.col("u_partition"))
        & (F.col("offset") >= F.col("first_offset"))
        & (F.col("last_offset").isNull() | (F.col("offset") <= F.col("last_offset")))
    )
    return ranges, inside


def excuse_recovery_point(expected: DataFrame, unreplicated: DataFrame) -> DataFrame:
    """``expected`` without the copies of records drsvc reported as never replicated (the
    recovery point of an unplanned failover): such a record must still be found where it was
    written, but not at its copies' places. Whether the report was true is the recovery-point
    check's business, not this one's."""
    ranges, inside = reported_ranges(unreplicated)
    return expected.join(ranges, inside & (F.col("at_cluster") != F.col("cluster")), "left_anti")


def aborted_visible(expected: DataFrame, observed: DataFrame) -> DataFrame:
    """Records of aborted transactions that a read_committed reader saw at a place."""
    aborted = expected.where(F.col("aborted"))
    return aborted.join(_found(observed).distinct(), _MATCH, "left_semi").select(*_EXPECTED_OUT)


def duplicates(observed: DataFrame) -> DataFrame:
    """Records found more than once at one place: one row per record, with how many copies and
    where they are. The extra copies are ``copies - 1`` each (:func:`extra_copies`)."""
    return (
        identified(observed)
        .groupBy("cluster", "topic", "producer_id", "seq")
        .agg(
            F.count(F.lit(1)).alias("copies"),
            F.sort_array(F.collect_list(F.struct("partition", "offset"))).alias("positions"),
        )
        .where(F.col("copies") > 1)
    )


def extra_copies(duplicate_rows: DataFrame) -> int:
    """How many records more than one each the duplicates stand for."""
    total = duplicate_rows.agg(F.sum(F.col("copies") - 1).alias("n")).first()
    return int(total["n"] or 0) if total is not None else 0


def reordered(observed: DataFrame) -> DataFrame:
    """Records of one producer that landed in a partition after a record it wrote later.

    A producer's sequence grows with every record it writes, so in every partition its records
    must appear in sequence order. Only each record's first copy counts: an at-least-once re-copy
    after a restart goes back and forth again, which is duplication (:func:`duplicates`), not
    reordering. ``after_seq`` is the highest sequence already seen before the record."""
    firsts = (
        identified(observed)
        .groupBy("cluster", "topic", "partition", "producer_id", "seq")
        .agg(F.min("offset").alias("offset"))
    )
    earlier = (
        Window.partitionBy("cluster", "topic", "partition", "producer_id")
        .orderBy("offset")
        .rowsBetween(Window.unboundedPreceding, -1)
    )
    return (
        firsts.withColumn("after_seq", F.max("seq").over(earlier))
        .where(F.col("seq") < F.col("after_seq"))
        .select("cluster", "topic", "partition", "offset", "producer_id", "seq", "after_seq")
    )


def altered(expected: DataFrame, observed: DataFrame) -> DataFrame:
    """Records found at a place with other bytes than were acknowledged: key, value (SHA-256 and
    size), headers (in order, provenance headers aside), timestamp, or another partition. One row
    per copy, ``fields`` naming what differs; both timestamps are kept so that a timestamp
    difference can be told apart from clock or unit trouble."""
    e = expected.where(~F.col("aborted")).alias("e")
    o = identified(observed).alias("o")
    joined = e.join(
        o,
        (F.col("e.at_cluster") == F.col("o.cluster"))
        & (F.col("e.at_topic") == F.col("o.topic"))
        & (F.col("e.producer_id") == F.col("o.producer_id"))
        & (F.col("e.seq") == F.col("o.seq")),
    )

    def differs(column: str, name: str) -> Column:
        return F.when(~F.col(f"e.{column}").eqNullSafe(F.col(f"o.{column}")), F.lit(name))

    fields = F.array_compact(
        F.array(
            differs("key", "key"),
            differs("value_sha256", "value"),
            differs("value_size", "value_size"),
            differs("headers", "headers"),
            differs("timestamp_ms", "timestamp"),
            differs("partition", "partition"),
        )
    )
    return joined.select(
        F.col("o.cluster").alias("cluster"),
        F.col("o.topic").alias("topic"),
        F.col("o.partition").alias("partition"),
        F.col("o.offset").alias("offset"),
        F.col("e.producer_id").alias("producer_id"),
        F.col("e.seq").alias("seq"),
        fields.alias("fields"),
        F.col("e.timestamp_ms").alias("acknowledged_timestamp_ms"),
        F.col("o.timestamp_ms").alias("found_timestamp_ms"),
    ).where(F.size("fields") > 0)


def _prefix_chain(topic: Column, aliases: Iterable[str], separator: str) -> Column:
    """The cluster aliases a topic name starts with (``west.east.orders`` -> [west, east])."""
    known = F.array(*[F.lit(a) for a in sorted(set(aliases))] or [F.lit(None).cast("string")])
    parts = F.split(topic, re.escape(separator))
    candidates = F.slice(parts, 1, F.greatest(F.size(parts) - 1, F.lit(1)))
    candidates = F.when(F.size(parts) > 1, candidates).otherwise(F.array().cast("array<string>"))
    start = F.struct(F.array().cast("array<string>").alias("chain"), F.lit(True).alias("open"))

    def step(acc: Column, part: Column) -> Column:
        extend = acc["open"] & F.array_contains(known, part)
        return F.struct(
            F.when(extend, F.concat(acc["chain"], F.array(part)))
            .otherwise(acc["chain"])
            .alias("chain"),
            extend.alias("open"),
        )

    return F.aggregate(candidates, start, step)["chain"]


def loops(
    observed: DataFrame, aliases: Iterable[str], separator: str = ".", max_hops: int = 1
) -> DataFrame:
    """Records that went round: copied back to a cluster they came from (its alias in their
    provenance or their topic's prefixes), through one cluster twice, or over more hops than
    any flow makes (a double prefix such as ``west.east.orders``). One row per record, with
    the ``reason``."""
    chain = _prefix_chain(F.col("topic"), aliases, separator)
    hops = F.col("hops")
    back = F.array_contains(hops, F.col("cluster")) | F.array_contains(chain, F.col("cluster"))
    twice = (F.size(F.array_distinct(hops)) < F.size(hops)) | (
        F.size(F.array_distinct(chain)) < F.size(chain)
    )
    too_far = (F.size(hops) > max_hops) | (F.size(chain) > max_hops)
    reason = (
        F.when(back, F.lit("back at a cluster it came from"))
        .when(twice, F.lit("through one cluster twice"))
        .when(too_far, F.lit(f"more than {max_hops} hop(s)"))
    )
    return (
        observed.withColumn("prefixes", chain)
        .withColumn("reason", reason)
        .where(F.col("reason").isNotNull())
        .select(
            "cluster",
            "topic",
            "partition",
            "offset",
            "producer_id",
            "seq",
            "hops",
            "prefixes",
            "reason",
        )
    )
