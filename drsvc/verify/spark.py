"""The one Spark session of a verification run, sized for a small machine by default."""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

from pyspark import SparkContext
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


class _SharedSession:
    """Who uses this process's Spark session, and whether this module started it.

    A process has one Spark session (getOrCreate hands the same one to every caller), so a job
    that stops it when done also stops it under every other job still running (two verify
    requests to the API at once) and under whoever started it before (a test process, a
    notebook). It is stopped when the last job done here is finished, and only if no session
    existed when the first of them started."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.users = 0
        self.started_here = False


_SHARED = _SharedSession()


@contextmanager
def verification_session(
    master: str = DEFAULT_MASTER,
    jars: Sequence[Path] = (),
    app_name: str = "drsvc-verify",
    shuffle_partitions: int = DEFAULT_SHUFFLE_PARTITIONS,
    driver_memory: str = DEFAULT_DRIVER_MEMORY,
    conf: Mapping[str, str] | None = None,
) -> Iterator[SparkSession]:
    """:func:`build_session` for one job, stopped afterwards unless it is still someone's (see
    :class:`_SharedSession`)."""
    shared = _SHARED
    with shared.lock:
        if shared.users == 0:
            shared.started_here = SparkContext._active_spark_context is None
        session = build_session(
            master, jars, app_name, shuffle_partitions, driver_memory, conf=conf
        )
        shared.users += 1
    try:
        yield session
    finally:
        with shared.lock:
            shared.users -= 1
            if shared.users == 0 and shared.started_here:
                session.stop()
