"""The Spark job of ``drsvc migrate verify``: a migration's source and target compared per
partition and per group (:mod:`failover.migration_verify` judges what it measures).

Both clusters are read once with Spark's Kafka source, up to their ends when the query runs.
Each record gets a fingerprint: xxhash64 of its key, value, headers (without drsvc's provenance
headers) and timestamp. A copy on the target is matched to its source record by its newest
provenance header naming the source cluster (topic, partition, offset); records on the target
without one were written there after a cutover, or, after taking over from MirrorMaker 2, are
its copies: below the offset drsvc took over from, those are matched to the source records by
content (the n-th target record with a fingerprint to the n-th source record with it, both in
offset order; MirrorMaker keeps key, value, headers and timestamp). Per partition each side is
aggregated on its own (count, first and last offset, the fingerprints summed as decimals, so the
sums cannot overflow: a checksum of each side), and a full outer join of records and copies
counts missing, altered and orphaned copies; copies beyond one per source offset are duplicates.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from drsvc.verify.kafka_source import read_topics
from drsvc.verify.spark import (
    DEFAULT_DRIVER_MEMORY,
    DEFAULT_MASTER,
    DEFAULT_SHUFFLE_PARTITIONS,
    verification_session,
)
from failover.migration_verify import (
    GroupComparison,
    MigrationVerdict,
    PartitionComparison,
    verdict,
)
from failover.provenance import PROVENANCE_HEADER


@dataclass(frozen=True)
class GroupPosition:
    """A group's committed position on both clusters (None: nothing committed there)."""

    group: str
    topic: str
    partition: int
    source_position: int | None
    target_position: int | None


def _fingerprint() -> Column:
    headers = F.filter(
        F.coalesce(F.col("headers"), F.array()), lambda h: h["key"] != F.lit(PROVENANCE_HEADER)
    )
    return F.xxhash64(
        F.col("key"), F.col("value"), headers, F.unix_millis(F.col("timestamp"))
    ).cast("decimal(38,0)")


def _unsigned(value: Column) -> Column:
    return F.conv(F.hex(value), 16, 10).cast("long")


def _hop_alias(value: Column) -> Column:
    length = F.conv(F.hex(F.substring(value, 2, 1)), 16, 10).cast("int")
    return F.substring(value, F.lit(3), length).cast("string")


def _copies(target: DataFrame, source_alias: str) -> DataFrame:
    """Target records with their source offset (None: no provenance from the source)."""
    hops = F.filter(
        F.coalesce(F.col("headers"), F.array()),
        lambda h: (
            (h["key"] == F.lit(PROVENANCE_HEADER)) & (_hop_alias(h["value"]) == F.lit(source_alias))
        ),
    )
    last = F.element_at(hops, -1)["value"]
    src_offset = F.when(F.size(hops) > 0, _unsigned(F.expr("substring(_v, -8, 8)")))
    return target.withColumn("_v", last).select(
        F.col("topic"),
        F.col("partition").cast("int").alias("partition"),
        F.col("offset").cast("long").alias("target_offset"),
        src_offset.alias("src_offset"),
        _fingerprint().alias("tfp"),
    )


