"""The verification job: histories and topics in, a :class:`~drsvc.verify.verdict.Verdict` out.

:func:`plan_places` decides where each acknowledged record must be found: on the topic it was
written to, and on the copy each flow of the topology makes of that topic. :func:`run` reads
every such topic once with Spark's Kafka source, reads the history tables, runs every check on
the one Spark session it is given, and counts what each found. :func:`application_scopes` says
which topics and groups are each application's, for the "two active" check
(:mod:`drsvc.verify.two_active`).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from drsvc.errors import ConfigError
from drsvc.topology.models import Topology
from drsvc.verify import checks, consumer_checks, histories, records, two_active
from drsvc.verify.kafka_source import read_topics
from drsvc.verify.verdict import ALWAYS_FATAL, Verdict, jsonable


@dataclass(frozen=True, order=True)
class Place:
    """Records written to ``cluster``/``topic`` must be found on ``at_cluster``/``at_topic``."""

    cluster: str
    topic: str
    at_cluster: str
    at_topic: str


@dataclass(frozen=True, order=True)
class ApplicationScope:
    """The topics an application writes and the groups it commits with, on whichever cluster
    it is active (the "two active" check judges those)."""

    app: str
    topics: tuple[str, ...]
    groups: tuple[str, ...]


def application_scopes(topology: Topology) -> tuple[ApplicationScope, ...]:
    """Each application of the topology with its topics and groups."""
    return tuple(
        sorted(ApplicationScope(a.name, a.topics, a.groups) for a in topology.applications)
    )


@dataclass(frozen=True)
class VerifyRequest:
    """What to check: the history directory, the clusters' addresses, where records must be
    found, and how strict to be."""

    history_dir: Path
    bootstrap: Mapping[str, str]
    places: tuple[Place, ...]
    aliases: frozenset[str]
    separator: str = "."
    max_hops: int = 1
    exactly_once: bool = False
    sample: int = 10
    kafka_options: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    #: each application's topics and groups; None: every topic of the produced history belongs
    #: to each application the switches history names, and its groups are those the failovers
    #: history lists for its failovers (a scenario's one application)
    applications: tuple[ApplicationScope, ...] | None = None


def plan_places(topology: Topology, written: Iterable[tuple[str, str]]) -> tuple[Place, ...]:
    """For each ``(cluster, topic)`` records were written to: the topic itself, and its copy on
    the target of every flow from that cluster that copies it."""
    places: set[Place] = set()
    for cluster, topic in written:
        topology.cluster(cluster)  # an unknown alias is a ConfigError naming it
        places.add(Place(cluster, topic, cluster, topic))
        for flow in topology.flows_from(cluster):
            verdict = topology.topic_verdict(flow, topic)
            if verdict.replicate and verdict.target_topic is not None:
                places.add(Place(cluster, topic, flow.target, verdict.target_topic))
    return tuple(sorted(places))


def read_table(spark: SparkSession, history_dir: Path, schema: histories.TableSchema) -> DataFrame:
    """One history table (empty, with its schema, when nobody wrote it)."""
    if not histories.part_files(history_dir, schema):
        return spark.createDataFrame([], schema.spark())
    return spark.read.schema(schema.spark()).parquet(str(history_dir / schema.name))


def written_topics(spark: SparkSession, history_dir: Path) -> list[tuple[str, str]]:
    """The ``(cluster, topic)`` pairs the ``produced`` history names."""
    produced = read_table(spark, history_dir, histories.PRODUCED)
    return sorted(
        (r["cluster"], r["topic"]) for r in produced.select("cluster", "topic").distinct().collect()
    )


def observe(spark: SparkSession, request: VerifyRequest) -> DataFrame:
    """Every record of every place's topic, read once per cluster, as the observed frame."""
    by_cluster: dict[str, set[str]] = {}
    for place in request.places:
        by_cluster.setdefault(place.at_cluster, set()).add(place.at_topic)
    frames = []
    for cluster, topics in sorted(by_cluster.items()):
        if cluster not in request.bootstrap:
            raise ConfigError(f"no bootstrap servers for cluster '{cluster}'")
        raw = read_topics(
            spark, request.bootstrap[cluster], topics, request.kafka_options.get(cluster)
        )
        frames.append(records.observed(raw, cluster))
    if not frames:
        raise ConfigError("nothing to verify: the produced history names no topic")
    result = frames[0]
    for frame in frames[1:]:
        result = result.unionByName(frame)
    return result


