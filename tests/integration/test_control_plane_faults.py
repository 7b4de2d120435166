"""Timing faults of the switch on real Consul servers and real brokers (issue 32).

Each test runs a planned failover with the real executor and the real client library, injects
a fault the way it happens in production (a Toxiproxy proxy in front of Consul's HTTP port that
delays or cuts one user's traffic), and checks the one promise of the switch: no moment at which
one client may use the old cluster while another uses the new one, and no record of the
application appended to the old cluster after the new one was activated.

- A slow "none" commit (defect 1): the executor's requests reach Consul 4.5 s late while it
  deactivates, longer than the lease margin. Fresh clients, one every 50 ms, read the key
  directly; the last one that heard "east" holds it a whole lease from its request, so the
  executor must count the lease from when "none" was acknowledged, not from when it decided.
- A client that hears "none" late (defect 3): the producer's Consul is cut until just before its
  lease on east ends, so it hears "none" from a fresh request; its queued records may be
  delivered to east only until the lease of the last answer that named east ends, which is
  before the activation. The records queue up because their topic does not exist on east yet
  (the producer holds them, sending nothing, until it appears; Kafka 4 no longer refuses
  ``acks=all`` writes for a ``min.insync.replicas`` above the replication factor, which would
  have been the other way to hold them); the test creates it on east right after west was
  activated: whatever the producer still delivers to east then lands after the activation. The
  topic is one no flow copies, so the planned failover has nothing to wait for.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError
from control_plane_support import APP, Application, new_application

from chaos.consul_proxy import ConsulProxies
from chaos.lease_overlap import longest_overlap_s, overlaps
from chaos.workload.lease_probe import LeaseProbe
from drsvc.client import ActiveCluster, FailoverProducer, NoActiveClusterError
from drsvc.devenv.environment import EnvironmentInfo
from drsvc.runtime.failover.connect import connect_executor
from drsvc.settings import Settings
from failover.failover_plan import FailoverRequest

pytestmark = pytest.mark.timeout(150)

#: how late the executor's requests reach Consul while it writes none: beyond the old margin
#: (1 % of the lease + 1 s) and well below the executor's 5 s request timeout
SLOW_MS = 4000


def _executor(application: Application, consul: str, state_dir: Path) -> Any:
    return connect_executor(
        application.topology,
        application.bootstraps,
        consul,
        Settings.from_env(state_dir=state_dir),
        catch_up_timeout_s=30,
    )


def test_a_none_write_that_commits_late_never_lets_two_clusters_be_held(
    cluster_pair: EnvironmentInfo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The lock's renewals are as slow as every other request of the executor: a longer session
    # TTL keeps one slow renewal from costing it the lock (the fault is the slow "none" write).
    monkeypatch.setenv("DRSVC_FAILOVER_LOCK_TTL_S", "30")
    application = new_application(cluster_pair, tmp_path, lease_s=3.0)
    with ConsulProxies(tmp_path / "proxies", application.consul, ("executor",)) as proxies:
        executor = _executor(application, proxies.address("executor"), tmp_path)
        probe = LeaseProbe(APP, application.topology, application.consul, period_s=0.05)
        stop = threading.Event()
        slowed: dict[str, float] = {}

        def slow_the_none_write() -> None:
            application.wait_lock_taken(60, stop)
            proxies.delay("executor", SLOW_MS)
            slowed["from"] = time.monotonic()
            try:
                application.wait_active(None, 60, poll_s=0.01)
                slowed["none"] = time.monotonic()
            finally:
                proxies.undelay("executor")

        striker = threading.Thread(target=slow_the_none_write, daemon=True)
        probe.start()
        time.sleep(1.0)
        striker.start()
        try:
            record = executor.start(FailoverRequest(app=APP, to="west"))
            time.sleep(1.0)  # the last samples of west
        finally:
            stop.set()
            samples = probe.stop()
            striker.join(10)
    assert record.state.value == "completed", record
    # the fault struck: none committed only after the delay
    assert slowed["none"] - slowed["from"] >= SLOW_MS / 1000 * 0.9
    held = {s.cluster for s in samples if s.held is not None}
    assert held == {"east", "west"}, f"the probe saw {held}"
    found = overlaps(samples)
    assert not found, (
        f"east and west were both held by clients' leases for {longest_overlap_s(samples):.2f} s "
        f"({len(found)} span(s))"
    )


class _BackloggedProducer:
    """A FailoverProducer writing to the application's topic from a thread of its own, its
    delivery reports counted (acknowledged with where and when, or the error)."""

    def __init__(self, application: Application, active: ActiveCluster) -> None:
        self.application = application
        self.producer = FailoverProducer(
            APP,
            application.topology,
            {
                "acks": "all",
                "enable.idempotence": True,
                "linger.ms": 5,
                # the topic's metadata is asked for again every 100 ms, so the backlog goes
                # out as soon as the topic exists
                "retry.backoff.ms": 100,
                "retry.backoff.max.ms": 100,
                # records for a topic the cluster lacks wait this long for it to appear
                "topic.metadata.propagation.max.ms": 60_000,
            },
            active=active,
        )
        self.acknowledged: list[tuple[str, float]] = []
        self.errors: list[int] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _report(self, cluster: str | None) -> Any:
        def done(err: Any, msg: Any) -> None:
            if err is None:
                self.acknowledged.append((cluster or "?", time.monotonic()))
            else:
                self.errors.append(err.code())

        return done

    def _run(self) -> None:
        n = 0
        while not self._stop.is_set():
            try:
                value = f"r{n}".encode()
                report = self._report(self.producer.cluster)
                self.producer.produce(self.application.events, value, on_delivery=report)
                n += 1
            except (NoActiveClusterError, BufferError):
                pass
            self.producer.poll(0.01)

    @property
    def purged(self) -> int:
        return sum(c in (KafkaError._PURGE_QUEUE, KafkaError._PURGE_INFLIGHT) for c in self.errors)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(10)
        self.producer.close(5)


def _cut_after_a_renewal(active: ActiveCluster, proxies: ConsulProxies) -> float:
    """Cut the client off from Consul right after an answer renewed its lease; returns when
    that lease ends (monotonic)."""
    first = active.state().lease_deadline_s
    while active.state().lease_deadline_s == first:
        time.sleep(0.005)
    deadline = active.state().lease_deadline_s
    proxies.cut("clients")
    return deadline


def test_a_producer_that_hears_none_late_stops_delivering_to_the_old_cluster_before_activation(
    cluster_pair: EnvironmentInfo, tmp_path: Path
) -> None:
    application = new_application(cluster_pair, tmp_path, lease_s=8.0)
    with ConsulProxies(tmp_path / "proxies", application.consul, ("clients",)) as proxies:
        active = ActiveCluster(APP, application.topology, consul=proxies.address("clients"))
        writer = _BackloggedProducer(application, active)
        try:
            deadline = time.monotonic() + 30
            while writer.producer.cluster != "east" or len(writer.producer) < 100:
                assert time.monotonic() < deadline, "the producer queued nothing for east"
                time.sleep(0.1)
            east_deadline = _cut_after_a_renewal(active, proxies)
            executor = _executor(application, application.consul, tmp_path)
            moving = threading.Thread(
                target=lambda: executor.start(FailoverRequest(app=APP, to="west")), daemon=True
            )
            moving.start()
            application.wait_active(None, 30)
            # back a second before its lease on east ends: it hears none from a fresh request
            time.sleep(max(0.0, east_deadline - 1.0 - time.monotonic()))
            proxies.heal("clients")
            application.wait_active("west", 60, poll_s=0.01)
            activated = time.monotonic()
            application.create_events("east")  # from now on the producer could deliver there
            time.sleep(4.0)
            final = application.end_offsets("east", application.events)
            moving.join(30)
        finally:
            writer.close()
            active.close()
    appended_after = sum(final.values())  # the topic was created after the activation
    late = [at for cluster, at in writer.acknowledged if cluster == "east" and at > activated]
    print(f"appended to east after west's activation: {appended_after}; purged: {writer.purged}")
    assert appended_after == 0, (
        f"{appended_after} record(s) appended to east after west was activated "
        f"({len(late)} acknowledged)"
    )
    assert writer.purged > 0, "the producer held no backlog for east: the test proved nothing"
