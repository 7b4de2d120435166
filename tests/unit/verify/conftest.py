"""One local Spark session for every verify test: Spark starts once per test session."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from pyspark.sql import SparkSession

from drsvc.verify.spark import build_session


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    # Frames of a few rows: re-planning them adaptively costs more than it saves.
    session = build_session(
        "local[1]",
        app_name="drsvc-verify-tests",
        shuffle_partitions=1,
        conf={"spark.sql.adaptive.enabled": "false"},
    )
    try:
        yield session
    finally:
        session.stop()
