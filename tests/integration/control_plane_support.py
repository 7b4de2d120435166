"""Helpers for the control-plane fault tests on real Consul and brokers: an application on the
session's pair with its topics, its active document, the Consul keys a test watches, and a
topic's end offsets."""

from __future__ import annotations

import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka import Consumer, KafkaException, TopicPartition
from confluent_kafka.admin import OffsetSpec  # type: ignore[attr-defined]
from failover_support import write_failover_topology

from drsvc.adapters.consul_client import ConsulClient
from drsvc.adapters.consul_coordination import ConsulCoordinator
from drsvc.devenv.environment import EnvironmentInfo
from drsvc.kafka.admin import admin_client, create_topic
from drsvc.topology.loader import load_topology
from drsvc.topology.models import Topology
from failover.active import ActiveDocument, decode_active
from failover.naming import app_active_key, app_lock_key

APP = "app"
PARTITIONS = 2


@dataclass
class Application:
    """Application ``app`` of a fresh namespace on the pair: its topic on both clusters (with
    the remote copies the prefix flows would write), active on east under ``lease_s``, and a
    topic ``events`` that its producers may write to but that no flow copies and no failover
    waits for, on west only until :meth:`create_events` (a producer holds records for a topic
    the cluster does not have, sending nothing, until it appears)."""

    namespace: str
    topic: str
    events: str
    topology_path: Path
    topology: Topology
    consul: str
    bootstraps: dict[str, str]

    @property
    def active_key(self) -> str:
        return app_active_key(self.namespace, APP)

    def active(self, coordinator: ConsulCoordinator) -> ActiveDocument:
        entry = coordinator.get(self.active_key)
        return decode_active(None if entry is None else entry.value, "east")

    def wait_active(
        self, wanted: str | None, timeout_s: float, poll_s: float = 0.02
    ) -> ActiveDocument:
        """The document once its cluster is ``wanted`` (None: none), read every ``poll_s``."""
        coordinator = ConsulCoordinator(self.consul)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            document = self.active(coordinator)
            if document.cluster == wanted:
                return document
            time.sleep(poll_s)
        raise AssertionError(f"{APP} was not active on {wanted or 'none'} in {timeout_s:.0f} s")

    def wait_lock_taken(self, timeout_s: float, stop: threading.Event) -> None:
        """Until an executor holds the application's lock: it is about to record its failover
        and deactivate (a fault armed now strikes the "none" write)."""
        coordinator = ConsulCoordinator(self.consul)
        key = app_lock_key(self.namespace, APP)
        deadline = time.monotonic() + timeout_s
        while not stop.is_set() and time.monotonic() < deadline:
            entry = coordinator.get(key)
            if entry is not None and entry.session is not None:
                return
            stop.wait(0.005)
        raise AssertionError(f"no executor took the lock of {APP} in {timeout_s:.0f} s")

    def end_offsets(self, cluster: str, topic: str) -> dict[int, int]:
        consumer_admin = admin_client(self.bootstraps[cluster])
        request = {
            TopicPartition(topic, p): OffsetSpec.latest()  # type: ignore[no-untyped-call]
            for p in range(PARTITIONS)
        }
        futures = consumer_admin.list_offsets(request, request_timeout=10)
        return {tp.partition: f.result(timeout=10).offset for tp, f in futures.items()}

    def create_events(self, cluster: str) -> None:
        create_topic(admin_client(self.bootstraps[cluster]), self.events, partitions=PARTITIONS)


def new_application(
    cluster_pair: EnvironmentInfo, directory: Path, lease_s: float, group: str = "g1"
) -> Application:
    tag = f"cpf-{uuid.uuid4().hex[:8]}"
    topic, events = f"{tag}-orders", f"{tag}-events"
    bootstraps = dict(cluster_pair.clusters)
    for alias, other in (("east", "west"), ("west", "east")):
        admin = admin_client(bootstraps[alias])
        create_topic(admin, topic, partitions=PARTITIONS)
        create_topic(admin, f"{other}.{topic}", partitions=PARTITIONS)
    for bootstrap in bootstraps.values():
        _start_group_at_zero(bootstrap, group, topic)
    path = write_failover_topology(
        directory / "topology.json", tag, bootstraps, topic, lease_s=lease_s, groups=(group,)
    )
    consul = cluster_pair.consul_sites.get("west") or cluster_pair.consul_http_addr
    assert consul is not None
    application = Application(tag, topic, events, path, load_topology(path), consul, bootstraps)
    application.create_events("west")
    document = ActiveDocument("east", epoch=1, failover_id="setup", lease_ms=int(lease_s * 1000))
    ConsulClient(consul).kv_put(application.active_key, document.encode())
    return application


def _start_group_at_zero(bootstrap: str, group: str, topic: str) -> None:
    """The group exists on the cluster, at the start of every partition, with no member (a
    failover asks whether it has live members where it goes)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    deadline = time.monotonic() + 60
    try:
        offsets = [TopicPartition(topic, p, 0) for p in range(PARTITIONS)]
        while True:
            try:
                consumer.commit(offsets=offsets, asynchronous=False)
                return
            except KafkaException:  # a group coordinator still loading after the start
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)
    finally:
        consumer.close()
