"""No drsvc code runs on a Spark executor: the verification jobs are DataFrame operations, so a
cluster's executors need the Kafka source's jars and PySpark, never the drsvc package (which
``drsvc verify --master spark://...`` does not ship). A UDF, an RDD function or a pandas map
would run drsvc code there: adding one means shipping drsvc (``--py-files`` or an image that
holds it, see docs/chaos.md) and changing this test."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
JOB_SOURCES = [
    *sorted((ROOT / "drsvc" / "verify").glob("*.py")),
    ROOT / "chaos" / "verification.py",
]
EXECUTOR_PYTHON = re.compile(
    r"\budf\b|pandas_udf|\.rdd\b|mapInPandas|mapInArrow|applyInPandas|foreachPartition|"
    r"\bforeach\(|mapPartitions|\.flatMap\(|\.map\(|register\(|transformWithState"
)


def test_the_jobs_run_no_python_function_on_executors() -> None:
    found = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
        for path in JOB_SOURCES
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if EXECUTOR_PYTHON.search(line)
    ]
    assert found == []
