"""drsvc verify beyond one JVM: a standalone Spark cluster (a master and two one-core workers
started with PySpark's own ``spark-class``) runs the verification of a faithful east -> west
copy, once as ``drsvc verify --master spark://...`` and once as the application
``spark-submit`` runs (``drsvc/verify/submit.py`` with the Kafka source as ``--jars``). Both
pass, and the master lists both applications with executors on both workers."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from replication_support import create, end_offsets, running_workers, wait_for, write_topology

from chaos.workload import ConsumerSpec, ProducerSpec, Workload
from drsvc.components import load_components
from drsvc.devenv.environment import EnvironmentInfo
from drsvc.devenv.spark_standalone import StandaloneSpark, applications, spark_home
from drsvc.settings import Settings
from drsvc.verify import submit

TOPICS = {"standalone-a": 3, "standalone-b": 2}
RECORDS = 3000
APP = "drsvc-verify"
# Two Spark applications on a master and two workers beside two brokers: 14 min in all on the
# two-core machine under a load average of about 20 (57 s of set-up, drsvc verify 340 s,
# spark-submit 422 s), so not part of make test.
pytestmark = [pytest.mark.spark_standalone, pytest.mark.timeout(1200)]


@pytest.fixture(scope="module")
def standalone(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandaloneSpark]:
    cluster = StandaloneSpark(tmp_path_factory.mktemp("spark-standalone"))
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()


def _copied(bootstrap: str) -> int:
    return sum(sum(end_offsets(bootstrap, f"east.{t}").values()) for t in TOPICS)


def _run(argv: list[str], spark: StandaloneSpark) -> tuple[int, dict[str, Any], float]:
    started = time.monotonic()
    env = {**spark.environment(), "PYSPARK_PYTHON": sys.executable}
    done = subprocess.run(argv, capture_output=True, text=True, timeout=600, check=False, env=env)
    elapsed = time.monotonic() - started
    assert done.stdout.strip(), (
        f"{argv[:3]} printed nothing (exit {done.returncode}):\n" + (done.stderr[-4000:])
    )
    return done.returncode, json.loads(done.stdout), elapsed


def _executor_logs(spark: StandaloneSpark, app_id: str) -> list[Path]:
    return [
        log for i in range(spark.workers) for log in (spark.worker_dir(i) / app_id).glob("*/stderr")
    ]


def _check(verdict: dict[str, Any], acknowledged: int, copied: int) -> None:
    assert verdict["passed"] is True, verdict
    checks = verdict["checks"]
    assert checks["lost"] == 0 and checks["reordered"] == 0 and checks["altered"] == 0
    assert checks["loops"] == 0 and checks["aborted_visible"] == 0
    assert verdict["counts"]["acknowledged"] == acknowledged
    observed = verdict["counts"]["observed"]
    assert sum(v for k, v in observed.items() if k.startswith("west/")) == copied


def test_verify_runs_on_a_standalone_cluster_and_as_submitted(
    cluster_pair: EnvironmentInfo, standalone: StandaloneSpark, tmp_path: Path
) -> None:
    east, west = cluster_pair.clusters["east"], cluster_pair.clusters["west"]
    for topic, partitions in TOPICS.items():
        create(east, topic, partitions)
    topology = write_topology(
        tmp_path / "standalone.yaml",
        "standalone",
        {"east": east, "west": west},
        [{"source": "east", "target": "west", "topics": {"include": ["standalone-.*"]}}],
    )
    history = tmp_path / "history"
    workload = Workload(
        history,
        {"east": east},
        [ProducerSpec("plain", "east", tuple(TOPICS), rate=1000, max_records=RECORDS)],
        [ConsumerSpec("standalone-readers", "east", tuple(TOPICS))],
        seed=14,
    )
    with running_workers(topology, ["east->west"], tmp_path):
        workload.start()
        workload.wait_for(lambda s: all(not p.running for p in workload.producers), 120)
        wait_for(lambda: _copied(west) >= RECORDS, 180, "every record copied", 1.0)
        workload.wait_for(lambda s: s.processed >= s.acknowledged, 60)
    stats = workload.stop()
    assert not stats.errors(), stats.errors()[:5]
    assert stats.acknowledged == RECORDS
    copied = _copied(west)

    cli = [sys.executable, "-m", "drsvc.cli.main", "verify", "-t", str(topology),
           "--history", str(history), "--master", standalone.master_url, "--json"]  # fmt: skip
    code, verdict, elapsed = _run(cli, standalone)
    print(f"drsvc verify on {standalone.master_url}: {elapsed:.1f} s")
    assert code == 0, verdict
    _check(verdict, RECORDS, copied)

    jars = load_components(Settings.from_env().cache_dir).spark_kafka.jars
    submitted = [str(spark_home() / "bin" / "spark-submit"), "--master", standalone.master_url,
                 "--jars", ",".join(str(j) for j in jars),
                 "--conf", "spark.executor.memory=512m", "--conf", "spark.executor.cores=1",
                 submit.__file__, "-t", str(topology), "--history", str(history)]  # fmt: skip
    code, verdict, elapsed = _run(submitted, standalone)
    print(f"spark-submit on {standalone.master_url}: {elapsed:.1f} s")
    assert code == 0, verdict
    _check(verdict, RECORDS, copied)

    # Both ran on the cluster: two finished applications, each with executors on both workers.
    state = standalone.state()
    assert state is not None
    done = [a for a in applications(state, APP) if a.get("state") == "FINISHED"]
    assert len(done) == 2, applications(state, APP)
    for app in done:
        logs = _executor_logs(standalone, app["id"])
        assert len({log.parents[2] for log in logs}) == standalone.workers, (app["id"], logs)
