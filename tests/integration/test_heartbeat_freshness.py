"""Heartbeats on real clusters: east's freshness seen from west follows east's broker down and
up again, and a data backlog in the flow's worker does not hold heartbeats back.

Emitters write on east and west every half second, a heartbeat lane copies east's heartbeats to
west, and observers watch both clusters, all in this process (the data worker of the backlog
test runs as a process of its own).
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from replication_support import (
    create,
    end_offsets,
    produce,
    read_all,
    running_workers,
    wait_for,
    write_topology,
)

from drsvc.cli.common import load_with_bootstraps
from drsvc.devenv.environment import EnvironmentInfo, LocalEnvironment
from drsvc.runtime.heartbeats.runner import HeartbeatRunner
from drsvc.runtime.replication.heartbeat_copier import HeartbeatCopier
from drsvc.runtime.replication.settings import worker_settings
from drsvc.topology.models import Topology
from failover import heartbeats, provenance
from failover.heartbeats import Freshness, FreshnessState

pytestmark = pytest.mark.timeout(300)

INTERVAL_S = 0.5
STALE_AFTER_S = 3.0
EAST_ON_WEST = ("west", "east")
BACKLOG_TOPIC = "hb-backlog"


@dataclass
class Heartbeats:
    """Emitters and observers on east and west, and the east->west lane, running."""

    topology: Topology
    bootstrap: dict[str, str]
    runner: HeartbeatRunner
    lane: HeartbeatCopier

    def freshness(self, key: tuple[str, str] = EAST_ON_WEST) -> Freshness:
        return self.runner.observer.freshness()[key]

    def is_(self, state: FreshnessState, key: tuple[str, str] = EAST_ON_WEST) -> bool:
        return self.freshness(key).state == state

    def watch_for_fresh(self) -> tuple[threading.Thread, list[float]]:
        """Note, on a thread, the monotonic time east first turns fresh on west (for at most
        two minutes): the caller may be busy restarting east meanwhile."""
        seen: list[float] = []

        def sample() -> None:
            deadline = time.monotonic() + 120
            while not seen and time.monotonic() < deadline:
                if self.is_(FreshnessState.FRESH):
                    seen.append(time.monotonic())
                time.sleep(0.05)

        thread = threading.Thread(target=sample, daemon=True)
        thread.start()
        return thread, seen

    def worst_freshness_over(self, seconds: float) -> float:
        """The largest freshness of east on west seen while sampling for ``seconds``."""
        worst = 0.0
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            worst = max(worst, self.freshness().seconds)
            time.sleep(0.05)
        return worst


@pytest.fixture(scope="module")
def running(
    cluster_pair: EnvironmentInfo, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Heartbeats]:
    path = write_topology(
        tmp_path_factory.mktemp("heartbeats") / "pair.yaml",
        "heartbeats-it",
        dict(cluster_pair.clusters),
        [{"source": "east", "target": "west", "topics": {"include": [BACKLOG_TOPIC]}}],
    )
    topology, bootstrap = load_with_bootstraps(path, None)
    runner = HeartbeatRunner(
        topology, bootstrap, interval_s=INTERVAL_S, stale_after_s=STALE_AFTER_S
    )
    lane = HeartbeatCopier(worker_settings(topology, topology.flows[0], bootstrap))
    runner.start()
    lane.start()
    try:
        running = Heartbeats(topology, bootstrap, runner, lane)
        wait_for(lambda: running.is_(FreshnessState.FRESH), 90, "east's heartbeats on west")
        yield running
    finally:
        lane.stop()
        runner.stop()


def test_copies_are_east_heartbeats_with_provenance(running: Heartbeats) -> None:
    copies = read_all(running.bootstrap["west"], "east.heartbeats")
    assert copies, "east.heartbeats on west is empty"
    last = copies[-1]
    beat = heartbeats.decode(last.value)
    assert beat.source == "east"
    assert last.key == b"east"
    hops = provenance.chain(last.headers)
    assert [(h.cluster, h.topic) for h in hops] == [("east", "heartbeats")]
    assert running.lane.stats.copied > 0
    assert running.lane.stats.routes == {"heartbeats": "east.heartbeats"}


def test_a_data_backlog_does_not_delay_heartbeats(running: Heartbeats, tmp_path: Path) -> None:
    east, west = running.bootstrap["east"], running.bootstrap["west"]
    create(east, BACKLOG_TOPIC, 1)
    count = 5000
    now_ms = int(time.time() * 1000)
    produce(east, BACKLOG_TOPIC, [(0, None, b"x" * 1000, [], now_ms)] * count)
    topology = write_topology(
        tmp_path / "backlog.yaml",
        "heartbeats-backlog",
        running.bootstrap,
        [{"source": "east", "target": "west", "topics": {"include": [BACKLOG_TOPIC]}}],
    )

    def copied() -> int:
        return sum(end_offsets(west, f"east.{BACKLOG_TOPIC}").values())

    # The flow's worker copies about 50 records a second: a backlog of well over a minute.
    with running_workers(
        topology, ["east->west"], tmp_path, "--throttle-bytes-per-s", "50000"
    ) as workers:
        wait_for(lambda: copied() > 0, 60, f"the worker to start copying\n{workers[0].log_tail()}")
        worst = running.worst_freshness_over(8.0)
        behind = count - copied()
    print(f"backlog: worst freshness of east on west {worst:.2f}s, worker {behind} behind")
    assert behind > 1000, "the worker caught up: there was no backlog to speak of"
    assert worst < 4 * INTERVAL_S, f"heartbeats went {worst:.2f}s without advancing"


def test_freshness_degrades_when_east_stops_and_recovers_when_it_restarts(
    running: Heartbeats, local_env: LocalEnvironment
) -> None:
    worst = running.worst_freshness_over(3.0)
    assert worst < 4 * INTERVAL_S, f"east on west went {worst:.2f}s without advancing"
    stopped_at = time.monotonic()
    try:
        local_env.stop_site("east")
        down_at = time.monotonic()
        wait_for(lambda: running.is_(FreshnessState.STALE), 60, "east to turn stale on west")
        stale_after = time.monotonic() - stopped_at
        first = running.freshness().seconds
        time.sleep(1.0)
        assert running.freshness().seconds >= first + 0.9, "freshness must keep growing"
        # West itself is fine: its own heartbeats still advance, only east's stopped.
        assert running.is_(FreshnessState.FRESH, ("west", "west"))
        assert running.is_(FreshnessState.STALE, ("east", "east"))
    finally:
        sampler, fresh_at = running.watch_for_fresh()
        restart_at = time.monotonic()
        local_env.up(["east"])
    up_at = time.monotonic()
    sampler.join(120)
    assert fresh_at, (
        "east did not turn fresh on west within two minutes of its restart: "
        f"copier {running.lane.stats}, consumers replaced {running.lane.consumers_replaced}; "
        f"emitters {[(e.settings.cluster, e.stats) for e in running.runner.emitters]}; "
        f"freshness {running.runner.observer.freshness()}"
    )
    recovered_after = fresh_at[0] - restart_at
    assert fresh_at[0] - up_at < 30, "east took more than 30s after its restart to turn fresh"
    wait_for(lambda: running.is_(FreshnessState.FRESH, ("east", "east")), 30, "east's own")
    print(
        f"outage: broker stop took {down_at - stopped_at:.1f}s, stale {stale_after:.1f}s after"
        f" the stop began; restart took {up_at - restart_at:.1f}s, fresh again"
        f" {recovered_after:.1f}s after the restart began"
    )
    worst = running.worst_freshness_over(3.0)
    assert worst < 4 * INTERVAL_S, f"after recovery east went {worst:.2f}s without advancing"


def test_the_role_command_watches_once(running: Heartbeats, tmp_path: Path) -> None:
    topology = write_topology(
        tmp_path / "once.yaml",
        "heartbeats-once",
        running.bootstrap,
        [{"source": "east", "target": "west"}],
    )
    done = subprocess.run(
        [sys.executable, "-m", "drsvc.cli.main", "heartbeats", "-t", str(topology), "--once",
         "--json", "--interval-s", str(INTERVAL_S), "--stale-after-s", str(STALE_AFTER_S)],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    rows = {(r["observer"], r["source"]): r for r in json.loads(done.stdout)["freshness"]}
    assert rows[EAST_ON_WEST]["state"] == "fresh"
    assert rows[("west", "west")]["state"] == "fresh"
    assert rows[("east", "east")]["state"] == "fresh"
    assert rows[EAST_ON_WEST]["last_offset"] >= 0


def test_the_role_serves_metrics_and_stops_on_sigterm(running: Heartbeats, tmp_path: Path) -> None:
    topology = write_topology(
        tmp_path / "role.yaml",
        "heartbeats-role",
        running.bootstrap,
        [{"source": "east", "target": "west"}],
    )
    log_file = tmp_path / "role.log"
    with log_file.open("wb") as log:
        role = subprocess.Popen(
            [sys.executable, "-m", "drsvc.cli.main", "heartbeats", "-t", str(topology),
             "--interval-s", str(INTERVAL_S), "--stale-after-s", str(STALE_AFTER_S),
             "--metrics-port", "0", "--log-format", "json"],
            stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip
        try:
            port = wait_for_metrics_port(log_file)
            url = f"http://127.0.0.1:{port}/metrics"

            def scraped(name: str, labels: str) -> float:
                text = urllib.request.urlopen(url, timeout=5).read().decode()
                for line in text.splitlines():
                    if line.startswith(f"{name}{{{labels}}} "):
                        return float(line.split()[-1])
                return -1.0

            wait_for(
                lambda: scraped("drsvc_heartbeats_emitted_total", 'cluster="east"') >= 3,
                30,
                "the role's heartbeats on east",
            )
            west_on_east = 'cluster="west",source="east"'
            # Before its first heartbeat a pair's freshness counts from the role's start, so
            # a low value alone does not say one arrived: the offset seen does.
            wait_for(
                lambda: (
                    scraped("drsvc_heartbeat_last_offset", west_on_east) >= 0
                    and 0 <= scraped("drsvc_heartbeat_freshness_seconds", west_on_east) < 2.0
                ),
                30,
                "a heartbeat of east on west, and a low freshness, in the role's metrics",
            )
        finally:
            role.send_signal(signal.SIGTERM)
            code = role.wait(30)
    lines = [json.loads(line) for line in log_file.read_text().splitlines() if line.startswith("{")]
    assert code == 0, lines[-10:]
    assert any(line["message"] == "heartbeats stopped" for line in lines)


def wait_for_metrics_port(log_file: Path) -> int:
    found: list[int] = []

    def announced() -> bool:
        match = re.search(r"http://127\.0\.0\.1:(\d+)/metrics", log_file.read_text())
        if match:
            found.append(int(match.group(1)))
        return bool(found)

    wait_for(announced, 30, "the role's metrics endpoint")
    return found[0]
