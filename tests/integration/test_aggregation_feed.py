"""Aggregation feeds: an aggregate cluster fed by several sources, read as one logical topic.

Sources east and west (and later south) copy a topic to ``agg`` (prefix naming), which also has
records of its own. A drsvc.client consumer of the application on ``agg`` reads the logical
topic: every record of every origin once, each origin partition in order, including the copies of
south, which is added to the topology file while the consumer runs. The two examples then read
the same: the Python feed and the Spark structured-streaming job count the records per origin.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from failover_support import wait_until
from replication_support import create, produce, running_workers, sequence_records

from drsvc.client import FailoverConsumer
from drsvc.devenv.environment import EnvironmentInfo

pytestmark = pytest.mark.timeout(600)

PER_ORIGIN = 1500
PARTITIONS = 3
REPO = Path(__file__).resolve().parents[2]


def _write(path: Path, name: str, clusters: dict[str, str], sources: list[str], topic: str) -> None:
    document: dict[str, Any] = {
        "name": name,
        "clusters": {a: {"bootstrap_servers": clusters[a]} for a in [*sources, "agg"]},
        "flows": [
            {"source": s, "target": "agg", "topics": {"include": [f"^{topic}$"]}} for s in sources
        ],
        "applications": [
            {"name": "central", "groups": ["central"], "topics": [topic], "preferred": "agg"}
        ],
    }
    # Written whole and renamed: a reader never sees half a file.
    partial = path.with_suffix(".tmp")
    partial.write_text(json.dumps(document, indent=2))
    partial.replace(path)


def test_a_logical_topic_on_an_aggregate_cluster_reads_every_origin_once_in_order(
    aggregation_trio: EnvironmentInfo, tmp_path: Path
) -> None:
    clusters = dict(aggregation_trio.clusters)
    consul = aggregation_trio.consul_http_addr
    assert consul is not None
    topic = f"feed-{uuid.uuid4().hex[:6]}"
    for alias in ("east", "west", "south", "agg"):
        create(clusters[alias], topic, PARTITIONS)
        produce(clusters[alias], topic, sequence_records(PER_ORIGIN, PARTITIONS, tag=f"{alias}-"))
    topology = tmp_path / "aggregation.json"
    _write(topology, topic, clusters, ["east", "west"], topic)

    reader = LogicalReader(
        FailoverConsumer(
            "central", topology,
            {"group.id": f"central-{topic}", "auto.offset.reset": "earliest"}, consul=consul,
        ),
        topic,
    ).start()  # fmt: skip
    # Both examples run from the start too, so they also see south added while they run.
    examples = _start_examples(topology, topic, clusters["agg"], consul, tmp_path)
    try:
        with running_workers(topology, ["east->agg", "west->agg"], tmp_path):
            wait_until(lambda: len(reader.read) >= 3 * PER_ORIGIN, 120, "east, west and agg read")
            # South joins: the topology file gains it, and its flow starts; the consumer runs on.
            _write(topology, topic, clusters, ["east", "west", "south"], topic)
            with running_workers(topology, ["south->agg"], tmp_path):
                wait_until(lambda: len(reader.read) >= 4 * PER_ORIGIN, 120, "south's copies read")
                outputs = {name: _finish(process) for name, process in examples.items()}
    finally:
        reader.stop()
        for process in examples.values():
            if process.poll() is None:
                process.kill()
    assert not reader.errors, reader.errors
    _check_once_in_order(reader.read)
    everyone = dict.fromkeys(["east", "west", "south", "agg"], PER_ORIGIN)
    # The Python example (its own group): per-origin counts, and nothing left to read.
    summary = json.loads(outputs["feed"].splitlines()[-1])
    assert summary["counts"] == everyone, summary
    assert all(behind == 0 for behind in summary["lag"].values()), summary["lag"]
    # The Spark example on local[*]: the same counts, from the topic names and headers.
    assert json.loads(outputs["spark"].splitlines()[-1]) == everyone


class LogicalReader:
    """Reads the logical topic on a thread, noting each record's origin."""

    def __init__(self, consumer: FailoverConsumer, topic: str) -> None:
        self.consumer = consumer
        self.consumer.subscribe([topic])
        self.read: list[tuple[str | None, int, int, bytes]] = []
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> LogicalReader:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(60)

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                msg = self.consumer.poll(0.2)
                if msg is None or msg.error() is not None:
                    continue
                origin = self.consumer.origin_of(msg)
                value = msg.value()
                assert value is not None
                self.read.append((origin.cluster, origin.partition, origin.offset, value))
        except Exception as err:
            self.errors.append(repr(err))
        finally:
            self.consumer.close()


def _check_once_in_order(read: list[tuple[str | None, int, int, bytes]]) -> None:
    """Every record of every origin once, each origin partition in its order."""
    values = Counter(value for *_, value in read)
    assert not [v for v, n in values.items() if n > 1], "records read twice"
    per_origin = Counter(cluster for cluster, *_ in read)
    assert per_origin == dict.fromkeys(["east", "west", "south", "agg"], PER_ORIGIN), per_origin
    for cluster in per_origin:
        for partition in range(PARTITIONS):
            offsets = [o for c, p, o, _ in read if (c, p) == (cluster, partition)]
            assert offsets == sorted(offsets), f"{cluster}-{partition} read out of order"
            assert len(offsets) == len(set(offsets))


def _start_examples(
    topology: Path, topic: str, agg: str, consul: str, tmp_path: Path
) -> dict[str, subprocess.Popen[str]]:
    total = str(4 * PER_ORIGIN)
    commands = {
        "feed": [
            sys.executable, str(REPO / "examples" / "aggregate_feed.py"), "-t", str(topology),
            "--app", "central", "--topic", topic, "--group", f"feed-{topic}", "--consul", consul,
            "--stop-after", total, "--json",
        ],
        "spark": [
            sys.executable, str(REPO / "examples" / "spark_origin_counts.py"),
            "--bootstrap", agg, "--topic", topic, "--cluster", "agg", "--stop-after", total,
            "--timeout-s", "400", "--json", "--checkpoint", str(tmp_path / "spark-checkpoint"),
        ],
    }  # fmt: skip
    return {
        name: subprocess.Popen(
            command,
            stdout=subprocess.PIPE,
            stderr=(tmp_path / f"{name}.err").open("w"),
            text=True,
        )
        for name, command in commands.items()
    }


def _finish(process: subprocess.Popen[str]) -> str:
    """The example's output once it stopped by itself (it stops after the last record)."""
    try:
        out, _ = process.communicate(timeout=420)
    except subprocess.TimeoutExpired:
        process.kill()
        out, _ = process.communicate()
    assert process.returncode == 0, f"{process.args[1]} exited {process.returncode}: {out[-500:]}"
    return out
