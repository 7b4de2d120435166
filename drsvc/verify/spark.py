"""The one Spark session of a verification run, sized for a small machine by default.

On a cluster master (``spark://``, ``yarn``, ``k8s://``) the executors are other JVMs: they get
the Kafka source from ``spark.jars`` (the driver serves those files to them), and Python only for
PySpark's own code (the jobs are DataFrame operations; no drsvc function runs on an executor,
which ``tests/unit/verify/test_executor_code.py`` keeps true). See ``docs/chaos.md``.
"""

from __future__ import annotations

import os
import socket
import sys
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

from pyspark import SparkContext
from pyspark.sql import SparkSession

from drsvc.errors import ConfigError

DEFAULT_MASTER = "local[*]"
#: Few shuffle partitions: histories of a scenario are small, and every partition is a task.
DEFAULT_SHUFFLE_PARTITIONS = 4
DEFAULT_DRIVER_MEMORY = "768m"
#: Executors on a cluster master: one core and this much heap each, so that a small standalone
#: worker (one core, 1 GiB) holds one; a real cluster's jobs set their own with ``--conf``.
DEFAULT_EXECUTOR_MEMORY = "512m"
DEFAULT_EXECUTOR_CORES = 1
#: How long to try a standalone master's port before saying it cannot be reached.
MASTER_CONNECT_TIMEOUT_S = 5.0


def is_local(master: str) -> bool:
    """True for ``local``, ``local[N]`` and ``local[N,F]``: everything runs in the driver's JVM."""
    return master == "local" or master.startswith("local[")


def standalone_addresses(master: str) -> list[tuple[str, int]]:
    """The ``(host, port)`` of each master a ``spark://`` URL names (several with standby
    masters: ``spark://h1:7077,h2:7077``); empty for any other kind of master."""
    if not master.startswith("spark://"):
        return []
    addresses = []
    for part in master.removeprefix("spark://").split(","):
        host, sep, port = part.strip().rpartition(":")
        if not sep or not host or not port.isdigit():
            raise ConfigError(f"Spark master {master!r}: expected spark://HOST:PORT[,HOST:PORT]")
        addresses.append((host.strip("[]"), int(port)))
    return addresses


def check_reachable(master: str, timeout_s: float = MASTER_CONNECT_TIMEOUT_S) -> None:
    """For a ``spark://`` master: a :class:`ConfigError` naming it when none of its masters
    accepts a connection (Spark itself retries for a minute, then prints a stack trace)."""
    addresses = standalone_addresses(master)
    for host, port in addresses:
        try:
            with socket.create_connection((host, port), timeout=timeout_s):
                return
        except OSError:
            continue
    if addresses:
        raise ConfigError(
            f"Spark master {master} cannot be reached (no master accepts a connection)"
        )


def parse_conf(pairs: Sequence[str]) -> dict[str, str]:
    """``KEY=VALUE`` settings (``spark-submit --conf``'s form) as a mapping; a pair without
    ``=`` or with an empty key is a :class:`ConfigError` naming it."""
    conf: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"Spark setting {pair!r}: expected KEY=VALUE")
        conf[key.strip()] = value
    return conf


def cluster_conf(
    master: str | None,
    executor_memory: str = DEFAULT_EXECUTOR_MEMORY,
    executor_cores: int = DEFAULT_EXECUTOR_CORES,
) -> dict[str, str]:
    """The settings a session on a cluster master adds: executor size (none in local mode, or
    under ``spark-submit`` (``master`` None), whose own settings stand)."""
    if master is None or is_local(master):
        return {}
    return {
        "spark.executor.memory": executor_memory,
        "spark.executor.cores": str(executor_cores),
    }


def build_session(
    master: str | None = DEFAULT_MASTER,
    jars: Sequence[Path] = (),
    app_name: str = "drsvc-verify",
    shuffle_partitions: int = DEFAULT_SHUFFLE_PARTITIONS,
    driver_memory: str = DEFAULT_DRIVER_MEMORY,
    conf: Mapping[str, str] | None = None,
) -> SparkSession:
    """A Spark session on ``master`` with ``jars`` (Spark's Kafka source) on its class path.

    ``master`` None: the one ``spark-submit`` was given (with its ``--jars`` or ``--packages``).
    Driver memory only takes effect when this process starts the JVM; executors on a cluster
    master are sized by :func:`cluster_conf`. ``conf`` adds or overrides any Spark setting.
    Python workers (PySpark's own, on the executors) run this interpreter unless
    ``PYSPARK_PYTHON`` says otherwise: on one machine that is the same Python and PySpark."""
    if master is not None:
        check_reachable(master)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder
    if master is not None:
        builder = builder.master(master)
    builder = (
        builder.appName(app_name)
        .config("spark.sql.shuffle.partitions", str(shuffle_partitions))
        .config("spark.default.parallelism", str(shuffle_partitions))
        .config("spark.driver.memory", driver_memory)
        .config("spark.ui.enabled", "false")
        .config("spark.sql.adaptive.enabled", "true")
        .config("spark.sql.session.timeZone", "UTC")
    )
    for key, value in {**cluster_conf(master), **(conf or {})}.items():
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
    master: str | None = DEFAULT_MASTER,
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
