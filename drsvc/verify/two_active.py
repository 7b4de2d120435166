"""The "two active" check: an application used a cluster after another one was activated for it.

A switch moves an application from cluster C to cluster D (the ``switches`` history,
:mod:`drsvc.verify.histories`): C's document becomes none, every client's lease on C runs out,
then D's document is written (``activate_ms``, epoch ``to_epoch``). From then on, until C is
activated again, nothing of the application may land on C. Two kinds of evidence break that:

**Records** (:func:`records_after_switch`). A record of one of the application's topics, written
on C itself (not a copy: it has no provenance hop), is a violation of switch S away from C when

* it landed on C after S activated D, and
* it was sent before C was active again: its ``drsvc.epoch`` header names an epoch older than
  D's (:mod:`failover.epoch_header`; the producer had not heard of the switch), or, for a record
  without the header, its timestamp is before C's next activation.

*When a record landed.* The broker's append time is not in a record whose timestamp is the
producer's (CreateTime), so the check bounds it from both sides, using the partition's log order
(offsets grow with append time):

* from below, by the latest timestamp of the records at or before it in its partition: a
  producer stamps a record before it sends it;
* from above, by the earliest acknowledgement (``produced.ack_ms``) of the records at or after
  it: a broker acknowledges a record after appending it (and every record before it).

A record whose upper bound is known landed "after" S when that bound is after the activation:
its producer, or one that wrote after it in the same partition, heard back from C only once D
was active, so it was still writing to C then (a client's lease promises it has stopped by
then), whatever the exact append time. Only acknowledgements heard before C was active again
count as that bound: later ones may come from records rightly written after C's return, which
follow every older record in the partition. A record nobody heard back about before then (a
purged or timed-out send the broker appended anyway, at the end of a partition; the last
records before a broker was killed, whose acknowledgements died with it) has only the lower
bound, and counts when even that is after the activation. The times are wall clocks of
the producers and of the executor: the check assumes they agree (one host, or synchronised
clocks well within the lease), as the other history checks do.

**Commits** (:func:`commits_after_switch`). A commit of one of the application's groups on C,
acknowledged (``commits.committed_ms``) after S set the group's offsets on D and before C's next
activation: the positions set on D do not include it, so D re-reads what it committed. For an
unplanned failover, whose ``set-offsets`` runs while the old lease is still running out (clients
may commit on C until then, which re-reads but never skips, see :mod:`failover.failover_plan`),
the point is the activation instead.

Each function returns one row per violation (its earliest switch when several apply); the
verdict counts both as ``two_active``. The application's topics and groups come in as frames
(``app``, ``topic``) and (``app``, ``group``).
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from failover.epoch_header import EPOCH_HEADER

_LONG_MAX = 2**63 - 1

RECORD_COLUMNS = (
    "app",
    "failover_id",
    "cluster",
    "topic",
    "partition",
    "offset",
    "producer_id",
    "seq",
    "epoch",
    "to_cluster",
    "to_epoch",
    "activate_ms",
    "landed_after_ms",
    "evidence",
)

COMMIT_COLUMNS = (
    "app",
    "failover_id",
    "group",
    "member",
    "cluster",
    "topic",
    "partition",
    "offset",
    "committed_ms",
    "to_cluster",
    "since_ms",
)


def epoch_of(headers: Column) -> Column:
    """The epoch in a record's last ``drsvc.epoch`` header (null when absent or not an epoch,
    as :func:`failover.epoch_header.decode_epoch` reads it)."""
    found = F.filter(F.coalesce(headers, F.array()), lambda h: h["key"] == F.lit(EPOCH_HEADER))
    text = F.element_at(found, -1)["value"].cast("string")
    return F.when(
        (F.size(found) > 0) & text.rlike("^[0-9]{1,19}$"), text.try_cast("long")
    ).otherwise(F.lit(None).cast("long"))


def away_switches(switches: DataFrame) -> DataFrame:
    """Every switch that activated another cluster, with ``reactivated_ms``: when its old
    cluster was next activated for the same application (the largest long: never)."""
    done = switches.where(F.col("activate_ms").isNotNull())
    back = done.select(
        F.col("app").alias("b_app"),
        F.col("to_cluster").alias("b_cluster"),
        F.col("activate_ms").alias("b_ms"),
    )
    again = (
        done.join(
            back,
            (F.col("b_app") == F.col("app"))
            & (F.col("b_cluster") == F.col("from_cluster"))
            & (F.col("b_ms") > F.col("activate_ms")),
            "left",
        )
        .groupBy("failover_id")
        .agg(F.min("b_ms").alias("reactivated_ms"))
    )
    return done.join(again, "failover_id").fillna(_LONG_MAX, subset=["reactivated_ms"])


def landing_bounds(observed: DataFrame, produced: DataFrame) -> DataFrame:
    """``observed`` with ``ack_ms`` (null: nobody heard back) and the bounds of each record's
    append time from its partition's log order: ``landed_from_ms`` (the latest timestamp at or
    before it) and ``landed_by_ms`` (the earliest acknowledgement at or after it, null if none)."""
    acks = produced.select("cluster", "topic", "partition", "offset", "ack_ms", "aborted")
    log = Window.partitionBy("cluster", "topic", "partition").orderBy("offset")
    return (
        observed.join(acks, ["cluster", "topic", "partition", "offset"], "left")
        .withColumn(
            "landed_from_ms",
            F.max("timestamp_ms").over(log.rowsBetween(Window.unboundedPreceding, 0)),
        )
        .withColumn(
            "landed_by_ms", F.min("ack_ms").over(log.rowsBetween(0, Window.unboundedFollowing))
        )
    )


def _earliest(violations: DataFrame, key: list[str], order: str) -> DataFrame:
    first = Window.partitionBy(*key).orderBy(order, "failover_id")
    return violations.withColumn("_n", F.row_number().over(first)).where(F.col("_n") == 1)


def records_after_switch(
    observed: DataFrame, produced: DataFrame, switches: DataFrame, app_topics: DataFrame
) -> DataFrame:
    """Records of an application that landed on a cluster after another cluster was activated
    for it (see the module docstring), with the evidence: ``acknowledged after`` or ``appended
    after`` the activation at ``activate_ms``, and ``landed_after_ms`` the bound that shows it."""
    # bounds over the whole log (copies share it under the identity policy), judged for the
    # records written on the cluster itself
    bounded = landing_bounds(observed, produced).where(
        (F.size(F.coalesce(F.col("hops"), F.array())) == 0)
        & (F.col("aborted").isNull() | ~F.col("aborted"))
    )
    of_apps = bounded.join(app_topics, "topic").withColumn("epoch", epoch_of(F.col("headers")))
    away = away_switches(switches).withColumnRenamed("app", "s_app")
    joined = of_apps.join(
        away, (F.col("s_app") == F.col("app")) & (F.col("from_cluster") == F.col("cluster"))
    )
    # An acknowledgement heard once the old cluster was active again is no evidence: a record
    # written then, rightly, follows every older one in the partition. A broker killed before it
    # acknowledged the last records of the old regime leaves them only that bound, and they may
    # well have been appended before the switch; their append time is then bounded from below.
    by_ack = F.col("landed_by_ms").isNotNull() & (F.col("landed_by_ms") < F.col("reactivated_ms"))
    landed_after_ms = F.when(by_ack, F.col("landed_by_ms")).otherwise(F.col("landed_from_ms"))
    stale = (
        F.col("epoch").isNotNull()
        & F.col("to_epoch").isNotNull()
        & (F.col("epoch") < F.col("to_epoch"))
    )
    sent_before_back = stale | (F.col("timestamp_ms") < F.col("reactivated_ms"))
    violations = (
        joined.withColumn("landed_after_ms", landed_after_ms)
        .withColumn(
            "evidence",
            F.when(by_ack, F.lit("acknowledged after")).otherwise(F.lit("appended after")),
        )
        .where((F.col("landed_after_ms") > F.col("activate_ms")) & sent_before_back)
    )
    record = ["app", "cluster", "topic", "partition", "offset"]
    return _earliest(violations, record, "activate_ms").select(*RECORD_COLUMNS)


def commits_after_switch(
    commits: DataFrame, switches: DataFrame, app_groups: DataFrame
) -> DataFrame:
    """Commits of an application's groups on its old cluster after a switch set their offsets
    on the new one (after the activation, for an unplanned switch), before the old cluster was
    activated again."""
    away = away_switches(switches).withColumnRenamed("app", "s_app")
    since = F.when(
        F.col("planned") & F.col("set_offsets_ms").isNotNull(), F.col("set_offsets_ms")
    ).otherwise(F.col("activate_ms"))
    violations = (
        commits.join(app_groups, "group")
        .join(away, (F.col("s_app") == F.col("app")) & (F.col("from_cluster") == F.col("cluster")))
        .withColumn("since_ms", since)
        .where(
            (F.col("committed_ms") > F.col("since_ms"))
            & (F.col("committed_ms") < F.col("reactivated_ms"))
        )
    )
    commit = ["app", "group", "member", "cluster", "topic", "partition", "offset", "committed_ms"]
    return _earliest(violations, commit, "since_ms").select(*COMMIT_COLUMNS)
