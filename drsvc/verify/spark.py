"""The one Spark session of a verification run, sized for a small machine by default."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from pyspark.sql import SparkSession

DEFAULT_MASTER = "local[*]"
#: Few shuffle partitions: histories of a scenario are small, and every partition is a task.
DEFAULT_SHUFFLE_PARTITIONS = 4
DEFAULT_DRIVER_MEMORY = "768m"


def build_session(
    master: str = DEFAULT_MASTER,
    jars: Sequence[Path] = (),
    app_name: str = "drsvc-verify",
    shuffle_partitions: int = DEFAULT_SHUFFLE_PARTITIONS,
    driver_memory: str = DEFAULT_DRIVER_MEMORY,
    conf: Mapping[str, str] | None = None,
) -> SparkSession:
    """A Spark session on ``master`` with ``jars`` (Spark's Kafka source) on its class path.

    Driver memory only takes effect when this process starts the JVM (local mode); on a real
    cluster, executors are sized by the cluster's own settings. ``conf`` adds or overrides any
    Spark setting."""
    builder = (
        SparkSession.builder.master(master)
        .appName(app_name)
        .config("spark.sql.shuffle.partitions", str(shuffle_partitions))
        .config("spark.default.parallelism", str(shuffle_partitions))
        .config("spark.driver.memory", driver_memory)
        .config("spark.ui.enabled", "false")
        .config("spark.sql.adaptive.enabled", "true")
        .config("spark.sql.session.timeZone", "UTC")
    )
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    if jars:
        builder = builder.config("spark.jars", ",".join(str(j) for j in jars))
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    return session
