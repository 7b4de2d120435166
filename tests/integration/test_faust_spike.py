"""Spike: a faust worker (one agent, one changelog-backed table) against a real Kafka 4.x broker.

The worker runs in a subprocess (faust runs its own event loop). Words are produced with
confluent-kafka, keyed by the word with the murmur2 partitioner (the one the Java clients and
aiokafka use), and the ``word=count`` records the agent emits are read back with confluent-kafka.

The test covers three phases with exact expectations:

1. words produced before the first worker starts are processed from the earliest offset;
2. words produced while the worker runs are processed live;
3. after a clean stop (SIGTERM) a new worker restores the table from its changelog topic and
   resumes from the committed offsets, so counts continue and nothing is processed twice.

In phase 3 the words are produced once the new worker reports that its rebalance (including the
table recovery) has completed. Input already waiting while faust 0.15.3 restores a table can be
dropped or processed twice (a faust race, independent of the broker; see
docs/faust-on-kafka4.md), so the test does not exercise that case.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import ConfigResource, ResourceType  # type: ignore[attr-defined]
from faust_spike_app import changelog_topic

from drsvc.devenv.environment import EnvironmentInfo
from drsvc.kafka.admin import admin_client, create_topic

REPO_ROOT = Path(__file__).resolve().parents[2]
#: run as a script: the spike is test support, not part of the drsvc package
SPIKE_APP = Path(__file__).with_name("faust_spike_app.py")
PARTITIONS = 2
OUTPUT_TIMEOUT_S = 60.0
READY_TIMEOUT_S = 60.0
STOP_GRACE_S = 20.0
LOG_TAIL_CHARS = 6000

BATCH_BEFORE_START = Counter({"kafka": 5, "faust": 3, "table": 2, "agent": 1})
BATCH_LIVE = Counter({"kafka": 2, "stream": 4, "agent": 1})
BATCH_AFTER_RESTART = Counter({"faust": 2, "stream": 1, "changelog": 3})


class Worker:
    """One ``faust_spike_app.py`` worker process writing to its own log file."""

    def __init__(self, args: Sequence[str], log_path: Path) -> None:
        self.log_path = log_path
        self.ready_file = log_path.with_suffix(".ready")
        self._log = log_path.open("wb")
        self.proc = subprocess.Popen(
            [
                sys.executable,
                str(SPIKE_APP),
                *args,
                "--ready-file",
                str(self.ready_file),
            ],
            cwd=REPO_ROOT,
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
            start_new_session=True,
        )

    def log_tail(self) -> str:
        if not self._log.closed:
            self._log.flush()
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError as err:
            return f"<worker log unreadable: {err}>"
        return text[-LOG_TAIL_CHARS:]

    def wait_ready(self, timeout_s: float) -> float:
        """Wait until the worker has completed its first rebalance; return the seconds waited."""
        start = time.monotonic()
        while not self.ready_file.exists():
            if self.proc.poll() is not None:
                pytest.fail(
                    f"worker exited with {self.proc.returncode} before it was ready\n"
                    f"--- worker log tail ---\n{self.log_tail()}"
                )
            if time.monotonic() - start >= timeout_s:
                pytest.fail(
                    f"worker not ready within {timeout_s:.0f}s\n"
                    f"--- worker log tail ---\n{self.log_tail()}"
                )
            time.sleep(0.1)
        return time.monotonic() - start

    def stop(self) -> int:
        """SIGTERM, then SIGKILL after a grace period; return the exit code (negative: signal)."""
        try:
            if self.proc.poll() is None:
                self.proc.send_signal(signal.SIGTERM)
                try:
                    self.proc.wait(timeout=STOP_GRACE_S)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait(timeout=STOP_GRACE_S)
            return self.proc.returncode
        finally:
            self._log.close()


def words_in_random_order(batch: Counter[str], seed: int) -> list[str]:
    words = list(batch.elements())
    random.Random(seed).shuffle(words)
    return words


def produce_words(bootstrap: str, topic: str, words: Sequence[str]) -> None:
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            # Same partitioner as aiokafka/Java, so a word's input and output partitions agree.
            "partitioner": "murmur2_random",
            "enable.idempotence": True,
            "log_level": 4,
        }
    )
    for word in words:
        producer.produce(topic, key=word.encode(), value=word.encode())
    remaining = producer.flush(15)
    assert remaining == 0, f"{remaining} input records not delivered"


class OutputReader:
    """Reads every ``word=count`` record of the output topic from the beginning."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self._consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": f"spike-check-{uuid.uuid4().hex[:8]}",
                "enable.auto.commit": False,
                "isolation.level": "read_committed",
                "log_level": 4,
            }
        )
        self._consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
        self.values: dict[str, list[int]] = {}

    def read_until(self, expected: Mapping[str, int], worker: Worker, timeout_s: float) -> None:
        """Poll until the latest count of every word equals ``expected`` (or fail)."""
        deadline = time.monotonic() + timeout_s
        while not self._reached(expected):
            overshoot = {w: c for w, c in self.latest().items() if c > expected.get(w, 0)}
            if overshoot:
                pytest.fail(
                    f"counts beyond {dict(expected)}: {overshoot} (input processed twice?)\n"
                    f"--- worker log tail ---\n{worker.log_tail()}"
                )
            if worker.proc.poll() is not None:
                pytest.fail(
                    f"worker exited with {worker.proc.returncode} before producing "
                    f"{dict(expected)}; latest {self.latest()}\n"
                    f"--- worker log tail ---\n{worker.log_tail()}"
                )
            if time.monotonic() >= deadline:
                pytest.fail(
                    f"expected counts {dict(expected)} not seen within {timeout_s:.0f}s; "
                    f"latest {self.latest()}\n--- worker log tail ---\n{worker.log_tail()}"
                )
            self._poll(0.5)

    def drain(self, quiet_s: float) -> None:
        """Keep reading until nothing arrives for ``quiet_s`` (catches trailing duplicates)."""
        while self._poll(quiet_s):
            pass

    def _poll(self, timeout_s: float) -> bool:
        msg = self._consumer.poll(timeout_s)
        if msg is None:
            return False
        assert msg.error() is None, f"output consumer error: {msg.error()}"
        key, value = (msg.key() or b"").decode(), (msg.value() or b"").decode()
        word, _, count = value.partition("=")
        assert word == key, f"record key {key!r} does not match value {value!r}"
        self.values.setdefault(word, []).append(int(count))
        return True

    def latest(self) -> dict[str, int]:
        return {word: counts[-1] for word, counts in self.values.items()}

    def _reached(self, expected: Mapping[str, int]) -> bool:
        latest = self.latest()
        return all(latest.get(word) == count for word, count in expected.items())

    def close(self) -> None:
        self._consumer.close()