def judge(
    counted: Mapping[str, int], planned_rereads: int, rpo_mismatches: int, exactly_once: bool
) -> tuple[str, ...]:
    """The checks that fail the run: any of :data:`ALWAYS_FATAL`; duplicates in exactly-once
    mode only (at least once they are counted); re-reads after a planned failover only (an
    unplanned one resumes from checkpoints); a recovery point other than the reported one."""
    failed = [name for name in ALWAYS_FATAL if counted.get(name, 0)]
    if exactly_once and counted.get("duplicates", 0):
        failed.append("duplicates")
    if planned_rereads:
        failed.append("reread_after_failover")
    if rpo_mismatches:
        failed.append("rpo")
    return tuple(failed)


def scope_frames(
    spark: SparkSession,
    applications: tuple[ApplicationScope, ...] | None,
    switches: DataFrame,
    produced: DataFrame,
    failovers: DataFrame,
) -> tuple[DataFrame, DataFrame]:
    """``(app, topic)`` and ``(app, group)`` frames of the applications (see
    :attr:`VerifyRequest.applications` for None)."""
    if applications is not None:
        topics = spark.createDataFrame(
            [(a.app, t) for a in applications for t in a.topics],
            "app string, topic string",
        )
        groups = spark.createDataFrame(
            [(a.app, g) for a in applications for g in a.groups],
            "app string, group string",
        )
        return topics, groups
    apps = switches.select("app", "failover_id")
    topics = apps.select("app").distinct().crossJoin(produced.select("topic").distinct())
    groups = (
        apps.join(failovers.select("failover_id", "group"), "failover_id")
        .select("app", "group")
        .distinct()
    )
    return topics, groups


def _samples(frame: DataFrame, n: int) -> list[dict[str, Any]]:
    return [jsonable(row.asDict(recursive=True)) for row in frame.limit(n).collect()]


def check_history(
    spark: SparkSession,
    topology: Topology,
    bootstrap: Mapping[str, str],
    history_dir: Path,
    kafka_options: Mapping[str, Mapping[str, str]],
    max_hops: int = 1,
    exactly_once: bool = False,
    sample: int = 10,
) -> Verdict:
    """``drsvc verify``'s job (and ``spark-submit``'s, :mod:`drsvc.verify.submit`): the places
    of every topic the history names on ``topology``, each checked on ``spark``."""
    request = VerifyRequest(
        history_dir=history_dir,
        bootstrap=bootstrap,
        places=plan_places(topology, written_topics(spark, history_dir)),
        aliases=topology.aliases,
        separator=topology.flows[0].separator if topology.flows else ".",
        max_hops=max_hops,
        exactly_once=exactly_once,
        sample=sample,
        applications=application_scopes(topology),
        kafka_options=kafka_options,
    )
    return run(spark, request)


def run(spark: SparkSession, request: VerifyRequest) -> Verdict:
    """Read every place's topic and run every check once on ``spark``."""
    return evaluate(spark, request, observe(spark, request))