def compare(
    spark: SparkSession,
    source_bootstrap: str,
    target_bootstrap: str,
    source_alias: str,
    topics: Sequence[str],
    groups: Iterable[GroupPosition] = (),
    taken_over: Mapping[tuple[str, int], int] | None = None,
) -> MigrationVerdict:
    """``taken_over``: per partition the source offset drsvc took a MirrorMaker 2 copy over
    from (the migration's ``takeover``): the target's records without provenance below it are
    MirrorMaker's copies."""
    source = (
        read_topics(spark, source_bootstrap, topics)
        .select(
            F.col("topic"),
            F.col("partition").cast("int").alias("partition"),
            F.col("offset").cast("long").alias("src_offset"),
            _fingerprint().alias("sfp"),
        )
        .cache()
    )
    copies = _copies(read_topics(spark, target_bootstrap, topics), source_alias)
    copies = _with_mirror_maker_copies(spark, source, copies, taken_over or {}).cache()
    # Each cluster is read once: the queries below share these two cached frames.
    source.count()
    copies.count()
    copied = copies.where(F.col("src_offset").isNotNull())
    joined = source.join(copied, ["topic", "partition", "src_offset"], "full_outer")
    per_partition = _per_partition(source, copied, joined)
    target_only = (
        copies.where(F.col("src_offset").isNull())
        .groupBy("topic", "partition")
        .agg(F.count(F.lit(1)).alias("target_only"))
    )
    rows = per_partition.join(target_only, ["topic", "partition"], "full_outer").collect()
    partitions = [
        PartitionComparison(
            topic=r["topic"],
            partition=int(r["partition"]),
            source_records=int(r["source_records"] or 0),
            source_first=r["source_first"],
            source_last=r["source_last"],
            source_checksum=None if r["source_checksum"] is None else str(r["source_checksum"]),
            copies=int(r["copies"] or 0),
            copied_first=r["copied_first"],
            copied_last=r["copied_last"],
            copies_checksum=None if r["copies_checksum"] is None else str(r["copies_checksum"]),
            missing=int(r["missing"] or 0),
            altered=int(r["altered"] or 0),
            duplicates=int(r["copies"] or 0) - int(r["copied_offsets"] or 0),
            orphans=int(r["orphans"] or 0),
            target_only=int(r["target_only"] or 0),
        )
        for r in rows
    ]
    group_rows = _translate_groups(spark, copied, list(groups))
    copies.unpersist()
    source.unpersist()
    return verdict(partitions, group_rows)


def taken_over_starts(
    takeover: Mapping[str, Mapping[int, int]] | None,
) -> dict[tuple[str, int], int]:
    """A migration state's ``takeover`` (topic -> partition -> source offset) as per-partition
    starts for :func:`compare`."""
    return {(t, p): o for t, parts in (takeover or {}).items() for p, o in parts.items()}


def _with_mirror_maker_copies(
    spark: SparkSession,
    source: DataFrame,
    copies: DataFrame,
    taken_over: Mapping[tuple[str, int], int],
) -> DataFrame:
    """``copies`` with a source offset for MirrorMaker 2's copies in taken-over partitions:
    the n-th record without provenance with a fingerprint is the copy of the n-th source record
    with that fingerprint below the takeover start (unmatched ones stay without one)."""
    if not taken_over:
        return copies
    starts = spark.createDataFrame(
        [(t, p, o) for (t, p), o in sorted(taken_over.items())],
        "topic string, partition int, takeover_start long",
    )
    keys = ["topic", "partition"]
    # Each copy learns whether its partition was taken over (a tiny, broadcast frame): the
    # records to match are a filter, not a join over every target record's offset.
    taken = F.broadcast(starts.select(*keys, F.lit(True).alias("taken")))
    tagged = copies.join(taken, keys, "left")
    unmatched = F.col("src_offset").isNull() & F.col("taken").isNotNull()
    plain = tagged.where(unmatched).drop("taken")
    rest = tagged.where(~unmatched).drop("taken")
    nth_by = Window.partitionBy("topic", "partition", "fp")
    originals = (
        source.join(starts, keys)
        .where(F.col("src_offset") < F.col("takeover_start"))
        .select(*keys, "src_offset", F.col("sfp").alias("fp"))
        .withColumn("nth", F.row_number().over(nth_by.orderBy("src_offset")))
    )
    matched = (
        plain.drop("src_offset")
        .withColumn("fp", F.col("tfp"))
        .withColumn("nth", F.row_number().over(nth_by.orderBy("target_offset")))
        .join(originals, [*keys, "fp", "nth"], "left")
        .select(*keys, "target_offset", "src_offset", "tfp")
    )
    return rest.unionByName(matched)


def _per_partition(source: DataFrame, copied: DataFrame, joined: DataFrame) -> DataFrame:
    """Each side aggregated on its own (no per-record ordering needed), and the join's counts."""
    keys = ["topic", "partition"]
    sources = source.groupBy(*keys).agg(
        F.count(F.lit(1)).alias("source_records"),
        F.min("src_offset").alias("source_first"),
        F.max("src_offset").alias("source_last"),
        F.sum("sfp").alias("source_checksum"),
    )
    copies = copied.groupBy(*keys).agg(
        F.count(F.lit(1)).alias("copies"),
        F.count_distinct("src_offset").alias("copied_offsets"),
        F.min("src_offset").alias("copied_first"),
        F.max("src_offset").alias("copied_last"),
        F.sum("tfp").alias("copies_checksum"),
    )
    has_s, has_t = F.col("sfp").isNotNull(), F.col("tfp").isNotNull()
    matched = joined.groupBy(*keys).agg(
        F.count(F.when(has_s & ~has_t, 1)).alias("missing"),
        F.count(F.when(has_s & has_t & (F.col("sfp") != F.col("tfp")), 1)).alias("altered"),
        F.count(F.when(~has_s, 1)).alias("orphans"),
    )
    return sources.join(copies, keys, "full_outer").join(matched, keys, "full_outer")


