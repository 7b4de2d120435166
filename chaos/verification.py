"""A scenario's consistency check: ``drsvc.verify``'s job on the suite's one Spark session, plus
per-partition loss and duplicate counts for the report.

The observed records are read from Kafka once and kept as Parquet in the scenario's directory,
so the verdict and the per-partition counts come from the same records.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from drsvc.topology.models import Topology
from drsvc.verify import checks, histories, job


@dataclass(frozen=True)
class Checked:
    verdict: dict[str, Any]
    #: rows {cluster, topic, partition, records, lost, duplicates}
    partitions: list[dict[str, Any]]
    #: how long reading the clusters took (the rest of the check is Spark's own work)
    read_s: float = 0.0


def verify(
    spark: SparkSession,
    topology: Topology,
    bootstrap: dict[str, str],
    history_dir: Path,
    scratch: Path,
    exactly_once: bool,
    kafka_options: Mapping[str, Mapping[str, str]] | None = None,
) -> Checked:
    """``kafka_options``: per cluster, the Spark Kafka source options that read it (its
    security; see :func:`drsvc.verify.kafka_options.cluster_read_options`)."""
    places = job.plan_places(topology, job.written_topics(spark, history_dir))
    request = job.VerifyRequest(
        history_dir=history_dir,
        bootstrap=bootstrap,
        places=places,
        aliases=topology.aliases,
        separator=topology.flows[0].separator if topology.flows else ".",
        exactly_once=exactly_once,
        sample=10,
        kafka_options=dict(kafka_options or {}),
    )
    snapshot = scratch / "observed.parquet"
    shutil.rmtree(snapshot, ignore_errors=True)
    started = time.monotonic()
    job.observe(spark, request).write.parquet(str(snapshot))
    read_s = time.monotonic() - started
    observed = spark.read.parquet(str(snapshot))
    verdict = job.evaluate(spark, request, observed)
    partitions = _per_partition(spark, request, observed)
    shutil.rmtree(snapshot, ignore_errors=True)
    return Checked(verdict.as_dict(), partitions, read_s)


def _per_partition(
    spark: SparkSession, request: job.VerifyRequest, observed: Any
) -> list[dict[str, Any]]:
    places = spark.createDataFrame(
        [(p.cluster, p.topic, p.at_cluster, p.at_topic) for p in request.places],
        "cluster string, topic string, at_cluster string, at_topic string",
    )
    produced = job.read_table(spark, request.history_dir, histories.PRODUCED)
    unreplicated = job.read_table(spark, request.history_dir, histories.UNREPLICATED)
    expected = checks.expectations(produced, places)
    lost = (
        checks.lost(checks.excuse_recovery_point(expected, unreplicated), observed)
        .groupBy(
            F.col("at_cluster").alias("cluster"), F.col("at_topic").alias("topic"), "partition"
        )
        .agg(F.count(F.lit(1)).alias("lost"))
    )
    identified = observed.where(F.col("producer_id").isNotNull() & F.col("seq").isNotNull())
    duplicates = (
        identified.groupBy("cluster", "topic", "producer_id", "seq")
        .agg(F.count(F.lit(1)).alias("n"), F.min("partition").alias("partition"))
        .where(F.col("n") > 1)
        .groupBy("cluster", "topic", "partition")
        .agg(F.sum(F.col("n") - 1).alias("duplicates"))
    )
    records = identified.groupBy("cluster", "topic", "partition").agg(
        F.count(F.lit(1)).alias("records")
    )
    keys = ["cluster", "topic", "partition"]
    joined = records.join(lost, keys, "full_outer").join(duplicates, keys, "full_outer")
    rows = [
        {
            "cluster": r["cluster"],
            "topic": r["topic"],
            "partition": int(r["partition"]),
            "records": int(r["records"] or 0),
            "lost": int(r["lost"] or 0),
            "duplicates": int(r["duplicates"] or 0),
        }
        for r in joined.collect()
    ]
    return sorted(rows, key=lambda r: (r["cluster"], r["topic"], r["partition"]))
