"""Reading topics with Spark's Kafka source, as one batch up to their current ends."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from pyspark.sql import DataFrame, SparkSession


def exact_pattern(topics: Iterable[str]) -> str:
    """A Java regex matching exactly these topic names (a pattern never creates a topic the way
    subscribing by name can, and a missing topic simply reads as empty)."""
    return "|".join(f"^{re.escape(t)}$" for t in sorted(set(topics)))


def read_topics(
    spark: SparkSession,
    bootstrap_servers: str,
    topics: Iterable[str],
    options: Mapping[str, str] | None = None,
) -> DataFrame:
    """Every committed record of ``topics`` on one cluster, from the start of each partition to
    its end when the query runs, with headers (the Kafka source's columns)."""
    reader = (
        spark.read.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap_servers)
        .option("subscribePattern", exact_pattern(topics))
        .option("startingOffsets", "earliest")
        .option("endingOffsets", "latest")
        .option("includeHeaders", "true")
        .option("kafka.isolation.level", "read_committed")
    )
    for key, value in (options or {}).items():
        reader = reader.option(key, value)
    return reader.load()
