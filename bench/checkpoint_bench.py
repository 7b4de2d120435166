"""Checkpoint latency: a consumer group commits on the source; how long until its translated
checkpoint can be read on the target? Prints one JSON object (progress on stderr).

Scenario: clusters ``east`` and ``west`` (the ``drsvc dev`` environment; started in a temporary
state directory unless ``--state-dir`` names one where both run). A topic of ``--partitions``
partitions with ``--records`` records is copied by ``drsvc replicate`` (east->west) and followed
by ``drsvc checkpoints`` (default 1 s poll). Then ``--commits`` times, at random moments (0.2 to
1.5 s apart, so commits fall anywhere in the poll cycle), a group commits a new offset on a
random partition, and a consumer tailing ``east.checkpoints.internal`` on west notes when the
checkpoint of that position arrives: *latency = time read on west - time the commit returned*,
one machine, one clock. Finally the agent is killed (SIGKILL) and restarted, a commit is made
while it is down, and the time from the restart to that checkpoint is reported
(``restart_to_checkpoint_s``, process start-up included).

Reported: median, p90, max and mean latency, how many were within 2 s, the agent's own
``drsvc_checkpoint_latency_ms`` (an upper bound: from the previous poll), the load average.

Run: ``python bench/checkpoint_bench.py [--commits 60] [--interval-s 1] [--state-dir DIR]``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import random
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition

from drsvc.devenv.environment import LocalEnvironment
from drsvc.kafka.admin import admin_client, create_topic
from drsvc.settings import Settings
from failover.checkpoints import CheckpointKey, decode_key, decode_value

GROUP = "ckb-app"


def say(message: str) -> None:
    print(f"checkpoint-bench: {message}", file=sys.stderr, flush=True)


@contextlib.contextmanager
def clusters(state_dir: Path | None) -> Iterator[dict[str, str]]:
    """east and west: reused from ``state_dir`` when running there, else started and stopped."""
    temporary = state_dir is None
    env = LocalEnvironment(
        Settings.from_env(state_dir=state_dir or Path(tempfile.mkdtemp(prefix="drsvc-ckb-")))
    )
    if not temporary:
        info = env.info()
        if {"east", "west"} <= set(info.clusters):
            yield dict(info.clusters)
            return
    info = env.up(["east", "west"], progress=lambda line: say(f"env: {line}"))
    try:
        yield dict(info.clusters)
    finally:
        env.down()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def spawn(args: list[str], log: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "drsvc.cli.main", *args],
        stdout=log.open("ab"),
        stderr=subprocess.STDOUT,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )


def stop(proc: subprocess.Popen[bytes], sig: int = signal.SIGTERM) -> None:
    if proc.poll() is None:
        proc.send_signal(sig)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


def metric(port: int, name: str) -> float | None:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as answer:
            text = answer.read().decode()
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith(name + "{") or line.startswith(name + " "):
            return float(line.rsplit(" ", 1)[1])
    return None


def wait(predicate: Any, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.2)
    raise SystemExit(f"checkpoint-bench: timed out waiting for {what}")


class Tail:
    """Reads new checkpoints on west as they arrive."""

    def __init__(self, west: str, topic: str) -> None:
        self.consumer = Consumer(
            {
                "bootstrap.servers": west,
                "group.id": "drsvc-bench-tail",
                "enable.auto.commit": False,
                "fetch.wait.max.ms": 5,
            }
        )
        _low, high = self.consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        self.consumer.assign([TopicPartition(topic, 0, high)])

    def wait_for(self, key: CheckpointKey, source_offset: int, timeout_s: float) -> float:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            for msg in self.consumer.consume(100, 0.02):
                raw_key, raw_value = msg.key(), msg.value()
                if msg.error() is not None or raw_key is None or raw_value is None:
                    continue
                if decode_key(raw_key) == key and (
                    decode_value(raw_value).source_offset == source_offset
                ):
                    return time.time()
        raise SystemExit(f"checkpoint-bench: no checkpoint of {key} at {source_offset}")


def commit(consumer: Consumer, topic: str, partition: int, offset: int) -> float:
    consumer.commit(offsets=[TopicPartition(topic, partition, offset)], asynchronous=False)
    return time.time()


def run(args: argparse.Namespace, east: str, west: str, work: Path) -> dict[str, Any]:
    topic = f"ckb-{uuid.uuid4().hex[:8]}"
    create_topic(admin_client(east), topic, args.partitions)
    producer = Producer({"bootstrap.servers": east, "linger.ms": 5})
    for i in range(args.records):
        producer.produce(topic, f"r{i}".encode(), partition=i % args.partitions)
        if i % 10_000 == 0:
            producer.poll(0)
    producer.flush(60)
    per_partition = args.records // args.partitions
    topology = work / "bench.yaml"
    topology.write_text(
        json.dumps(
            {
                "name": "ckbench",
                "clusters": {
                    "east": {"bootstrap_servers": east},
                    "west": {"bootstrap_servers": west},
                },
                "flows": [{"source": "east", "target": "west", "topics": {"include": [topic]}}],
            }
        )
    )
    worker = spawn(["replicate", "-t", str(topology), "--flow", "east->west"], work / "worker.log")
    port = free_port()
    agent_args = ["checkpoints", "-t", str(topology), "--interval-s", str(args.interval_s),
                  "--metrics-port", str(port), "--state-dir", str(work)]  # fmt: skip
    agent = spawn(agent_args, work / "agent.log")
    try:
        say("waiting for the agent's first cycle")
        wait(
            lambda: metric(port, "drsvc_checkpoint_numbers_as_of_seconds") is not None, 120, "agent"
        )
        tail = Tail(west, "east.checkpoints.internal")
        group = Consumer(
            {"bootstrap.servers": east, "group.id": GROUP, "enable.auto.commit": False}
        )
        positions = dict.fromkeys(range(args.partitions), 0)
        latencies, agent_bounds = [], []
        rng = random.Random(7)
        say(f"{args.commits} commits")
        for _ in range(args.commits):
            time.sleep(rng.uniform(0.2, 1.5))
            p = rng.randrange(args.partitions)
            positions[p] = min(per_partition, positions[p] + rng.randint(1, 20))
            committed_at = commit(group, topic, p, positions[p])
            key = CheckpointKey(GROUP, f"east.{topic}", p)
            latencies.append(tail.wait_for(key, positions[p], 30) - committed_at)
            bound = metric(port, "drsvc_checkpoint_latency_ms")
            if bound is not None:
                agent_bounds.append(bound / 1000)
        say("kill -9 and restart of the agent")
        stop(agent, signal.SIGKILL)
        p = 0
        positions[p] = min(per_partition, positions[p] + 5)
        commit(group, topic, p, positions[p])
        restarted = time.time()
        agent = spawn(agent_args, work / "agent-restarted.log")
        seen = tail.wait_for(CheckpointKey(GROUP, f"east.{topic}", p), positions[p], 120)
        group.close()
    finally:
        stop(agent)
        stop(worker)
    ordered = sorted(latencies)
    return {
        "commits": len(latencies),
        "interval_s": args.interval_s,
        "latency_s": {
            "median": round(statistics.median(ordered), 3),
            "p90": round(ordered[int(0.9 * (len(ordered) - 1))], 3),
            "max": round(ordered[-1], 3),
            "mean": round(statistics.fmean(ordered), 3),
            "within_2s": sum(1 for x in ordered if x <= 2.0),
        },
        "agent_latency_bound_s_median": (
            round(statistics.median(agent_bounds), 3) if agent_bounds else None
        ),
        "restart_to_checkpoint_s": round(seen - restarted, 2),
        "machine": {
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "loadavg_1m_at_end": os.getloadavg()[0],
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--commits", type=int, default=60)
    parser.add_argument("--interval-s", type=float, default=1.0)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--records", type=int, default=20_000)
    parser.add_argument("--state-dir", type=Path, default=None)
    parser.add_argument("--output", type=Path, default=None)
    args = parser.parse_args()
    with clusters(args.state_dir) as found, tempfile.TemporaryDirectory(prefix="ckb-") as work:
        result = run(args, found["east"], found["west"], Path(work))
    text = json.dumps(result, indent=2)
    print(text)
    if args.output is not None:
        args.output.write_text(text + "\n")


if __name__ == "__main__":
    main()
