"""Records read from Kafka, in the shape every check expects (the *observed* frame).

:func:`observed` turns a frame with the columns of Spark's Kafka source (``key``, ``value``,
``topic``, ``partition``, ``offset``, ``timestamp``, ``headers``) into:

=================  =============================================================================
``cluster``        where the record was read
``topic``          ``partition``, ``offset``: its place there
``key``            as read
``value_sha256``   hex SHA-256 of the value (None for a null value), ``value_size`` its length
``headers``        the record's headers without drsvc's provenance headers, in order
``timestamp_ms``   its timestamp in milliseconds
``producer_id``    ``seq``: the identity the workload put in the value (None if there is none)
``hops``           the clusters it was copied from, oldest first (provenance headers)
=================  =============================================================================

Pure column expressions: nothing here reads or writes anything.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from drsvc.verify.identity import SEPARATOR
from failover.provenance import PROVENANCE_HEADER

OBSERVED_COLUMNS = (
    "cluster",
    "topic",
    "partition",
    "offset",
    "key",
    "value_sha256",
    "value_size",
    "headers",
    "timestamp_ms",
    "producer_id",
    "seq",
    "hops",
)


def _alias_of_hop(value: Column) -> Column:
    """The cluster alias of one provenance header value (u8 version, u8 length, alias)."""
    length = F.conv(F.hex(F.substring(value, 2, 1)), 16, 10).cast("int")
    return F.substring(value, F.lit(3), length).cast("string")


def identity_columns(value: Column) -> tuple[Column, Column]:
    """``(producer_id, seq)`` parsed from a workload value; nulls for any other value."""
    parts = F.split(value.cast("string"), SEPARATOR, 3)
    ok = (F.size(parts) == 3) & (F.length(parts[0]) > 0) & parts[1].rlike("^[0-9]+$")
    producer_id = F.when(ok, parts[0])
    seq = F.when(ok, parts[1].try_cast("long"))
    return producer_id, seq


def observed(kafka_rows: DataFrame, cluster: str) -> DataFrame:
    """The observed frame of records read from ``cluster`` (see the module docstring)."""
    provenance = F.filter("headers", lambda h: h["key"] == F.lit(PROVENANCE_HEADER))
    producer_id, seq = identity_columns(F.col("value"))
    return kafka_rows.select(
        F.lit(cluster).alias("cluster"),
        F.col("topic"),
        F.col("partition").cast("int").alias("partition"),
        F.col("offset").cast("long").alias("offset"),
        F.col("key"),
        F.sha2(F.col("value"), 256).alias("value_sha256"),
        F.length(F.col("value")).cast("int").alias("value_size"),
        F.filter(
            F.coalesce(F.col("headers"), F.array()),
            lambda h: h["key"] != F.lit(PROVENANCE_HEADER),
        ).alias("headers"),
        F.unix_millis(F.col("timestamp")).alias("timestamp_ms"),
        producer_id.alias("producer_id"),
        seq.alias("seq"),
        F.transform(F.coalesce(provenance, F.array()), lambda h: _alias_of_hop(h["value"])).alias(
            "hops"
        ),
    )