@pytest.fixture
def topics(cluster_pair: EnvironmentInfo) -> tuple[str, str, str]:
    bootstrap = cluster_pair.clusters["east"]
    suffix = uuid.uuid4().hex[:8]
    input_topic, output_topic = f"spike-words-{suffix}", f"spike-counts-{suffix}"
    admin = admin_client(bootstrap)
    assert create_topic(admin, input_topic, PARTITIONS)
    assert create_topic(admin, output_topic, PARTITIONS)
    return bootstrap, input_topic, output_topic


@pytest.fixture
def workers() -> Iterator[list[Worker]]:
    """Workers started by the test; any still running at the end are stopped."""
    started: list[Worker] = []
    yield started
    for worker in started:
        worker.stop()


def assert_changelog_topic(bootstrap: str, topic: str, worker: Worker) -> None:
    admin = admin_client(bootstrap)
    metadata = admin.list_topics(topic=topic, timeout=10)
    described: Any = metadata.topics.get(topic)
    assert described is not None and described.error is None, (
        f"changelog topic {topic} missing: {described and described.error}\n"
        f"--- worker log tail ---\n{worker.log_tail()}"
    )
    assert len(described.partitions) == PARTITIONS
    resource = ConfigResource(ResourceType.TOPIC, topic)
    configs = admin.describe_configs([resource])[resource].result(timeout=10)
    assert configs["cleanup.policy"].value == "compact"


@pytest.mark.timeout(180)
def test_faust_word_count_on_kafka4(
    topics: tuple[str, str, str], workers: list[Worker], tmp_path: Path
) -> None:
    bootstrap, input_topic, output_topic = topics
    app_id = f"drsvc-spike-{uuid.uuid4().hex[:8]}"
    args = [
        "--bootstrap",
        bootstrap,
        "--app-id",
        app_id,
        "--input",
        input_topic,
        "--output",
        output_topic,
        "--partitions",
        str(PARTITIONS),
    ]
    reader = OutputReader(bootstrap, output_topic)
    try:
        # 1. Backlog produced before the worker starts.
        produce_words(bootstrap, input_topic, words_in_random_order(BATCH_BEFORE_START, 1))
        first = Worker(args, tmp_path / "worker-1.log")
        workers.append(first)
        expected = Counter(BATCH_BEFORE_START)
        reader.read_until(expected, first, OUTPUT_TIMEOUT_S)

        # 2. Words produced while the worker runs.
        produce_words(bootstrap, input_topic, words_in_random_order(BATCH_LIVE, 2))
        expected += BATCH_LIVE
        reader.read_until(expected, first, OUTPUT_TIMEOUT_S)
        assert_changelog_topic(bootstrap, changelog_topic(app_id), first)

        code = first.stop()
        assert code == 0, (
            f"worker did not stop cleanly on SIGTERM (exit {code})\n{first.log_tail()}"
        )

        # 3. A new worker restores the table from the changelog and resumes where it stopped.
        second = Worker(args, tmp_path / "worker-2.log")
        workers.append(second)
        second.wait_ready(READY_TIMEOUT_S)
        produce_words(bootstrap, input_topic, words_in_random_order(BATCH_AFTER_RESTART, 3))
        expected += BATCH_AFTER_RESTART
        reader.read_until(expected, second, OUTPUT_TIMEOUT_S)

        # Exactly one output record per input word, counting up without gaps or repeats.
        reader.drain(1.0)
        assert reader.values == {word: list(range(1, n + 1)) for word, n in expected.items()}, (
            f"unexpected output sequence {reader.values}\n"
            f"--- worker log tail ---\n{second.log_tail()}"
        )
        code = second.stop()
        assert code == 0, f"worker did not stop cleanly (exit {code})\n{second.log_tail()}"
    finally:
        reader.close()
