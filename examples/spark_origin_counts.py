"""Per-origin record counts of a logical topic on an aggregate cluster, with Spark Structured
Streaming and Spark's Kafka source.

    python examples/spark_origin_counts.py --bootstrap HOST:PORT --topic orders --cluster agg \\
        [--master local[*]] [--once | --stop-after N] [--json] [--checkpoint DIR]

It subscribes to the topic and every copy of it (``<alias>.orders``, any alias, so a source added
later is read too), adds the origin columns (cluster, topic, partition, offset) from the topic name
and the first ``drsvc.provenance`` header, and keeps the count per origin cluster. ``--once``
reads what is there now and stops; ``--stop-after N`` keeps reading (topics created meanwhile
included) until N records are counted; ``--json`` then prints the counts as one object. Without
either, the counts are printed to the console as they change. Runs on ``local[*]`` by default
and on a Spark cluster with ``--master``.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from drsvc.devenv.components import load_components
from drsvc.settings import Settings

PROVENANCE_HEADER = "drsvc.provenance"


def _int(binary: Column, start: Column | int, length: int) -> Column:
    """The big-endian unsigned integer of ``length`` bytes at ``start`` (1-based)."""
    start_col = start if isinstance(start, Column) else F.lit(start)
    return F.conv(F.hex(F.substring(binary, start_col, F.lit(length))), 16, 10).cast("long")


def with_origin(records: DataFrame, cluster: str) -> DataFrame:
    """Adds origin_cluster, origin_topic, origin_partition and origin_offset: the first hop of the
    provenance header (version u8, alias u8+bytes, topic u16+bytes, partition i32, offset i64),
    else where the record was read (a record written on ``cluster`` itself)."""
    first = F.filter("headers", lambda h: h["key"] == PROVENANCE_HEADER)
    hop = F.when(F.size(first) > 0, first[0]["value"])
    alias_len = _int(hop, 2, 1)
    topic_len_at = alias_len + 3
    topic_len = _int(hop, topic_len_at, 2)
    topic_at = topic_len_at + 2
    partition_at = topic_at + topic_len
    return (
        records.withColumn("hop", hop)
        .withColumn(
            "origin_cluster",
            F.coalesce(F.substring("hop", F.lit(3), alias_len).cast("string"), F.lit(cluster)),
        )
        .withColumn(
            "origin_topic",
            F.coalesce(F.substring("hop", topic_at, topic_len).cast("string"), F.col("topic")),
        )
        .withColumn(
            "origin_partition", F.coalesce(_int(F.col("hop"), partition_at, 4), F.col("partition"))
        )
        .withColumn(
            "origin_offset", F.coalesce(_int(F.col("hop"), partition_at + 4, 8), F.col("offset"))
        )
        .drop("hop")
    )


def copies_pattern(topic: str) -> str:
    """A Java regex for the topic and its copies from any alias (one hop)."""
    escaped = topic.replace(".", "[.]")
    return f"([A-Za-z0-9_-]+[.])?{escaped}"


def spark_session(master: str) -> SparkSession:
    jars = load_components(Settings.from_env().cache_dir).spark_kafka.jars
    return (
        SparkSession.builder.master(master)
        .appName("drsvc-origin-counts")
        .config("spark.jars", ",".join(str(j) for j in jars))
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.ui.enabled", "false")
        .getOrCreate()
    )


def _counted(spark: SparkSession) -> dict[str, int]:
    return {r["origin_cluster"]: r["count"] for r in spark.table("origin_counts").collect()}


def _wait_for(spark: SparkSession, total: int, timeout_s: float) -> dict[str, int]:
    deadline = time.monotonic() + timeout_s
    result: dict[str, int] = {}
    while time.monotonic() < deadline:
        if spark.catalog.tableExists("origin_counts"):
            result = _counted(spark)
            if sum(result.values()) >= total:
                break
        time.sleep(1)
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bootstrap", required=True, help="the aggregate cluster's servers")
    parser.add_argument("--topic", required=True, help="the logical topic (no prefix)")
    parser.add_argument("--cluster", required=True, help="the aggregate cluster's alias")
    parser.add_argument("--master", default="local[*]")
    parser.add_argument("--once", action="store_true", help="read what is there now, then stop")
    parser.add_argument(
        "--stop-after", type=int, default=0, help="stop once this many records are counted"
    )
    parser.add_argument("--timeout-s", type=float, default=600.0, help="with --stop-after")
    parser.add_argument("--json", action="store_true", help="print the counts as one object")
    parser.add_argument("--checkpoint", help="checkpoint directory (default: a temporary one)")
    args = parser.parse_args(argv)

    spark = spark_session(args.master)
    spark.sparkContext.setLogLevel("ERROR")
    records = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", args.bootstrap)
        .option("subscribePattern", copies_pattern(args.topic))
        .option("startingOffsets", "earliest")
        .option("includeHeaders", "true")
        .option("kafka.isolation.level", "read_committed")
        .load()
    )
    counts = with_origin(records, args.cluster).groupBy("origin_cluster").count()
    checkpoint = args.checkpoint or tempfile.mkdtemp(prefix="drsvc-origin-counts-")
    if args.once or args.stop_after:
        writer = (
            counts.writeStream.outputMode("complete")
            .format("memory")
            .queryName("origin_counts")
            .option("checkpointLocation", checkpoint)
        )
        if args.once:
            writer.trigger(availableNow=True).start().awaitTermination()
            result = _counted(spark)
        else:
            query = writer.trigger(processingTime="1 second").start()
            result = _wait_for(spark, args.stop_after, args.timeout_s)
            query.stop()
        print(json.dumps(result, sort_keys=True) if args.json else result, flush=True)
        spark.stop()
        return 0 if args.once or sum(result.values()) >= args.stop_after else 1
    query = (
        counts.writeStream.outputMode("complete")
        .format("console")
        .option("checkpointLocation", checkpoint)
        .start()
    )
    try:
        query.awaitTermination()
    except KeyboardInterrupt:
        query.stop()
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