_GROUP_SCHEMA = T.StructType(
    [
        T.StructField("group", T.StringType()),
        T.StructField("topic", T.StringType()),
        T.StructField("partition", T.IntegerType()),
        T.StructField("source_position", T.LongType()),
        T.StructField("target_position", T.LongType()),
    ]
)


def _translate_groups(
    spark: SparkSession, copied: DataFrame, groups: list[GroupPosition]
) -> list[GroupComparison]:
    """Where each group's source position lands on the target: the copy of the record at (or
    first after) it, else just past the last copy."""
    if not groups:
        return []
    frame = spark.createDataFrame(
        [(g.group, g.topic, g.partition, g.source_position, g.target_position) for g in groups],
        _GROUP_SCHEMA,
    )
    at_or_after = (
        frame.alias("g")
        .join(
            copied.alias("c"),
            (F.col("g.topic") == F.col("c.topic"))
            & (F.col("g.partition") == F.col("c.partition"))
            & (F.col("c.src_offset") >= F.col("g.source_position")),
            "left",
        )
        .groupBy("g.group", "g.topic", "g.partition")
        .agg(F.min("c.target_offset").alias("landing"))
    )
    ends = copied.groupBy("topic", "partition").agg(
        (F.max("target_offset") + 1).alias("copies_end")
    )
    rows = (
        frame.join(at_or_after, ["group", "topic", "partition"], "left")
        .join(ends, ["topic", "partition"], "left")
        .collect()
    )
    found = []
    for r in rows:
        translated = None
        if r["source_position"] is not None:
            translated = r["landing"] if r["landing"] is not None else r["copies_end"]
        found.append(
            GroupComparison(
                group=r["group"],
                topic=r["topic"],
                partition=int(r["partition"]),
                source_position=r["source_position"],
                translated=translated,
                target_position=r["target_position"],
            )
        )
    return found


class MigrationInputs(Protocol):
    """What :func:`verify_migration` compares (gathered by the migration runtime's
    ``migration_check``; declared here because verify stands beside the runtime, not on it)."""

    @property
    def migration(self) -> str: ...

    @property
    def source_alias(self) -> str: ...

    @property
    def source_bootstrap(self) -> str: ...

    @property
    def target_bootstrap(self) -> str: ...

    @property
    def topics(self) -> Sequence[str]: ...

    @property
    def positions(self) -> Sequence[tuple[str, str, int, int | None, int | None]]: ...

    @property
    def takeover(self) -> Mapping[str, Mapping[int, int]] | None: ...


def verify_migration(
    inputs: MigrationInputs,
    *,
    jars: Sequence[Path],
    master: str = DEFAULT_MASTER,
    driver_memory: str = DEFAULT_DRIVER_MEMORY,
    shuffle_partitions: int = DEFAULT_SHUFFLE_PARTITIONS,
) -> dict[str, Any]:
    """Run :func:`compare` on a Spark session of its own and return the verdict as the command
    prints it and the API answers it: the migration's name, the verdict's fields and the
    seconds it took."""
    started = time.monotonic()
    with verification_session(
        master,
        jars=jars,
        driver_memory=driver_memory,
        app_name="drsvc-migrate-verify",
        shuffle_partitions=shuffle_partitions,
        conf={"spark.ui.showConsoleProgress": "false"},
    ) as spark:
        found = compare(
            spark,
            inputs.source_bootstrap,
            inputs.target_bootstrap,
            inputs.source_alias,
            inputs.topics,
            [GroupPosition(*row) for row in inputs.positions],
            taken_over_starts(inputs.takeover),
        )
    return {
        "migration": inputs.migration,
        **found.as_dict(),
        "elapsed_s": round(time.monotonic() - started, 1),
    }
