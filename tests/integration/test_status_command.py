"""``drsvc status`` and the replication metrics against real clusters and real workers."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families
from replication_support import (
    WorkerProcess,
    create,
    end_offsets,
    produce,
    running_workers,
    sequence_records,
    wait_for,
    write_topology,
)
from typer.testing import CliRunner

from drsvc.cli.main import build_app
from drsvc.devenv.environment import EnvironmentInfo
from drsvc.runtime.metrics_server import serve_metrics
from drsvc.runtime.replication.engine import ReplicationEngine
from drsvc.runtime.replication.metrics import (
    install_replication_metrics,
    remove_replication_metrics,
)
from drsvc.runtime.replication.settings import worker_settings
from drsvc.topology.loader import load_topology

Partitions = dict[int, dict[str, Any]]


def status_json(topology: Path) -> dict[str, Any]:
    """``drsvc status --json`` in this process (cheaper than a new interpreter per poll)."""
    result = CliRunner().invoke(build_app(), ["status", "-t", str(topology), "--json"])
    assert result.exit_code == 0, f"status failed ({result.exit_code}): {result.output}"
    document: dict[str, Any] = json.loads(result.stdout)
    return document


def partitions_of(document: dict[str, Any], flow: str, topic: str) -> Partitions:
    (entry,) = [f for f in document["flows"] if f["flow"] == flow]
    assert entry["error"] is None, entry["error"]
    return {p["partition"]: p for p in entry["partitions"] if p["topic"] == topic}


def caught_up_and_owned(topology: Path, topic: str, partitions: int) -> bool:
    rows = partitions_of(status_json(topology), "east->west", topic)
    return len(rows) == partitions and all(
        p["lag"] == 0 and p["owner"] != "-" for p in rows.values()
    )


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_status_shows_lag_until_the_worker_catches_up_and_who_copies(
    cluster_pair: EnvironmentInfo, tmp_path: Path
) -> None:
    east, west = cluster_pair.clusters["east"], cluster_pair.clusters["west"]
    create(east, "st-orders", 3)
    produce(east, "st-orders", sequence_records(3000, 3, tag="st-"))
    ends = end_offsets(east, "st-orders")
    flow = {"source": "east", "target": "west", "topics": {"include": ["st-orders"]}}
    topology = write_topology(tmp_path / "st.yaml", "st", {"east": east, "west": west}, [flow])

    before = partitions_of(status_json(topology), "east->west", "st-orders")
    assert {p: row["lag"] for p, row in before.items()} == ends
    assert all(row["replicated_offset"] is None for row in before.values())
    assert all(row["progress"] == "none" and row["owner"] == "-" for row in before.values())
    assert all(row["remote_topic"] == "east.st-orders" for row in before.values())

    with running_workers(topology, ["east->west"], tmp_path):
        wait_for(lambda: caught_up_and_owned(topology, "st-orders", 3), 90, "lag 0, owned")
        running = partitions_of(status_json(topology), "east->west", "st-orders")
        assert {p: row["replicated_offset"] for p, row in running.items()} == ends
        assert {p: row["source_end_offset"] for p, row in running.items()} == ends
        assert len({row["owner"] for row in running.values()}) == 1  # one worker owns all
        assert {row["owner_client_id"] for row in running.values()} == {"drsvc-east->west"}

        # The console script, as an operator runs it: a table, and exit 1 plus an error entry
        # for a flow whose source cannot be reached while the other flow still reports.
        gone = f"127.0.0.1:{closed_port()}"
        mixed = write_topology(
            tmp_path / "mixed.yaml",
            "mixed",
            {"east": east, "west": west, "gone": gone},
            [flow, {"source": "gone", "target": "west"}],
        )
        table = subprocess.run(
            [sys.executable, "-m", "drsvc.cli.main", "status", "-t", str(topology)],
            capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
        assert table.returncode == 0, table.stderr
        assert "REPLICATED-OFFSET" in table.stdout and "east.st-orders" in table.stdout
        failed = subprocess.run(
            [sys.executable, "-m", "drsvc.cli.main", "status", "-t", str(mixed), "--json",
             "--timeout-s", "3"],
            capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
        assert failed.returncode == 1, failed.stderr
        assert "Traceback" not in failed.stderr
        flows = {f["flow"]: f for f in json.loads(failed.stdout)["flows"]}
        assert flows["gone->west"]["error"].startswith("cluster 'gone': ")
        assert flows["east->west"]["error"] is None

    # Stopped: the progress stays, nobody owns the partitions, new records are lag again.
    produce(east, "st-orders", sequence_records(600, 3, first=3000, tag="st-"))
    after = partitions_of(status_json(topology), "east->west", "st-orders")
    assert {p: row["replicated_offset"] for p, row in after.items()} == ends
    assert {p: row["lag"] for p, row in after.items()} == {0: 200, 1: 200, 2: 200}
    assert all(row["progress"] == "committed" and row["owner"] == "-" for row in after.values())


def test_status_of_an_exactly_once_flow_reads_progress_and_slot_owners_on_the_target(
    cluster_pair: EnvironmentInfo, tmp_path: Path
) -> None:
    east, west = cluster_pair.clusters["east"], cluster_pair.clusters["west"]
    create(east, "st-eos", 3)
    produce(east, "st-eos", sequence_records(900, 3, tag="eos-"))
    ends = end_offsets(east, "st-eos")
    flow = {
        "source": "east",
        "target": "west",
        "delivery": "exactly-once",
        "topics": {"include": ["st-eos"]},
    }
    topology = write_topology(tmp_path / "eos.yaml", "eos", {"east": east, "west": west}, [flow])

    before = status_json(topology)["flows"][0]
    assert (before["delivery"], before["progress_cluster"]) == ("exactly-once", "west")
    rows = partitions_of(status_json(topology), "east->west", "st-eos")
    assert {p: row["lag"] for p, row in rows.items()} == ends

    log = tmp_path / "eos-worker.log"
    worker = WorkerProcess(topology, "east->west", log, "--slots", "4")
    try:
        wait_for(lambda: caught_up_and_owned(topology, "st-eos", 3), 120, "lag 0, slots owned")
        rows = partitions_of(status_json(topology), "east->west", "st-eos")
        assert {p: row["replicated_offset"] for p, row in rows.items()} == ends
        assert all(row["progress"] == "committed" for row in rows.values())
        assert len({row["owner"] for row in rows.values()}) == 1
    finally:
        worker.stop()
    assert worker.proc.returncode == 0, worker.log_tail()


def scrape(port: int) -> dict[str, dict[tuple[str, int], float]]:
    """Metric name -> (topic, partition) -> value, of the replication metrics served."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        text = response.read().decode()
    metrics: dict[str, dict[tuple[str, int], float]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name.startswith("drsvc_replication_") and "topic" in sample.labels:
                key = (sample.labels["topic"], int(sample.labels["partition"]))
                metrics.setdefault(sample.name, {})[key] = sample.value
            elif sample.name.startswith("drsvc_replication_"):
                metrics.setdefault(sample.name, {})[("", -1)] = sample.value
    return metrics


@contextmanager
def worker_in_this_process(topology: Path) -> Iterator[ReplicationEngine]:
    loaded = load_topology(topology)
    worker = ReplicationEngine(worker_settings(loaded, loaded.flows[0], {}))
    thread = threading.Thread(target=worker.run, name="flow-worker", daemon=True)
    thread.start()
    try:
        yield worker
    finally:
        worker.stop()
        thread.join(60)
        assert not thread.is_alive(), "the worker did not stop"


def test_metrics_endpoint_reports_records_bytes_latency_and_lag(
    cluster_pair: EnvironmentInfo, tmp_path: Path
) -> None:
    east, west = cluster_pair.clusters["east"], cluster_pair.clusters["west"]
    topic = "st-metrics"
    create(east, topic, 2)
    flow = {"source": "east", "target": "west", "topics": {"include": [topic]}}
    topology = write_topology(tmp_path / "m.yaml", "m", {"east": east, "west": west}, [flow])
    now_ms = int(time.time() * 1000)
    records = [
        (seq % 2, f"k{seq}".encode(), f"metric-{seq}".encode(), [], now_ms + seq)
        for seq in range(1000)
    ]
    expected_bytes = {
        p: sum(len(k) + len(v) for part, k, v, _h, _t in records if part == p) for p in (0, 1)
    }
    port = serve_metrics(0)
    assert port is not None
    with worker_in_this_process(topology) as worker:
        install_replication_metrics(worker)
        try:
            # Records written while the worker runs: their latency is the copy's, not a backlog's.
            produce(east, topic, records)
            ends = end_offsets(east, topic)

            def caught_up() -> bool:
                now = scrape(port)
                lag = now.get("drsvc_replication_lag_records", {})
                replicated = now.get("drsvc_replication_replicated_offset", {})
                return all(
                    lag.get((topic, p)) == 0 and replicated.get((topic, p)) == ends[p]
                    for p in (0, 1)
                )

            wait_for(caught_up, 90, "lag 0 in the metrics")
            metrics = scrape(port)
        finally:
            remove_replication_metrics(worker)
    for p in (0, 1):
        key = (topic, p)
        assert metrics["drsvc_replication_records_total"][key] == 500
        assert metrics["drsvc_replication_bytes_total"][key] == expected_bytes[p]
        assert metrics["drsvc_replication_replicated_offset"][key] == ends[p]
        assert metrics["drsvc_replication_source_end_offset"][key] == ends[p]
        latency = metrics["drsvc_replication_latency_ms"][key]
        assert 0 <= latency < 60_000, latency
        assert 0 <= metrics["drsvc_replication_record_age_ms"][key] < 120_000
    assert metrics["drsvc_replication_syncs_written_total"][("", -1)] > 0
    assert metrics["drsvc_replication_rewinds_total"][("", -1)] == 0
    assert metrics["drsvc_replication_delivery_failures_total"][("", -1)] == 0
    assert "drsvc_replication_records_total" not in scrape(port)  # removed with its worker
