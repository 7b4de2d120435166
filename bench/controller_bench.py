"""Automated failover: detection time and RTO of ``drsvc controller``. Prints one JSON object
(progress on stderr).

Scenario, ``--runs`` times: clusters ``east`` and ``west`` with Consul per site and a witness (the
``drsvc dev`` environment, started in a temporary state directory), flows both ways (prefix
naming), the checkpoint agent, an application with ``auto_failover`` and a 2 s client lease, a
producer and a consumer group on ``drsvc.client`` running the whole time, and two controller
replicas with ``--threshold-s``. Then east's brokers stop (SIGTERM, 1 s grace, then SIGKILL), and
the benchmark notes, from that moment (one machine, one clock):

* ``deactivated_s``: the active key says none (the leader decided and began the failover);
* ``activated_s``: the key says west;
* ``rto_s``: the consumer group reads its first record on west.

East is brought back and everything stopped before the next run. Reported: every run, and the
median and worst of each. Run: ``python bench/controller_bench.py [--runs 5] [--threshold-s 4]``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from replication_bench import source_revision

from drsvc.adapters.consul_client import ConsulClient
from drsvc.adapters.kafka_admin import admin_client, create_topic
from drsvc.client import FailoverConsumer, FailoverProducer, NoActiveClusterError
from drsvc.devenv.environment import LocalEnvironment
from drsvc.settings import Settings
from failover.active import ActiveDocument, decode_active
from failover.naming import app_active_key

LEASE_MS = 2000


def say(message: str) -> None:
    print(f"controller-bench: {message}", file=sys.stderr, flush=True)


def topology(
    path: Path, name: str, clusters: dict[str, str], topic: str, threshold_s: float
) -> None:
    flows = [
        {"source": s, "target": t, "topics": {"include": [f"^{topic}$"]}}
        for s, t in (("east", "west"), ("west", "east"))
    ]
    document = {
        "name": name,
        "clusters": {a: {"bootstrap_servers": b} for a, b in clusters.items()},
        "flows": flows,
        "applications": [
            {"name": "app", "groups": ["readers"], "topics": [topic], "preferred": "east",
             "auto_failover": True, "lease_s": LEASE_MS / 1000},
        ],
        "controller": {"unreachable_after_s": threshold_s, "healthy_after_s": 0, "interval_s": 1},
    }  # fmt: skip
    path.write_text(json.dumps(document, indent=2))


def drsvc(args: list[str], log: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "DRSVC_FAILOVER_LOCK_TTL_S": "2",
           "DRSVC_FAILOVER_LOCK_DELAY_S": "1"}  # fmt: skip
    return subprocess.Popen(
        [sys.executable, "-m", "drsvc.cli.main", *args],
        stdout=log.open("ab"), stderr=subprocess.STDOUT, env=env,
    )  # fmt: skip


def stop(processes: list[subprocess.Popen[bytes]]) -> None:
    for process in processes:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
    for process in processes:
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()


class App:
    """The application: a producer and a consumer group on drsvc.client, on threads."""

    def __init__(self, name: str, path: Path, topic: str, consul: str) -> None:
        self.producer = FailoverProducer("app", path, {"linger.ms": 1}, consul=consul)
        self.consumer = FailoverConsumer(
            "app", path, {"group.id": "readers", "auto.offset.reset": "earliest",
                          "auto.commit.interval.ms": 500}, consul=consul,
        )  # fmt: skip
        self.consumer.subscribe([topic])
        self.topic = topic
        self.first_read_on: dict[str, float] = {}
        self._stop = threading.Event()
        self._threads = [
            threading.Thread(target=self._produce, daemon=True),
            threading.Thread(target=self._consume, daemon=True),
        ]
        for thread in self._threads:
            thread.start()

    def _produce(self) -> None:
        seq = 0
        while not self._stop.is_set():
            try:
                self.producer.produce(self.topic, str(seq).encode(), str(seq % 8).encode())
                seq += 1
            except (NoActiveClusterError, BufferError):
                pass
            self.producer.poll(0.02)

    def _consume(self) -> None:
        while not self._stop.is_set():
            msg = self.consumer.poll(0.1)
            cluster = self.consumer.cluster
            if msg is not None and msg.error() is None and cluster is not None:
                self.first_read_on.setdefault(cluster, time.monotonic())

    def close(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(30)
        self.producer.close(5)
        self.consumer.close()


def one_run(env: LocalEnvironment, consul: str, clusters: dict[str, str], run: int,
            threshold_s: float, work: Path) -> dict[str, Any]:  # fmt: skip
    tag = uuid.uuid4().hex[:6]
    topic = name = f"cb-{tag}"
    for bootstrap in clusters.values():
        create_topic(admin_client(bootstrap), topic, 2, 1)
    path = work / f"{name}.json"
    topology(path, name, clusters, topic, threshold_s)
    client = ConsulClient(consul)
    key = app_active_key(name, "app")
    client.kv_put(key, ActiveDocument("east", lease_ms=LEASE_MS).encode())
    logs = work / name
    logs.mkdir()
    processes = [
        drsvc(["replicate", "-t", str(path), "--flow", f, "--consul", consul], logs / f"{f}.log")
        for f in ("east->west", "west->east")
    ]
    processes.append(drsvc(["checkpoints", "-t", str(path), "--consul", consul,
                            "--state-dir", str(logs / "agent")], logs / "agent.log"))  # fmt: skip
    # As drsvc run does: heartbeats on every cluster, one more vantage point of the controller.
    processes.append(drsvc(["heartbeats", "-t", str(path)], logs / "heartbeats.log"))
    app = App(name, path, topic, consul)
    try:
        deadline = time.monotonic() + 60
        while "east" not in app.first_read_on and time.monotonic() < deadline:
            time.sleep(0.2)
        processes += [
            drsvc(["controller", "-t", str(path), "--consul", consul, "--replica", r],
                  logs / f"{r}.log")
            for r in ("c1", "c2")
        ]  # fmt: skip
        time.sleep(8)  # a leader, and a few seconds of checkpoints
        say(f"run {run}: stopping east")
        gone = time.monotonic()
        gone_wall_ms = time.time() * 1000
        env.stop_site("east", grace_s=1)
        stopped_s = time.monotonic() - gone
        marks: dict[str, float] = {}
        deadline = gone + 120
        while time.monotonic() < deadline and not ("west" in marks and "west" in app.first_read_on):
            try:
                cluster = decode_active(client.kv_get(key), "east").cluster
            except Exception:  # Consul answering slowly while east's agent is busy
                cluster = "?"
            now = time.monotonic()
            if cluster is None:
                marks.setdefault("none", now)
            elif cluster == "west":
                marks.setdefault("west", now)
            time.sleep(0.05)
        result = {
            "run": run,
            "brokers_stopped_s": round(stopped_s, 2),
            "deactivated_s": _since(marks.get("none"), gone),
            "activated_s": _since(marks.get("west"), gone),
            "rto_s": _since(app.first_read_on.get("west"), gone),
            "steps": step_times(path, consul, gone_wall_ms),
        }
        say(f"run {run}: {result}")
        return result
    finally:
        app.close()
        stop(processes)
        env.up(["east", "west"])


def step_times(path: Path, consul: str, gone_wall_ms: float) -> list[dict[str, Any]]:
    """When each step of the automated failover ended, in seconds since east was stopped."""
    listed = subprocess.run(
        [sys.executable, "-m", "drsvc.cli.main", "failovers", "-t", str(path), "--consul", consul,
         "--json"],
        capture_output=True, text=True, timeout=30, check=False,
    )  # fmt: skip
    try:
        events = json.loads(listed.stdout)[0]["events"]
    except (KeyError, IndexError, ValueError) as err:
        return [{"error": f"no failover record read: {err}"}]
    return [
        {"step": e["step"], "outcome": e["outcome"],
         "at_s": round((e["at_ms"] - gone_wall_ms) / 1000, 2)}
        for e in events
    ]  # fmt: skip


def _since(mark: float | None, start: float) -> float | None:
    return None if mark is None else round(mark - start, 2)


def summary(values: list[float | None]) -> dict[str, float | int | None]:
    known = [v for v in values if v is not None]
    return {
        "median": round(statistics.median(known), 2) if known else None,
        "worst": max(known) if known else None,
        "missing": len(values) - len(known),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--threshold-s", type=float, default=4.0)
    parser.add_argument("--output", type=Path, help="also write the JSON here")
    parser.add_argument(
        "--keep-logs", action="store_true", help="keep the work directory (processes' logs)"
    )
    args = parser.parse_args()
    started = time.time()
    work = Path(tempfile.mkdtemp(prefix="drsvc-controller-bench-"))
    say(f"work directory: {work}")
    env = LocalEnvironment(Settings.from_env(state_dir=work / "state", consul_layout="per-site"))
    try:
        info = env.up(["east", "west"])
        assert info.consul_http_addr is not None
        runs = [
            one_run(env, info.consul_http_addr, dict(info.clusters), i, args.threshold_s, work)
            for i in range(args.runs)
        ]
    finally:
        env.down()
        if not args.keep_logs:
            shutil.rmtree(work, ignore_errors=True)
    result = {
        "benchmark": "controller",
        "threshold_s": args.threshold_s,
        "lease_s": LEASE_MS / 1000,
        "runs": runs,
        **{k: summary([r[k] for r in runs]) for k in ("deactivated_s", "activated_s", "rto_s")},
        "load_average": os.getloadavg(),
        "machine": platform.platform(),
        **source_revision(),
        "took_s": round(time.time() - started, 1),
    }
    text = json.dumps(result, indent=2)
    print(text)
    if args.output:
        args.output.write_text(text + "\n")


if __name__ == "__main__":
    main()
