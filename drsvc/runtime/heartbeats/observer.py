"""Freshness observers: how long since each source's heartbeats last advanced on each cluster.

For every observing cluster C the observer follows C's own heartbeats topic (the freshness of C's
emitter) and, for every flow A->C, the copy of A's heartbeats on C (``A.heartbeats`` under the
prefix policy). It consumes the records from the end of each topic, on one thread and one consumer
per observing cluster (a new consumer when a followed topic is deleted and recreated), and
attributes each record to the source alias written in it. A record this version cannot read still
counts for the topic's source when the topic name says which one that is; under the identity
policy copies share C's own topic and only the record can tell.

Freshness of (C, A) is the observer's monotonic time since a heartbeat of A last arrived on C with
a new offset (:class:`failover.heartbeats.FreshnessTracker`). Wall clocks of different machines
are never compared. When C itself is unreachable nothing arrives and every source seen from C
turns stale: from there, nothing can be said.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from drsvc.errors import DrsvcError, KafkaUnavailableError
from drsvc.kafka.admin import TopicInfo
from drsvc.kafka.clients import KafkaClients
from drsvc.kafka.clock import Clock
from drsvc.kafka.errors import translated
from drsvc.kafka.types import OFFSET_END, Message, TopicPartition
from drsvc.runtime.heartbeats.client_logs import kafka_client_logger
from drsvc.runtime.heartbeats.metrics import HeartbeatMetrics, heartbeat_metrics
from drsvc.runtime.heartbeats.outage import OutageLog
from drsvc.runtime.heartbeats.topic import find_topics
from drsvc.topology.models import Topology
from failover import heartbeats, naming
from failover.errors import HeartbeatFormatError
from failover.heartbeats import Freshness, FreshnessTracker

log = logging.getLogger(__name__)

#: (observing cluster, source alias)
FreshnessKey = tuple[str, str]


#: looks up topics by name on one cluster: id and partition count of those that exist
TopicFinder = Callable[[list[str]], Mapping[str, TopicInfo]]


class HeartbeatConsumer(Protocol):
    """What an observer needs of a consumer (a confluent-kafka ``Consumer``, or a fake)."""

    def incremental_assign(self, partitions: list[TopicPartition]) -> None: ...

    def incremental_unassign(self, partitions: list[TopicPartition]) -> None: ...

    def consume(self, num_messages: int = 1, timeout: float = -1) -> list[Message]: ...

    def close(self) -> None: ...


def followed_topics(topology: Topology, observer: str) -> dict[str, frozenset[str]]:
    """The heartbeats topics to follow on cluster ``observer``, each with the sources whose
    heartbeats it carries: the local topic (the observer's own) and the copy made by every flow
    into the observer, named by that flow's policy."""
    names = topology.internal_names()
    topics: dict[str, set[str]] = {names.heartbeats: {observer}}
    for flow in topology.flows_into(observer):
        remote = topology.policy_for(flow).format_remote_topic(flow.source, names.heartbeats)
        topics.setdefault(remote, set()).add(flow.source)
    return {topic: frozenset(sources) for topic, sources in topics.items()}


def consumer_config(observer: str) -> dict[str, Any]:
    """The settings of an observer's consumer on cluster ``observer`` (the client factory adds
    where the cluster is and how to reach it): assigned partitions only (the group is never
    joined, nothing is committed), short fetch waits, quick reconnects."""
    return dict(
        {
            "group.id": naming.heartbeat_observer_group(observer),
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "auto.offset.reset": "latest",
            "enable.partition.eof": False,
            "fetch.wait.max.ms": 100,
            "reconnect.backoff.max.ms": 1000,
            "socket.connection.setup.timeout.ms": 3000,
            "client.id": naming.heartbeat_observer_client_id(observer),
            "log_level": 3,
            "logger": kafka_client_logger(),
        }
    )


@dataclass(frozen=True)
class ObserverSettings:
    """Settings of a :class:`HeartbeatObserver`."""

    #: a source whose heartbeats have not advanced for longer than this is stale
    stale_after_s: float = 5.0
    #: how often each observing cluster's topics are looked up (topics created later are found)
    refresh_interval_s: float = 2.0
    #: longest wait for records in one consume call
    poll_timeout_s: float = 0.2


class HeartbeatObserver:
    """Follows heartbeats on every cluster of a topology (or those given) and says how fresh each
    (observer, source) pair is.

    Its consumers and admin clients come from ``clients`` (default: a factory over ``topology``
    and ``bootstrap``); ``finder_factory`` gives an observing cluster's topic finder instead of
    its admin client (for tests); ``clock`` (default: the factory's) measures freshness.
    """

    def __init__(
        self,
        topology: Topology,
        bootstrap: Mapping[str, str],
        settings: ObserverSettings | None = None,
        *,
        clusters: Iterable[str] | None = None,
        metrics: HeartbeatMetrics | None = None,
        clients: KafkaClients | None = None,
        finder_factory: Callable[[str], TopicFinder] | None = None,
        clock: Clock | None = None,
    ) -> None:
        self.settings = settings or ObserverSettings()
        observers = sorted(clusters) if clusters is not None else sorted(topology.clusters)
        self._kafka = clients if clients is not None else KafkaClients(topology, bootstrap)
        for alias in observers:
            # an unknown cluster or a missing secret is refused now, not on a watch thread
            self._kafka.config(alias)
        self.routes = {alias: followed_topics(topology, alias) for alias in observers}
        self._metrics = metrics if metrics is not None else heartbeat_metrics()
        self._finder_factory = finder_factory or self._admin_finder
        self._clock: Clock = clock if clock is not None else self._kafka.clock
        self._lock = threading.Lock()
        self._trackers: dict[FreshnessKey, FreshnessTracker] = {}
        self._unreadable_reported: set[tuple[str, str]] = set()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    # ------------------------------------------------------------------ the API

    def expected(self) -> list[FreshnessKey]:
        """The (observer, source) pairs the topology says heartbeats should reach."""
        return sorted(
            (observer, source)
            for observer, topics in self.routes.items()
            for sources in topics.values()
            for source in sources
        )

    def freshness(self, now: float | None = None) -> dict[FreshnessKey, Freshness]:
        """Freshness of every (observer, source) pair watched so far."""
        at = self._clock.monotonic() if now is None else now
        with self._lock:
            return {key: tracker.freshness(at) for key, tracker in sorted(self._trackers.items())}

    def start(self) -> None:
        """Watch every observing cluster on a thread of its own."""
        if self._threads:
            return
        self.begin(self._clock.monotonic())
        for alias in self.routes:
            thread = threading.Thread(
                target=self._watch, args=(alias,), name=f"heartbeat-observer-{alias}", daemon=True
            )
            thread.start()
            self._threads.append(thread)

    def stop(self, timeout_s: float = 10.0) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout_s)

    # ------------------------------------------------------------------ bookkeeping

    def begin(self, now: float) -> None:
        """Start the clock of every expected pair at ``now`` (they are unknown until seen)."""
        with self._lock:
            for key in self.expected():
                self._trackers.setdefault(
                    key, FreshnessTracker(self.settings.stale_after_s, started_at=now)
                )

    def record(self, observer: str, messages: Iterable[Message], now: float) -> int:
        """Note heartbeat records consumed on ``observer`` at ``now``; return how many counted."""
        counted = 0
        topics = self.routes.get(observer, {})
        for msg in messages:
            if msg.error() is not None:
                self._consume_error(observer, msg)
                continue
            topic = msg.topic() or ""
            offset = msg.offset()
            if offset is None:
                continue
            source = self._source_of(observer, topic, msg.value(), topics.get(topic, frozenset()))
            if source is None:
                continue
            with self._lock:
                tracker = self._trackers.get((observer, source))
                if tracker is None:
                    # A source the topology does not route here (say, a multi-hop identity
                    # copy): tracked all the same, from the moment it shows up.
                    tracker = FreshnessTracker(self.settings.stale_after_s, started_at=now)
                    self._trackers[(observer, source)] = tracker
                tracker.observe(offset, now)
            counted += 1
        return counted

    def publish(self, observer: str, now: float) -> None:
        """Set the gauges of ``observer``'s pairs as of ``now``."""
        for (seen_on, source), fresh in self.freshness(now).items():
            if seen_on != observer:
                continue
            self._metrics.freshness_seconds.labels(cluster=observer, source=source).set(
                fresh.seconds
            )
            if fresh.last_offset is not None:
                self._metrics.last_offset.labels(cluster=observer, source=source).set(
                    fresh.last_offset
                )

    def _source_of(
        self, observer: str, topic: str, value: bytes | None, expected: frozenset[str]
    ) -> str | None:
        try:
            return heartbeats.decode(value).source
        except HeartbeatFormatError as err:
            if len(expected) == 1:
                # A newer format still says "a heartbeat arrived"; the name says whose.
                (source,) = expected
                return source
            if (observer, topic) not in self._unreadable_reported:
                self._unreadable_reported.add((observer, topic))
                log.warning(
                    "unreadable heartbeat in %s on %s, which carries heartbeats of %s: %s"
                    " (ignored; said once)",
                    topic,
                    observer,
                    ", ".join(sorted(expected)) or "no expected source",
                    err,
                )
            return None

    def _consume_error(self, observer: str, msg: Message) -> None:
        err = msg.error()
        assert err is not None
        log.debug("consuming heartbeats on %s: %s", observer, err.str())

    # ------------------------------------------------------------------ one observing cluster

    def _admin_finder(self, observer: str) -> TopicFinder:
        admin = self._kafka.admin(observer)

        def find(names: list[str]) -> Mapping[str, TopicInfo]:
            return find_topics(admin, names, timeout_s=2.0)

        return find

    def _watch(self, observer: str) -> None:
        watch = _ClusterWatch(
            observer,
            sorted(self.routes[observer]),
            lambda: self._kafka.consumer(observer, consumer_config(observer)),
            self._finder_factory(observer),
        )
        # An observer that died would make every source look stale: it survives anything.
        crashes = OutageLog(f"observing heartbeats on {observer}", log)
        next_refresh = 0.0
        try:
            while not self._stop.is_set():
                try:
                    now = self._clock.monotonic()
                    if now >= next_refresh:
                        watch.follow()
                        next_refresh = now + self.settings.refresh_interval_s
                    if watch.assigned:
                        messages = watch.consumer.consume(500, self.settings.poll_timeout_s)
                        self.record(observer, messages, self._clock.monotonic())
                    else:
                        self._stop.wait(self.settings.poll_timeout_s)
                    self.publish(observer, self._clock.monotonic())
                    crashes.succeeded(self._clock.monotonic())
                except Exception as err:
                    crashes.failed(repr(err), self._clock.monotonic(), with_traceback=True)
                    self._stop.wait(1.0)
        finally:
            watch.consumer.close()


