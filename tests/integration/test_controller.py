"""The automated DR trigger against real brokers and real Consul servers (one per site and a
witness): two controller replicas, a threshold of a few seconds.

First east's broker is frozen (SIGSTOP) for less than the threshold: nothing happens. Then east's
brokers stop: the opted-in application is failed over to west (unplanned) by exactly one replica,
its groups resume there skipping nothing and reading nothing twice, the record reports the
unreplicated ranges; an application without ``auto_failover`` stays where it is.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from checkpoint_support import AgentProcess
from failover_support import (
    PARTITIONS,
    active_cluster,
    checkpoints_at,
    consume_part,
    failover_env,
    read_rest,
    wait_until,
    write_failover_topology,
)
from replication_support import create, produce, running_workers
from translation_support import caught_up

from drsvc.adapters.consul_client import ConsulClient
from drsvc.adapters.consul_coordination import ConsulCoordinator
from drsvc.devenv.environment import EnvironmentInfo, LocalEnvironment
from failover.active import ActiveDocument
from failover.failover_record import decode_record
from failover.naming import app_active_key, failovers_prefix

pytestmark = pytest.mark.timeout(600)

THRESHOLD_S = 4.0
LEASE_MS = 2000
GROUPS = ("g1", "g2")


class Controller:
    """A ``drsvc controller`` replica logging to a file."""

    def __init__(self, topology: Path, replica: str, consul: str, log: Path) -> None:
        self.log = log
        self._out = log.open("ab")
        env = {**os.environ, "PYTHONUNBUFFERED": "1", **failover_env(consul)}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "drsvc.cli.main", "controller", "-t", str(topology),
             "--replica", replica, "--consul", consul],
            stdout=self._out, stderr=subprocess.STDOUT, env=env,
        )  # fmt: skip

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self._out.close()

    def acted(self) -> bool:
        return "controller: failover app to west" in self.log.read_text(errors="replace")


def _topology(tmp_path: Path, name: str, clusters: dict[str, str], topic: str) -> Path:
    path = write_failover_topology(tmp_path / "topology.json", name, clusters, topic)
    document = json.loads(path.read_text())
    document["applications"][0]["auto_failover"] = True
    document["applications"].append(
        {"name": "manual", "groups": ["m1"], "topics": [topic], "preferred": "east"}
    )
    document["controller"] = {
        "unreachable_after_s": THRESHOLD_S,
        "healthy_after_s": 0,
        "interval_s": 1,
    }
    path.write_text(json.dumps(document, indent=2))
    return path


def test_two_controllers_fail_an_opted_in_application_over_once(
    local_env: LocalEnvironment,
    cluster_pair: EnvironmentInfo,
    tmp_path: Path,
    east_restored: None,
) -> None:
    tag = uuid.uuid4().hex[:6]
    topic, namespace = f"ctl-{tag}", f"ctl-{tag}"
    east, west = cluster_pair.clusters["east"], cluster_pair.clusters["west"]
    consul = cluster_pair.consul_http_addr
    assert consul is not None
    for bootstrap in (east, west):
        create(bootstrap, topic, PARTITIONS)
    topology = _topology(tmp_path, namespace, cluster_pair.clusters, topic)
    client = ConsulClient(consul)
    for app in ("app", "manual"):  # both active on east, with a short client lease
        client.kv_put(
            app_active_key(namespace, app), ActiveDocument("east", lease_ms=LEASE_MS).encode()
        )
    produce(east, topic, [(i % PARTITIONS, str(i).encode(), f"{tag}-{i:05d}".encode(), [], 0)
                          for i in range(300)])  # fmt: skip
    agent = AgentProcess(topology, tmp_path / "agent.log", tmp_path / "agent-state")
    controllers: list[Controller] = []
    consumed: dict[str, list[bytes]] = {}
    committed: dict[str, dict[tuple[str, int], int]] = {}
    try:
        with running_workers(topology, ["east->west", "west->east"], tmp_path, "--consul", consul):
            wait_until(lambda: caught_up(east, "east->west", topic, PARTITIONS), 90, "replication")
            for group, fraction in zip(GROUPS, (1.0, 0.4), strict=True):
                consumed[group], committed[group] = consume_part(east, group, [topic], fraction)
            wait_until(lambda: checkpoints_at(west, committed), 90, "checkpoints of the commits")
            controllers = [
                Controller(topology, name, consul, tmp_path / f"{name}.log")
                for name in ("c1", "c2")
            ]
            wait_until(lambda: _leader(consul, namespace) is not None, 30, "a leader")
            # A pause shorter than the threshold (a GC pause, a slow broker): nothing happens.
            _freeze_east(local_env, THRESHOLD_S / 2)
            time.sleep(THRESHOLD_S + 3)
            assert active_cluster(client, namespace) == "east"
            assert not any(c.acted() for c in controllers)
            # East is gone.
            local_env.stop_site("east", grace_s=1)
            gone = time.monotonic()
            wait_until(lambda: active_cluster(client, namespace) == "west", 60, "west active")
            moved_after = time.monotonic() - gone
    finally:
        for controller in controllers:
            controller.stop()
        agent.stop()
    # Exactly one replica acted, one failover, unplanned, with the unreplicated ranges reported.
    assert sum(c.acted() for c in controllers) == 1, [
        c.log.read_text()[-2000:] for c in controllers
    ]
    records = [
        decode_record(e.value) for e in ConsulCoordinator(consul).list(failovers_prefix(namespace))
    ]
    assert len(records) == 1, records
    record = records[0]
    plan = record.plan
    assert (plan.app, plan.to_cluster, plan.kind.value, record.state.value) == (
        "app", "west", "unplanned", "completed",
    )  # fmt: skip
    assert {(u.topic, u.partition) for u in record.unreplicated} == {
        (topic, p) for p in range(PARTITIONS)
    }
    # A sanity bound, not the target: detection (Consul's 2 s checks, 2 s probes), the
    # threshold, the clients' lease (2 s, waited 3 s) and the failover's own probes of east.
    assert moved_after <= THRESHOLD_S + 20, moved_after
    # The application without auto_failover stays on east.
    assert ActiveDocument("east", lease_ms=LEASE_MS).encode() == client.kv_get(
        app_active_key(namespace, "manual")
    )
    # Its groups resume on west skipping nothing and reading nothing twice.
    for group in GROUPS:
        rest = read_rest(west, group, [f"east.{topic}", topic])
        everything = consumed[group] + rest
        assert len(everything) == len(set(everything)) == 300, (group, len(everything))


def _leader(consul: str, namespace: str) -> str | None:
    entry = ConsulCoordinator(consul).get(f"drsvc/{namespace}/controller/leader")
    return None if entry is None or entry.session is None else entry.value


def _freeze_east(local_env: LocalEnvironment, seconds: float) -> None:
    pids = [
        node.process.pid
        for node in local_env.store.load().sites["east"].nodes
        if node.process is not None
    ]
    for pid in pids:
        os.kill(pid, signal.SIGSTOP)
    try:
        time.sleep(seconds)
    finally:
        for pid in pids:
            os.kill(pid, signal.SIGCONT)
