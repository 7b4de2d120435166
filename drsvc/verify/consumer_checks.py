"""Checks of what consumer groups processed across failovers, and of the recovery point.

Inputs are the history tables (:mod:`drsvc.verify.histories`): ``consumed``, ``failovers``,
``cutoffs``, ``unreplicated``, the *expected* frame of :mod:`drsvc.verify.checks` and the
*observed* frame of :mod:`drsvc.verify.records`. Each failover of a group splits the group's
processing into *before* (since its previous failover) and *after* (until its next one).

- **re-read**: a record the group processed before the failover and again after it.
- **skipped**: a record the group never processed although, in the same stream (producer, source
  cluster, topic and partition: the order a consumer must follow), it processed a record written
  before it by the failover and one written after it after the failover: the switch jumped over
  it. Records after the last one processed are not skipped, only not reached yet; records drsvc
  reported as not replicated (a closed range: the recovery point) are not skipped either, they
  are the recovery point, whose report the recovery-point check holds to the truth.
- **recovery point**: per failover and source partition, the records the old cluster held before
  the switch whose copy was not on the new cluster below the cut-off, against the ranges drsvc
  reported as not replicated. Every partition where the two counts differ is a violation. The
  records it held are the acknowledged ones and those it wrote without the producer hearing back
  (the acknowledgement lost as the cluster went down): drsvc sees the cluster's log, not the
  producer's, so those count too.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from drsvc.verify import checks

_LONG_MIN = -(2**63)
_LONG_MAX = 2**63 - 1
_STREAM = ["src_cluster", "src_topic", "src_partition", "producer_id"]


def failover_windows(failovers: DataFrame) -> DataFrame:
    """Each failover of a group with the times of the group's previous and next failover."""
    per_group = Window.partitionBy("group").orderBy("at_ms", "failover_id")
    return failovers.select(
        "failover_id",
        "group",
        "at_ms",
        "planned",
        F.coalesce(F.lag("at_ms").over(per_group), F.lit(_LONG_MIN)).alias("prev_ms"),
        F.coalesce(F.lead("at_ms").over(per_group), F.lit(_LONG_MAX)).alias("next_ms"),
    )


def _sides(consumed: DataFrame, failovers: DataFrame) -> tuple[DataFrame, DataFrame]:
    processed = consumed.where(F.col("producer_id").isNotNull() & F.col("seq").isNotNull())
    joined = processed.join(failover_windows(failovers), "group")
    t = F.col("processed_ms")
    before = joined.where((t >= F.col("prev_ms")) & (t < F.col("at_ms")))
    after = joined.where((t >= F.col("at_ms")) & (t < F.col("next_ms")))
    return before, after


def reread_after_failover(consumed: DataFrame, failovers: DataFrame) -> DataFrame:
    """Records a group processed both before and after one of its failovers; ``planned`` says
    whether that failover was planned (where no re-read is allowed at all)."""
    before, after = _sides(consumed, failovers)
    key = ["failover_id", "group", "planned", "producer_id", "seq"]

    def firsts(side: DataFrame, prefix: str) -> DataFrame:
        return side.groupBy(*key).agg(
            F.min(F.struct("processed_ms", "cluster", "topic", "partition", "offset")).alias(prefix)
        )

    return firsts(before, "before").join(firsts(after, "after"), key)


def _streams(expected: DataFrame) -> DataFrame:
    """Committed acknowledged records with their stream, once each (not once per place)."""
    return (
        expected.where(~F.col("aborted"))
        .select(
            "producer_id",
            "seq",
            F.col("cluster").alias("src_cluster"),
            F.col("topic").alias("src_topic"),
            F.col("partition").alias("src_partition"),
        )
        .distinct()
    )


def _reported_unreplicated(expected: DataFrame, unreplicated: DataFrame) -> DataFrame:
    """``producer_id``, ``seq`` of the records inside a closed range drsvc reported as never
    replicated (an open range is unknown, and fails the recovery-point check anyway)."""
    ranges, inside = checks.reported_ranges(unreplicated, closed_only=True)
    return expected.join(ranges, inside).select("producer_id", "seq").distinct()


