"""The heartbeat copier of a flow: heartbeats copied on their own, never behind a data backlog.

A flow's worker may be minutes behind on a large backlog; its heartbeats must not be, or the far
side would take a busy flow for a dead cluster. So heartbeats get a copier of their own: a thread
with its own consumer and its own producer, copying every heartbeats topic the flow copies (the
source's own ``heartbeats`` and, with multi-hop, the upstream copies on it such as
``south.heartbeats``) to its remote name on the target, which it creates.

The consumer assigns itself every partition of those topics instead of joining a consumer group.
A group would make the workers of one flow copy each heartbeat once, but it ties the copier to the
source's group coordinator: after a source restart the member had to rejoin, and heartbeats
resumed about ten seconds later than the cluster did. Without a group they resume within about
a second. The price: a flow run by N workers copies each heartbeat N times, which freshness does
not mind (an observer counts arrivals) and which emitter id and sequence make recognisable.

Copies keep key, value, timestamp, partition and headers and get the provenance header appended
like every copy, so the identity policy's loop check works for heartbeats too. No offset syncs
and no committed progress: a copier that starts (or takes a partition over) begins at the end of the
log, because old heartbeats say nothing about the present. For the same reason a copy that does
not reach the target within a few seconds is dropped rather than retried.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from drsvc.errors import ConfigError, DrsvcError, KafkaUnavailableError
from drsvc.kafka.admin import (
    TopicInfo,
    grow_partitions,
    list_topic_names,
)
from drsvc.kafka.clients import KafkaClients
from drsvc.kafka.clock import Clock
from drsvc.kafka.errors import translated
from drsvc.kafka.types import (
    OFFSET_END,
    TIMESTAMP_NOT_AVAILABLE,
    AdminClient,
    Consumer,
    KafkaError,
    Message,
    Producer,
    TopicPartition,
)
from drsvc.runtime.heartbeats.client_logs import kafka_client_logger
from drsvc.runtime.heartbeats.outage import OutageLog
from drsvc.runtime.heartbeats.topic import ensure_heartbeat_topic, find_topics
from drsvc.runtime.replication.settings import WorkerSettings
from drsvc.runtime.replication.topics import flow_clients, topic_routes
from failover import naming, provenance

log = logging.getLogger(__name__)

#: record headers as confluent-kafka types them (values it returns are always bytes or None)
Headers = list[tuple[str, str | bytes | None]]

#: a copy not acknowledged by the target within this long is dropped (see the module docstring)
LANE_MESSAGE_TIMEOUT_MS = 5000
#: longest wait for one admin call, so a cluster that is down never holds the copier for long
ADMIN_TIMEOUT_S = 3.0
#: a consumer that read nothing for this long while the source's heartbeats kept coming is
#: replaced (see :meth:`HeartbeatCopier._replace_if_stuck`)
STUCK_AFTER_S = 10.0


@dataclass
class HeartbeatCopierStats:
    """Counters of one copier (monotonic, never reset)."""

    copied: int = 0
    failed: int = 0
    skipped_loops: int = 0
    #: monotonic time of the last copy the target acknowledged
    last_copy_at: float | None = None
    #: source topic -> remote topic, as last discovered
    routes: dict[str, str] = field(default_factory=dict)


def heartbeat_routes(topic_names: Iterable[str], settings: WorkerSettings) -> dict[str, str]:
    """The heartbeats topics among ``topic_names`` (on the flow's source) that the flow copies,
    each with its name on the target (:func:`~drsvc.runtime.replication.topics.topic_routes`)."""
    return topic_routes(topic_names, settings, heartbeats=True).copied


def copy_headers(
    headers: Headers | None, source_alias: str, topic: str, partition: int, offset: int
) -> Headers:
    """The headers of a copy: the original ones in order, then this hop's provenance."""
    copied = list(headers or [])
    hop = provenance.Provenance(source_alias, topic, partition, offset)
    copied.append((provenance.PROVENANCE_HEADER, provenance.encode(hop)))
    return copied


def copier_consumer_config(s: WorkerSettings) -> dict[str, Any]:
    """The copier's own settings of its source consumer (the factory adds where the source is
    and how to reach it): assigned partitions only (the group id is required by the client, but
    never joined), no commits, starting at the end, short fetch waits, quick reconnects."""
    return dict(
        {
            "group.id": naming.heartbeat_copier_group(s.source_alias, s.target_alias),
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "auto.offset.reset": "latest",
            "enable.partition.eof": False,
            # The broker answers as soon as a record arrives; this only bounds an idle wait.
            "fetch.wait.max.ms": 50,
            "topic.metadata.refresh.interval.ms": 5_000,
            "reconnect.backoff.max.ms": 1_000,
            "socket.connection.setup.timeout.ms": 3_000,
            "client.id": naming.heartbeats_client_id(s.flow_id),
            "log_level": 3,
            "logger": kafka_client_logger(),
        }
    )


def copier_producer_config(s: WorkerSettings) -> dict[str, Any]:
    """The copier's own settings of its target producer (the factory adds where the target is
    and how to reach it): no batching delay, a short delivery timeout."""
    return dict(
        {
            "acks": "all",
            "linger.ms": 1,
            # A lost or doubled heartbeat copy is harmless; idempotence would add nothing.
            "enable.idempotence": False,
            "message.timeout.ms": LANE_MESSAGE_TIMEOUT_MS,
            "request.timeout.ms": LANE_MESSAGE_TIMEOUT_MS - 1000,
            "reconnect.backoff.max.ms": 1_000,
            "socket.connection.setup.timeout.ms": 3_000,
            "client.id": naming.heartbeats_client_id(s.flow_id),
            "log_level": 3,
            "logger": kafka_client_logger(),
        }
    )


class HeartbeatCopier:
    """Copies a flow's heartbeats on a thread of its own (see the module docstring).

    Its clients come from ``clients`` (default: the flow's, :func:`flow_clients`), its time from
    ``clock`` (default: the factory's)."""

    def __init__(
        self,
        settings: WorkerSettings,
        refresh_interval_s: float = 5.0,
        *,
        clients: KafkaClients | None = None,
        clock: Clock | None = None,
    ) -> None:
        self.settings = settings
        self._clients = clients if clients is not None else flow_clients(settings, clock)
        self._clock: Clock = clock if clock is not None else self._clients.clock
        self.stats = HeartbeatCopierStats()
        self.refresh_interval_s = refresh_interval_s
        self._identity_loop_check = (
            settings.policy.format_remote_topic(settings.source_alias, "x") == "x"
        )
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        #: remote topic -> its partition count, for remote topics known to exist
        self._remote_partitions: dict[str, int] = {}
        self._consumer: Consumer | None = None
        self._assigned: set[tuple[str, int]] = set()
        self._source_topic_ids: dict[str, bytes] = {}
        #: when the consumer last returned records (or was given its partitions)
        self._last_read_at = self._clock.monotonic()
        #: the source's log ends as last looked at, while the consumer reads nothing
        self._ends_seen: dict[tuple[str, int], int] = {}
        self.consumers_replaced = 0
        self._source_outage = OutageLog(
            f"heartbeat copier {settings.flow_id}: finding heartbeats topics on"
            f" {settings.source_alias}",
            log,
        )
        self._target_outage = OutageLog(
            f"heartbeat copier {settings.flow_id}: creating heartbeats topics on"
            f" {settings.target_alias}",
            log,
        )
        self._delivery = OutageLog(f"heartbeat copier {settings.flow_id}: copying heartbeats", log)

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> None:
        """Copy on a thread of its own until :meth:`stop`."""
        if self._thread is not None:
            return
        self._thread = threading.Thread(
            target=self.run, name=f"heartbeat-copier-{self.settings.flow_id}", daemon=True
        )
        self._thread.start()

    def stop(self, timeout_s: float = 10.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout_s)

    def run(self) -> None:
        """The copier's loop (the thread's body; callable directly too)."""
        s = self.settings
        source_admin = self._clients.admin(s.source_alias)
        target_admin = self._clients.admin(s.target_alias)
        self._consumer = self._new_consumer()
        producer = self._clients.producer(s.target_alias, copier_producer_config(s))
        next_refresh = 0.0
        # A copier that died would make its source look dead on the target: it survives anything.
        crashes = OutageLog(f"heartbeat copier {s.flow_id}", log)
        try:
            while not self._stop.is_set():
                try:
                    now = self._clock.monotonic()
                    if now >= next_refresh:
                        self._refresh(source_admin, target_admin)
                        next_refresh = self._clock.monotonic() + self.refresh_interval_s
                    if self._assigned:
                        messages = self._consumer.consume(100, 0.1)
                        if messages:
                            self._last_read_at = self._clock.monotonic()
                        for msg in messages:
                            self._copy(producer, msg)
                    else:
                        self._stop.wait(0.1)
                    producer.poll(0)
                    crashes.succeeded(self._clock.monotonic())
                except Exception as err:
                    crashes.failed(repr(err), self._clock.monotonic(), with_traceback=True)
                    self._stop.wait(1.0)
        finally:
            self._consumer.close()
            producer.flush(2.0)

    # ------------------------------------------------------------------ discovery

    def _refresh(self, source_admin: AdminClient, target_admin: AdminClient) -> None:
        """Find the heartbeats topics to copy, make their remote topics, follow them."""
        s = self.settings
        try:
            routes = heartbeat_routes(list_topic_names(source_admin, ADMIN_TIMEOUT_S), s)
            sources = find_topics(source_admin, sorted(routes), ADMIN_TIMEOUT_S)
        except KafkaUnavailableError as err:
            self._source_outage.failed(str(err), self._clock.monotonic())
            return
        self._source_outage.succeeded(self._clock.monotonic())
        self._follow_recreated(sources)
        self._replace_if_stuck()
        consumer = self._consumer
        assert consumer is not None
        ready = sorted(
            topic
            for topic, info in sources.items()
            if self._ensure_remote(target_admin, routes[topic], info.partitions)
        )
        self.stats.routes = {topic: routes[topic] for topic in ready}
        wanted = {(t, p) for t in ready for p in range(sources[t].partitions)}
        new = sorted(wanted - self._assigned)
        gone = sorted(self._assigned - wanted)
        try:
            with translated("assigning heartbeats partitions", s.source_alias):
                if gone:
                    consumer.incremental_unassign([TopicPartition(t, p) for t, p in gone])
                if new:
                    # From the end: heartbeats written before the copier (re)started are history.
                    consumer.incremental_assign([TopicPartition(t, p, OFFSET_END) for t, p in new])
        except DrsvcError as err:
            log.warning("heartbeat copier %s: following %s: %s", s.flow_id, ready, err)
            return
        if new:
            self._last_read_at = self._clock.monotonic()
        if new or gone:
            log.info(
                "heartbeat copier %s copies %s",
                s.flow_id,
                ", ".join(f"{t} -> {routes[t]}" for t in ready) or "nothing",
            )
        self._assigned = wanted

    def _follow_recreated(self, sources: Mapping[str, TopicInfo]) -> None:
        """Start a new consumer when a heartbeats topic was deleted and recreated on the source:
        a client that knew the old topic may ignore the new one's metadata (its leader epochs
        start again from zero) and never fetch from it."""
        recreated = sorted(
            topic
            for topic, info in sources.items()
            if self._source_topic_ids.get(topic, info.topic_id) != info.topic_id
        )
        self._source_topic_ids.update((topic, info.topic_id) for topic, info in sources.items())
        if not recreated or self._consumer is None:
            return
        log.info(
            "heartbeat copier %s: %s recreated on %s, following it with a new consumer",
            self.settings.flow_id,
            ", ".join(recreated),
            self.settings.source_alias,
        )
        self._consumer.close()
        self._consumer = self._new_consumer()
        self._assigned = set()

    def _new_consumer(self) -> Consumer:
        return self._clients.consumer(
            self.settings.source_alias, copier_consumer_config(self.settings)
        )

    def _replace_if_stuck(self) -> None:
        """Start a new consumer when the one assigned has read nothing for ``STUCK_AFTER_S``
        while the source's heartbeats topics grew. After a source broker restart, librdkafka's
        consumer of assigned partitions now and then never fetches again although the broker
        is back (a new client reads at once); the heartbeats copied would stop for good, and
        the far side would take a live cluster for a dead one."""
        consumer = self._consumer
        if consumer is None or not self._assigned:
            return
        if self._clock.monotonic() - self._last_read_at < STUCK_AFTER_S:
            self._ends_seen = {}
            return
        ends: dict[tuple[str, int], int] = {}
        try:
            with translated("looking at the heartbeats topics' ends", self.settings.source_alias):
                for topic, partition in sorted(self._assigned):
                    _low, high = consumer.get_watermark_offsets(
                        TopicPartition(topic, partition), timeout=ADMIN_TIMEOUT_S, cached=False
                    )
                    ends[(topic, partition)] = high
        except DrsvcError:
            return  # the source is not answering: nothing to tell yet
        grew = any(end > self._ends_seen.get(tp, end) for tp, end in ends.items())
        self._ends_seen = ends
        if not grew:
            return  # nothing new to read (no emitter writes there): not stuck
        log.warning(
            "heartbeat copier %s: its consumer read nothing for %.0fs while heartbeats kept "
            "arriving on %s; reading with a new consumer",
            self.settings.flow_id,
            self._clock.monotonic() - self._last_read_at,
            self.settings.source_alias,
        )
        self.consumers_replaced += 1
        consumer.close()
        self._consumer = self._new_consumer()
        self._assigned = set()
        self._ends_seen = {}
        self._last_read_at = self._clock.monotonic()

    def _ensure_remote(self, target_admin: AdminClient, remote: str, partitions: int) -> bool:
        """Make sure ``remote`` exists on the target with ``partitions`` or more; say if it does."""
        if self._remote_partitions.get(remote, 0) >= partitions:
            return True
        s = self.settings
        try:
            found = find_topics(target_admin, [remote], ADMIN_TIMEOUT_S).get(remote)
            if found is None:
                if ensure_heartbeat_topic(
                    target_admin, remote, partitions=partitions, timeout_s=ADMIN_TIMEOUT_S
                ):
                    log.info("created %s on %s", remote, s.target_alias)
                have = partitions
            elif found.partitions < partitions:
                grow_partitions(target_admin, remote, partitions, ADMIN_TIMEOUT_S)
                have = partitions
            else:
                have = found.partitions
        except (KafkaUnavailableError, ConfigError, TimeoutError) as err:
            # TimeoutError: growing partitions, when the target does not answer in time
            self._target_outage.failed(f"{remote}: {err}", self._clock.monotonic())
            return remote in self._remote_partitions
        self._target_outage.succeeded(self._clock.monotonic())
        self._remote_partitions[remote] = have
        return True

    # ------------------------------------------------------------------ copying

    def _copy(self, producer: Producer, msg: Message) -> None:
        err = msg.error()
        if err is not None:
            log.debug("heartbeat copier %s: consuming: %s", self.settings.flow_id, err.str())
            return
        topic, partition, offset = msg.topic(), msg.partition(), msg.offset()
        remote = self.stats.routes.get(topic or "")
        if topic is None or partition is None or offset is None or remote is None:
            return
        headers: Any = msg.headers()  # bytes values: confluent-kafka never decodes them
        if self._identity_loop_check and provenance.visited(headers, self.settings.target_alias):
            self.stats.skipped_loops += 1
            return
        ts_type, timestamp = msg.timestamp()
        try:
            with translated(f"copying a heartbeat to {remote}", self.settings.target_alias):
                producer.produce(
                    remote,
                    msg.value(),
                    msg.key(),
                    # The remote topic was made with the source's partition count or more.
                    partition=(
                        partition if partition < self._remote_partitions.get(remote, 0) else -1
                    ),
                    timestamp=0 if ts_type == TIMESTAMP_NOT_AVAILABLE else timestamp,
                    headers=copy_headers(
                        headers, self.settings.source_alias, topic, partition, offset
                    ),
                    on_delivery=self._on_delivery,
                )
        except BufferError as error:  # the producer's queue is full
            self.stats.failed += 1
            self._delivery.failed(f"{remote}: {error}", self._clock.monotonic())
        except DrsvcError as error:
            self.stats.failed += 1
            self._delivery.failed(str(error), self._clock.monotonic())

    def _on_delivery(self, err: KafkaError | None, msg: Message) -> None:
        now = self._clock.monotonic()
        if err is None:
            self.stats.copied += 1
            self.stats.last_copy_at = now
            self._delivery.succeeded(now)
            return
        self.stats.failed += 1
        # The remote topic may have been deleted (that shows only as timed-out copies): the next
        # refresh looks at it again and creates it if it is missing.
        self._remote_partitions.pop(msg.topic() or "", None)
        self._delivery.failed(f"to {self.settings.target_alias}: {err.str()}", now)
