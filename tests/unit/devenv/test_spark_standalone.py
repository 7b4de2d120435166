"""Reading a standalone master's ``/json``: its alive workers and an application's runs."""

from __future__ import annotations

from pathlib import Path

from drsvc.devenv.spark_standalone import (
    StandaloneSpark,
    alive_workers,
    applications,
    spark_home,
)

STATE = {
    "status": "ALIVE",
    "workers": [{"id": "w1", "state": "ALIVE"}, {"id": "w2", "state": "DEAD"}, {"id": "w3"}],
    "activeapps": [{"id": "app-2", "name": "drsvc-verify", "state": "RUNNING"}],
    "completedapps": [
        {"id": "app-1", "name": "drsvc-verify", "state": "FINISHED"},
        {"id": "app-0", "name": "other", "state": "FINISHED"},
    ],
}


def test_only_alive_workers_count() -> None:
    assert alive_workers(STATE) == 1
    assert alive_workers({}) == 0


def test_applications_are_found_by_name_running_or_done() -> None:
    assert [a["id"] for a in applications(STATE, "drsvc-verify")] == ["app-2", "app-1"]
    assert applications(STATE, "none") == []


def test_the_cluster_keeps_everything_under_its_root(tmp_path: Path) -> None:
    cluster = StandaloneSpark(tmp_path)
    assert cluster.worker_dir(1) == tmp_path / "worker-1" / "work"
    env = cluster.environment()
    assert env["SPARK_LOG_DIR"] == str(tmp_path / "logs")
    assert env["SPARK_LOCAL_IP"] == "127.0.0.1"
    assert (spark_home() / "bin" / "spark-class").is_file()
    assert cluster.state() is None  # not started: no master to ask