def evaluate(spark: SparkSession, request: VerifyRequest, found_records: DataFrame) -> Verdict:
    """Run every check on the histories of ``request`` and the observed frame ``found_records``
    (records as :func:`drsvc.verify.records.observed` shapes them) and return the verdict."""
    started = time.monotonic()
    places = spark.createDataFrame(
        [(p.cluster, p.topic, p.at_cluster, p.at_topic) for p in request.places],
        "cluster string, topic string, at_cluster string, at_topic string",
    )
    produced = read_table(spark, request.history_dir, histories.PRODUCED)
    expected = checks.expectations(produced, places).persist(StorageLevel.MEMORY_AND_DISK)
    observed = found_records.persist(StorageLevel.MEMORY_AND_DISK)
    consumed = read_table(spark, request.history_dir, histories.CONSUMED)
    failovers = read_table(spark, request.history_dir, histories.FAILOVERS)
    cutoffs = read_table(spark, request.history_dir, histories.CUTOFFS)
    unreplicated = read_table(spark, request.history_dir, histories.UNREPLICATED)
    switches = read_table(spark, request.history_dir, histories.SWITCHES)
    commits = read_table(spark, request.history_dir, histories.COMMITS)
    app_topics, app_groups = scope_frames(
        spark, request.applications, switches, produced, failovers
    )

    found: dict[str, DataFrame] = {
        "lost": checks.lost(checks.excuse_recovery_point(expected, unreplicated), observed),
        "duplicates": checks.duplicates(observed),
        "reordered": checks.reordered(observed),
        "altered": checks.altered(expected, observed),
        "loops": checks.loops(observed, request.aliases, request.separator, request.max_hops),
        "skipped_after_failover": consumer_checks.skipped_after_failover(
            expected, consumed, failovers, unreplicated
        ),
        "reread_after_failover": consumer_checks.reread_after_failover(consumed, failovers),
        "aborted_visible": checks.aborted_visible(expected, observed),
    }
    counted: dict[str, int] = {}
    samples: dict[str, list[dict[str, Any]]] = {}
    for name, check in found.items():
        frame = check.persist(StorageLevel.MEMORY_AND_DISK)
        found[name] = frame
        counted[name] = checks.extra_copies(frame) if name == "duplicates" else frame.count()
        samples[name] = _samples(frame, request.sample) if counted[name] else []
    planned_rereads = found["reread_after_failover"].where(F.col("planned")).count()

    stale_records = two_active.records_after_switch(
        observed, produced, switches, app_topics
    ).persist(StorageLevel.MEMORY_AND_DISK)
    late_commits = two_active.commits_after_switch(commits, switches, app_groups).persist(
        StorageLevel.MEMORY_AND_DISK
    )
    two_active_records, two_active_commits = stale_records.count(), late_commits.count()
    counted["two_active"] = two_active_records + two_active_commits
    samples["two_active"] = [
        {"kind": "record", **row} for row in _samples(stale_records, request.sample)
    ] + [{"kind": "commit", **row} for row in _samples(late_commits, request.sample)]
    samples["two_active"] = samples["two_active"][: request.sample]

    recovery = consumer_checks.recovery_point(
        expected, observed, failovers, cutoffs, unreplicated
    ).persist(StorageLevel.MEMORY_AND_DISK)
    mismatches = consumer_checks.rpo_mismatches(recovery)
    rpo_mismatches = mismatches.count()
    samples["rpo"] = _samples(mismatches, request.sample) if rpo_mismatches else []
    has_failovers = failovers.limit(1).count() > 0
    rpo_records: int | None = None
    rpo_reported: int | None = None
    if has_failovers:
        totals = recovery.agg(F.sum("actual").alias("a"), F.sum("reported").alias("r")).first()
        rpo_records = int(totals["a"] or 0) if totals is not None else 0
        rpo_reported = int(totals["r"] or 0) if totals is not None else 0

    failed = judge(counted, planned_rereads, rpo_mismatches, request.exactly_once)
    observed_counts = {
        f"{r['cluster']}/{r['topic']}": r["count"]
        for r in observed.groupBy("cluster", "topic").count().collect()
    }
    acknowledged = produced.groupBy("aborted").count().collect()
    counts = {
        "acknowledged": sum(r["count"] for r in acknowledged if not r["aborted"]),
        "aborted": sum(r["count"] for r in acknowledged if r["aborted"]),
        "observed": dict(sorted(observed_counts.items())),
        "places": [f"{p.cluster}/{p.topic} -> {p.at_cluster}/{p.at_topic}" for p in request.places],
        "consumed": consumed.count(),
        "failovers": failovers.select("failover_id").distinct().count(),
        "reread_after_planned_failover": planned_rereads,
        "rpo_mismatched_partitions": rpo_mismatches,
        "switches": switches.count(),
        "two_active_records": two_active_records,
        "two_active_commits": two_active_commits,
    }
    for frame in (*found.values(), stale_records, late_commits, recovery, expected, observed):
        frame.unpersist()
    return Verdict(
        checks=counted,
        failed=failed,
        rpo_records=rpo_records,
        rpo_reported_records=rpo_reported,
        counts=counts,
        samples=samples,
        elapsed_s=time.monotonic() - started,
    )