def skipped_after_failover(
    expected: DataFrame,
    consumed: DataFrame,
    failovers: DataFrame,
    unreplicated: DataFrame | None = None,
) -> DataFrame:
    """Records a failover made a group jump over (see the module docstring)."""
    records = _streams(expected)
    if unreplicated is not None:
        records = records.join(
            _reported_unreplicated(expected, unreplicated), ["producer_id", "seq"], "left_anti"
        )
    before, after = _sides(consumed, failovers)
    key = ["failover_id", "group", *_STREAM]
    last_before = (
        before.join(records, ["producer_id", "seq"])
        .groupBy(*key)
        .agg(F.max("seq").alias("last_before"))
    )
    first_after = (
        after.join(records, ["producer_id", "seq"])
        .groupBy(*key)
        .agg(F.min("seq").alias("first_after"))
    )
    bounds = first_after.join(last_before, key, "left").fillna(-1, subset=["last_before"])
    between = records.join(bounds, _STREAM).where(
        (F.col("seq") > F.col("last_before")) & (F.col("seq") < F.col("first_after"))
    )
    ever = (
        consumed.where(F.col("producer_id").isNotNull())
        .select("group", "producer_id", "seq")
        .distinct()
    )
    return between.join(ever, ["group", "producer_id", "seq"], "left_anti").select(
        "failover_id", "group", *_STREAM, "seq", "last_before", "first_after"
    )


def recovery_point(
    expected: DataFrame,
    observed: DataFrame,
    failovers: DataFrame,
    cutoffs: DataFrame,
    unreplicated: DataFrame,
) -> DataFrame:
    """Per failover and source partition: ``actual`` records acknowledged on the old cluster
    before the switch whose copy on the new cluster was not below the cut-off, and ``reported``
    records drsvc reported as not replicated (an open range counts as unknown: ``exact`` false).
    Every row is returned; :func:`rpo_mismatches` keeps those that disagree."""
    switches = failovers.groupBy("failover_id", "from_cluster", "to_cluster").agg(
        F.min("at_ms").alias("at_ms")
    )
    crossing = (F.col("cluster") == F.col("from_cluster")) & (
        F.col("at_cluster") == F.col("to_cluster")
    )
    due_columns = ["failover_id", "cluster", "topic", "partition", "at_cluster", "at_topic",
                   "producer_id", "seq"]  # fmt: skip
    acknowledged = (
        expected.where(~F.col("aborted"))
        .join(switches, crossing)
        .where(F.col("ack_ms") < F.col("at_ms"))
        .select(*due_columns)
    )
    due = acknowledged.unionByName(
        unacknowledged_before_switch(expected, observed, switches, crossing).select(*due_columns)
    )
    present = (
        observed.where(F.col("producer_id").isNotNull())
        .join(cutoffs.withColumnRenamed("partition", "cut_partition"), ["cluster", "topic"])
        .where(
            (F.col("partition") == F.col("cut_partition")) & (F.col("offset") < F.col("end_offset"))
        )
        .select(
            "failover_id",
            F.col("cluster").alias("at_cluster"),
            F.col("topic").alias("at_topic"),
            "producer_id",
            "seq",
        )
        .distinct()
    )
    missing = due.join(
        present, ["failover_id", "at_cluster", "at_topic", "producer_id", "seq"], "left_anti"
    )
    part = ["failover_id", "cluster", "topic", "partition"]
    actual = missing.groupBy(*part).agg(F.count(F.lit(1)).alias("actual"))
    reported = unreplicated.groupBy(*part).agg(
        F.sum(
            F.when(
                F.col("last_offset").isNotNull(), F.col("last_offset") - F.col("first_offset") + 1
            ).otherwise(0)
        ).alias("reported"),
        F.min(F.col("last_offset").isNotNull()).alias("exact"),
    )
    return (
        actual.join(reported, part, "full_outer")
        .fillna(0, subset=["actual", "reported"])
        .fillna(True, subset=["exact"])
    )


def unacknowledged_before_switch(
    expected: DataFrame, observed: DataFrame, switches: DataFrame, crossing: Column
) -> DataFrame:
    """Records found on a switch's old cluster, in a produced topic, that their producer never
    heard were acknowledged there, written (their timestamp) before the switch."""
    produced_here = expected.select("cluster", "topic", "producer_id", "seq").distinct()
    routes = expected.select(*checks.PLACE_COLUMNS).distinct()
    return (
        checks.identified(observed)
        .select("cluster", "topic", "partition", "producer_id", "seq", "timestamp_ms")
        .join(produced_here, ["cluster", "topic", "producer_id", "seq"], "left_anti")
        .join(routes, ["cluster", "topic"])
        .join(switches, crossing)
        .where(F.col("timestamp_ms") < F.col("at_ms"))
    )


def rpo_mismatches(recovery: DataFrame) -> DataFrame:
    """The partitions where the recovery point drsvc reported is not the true one."""
    return recovery.where((F.col("actual") != F.col("reported")) | ~F.col("exact"))
