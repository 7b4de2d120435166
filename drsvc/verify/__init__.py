"""The consistency job behind ``drsvc verify``: histories, and checks run on Spark.

Histories (:mod:`drsvc.verify.histories`) are Parquet tables a workload writes: every record a
producer had acknowledged, every record a consumer processed and every commit it made, and the
failovers a scenario ran. The job (:mod:`drsvc.verify.job`) reads them with the topics of the
clusters involved (Spark's Kafka source) and runs the checks (:mod:`drsvc.verify.checks`,
:mod:`drsvc.verify.consumer_checks`): each a pure DataFrame -> violations function.
"""
