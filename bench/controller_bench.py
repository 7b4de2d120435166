"""Automated failover: detection time and RTO of ``drsvc controller``. Prints one JSON object
(progress on stderr).

Setup of every run: clusters ``east`` and ``west`` with Consul per site and a witness (the
``drsvc dev`` environment, started in a temporary state directory), flows both ways (prefix
naming), the checkpoint agent, the heartbeats role, applications with ``auto_failover`` and a
2 s client lease, each with a producer and a consumer group on ``drsvc.client`` running the whole
time, and two controller replicas. Then east's brokers go, and the benchmark notes, per
application, from that moment (one machine, one clock):

* ``deactivated_s``: the active key says none (the leader decided and began the failover);
* ``activated_s``: the key says west;
* ``rto_s``: the consumer group reads its first record on west.

Scenarios (``--scenarios``, each ``--runs`` times):

* ``one-app``: one application, its active key written at east before the controllers start,
  threshold ``--threshold-s``; east's brokers stop (SIGTERM, 1 s grace, then SIGKILL).
* ``five-apps``: the same with five applications failing over together; ``all_activated_s`` and
  ``all_rto_s`` are the last of the five. Target: all five switched within RTO(one app) + 2 s.
* ``new-user``: what a new user does: one application whose active key was never written,
  ``lease_s: 2``, threshold 5 s, east's brokers killed with SIGKILL. Target: west active within
  10 s of the kill (median of the runs).

East is brought back and everything stopped before the next run. Reported: every run, and the
median and worst of each measure, and each target met or not. Run:
``python bench/controller_bench.py [--runs 5] [--threshold-s 4] [--scenarios one-app,new-user]``.
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
from drsvc.client import FailoverConsumer, FailoverProducer, NoActiveClusterError
from drsvc.devenv.environment import LocalEnvironment
from drsvc.kafka.admin import admin_client, create_topic
from drsvc.settings import Settings
from failover.active import ActiveDocument, decode_active
from failover.naming import app_active_key, controller_lock_key

LEASE_MS = 2000
#: The new user's threshold (issue 32's "done when").
NEW_USER_THRESHOLD_S = 5.0
SCENARIOS = ("one-app", "five-apps", "new-user")


def say(message: str) -> None:
    print(f"controller-bench: {message}", file=sys.stderr, flush=True)


def topology(
    path: Path, name: str, clusters: dict[str, str], topics: list[str], threshold_s: float
) -> None:
    """One application per topic, ``app-<i>`` reading with group ``readers-<i>``."""
    pattern = "^(" + "|".join(topics) + ")$"
    flows = [
        {"source": s, "target": t, "topics": {"include": [pattern]}}
        for s, t in (("east", "west"), ("west", "east"))
    ]
    document = {
        "name": name,
        "clusters": {a: {"bootstrap_servers": b} for a, b in clusters.items()},
        "flows": flows,
        "applications": [
            {"name": f"app-{i}", "groups": [f"readers-{i}"], "topics": [topic],
             "preferred": "east", "auto_failover": True, "lease_s": LEASE_MS / 1000}
            for i, topic in enumerate(topics)
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
    """An application: a producer and a consumer group on drsvc.client, on threads."""

    def __init__(self, name: str, group: str, path: Path, topic: str, consul: str) -> None:
        self.name = name
        self.producer = FailoverProducer(name, path, {"linger.ms": 1}, consul=consul)
        self.consumer = FailoverConsumer(
            name, path, {"group.id": group, "auto.offset.reset": "earliest",
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


def one_run(env: LocalEnvironment, consul: str, clusters: dict[str, str], scenario: str,
            run: int, threshold_s: float, work: Path) -> dict[str, Any]:  # fmt: skip
    tag = uuid.uuid4().hex[:6]
    name = f"cb-{tag}"
    count = 5 if scenario == "five-apps" else 1
    new_user = scenario == "new-user"
    if new_user:
        threshold_s = NEW_USER_THRESHOLD_S
    topics = [f"cb-{tag}-{i}" for i in range(count)]
    for bootstrap in clusters.values():
        admin = admin_client(bootstrap)
        for topic in topics:
            create_topic(admin, topic, 2, 1)
    path = work / f"{name}.json"
    topology(path, name, clusters, topics, threshold_s)
    client = ConsulClient(consul)
    apps = [f"app-{i}" for i in range(count)]
    keys = {app: app_active_key(name, app) for app in apps}
    if not new_user:  # as the earlier measurements did; a new user writes nothing
        for key in keys.values():
            client.kv_put(key, ActiveDocument("east", lease_ms=LEASE_MS).encode())
    logs = work / name
    logs.mkdir()
    processes = start_roles(path, consul, logs)
    running = [
        App(app, f"readers-{i}", path, topic, consul)
        for i, (app, topic) in enumerate(zip(apps, topics, strict=True))
    ]
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not all("east" in a.first_read_on for a in running):
            time.sleep(0.2)
        processes += start_controllers(path, consul, logs, client, name)
        # What a new user's key holds when the fault comes (drsvc creates it when it starts).
        existed = {app: client.kv_get(key) is not None for app, key in keys.items()}
        say(f"{scenario} run {run}: east goes")
        gone = time.monotonic()
        gone_wall_ms = time.time() * 1000
        if new_user:
            kill_site("east", env)
        else:
            env.stop_site("east", grace_s=1)
        stopped_s = time.monotonic() - gone
        marks = watch_switches(client, keys, running, gone)
        per_app = {
            a.name: {
                "deactivated_s": _since(marks[a.name].get("none"), gone),
                "activated_s": _since(marks[a.name].get("west"), gone),
                "rto_s": _since(a.first_read_on.get("west"), gone),
            }
            for a in running
        }
        result: dict[str, Any] = {
            "run": run,
            "brokers_stopped_s": round(stopped_s, 2),
            **_last_of(per_app),
            "steps": {app: step_times(path, consul, gone_wall_ms, app) for app in apps},
        }
        if count > 1:
            result["apps"] = per_app
        if new_user:
            result["key_existed_at_the_fault"] = existed
        say(f"{scenario} run {run}: { {k: v for k, v in result.items() if k != 'steps'} }")
        return result
    finally:
        for app in running:
            app.close()
        stop(processes)
        env.up(["east", "west"])


def start_roles(path: Path, consul: str, logs: Path) -> list[subprocess.Popen[bytes]]:
    """Replication both ways, the checkpoint agent and, as drsvc run does, heartbeats on every
    cluster (one more vantage point of the controller)."""
    processes = [
        drsvc(["replicate", "-t", str(path), "--flow", f, "--consul", consul], logs / f"{f}.log")
        for f in ("east->west", "west->east")
    ]
    processes.append(drsvc(["checkpoints", "-t", str(path), "--consul", consul,
                            "--state-dir", str(logs / "agent")], logs / "agent.log"))  # fmt: skip
    processes.append(drsvc(["heartbeats", "-t", str(path)], logs / "heartbeats.log"))
    return processes


def start_controllers(
    path: Path, consul: str, logs: Path, client: ConsulClient, namespace: str
) -> list[subprocess.Popen[bytes]]:
    """Two replicas; returns once one leads (a loaded machine takes a while to start them) and
    a few seconds of checkpoints and heartbeats later, so that every vantage point saw east."""
    processes = [
        drsvc(["controller", "-t", str(path), "--consul", consul, "--replica", r],
              logs / f"{r}.log")
        for r in ("c1", "c2")
    ]  # fmt: skip
    deadline = time.monotonic() + 90
    while client.kv_get(controller_lock_key(namespace)) is None and time.monotonic() < deadline:
        time.sleep(0.2)
    time.sleep(8)
    return processes


def watch_switches(
    client: ConsulClient, keys: dict[str, str], running: list[App], gone: float
) -> dict[str, dict[str, float]]:
    """Per application, when (monotonic) its key first said none and west; until every one is
    active on west and read there, or 120 s."""
    marks: dict[str, dict[str, float]] = {app: {} for app in keys}
    deadline = gone + 120
    while time.monotonic() < deadline and not all(
        "west" in marks[a.name] and "west" in a.first_read_on for a in running
    ):
        for app, key in keys.items():
            try:
                cluster = decode_active(client.kv_get(key), "east").cluster
            except Exception:  # Consul answering slowly while east's agent is busy
                cluster = "?"
            now = time.monotonic()
            if cluster is None:
                marks[app].setdefault("none", now)
            elif cluster == "west":
                marks[app].setdefault("west", now)
        time.sleep(0.05)
    return marks


def kill_site(alias: str, env: LocalEnvironment) -> None:
    """SIGKILL every broker of the site at once (no shutdown at all), then let the environment
    note that they are gone (``up`` starts them again)."""
    pids = [n.process.pid for n in env.store.load().sites[alias].nodes if n.process is not None]
    for pid in pids:
        os.kill(pid, signal.SIGKILL)
    env.stop_site(alias, grace_s=0)


def _last_of(per_app: dict[str, dict[str, float | None]]) -> dict[str, float | None]:
    """Each measure of the application that was last (None if one never got there)."""
    out: dict[str, float | None] = {}
    for measure in ("deactivated_s", "activated_s", "rto_s"):
        values = [m[measure] for m in per_app.values()]
        known = [v for v in values if v is not None]
        out[measure] = None if len(known) < len(values) else max(known)
    return out


def step_times(path: Path, consul: str, gone_wall_ms: float, app: str) -> list[dict[str, Any]]:
    """When each step of the application's automated failover ended, in seconds since east
    went."""
    listed = subprocess.run(
        [sys.executable, "-m", "drsvc.cli.main", "failovers", "-t", str(path), "--consul", consul,
         "--json"],
        capture_output=True, text=True, timeout=30, check=False,
    )  # fmt: skip
    try:
        events = next(r for r in json.loads(listed.stdout) if r["app"] == app)["events"]
    except (KeyError, StopIteration, ValueError) as err:
        return [{"error": f"no failover record of {app} read: {err!r}"}]
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


def targets(scenarios: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The targets of issue 32 that the scenarios run measure."""
    found: dict[str, Any] = {}
    one, five = scenarios.get("one-app"), scenarios.get("five-apps")
    if one and five:
        for measure in ("activated_s", "rto_s"):
            single, together = one[measure]["median"], five[measure]["median"]
            found[f"five_apps_{measure}_within_one_app_plus_2s"] = {
                "one_app_median": single,
                "five_apps_median_of_the_last": together,
                "met": None if single is None or together is None else together <= single + 2,
            }
    new_user = scenarios.get("new-user")
    if new_user:
        median = new_user["activated_s"]["median"]
        found["new_user_activated_within_10s"] = {
            "median": median,
            "met": None if median is None else median <= 10,
        }
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--runs", type=int, default=5, help="runs of each scenario")
    parser.add_argument("--threshold-s", type=float, default=4.0,
                        help="threshold of one-app and five-apps (new-user: 5 s)")  # fmt: skip
    parser.add_argument("--scenarios", default=",".join(SCENARIOS),
                        help=f"comma-separated, of {', '.join(SCENARIOS)}")  # fmt: skip
    parser.add_argument("--output", type=Path, help="also write the JSON here")
    parser.add_argument(
        "--keep-logs", action="store_true", help="keep the work directory (processes' logs)"
    )
    args = parser.parse_args()
    chosen = [s.strip() for s in args.scenarios.split(",") if s.strip()]
    unknown = sorted(set(chosen) - set(SCENARIOS))
    if unknown:
        parser.error(f"unknown scenario(s) {', '.join(unknown)}: choose of {', '.join(SCENARIOS)}")
    started = time.time()
    work = Path(tempfile.mkdtemp(prefix="drsvc-controller-bench-"))
    say(f"work directory: {work}")
    env = LocalEnvironment(Settings.from_env(state_dir=work / "state", consul_layout="per-site"))
    scenarios: dict[str, dict[str, Any]] = {}
    try:
        info = env.up(["east", "west"])
        assert info.consul_http_addr is not None
        for scenario in chosen:
            runs = [
                one_run(
                    env,
                    info.consul_http_addr,
                    dict(info.clusters),
                    scenario,
                    i,
                    args.threshold_s,
                    work,
                )
                for i in range(args.runs)
            ]
            scenarios[scenario] = {
                "threshold_s": NEW_USER_THRESHOLD_S if scenario == "new-user" else args.threshold_s,
                "runs": runs,
                **{
                    k: summary([r[k] for r in runs])
                    for k in ("deactivated_s", "activated_s", "rto_s")
                },
            }
    finally:
        env.down()
        if not args.keep_logs:
            shutil.rmtree(work, ignore_errors=True)
    result = {
        "benchmark": "controller",
        "lease_s": LEASE_MS / 1000,
        "scenarios": scenarios,
        "targets": targets(scenarios),
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
