"""One local Spark session for every verify test: Spark starts once per test process.

It starts with Spark's Kafka source on its class path although these tests do not read Kafka: a
JVM's class path is fixed when it starts, and the same test process may go on to integration
tests that build their session (getOrCreate) on this one and read Kafka."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from pyspark.sql import SparkSession

from drsvc.devenv.components import load_components
from drsvc.settings import Settings
from drsvc.verify.spark import build_session


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    # Frames of a few rows: re-planning them adaptively costs more than it saves.
    session = build_session(
        "local[1]",
        jars=load_components(Settings.from_env().cache_dir).spark_kafka.jars,
        app_name="drsvc-verify-tests",
        shuffle_partitions=1,
        conf={"spark.sql.adaptive.enabled": "false"},
    )
    try:
        yield session
    finally:
        session.stop()
