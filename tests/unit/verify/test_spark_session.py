"""A verification job leaves alone a Spark session it did not start: the process has one, and
stopping it under its owner (this test process, an API request still running) breaks them."""

from __future__ import annotations

from pyspark.sql import SparkSession

from drsvc.verify.spark import verification_session


def test_a_job_on_a_session_that_existed_leaves_it_running(spark: SparkSession) -> None:
    with verification_session("local[1]", shuffle_partitions=1) as session:
        assert session.sparkContext is spark.sparkContext
        assert session.range(3).count() == 3
    assert spark.range(4).count() == 4


def test_overlapping_jobs_share_the_session_and_neither_stops_it(spark: SparkSession) -> None:
    with verification_session("local[1]") as first:
        with verification_session("local[1]") as second:
            assert second.sparkContext is first.sparkContext
        assert first.range(2).count() == 2
    assert spark.range(5).count() == 5
