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

    consumer = FailoverConsumer(
        "central", topology, {"group.id": f"central-{topic}", "auto.offset.reset": "earliest"},
        consul=consul,
    )  # fmt: skip
    consumer.subscribe([topic])
    read: list[tuple[str | None, int, int, bytes]] = []
    stop = threading.Event()
    errors: list[str] = []

    def run() -> None:
        try:
            while not stop.is_set():
                msg = consumer.poll(0.2)
                if msg is None or msg.error() is not None:
                    continue
                origin = consumer.origin_of(msg)
                value = msg.value()
                assert value is not None
                read.append((origin.cluster, origin.partition, origin.offset, value))
        except Exception as err:
            errors.append(repr(err))
        finally:
            consumer.close()

    reader = threading.Thread(target=run, daemon=True)
    reader.start()
    try:
        with running_workers(topology, ["east->agg", "west->agg"], tmp_path):
            wait_until(lambda: len(read) >= 3 * PER_ORIGIN, 120, "east, west and agg read")
            # South joins: the topology file gains it, and its flow starts; the consumer runs on.
            _write(topology, topic, clusters, ["east", "west", "south"], topic)
            with running_workers(topology, ["south->agg"], tmp_path):
                wait_until(lambda: len(read) >= 4 * PER_ORIGIN, 120, "south's copies read")
    finally:
        stop.set()
        reader.join(60)
    assert not errors, errors

    values = Counter(value for *_, value in read)
    assert not [v for v, n in values.items() if n > 1], "records read twice"
    per_origin = Counter(cluster for cluster, *_ in read)
    assert per_origin == dict.fromkeys(["east", "west", "south", "agg"], PER_ORIGIN), per_origin
    for cluster in per_origin:
        for partition in range(PARTITIONS):
            offsets = [o for c, p, o, _ in read if (c, p) == (cluster, partition)]
            assert offsets == sorted(offsets), f"{cluster}-{partition} read out of order"
            assert len(offsets) == len(set(offsets))

    _examples_count_the_same(topology, topic, clusters["agg"], consul, tmp_path)


def _examples_count_the_same(
    topology: Path, topic: str, agg: str, consul: str, tmp_path: Path
) -> None:
    # The Python example: its own group, per-origin counts.
    feed = subprocess.run(
        [sys.executable, str(REPO / "examples" / "aggregate_feed.py"), "-t", str(topology),
         "--app", "central", "--topic", topic, "--group", f"feed-{topic}", "--consul", consul,
         "--idle-exit-s", "5", "--json"],
        capture_output=True, text=True, timeout=180, check=False,
    )  # fmt: skip
    assert feed.returncode == 0, feed.stderr[-2000:]
    summary = json.loads(feed.stdout.strip().splitlines()[-1])
    assert summary["counts"] == dict.fromkeys(["east", "west", "south", "agg"], PER_ORIGIN)
    assert all(behind == 0 for behind in summary["lag"].values()), summary["lag"]

    # The Spark example, on local[*]: the same counts, from the topic names and headers.
    spark = subprocess.run(
        [sys.executable, str(REPO / "examples" / "spark_origin_counts.py"),
         "--bootstrap", agg, "--topic", topic, "--cluster", "agg", "--once",
         "--json", "--checkpoint", str(tmp_path / "spark-checkpoint")],
        capture_output=True, text=True, timeout=400, check=False,
    )  # fmt: skip
    assert spark.returncode == 0, spark.stderr[-3000:]
    counts = json.loads(spark.stdout.strip().splitlines()[-1])
    assert counts == dict.fromkeys(["east", "west", "south", "agg"], PER_ORIGIN), counts
