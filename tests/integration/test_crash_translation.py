"""Exact translation survives workers killed with kill -9 while records keep arriving.

A producer writes sequence-numbered records to east without a pause while the flow's worker is
killed three times and restarted. Once replication has caught up, a consumer group that read part
of every partition on east is translated with ``drsvc translate``: every partition must be exact,
and a consumer starting on west at the translated offsets must read exactly the records the group
had not read (never one it had read, never a gap). At least once, a record copied twice may come
twice; exactly once, nothing does.
"""

from __future__ import annotations

import random
import re
import threading
import time
from pathlib import Path

import pytest
from confluent_kafka import Producer
from replication_support import WorkerProcess, create, wait_for, write_topology
from translation_support import (
    by_partition,
    consume_and_commit,
    read_from,
    stable_ends,
    translate,
    translated,
)

from drsvc.devenv.environment import EnvironmentInfo

pytestmark = pytest.mark.timeout(420)

PARTITIONS = 3
KILLS = 3


class SteadyProducer:
    """Writes sequence-numbered records to ``topic`` at about ``rate`` per second until stopped."""

    def __init__(self, bootstrap: str, topic: str, rate: int = 5000) -> None:
        self._producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "all"})
        self._topic = topic
        self._rate = rate
        self._stop = threading.Event()
        self._errors: list[str] = []
        self.sent = 0
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> SteadyProducer:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stop()

    def stop(self) -> None:
        if not self._stop.is_set():
            self._stop.set()
            self._thread.join(30)
            left = self._producer.flush(60)
            assert left == 0 and not self._errors, f"{left} records left, {self._errors[:3]}"

    def _on_delivery(self, err: object, _msg: object) -> None:
        if err is not None:
            self._errors.append(str(err))

    def _run(self) -> None:
        started = time.monotonic()
        while not self._stop.is_set():
            due = int((time.monotonic() - started) * self._rate)
            while self.sent < due:
                seq = self.sent
                self._producer.produce(
                    self._topic,
                    f"{seq}".encode(),
                    f"k{seq}".encode(),
                    partition=seq % PARTITIONS,
                    on_delivery=self._on_delivery,
                )
                self.sent += 1
            self._producer.poll(0)
            time.sleep(0.005)


def copied_so_far(worker: WorkerProcess) -> int:
    """Records the worker says it has copied (its progress line, once a second)."""
    found = re.findall(r": (\d+) records copied", worker.log_file.read_text(errors="replace"))
    return int(found[-1]) if found else 0


def all_exact(topology: Path, group: str) -> bool:
    result = translate(topology, group, "east", "west")
    return bool(result["exact"]) and len(result["partitions"]) == PARTITIONS


def copy_while_killing(
    east: str, topic: str, topology: Path, logs: Path, rng: random.Random, extra: list[str]
) -> dict[int, int]:
    """Produce steadily while the worker is killed :data:`KILLS` times, each time while it
    copies; then let replication catch up until the source's end offsets translate exactly.
    Returns those end offsets."""
    logs.mkdir()
    worker = WorkerProcess(topology, "east->west", logs / "worker-0.log", *extra)
    try:
        with SteadyProducer(east, topic) as producer:
            for kill in range(1, KILLS + 1):
                # Kill it while it copies: once it has partitions (or slots) and records flow.
                wait_for(lambda w=worker: copied_so_far(w) > 0, 60, f"worker {kill - 1} to copy")
                time.sleep(rng.uniform(1.0, 3.0))
                assert worker.proc.poll() is None, worker.log_tail()
                worker.kill()
                worker = WorkerProcess(topology, "east->west", logs / f"worker-{kill}.log", *extra)
            time.sleep(3)
            producer.stop()
            assert producer.sent > 30_000, f"only {producer.sent} records produced"
        ends = stable_ends(east, topic, PARTITIONS)
        consume_and_commit(east, topic, f"{topic}-end", ends, "read_committed")
        wait_for(
            lambda: all_exact(topology, f"{topic}-end"),
            180,
            "replication to catch up with exact translation of the end offsets",
        )
    finally:
        worker.stop()
    assert worker.proc.returncode == 0, worker.log_tail()
    return ends


@pytest.mark.parametrize(
    ("delivery", "commit_interval_s"),
    [
        ("at-least-once", None),
        ("at-least-once", 5.0),
        ("exactly-once", None),
        ("exactly-once", 5.0),
    ],
    ids=["alo-default", "alo-commit-5s", "eos-default", "eos-commit-5s"],
)
def test_kill_9_under_load_leaves_every_partition_translating_exactly(
    cluster_pair: EnvironmentInfo, tmp_path: Path, delivery: str, commit_interval_s: float | None
) -> None:
    east, west = cluster_pair.clusters["east"], cluster_pair.clusters["west"]
    tag = f"{'alo' if delivery == 'at-least-once' else 'eos'}-{int(commit_interval_s or 0)}"
    topic = f"crash-{tag}"
    create(east, topic, PARTITIONS)
    topology = write_topology(
        tmp_path / "crash.yaml",
        "crash",
        {"east": east, "west": west},
        [
            {
                "source": "east",
                "target": "west",
                "topics": {"include": [f"^{topic}$"]},
                "delivery": delivery,
            }
        ],
    )
    extra = [] if commit_interval_s is None else ["--commit-interval-s", str(commit_interval_s)]
    if delivery == "exactly-once":
        # The session's clusters share one east->west flow, whose slot count is fixed once it
        # has run: every exactly-once test on the pair uses 4.
        extra += ["--slots", "4"]
    rng = random.Random(tag)
    ends = copy_while_killing(east, topic, topology, tmp_path / "workers", rng, extra)

    # A group part way through every partition: somewhere in what was copied around the kills.
    stops = {p: rng.randrange(ends[p] // 10, ends[p] - ends[p] // 10) for p in range(PARTITIONS)}
    group = f"{topic}-group"
    consumed = consume_and_commit(east, topic, group, stops, "read_committed")

    result = translate(topology, group, "east", "west")
    rows = translated(result, f"east.{topic}")
    assert sorted(rows) == list(range(PARTITIONS))
    assert result["exact"], [(p, r["reason"], r["pending"]) for p, r in rows.items()]
    starts = {p: row["target_offset"] for p, row in rows.items()}
    after = read_from(west, f"east.{topic}", f"{group}-west", starts, "read_committed")

    everything = by_partition(east, topic)
    copies = by_partition(west, f"east.{topic}")
    duplicates = sum(map(len, copies.values())) - sum(map(len, everything.values()))
    for p, records in everything.items():
        values = [value for _offset, value in records]
        unread = values[len(consumed[p]) :]
        assert consumed[p] == values[: len(consumed[p])]
        read = after[p]
        assert not set(read) & set(consumed[p]), f"partition {p}: re-read a consumed record"
        assert list(dict.fromkeys(read)) == unread, (
            f"partition {p}: read {len(read)} records after the move ({len(set(read))} "
            f"distinct), {len(unread)} were unread; first unread {unread[:1]}, "
            f"first read {read[:1]}"
        )
        if delivery == "exactly-once":
            assert read == unread, f"partition {p}: {len(read) - len(unread)} duplicates"
    if delivery == "exactly-once":
        assert duplicates == 0
    else:
        # The kills really made the at-least-once worker copy records again.
        assert duplicates > 0
