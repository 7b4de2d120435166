"""Helpers for checkpoint tests on real clusters: the agent process, commits, reading checkpoints,
scraping metrics, and a brute-force count of what a failover would lose or re-read."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition
from prometheus_client.parser import text_string_to_metric_families
from replication_support import end_offsets, read_all, wait_for

from drsvc.devenv.ports import allocate_ports
from failover import naming, provenance
from failover.checkpoints import Checkpoint, CheckpointKey, decode_key, decode_value

CHECKPOINTS = "east.checkpoints.internal"


def free_port() -> int:
    (port,) = allocate_ports("127.0.0.1", 1)
    return port


class AgentProcess:
    """A ``drsvc checkpoints`` process, logging to a file, with a metrics endpoint."""

    def __init__(self, topology: Path, log_file: Path, state_dir: Path, *extra: str) -> None:
        self.log_file = log_file
        self.metrics_port = free_port()
        self._log = log_file.open("ab")
        self.started = time.monotonic()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "drsvc.cli.main", "checkpoints", "-t", str(topology),
             "--metrics-port", str(self.metrics_port), "--state-dir", str(state_dir), *extra],
            stdout=self._log, stderr=subprocess.STDOUT, env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )  # fmt: skip

    def log_tail(self, lines: int = 40) -> str:
        return "\n".join(self.log_file.read_text(errors="replace").splitlines()[-lines:])

    def metrics(self) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
        """Every sample the agent exports now: ``{(name, sorted labels): value}``."""
        url = f"http://127.0.0.1:{self.metrics_port}/metrics"
        with urllib.request.urlopen(url, timeout=5) as answer:
            text = answer.read().decode()
        return {
            (sample.name, tuple(sorted(sample.labels.items()))): sample.value
            for family in text_string_to_metric_families(text)
            for sample in family.samples
        }

    def sample(self, name: str, **labels: str) -> float | None:
        try:
            return self.metrics().get((name, tuple(sorted(labels.items()))))
        except OSError:
            return None  # not serving yet

    def stop(self, timeout_s: float = 60) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self._log.close()
        return self.proc.returncode

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)
        self._log.close()


def commit(bootstrap: str, group: str, topic: str, offsets: Mapping[int, int]) -> None:
    """Commit ``offsets`` for ``group`` (as a consumer that read everything before them would)."""
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False}
    )
    try:
        consumer.commit(
            offsets=[TopicPartition(topic, p, o) for p, o in offsets.items()], asynchronous=False
        )
    finally:
        consumer.close()


@dataclass(frozen=True)
class LoggedCheckpoint:
    offset: int
    key: CheckpointKey
    checkpoint: Checkpoint


def checkpoint_log(bootstrap: str, topic: str = CHECKPOINTS) -> list[LoggedCheckpoint]:
    """Every record of the checkpoints topic, in log order."""
    out = []
    for record in read_all(bootstrap, topic):
        assert record.key is not None and record.value is not None
        out.append(
            LoggedCheckpoint(record.offset, decode_key(record.key), decode_value(record.value))
        )
    return out


def latest(log: list[LoggedCheckpoint]) -> dict[CheckpointKey, Checkpoint]:
    return {entry.key: entry.checkpoint for entry in log}


class CheckpointTail:
    """A consumer at the end of the checkpoints topic, to see new checkpoints as they land."""

    def __init__(self, bootstrap: str, topic: str = CHECKPOINTS) -> None:
        self.consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": "drsvc-test-tail",
                "enable.auto.commit": False,
                "fetch.wait.max.ms": 10,
                "isolation.level": "read_committed",
            }
        )
        # From the end as it is now (OFFSET_END would be resolved later, missing what lands
        # in between).
        _low, high = self.consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        self.consumer.assign([TopicPartition(topic, 0, high)])
        self.seen: list[tuple[float, CheckpointKey, Checkpoint]] = []

    def wait_for(
        self, key: CheckpointKey, source_offset: int, timeout_s: float
    ) -> tuple[float, Checkpoint]:
        """(time.time() it was read, checkpoint) of the first checkpoint of ``key`` at
        ``source_offset``; AssertionError after ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            for msg in self.consumer.consume(100, 0.05):
                if msg.error() is not None:
                    assert msg.error().code() == KafkaError._PARTITION_EOF, msg.error()
                    continue
                now = time.time()
                raw_key, raw_value = msg.key(), msg.value()
                assert raw_key is not None and raw_value is not None
                self.seen.append((now, decode_key(raw_key), decode_value(raw_value)))
            for at, seen_key, checkpoint in self.seen:
                if seen_key == key and checkpoint.source_offset == source_offset:
                    return at, checkpoint
        raise AssertionError(f"no checkpoint of {key} at {source_offset} within {timeout_s:.0f}s")

    def close(self) -> None:
        self.consumer.close()


def translate_json(topology: Path, group: str) -> dict[str, Any]:
    """``drsvc translate --json`` of ``group`` from east to west."""
    done = subprocess.run(
        [sys.executable, "-m", "drsvc.cli.main", "translate", "-t", str(topology),
         "--group", group, "--from", "east", "--to", "west", "--json"],
        capture_output=True, text=True, timeout=90, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def brute_force_exposure(
    east: str, west: str, topic: str, committed: Mapping[int, int], translated: Mapping[int, int]
) -> dict[int, tuple[int, int]]:
    """Per partition, (would lose, would re-read), counted record by record on both clusters.

    * lost: records of the source partition at or after the committed offset that have no copy
      on the target;
    * re-read: records before the committed offset that have no copy (they come back if the
      source recovers), plus copies at or after the translated position of records before the
      committed offset (the group would read them again on the target).
    """
    copies: dict[int, list[tuple[int, int]]] = {}  # partition -> [(target offset, source offset)]
    for record in read_all(west, f"east.{topic}"):
        hops = provenance.chain(record.headers)
        assert hops, f"copy {record.partition}@{record.offset} has no provenance header"
        copies.setdefault(record.partition, []).append((record.offset, hops[-1].offset))
    sources: dict[int, list[int]] = {}
    for record in read_all(east, topic):
        sources.setdefault(record.partition, []).append(record.offset)
    result = {}
    for p, c in committed.items():
        copied = {source for _target, source in copies.get(p, [])}
        lost = sum(1 for o in sources.get(p, []) if o >= c and o not in copied)
        not_copied = sum(1 for o in sources.get(p, []) if o < c and o not in copied)
        twice = sum(1 for t, s in copies.get(p, []) if t >= translated[p] and s < c)
        result[p] = (lost, not_copied + twice)
    return result


def replicator_progress(east: str, topic: str) -> dict[int, int]:
    """The east->west worker's committed progress of ``topic`` (empty while no coordinator)."""
    consumer = Consumer(
        {"bootstrap.servers": east, "group.id": naming.replicator_group("east", "west")}
    )
    try:
        partitions = [TopicPartition(topic, p) for p in end_offsets(east, topic)]
        return {tp.partition: tp.offset for tp in consumer.committed(partitions, timeout=10)}
    except KafkaException as err:
        if err.args[0].code() != KafkaError.NOT_COORDINATOR:
            raise
        return {}
    finally:
        consumer.close()


def wait_replicated(east: str, topic: str) -> None:
    """The east->west worker committed every partition of ``topic`` up to its end (copies and
    syncs)."""
    wait_for(
        lambda: all(
            replicator_progress(east, topic).get(p, -1) >= end
            for p, end in end_offsets(east, topic).items()
        ),
        90,
        f"east->west to copy {topic}",
    )
