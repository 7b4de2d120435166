"""Tiny histories and topic contents for the verify checks' unit tests.

A test describes records as plain Python values, corrupts them (drops, repeats, swaps, edits) and
turns them into the frames the checks read: the ``produced`` history and the *observed* frame of
records as Spark's Kafka source returns them.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as T

from drsvc.verify import histories, records
from drsvc.verify.identity import value_prefix
from failover import provenance

KAFKA_SCHEMA = T.StructType(
    [
        T.StructField("key", T.BinaryType()),
        T.StructField("value", T.BinaryType()),
        T.StructField("topic", T.StringType()),
        T.StructField("partition", T.IntegerType()),
        T.StructField("offset", T.LongType()),
        T.StructField("timestamp", T.TimestampType()),
        T.StructField("timestampType", T.IntegerType()),
        T.StructField("headers", histories.HEADERS_TYPE),
    ]
)

BASE_TS = 1_700_000_000_000


@dataclass(frozen=True)
class Rec:
    """One record as written on its source, or as found somewhere."""

    producer_id: str
    seq: int
    partition: int
    offset: int
    key: bytes | None
    value: bytes
    headers: tuple[tuple[str, bytes | None], ...]
    timestamp_ms: int
    aborted: bool = False

    def at(self, offset: int, **changes: object) -> Rec:
        return replace(self, offset=offset, **changes)  # type: ignore[arg-type]


def workload(count: int, partitions: int = 2, producers: Sequence[str] = ("p0",)) -> list[Rec]:
    """``count`` records per producer, round-robin over ``partitions``, offsets as on a log."""
    next_offset = [0] * partitions
    out: list[Rec] = []
    for seq in range(count):
        for pid in producers:
            partition = seq % partitions
            headers: tuple[tuple[str, bytes | None], ...] = (("h", str(seq).encode()),)
            if seq % 3 == 0:
                headers += (("null", None), ("empty", b""))
            out.append(
                Rec(
                    pid,
                    seq,
                    partition,
                    next_offset[partition],
                    None if seq % 5 == 0 else f"k{seq}".encode(),
                    value_prefix(pid, seq) + b"x" * (seq % 7),
                    headers,
                    BASE_TS + seq,
                )
            )
            next_offset[partition] += 1
    return out


def copies(source: Iterable[Rec], source_cluster: str, source_topic: str) -> list[Rec]:
    """What a replicator writes: the same records, each with a provenance header, at offsets
    renumbered from 0 per partition in the given order."""
    out: list[Rec] = []
    next_offset: dict[int, int] = {}
    for r in source:
        hop = provenance.encode(
            provenance.Provenance(source_cluster, source_topic, r.partition, r.offset)
        )
        offset = next_offset.get(r.partition, 0)
        next_offset[r.partition] = offset + 1
        out.append(r.at(offset, headers=(*r.headers, (provenance.PROVENANCE_HEADER, hop))))
    return out


def renumber(recs: Iterable[Rec]) -> list[Rec]:
    """Offsets renumbered from 0 per partition in list order (after a test edited the list)."""
    out: list[Rec] = []
    next_offset: dict[int, int] = {}
    for r in recs:
        offset = next_offset.get(r.partition, 0)
        next_offset[r.partition] = offset + 1
        out.append(r.at(offset))
    return out


def produced(
    spark: SparkSession, recs: Iterable[Rec], cluster: str = "east", topic: str = "t"
) -> DataFrame:
    rows = [
        histories.ProducedRecord(
            r.producer_id,
            r.seq,
            cluster,
            topic,
            r.partition,
            r.offset,
            r.key,
            hashlib.sha256(r.value).hexdigest(),
            len(r.value),
            list(r.headers),
            r.timestamp_ms,
            r.aborted,
            r.aborted,
            r.timestamp_ms + 5,
        )
        for r in recs
    ]
    return spark.createDataFrame(rows, histories.PRODUCED.spark())


def observed(spark: SparkSession, recs: Iterable[Rec], cluster: str, topic: str) -> DataFrame:
    rows = [
        (
            r.key,
            r.value,
            topic,
            r.partition,
            r.offset,
            datetime.fromtimestamp(r.timestamp_ms / 1000, UTC),
            0,
            [(k, v) for k, v in r.headers] or None,
        )
        for r in recs
    ]
    return records.observed(spark.createDataFrame(rows, KAFKA_SCHEMA), cluster)


def places(spark: SparkSession, *rows: tuple[str, str, str, str]) -> DataFrame:
    schema = "cluster string, topic string, at_cluster string, at_topic string"
    return spark.createDataFrame(list(rows), schema)


def keys(frame: DataFrame, *columns: str) -> list[tuple[object, ...]]:
    """The rows of ``frame`` as sorted tuples of ``columns``."""
    return sorted(tuple(row[c] for c in columns) for row in frame.collect())