class _ClusterWatch:
    """The consumer of one observing cluster and the partitions it follows."""

    def __init__(
        self,
        observer: str,
        topics: list[str],
        new_consumer: Callable[[], HeartbeatConsumer],
        find_topics: TopicFinder,
    ) -> None:
        self.observer = observer
        self.topics = topics
        self._new_consumer = new_consumer
        self._find_topics = find_topics
        self.consumer = new_consumer()
        self.assigned: set[tuple[str, int]] = set()
        self._topic_ids: dict[str, bytes] = {}

    def follow(self) -> None:
        """Assign the partitions of followed topics that exist now, from their end."""
        try:
            found = self._find_topics(self.topics)
        except KafkaUnavailableError as err:
            log.debug("looking up heartbeats topics on %s: %s", self.observer, err)
            return
        recreated = sorted(
            topic
            for topic, info in found.items()
            if self._topic_ids.get(topic, info.topic_id) != info.topic_id
        )
        self._topic_ids.update((topic, info.topic_id) for topic, info in found.items())
        if recreated:
            # A client that knew the old topic may ignore the new one's metadata (its leader
            # epochs start again from zero): a new consumer is the sure way to follow it.
            log.info(
                "%s on %s was deleted and recreated: following it with a new consumer",
                ", ".join(recreated),
                self.observer,
            )
            self.consumer.close()
            self.consumer = self._new_consumer()
            self.assigned = set()
        wanted = {(t, p) for t, info in found.items() for p in range(info.partitions)}
        new = sorted(wanted - self.assigned)
        gone = sorted(self.assigned - wanted)
        try:
            with translated("assigning heartbeats partitions", self.observer):
                if gone:
                    self.consumer.incremental_unassign([TopicPartition(t, p) for t, p in gone])
                if new:
                    self.consumer.incremental_assign(
                        [TopicPartition(t, p, OFFSET_END) for t, p in new]
                    )
            if new:
                log.info(
                    "observing heartbeats on %s in %s",
                    self.observer,
                    ", ".join(f"{t}-{p}" for t, p in new),
                )
        except DrsvcError as err:
            log.warning("following heartbeats topics on %s: %s (will retry)", self.observer, err)
            return
        self.assigned = wanted
