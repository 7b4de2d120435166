"""A confluent-kafka consumer that follows its application's active cluster.

``FailoverConsumer(app, topology, config)`` reads the application's logical topics on whichever
cluster is active: subscribing to ``orders`` reads the local ``orders`` and every remote copy of it
there (``east.orders`` ...), copies created later included. On a switch (the key says none, or the
lease lapsed) it commits what the application processed (every message returned before the call
that notices the switch), leaves the group and waits; when a cluster is active again it joins the
group there, where the failover set the group's offsets.

Across a switch, a key's older records lie in a remote copy (``east.orders`` on west) and its
newer ones in the local topic: each local partition is held paused until the group has read the
remote copies' same partitions up to the failover's cut-off, so per-key order holds.

Rules for the application: process each message before the next ``poll``/``consume`` call and
commit with ``commit()`` (or automatic commits) rather than with a message kept from before a
switch; ``poll`` and ``consume`` return nothing while no cluster is usable.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, TopicPartition

from drsvc.client.active_cluster import ActiveCluster, ActiveState, known_cluster
from drsvc.client.application import ClientApplication
from drsvc.client.origins import origin_of
from drsvc.errors import (
    ConfigError,
    CoordinatorUnavailableError,
    DrsvcError,
    NoActiveClusterError,
)
from drsvc.topology.models import Topology
from failover.logical_topics import LogicalTopic, Origin, drain_blockers, drained

__all__ = ["FailoverConsumer"]

log = logging.getLogger(__name__)

Partition = tuple[str, int]
RebalanceCallback = Callable[[Any, list[TopicPartition]], None]

#: the longest one underlying consume call blocks, so a switch is noticed promptly
_SLICE_S = 0.2
#: how often held-back partitions are checked against the cut-offs
_GATE_CHECK_S = 0.5
#: how long close() waits for the commit and leave of a cluster it stopped reading
_LEAVE_WAIT_S = 30.0
#: how often a topology file is looked at for changes (a source added to an aggregate cluster)
_TOPOLOGY_CHECK_S = 2.0


class FailoverConsumer:
    """``Consumer`` (poll, consume, commit, close, subscribe ...) over the active cluster of
    application ``app`` of ``topology`` (a path or a loaded topology). ``config`` is a
    confluent-kafka configuration with ``group.id`` and without ``bootstrap.servers``;
    ``consul`` a ``host:port`` (default as the CLI finds it)."""

    def __init__(
        self,
        app: str,
        topology: Topology | str | Path,
        config: Mapping[str, Any],
        *,
        consul: str | None = None,
        active: ActiveCluster | None = None,
    ) -> None:
        if not config.get("group.id"):
            raise ConfigError(f"the consumer of application '{app}' needs a group.id")
        self._owns_active = active is None
        self._active = active if active is not None else ActiveCluster(app, topology, consul=consul)
        self._app = self._active.application
        self._app.client_config(self._app.application.preferred, config)  # refuses servers early
        self._topology_file = None if isinstance(topology, Topology) else Path(topology)
        self._topology_stamp = _stamp(self._topology_file)
        self._next_topology_check = time.monotonic() + _TOPOLOGY_CHECK_S
        # Remote copies created while running are found through the pattern subscription at
        # the next metadata refresh: keep it short unless the application chose.
        self._config = {"topic.metadata.refresh.interval.ms": 5000, **config}
        self._cooperative = "cooperative" in str(config.get("partition.assignment.strategy", ""))
        self._lock = threading.RLock()
        self._consumer: Consumer | None = None
        self._joined: tuple[str, int] | None = None
        self._names: list[str] = []
        self._logical: list[LogicalTopic] = []
        self._callbacks: dict[str, RebalanceCallback | None] = {}
        self._cutoffs: dict[Partition, int] = {}
        self._held: dict[Partition, dict[Partition, int]] = {}
        self._next_gate_check = 0.0
        self._closed = False
        self._leaving: list[threading.Thread] = []
        self._active.start()

    # ------------------------------------------------------------------ what it reads

    @property
    def cluster(self) -> str | None:
        """The cluster it reads now (None: none joined)."""
        return None if self._joined is None else self._joined[0]

    def subscribe(
        self,
        topics: list[str],
        on_assign: RebalanceCallback | None = None,
        on_revoke: RebalanceCallback | None = None,
        on_lost: RebalanceCallback | None = None,
    ) -> None:
        """Read the logical ``topics`` (names on the preferred cluster, without prefixes)."""
        if not topics:
            raise ConfigError("subscribe to at least one topic")
        with self._lock:
            self._names = list(topics)
            self._callbacks = {"assign": on_assign, "revoke": on_revoke, "lost": on_lost}
            if self._consumer is not None and self._joined is not None:
                self._subscribe(self._consumer, self._joined[0])

    def unsubscribe(self) -> None:
        with self._lock:
            self._names = []
            if self._consumer is not None:
                self._consumer.unsubscribe()

    def assignment(self) -> list[TopicPartition]:
        with self._lock:
            return [] if self._consumer is None else list(self._consumer.assignment())

    def lag(self) -> dict[tuple[str, int], int]:
        """Records not read yet per assigned partition: its end minus this member's position
        (the group's committed offset where nothing was fetched since the assignment; the whole
        partition where there is neither)."""
        with self._lock:
            consumer = self._consumer
            if consumer is None:
                return {}
            positions = {
                (tp.topic, tp.partition): tp.offset
                for tp in consumer.position(consumer.assignment())
            }
            unknown = [TopicPartition(t, p) for (t, p), o in positions.items() if o < 0]
            if unknown:
                for tp in consumer.committed(unknown, timeout=5):
                    positions[(tp.topic, tp.partition)] = tp.offset
            lag: dict[tuple[str, int], int] = {}
            for (topic, partition), offset in positions.items():
                low, high = consumer.get_watermark_offsets(
                    TopicPartition(topic, partition), timeout=5, cached=False
                )
                lag[(topic, partition)] = max(0, high - (offset if offset >= 0 else low))
            return lag

    def origin_of(self, message: Message) -> Origin:
        """Where ``message`` (returned by this consumer) was first written."""
        return origin_of(message, self.cluster)

    # ------------------------------------------------------------------ reading

    def poll(self, timeout: float | None = None) -> Message | None:
        messages = self.consume(1, -1 if timeout is None else timeout)
        return messages[0] if messages else None

    def consume(self, num_messages: int = 1, timeout: float = -1) -> list[Message]:
        deadline = None if timeout < 0 else time.monotonic() + timeout
        while True:
            left = None if deadline is None else deadline - time.monotonic()
            with self._lock:
                if self._closed:
                    raise RuntimeError("consumer closed")
                consumer = self._ensure()
                if consumer is not None:
                    self._follow_topology(consumer)
                    self._release_drained(consumer)
                    slice_s = _SLICE_S if left is None else max(0.0, min(left, _SLICE_S))
                    messages: list[Message] = consumer.consume(num_messages, slice_s)
                    if messages:
                        return messages
            if consumer is None:
                pause_s = _SLICE_S if left is None else max(0.0, min(left, _SLICE_S))
                if self._active.cluster is None:
                    self._active.wait(pause_s)  # returns early once a cluster is usable
                else:
                    time.sleep(pause_s)  # not subscribed, or the cut-offs are not readable yet
            if left is not None and left <= 0:
                return []

    def commit(
        self,
        message: Message | None = None,
        offsets: list[TopicPartition] | None = None,
        asynchronous: bool = True,
    ) -> list[TopicPartition] | None:
        """Commit on the active cluster (the stored offsets, or ``message``/``offsets`` read
        since the last switch). Raises :class:`NoActiveClusterError` while none is joined."""
        with self._lock:
            if self._consumer is None:
                raise NoActiveClusterError(
                    f"application '{self._app.name}' has no active cluster to commit to; what "
                    "was processed before the switch was committed then"
                )
            kwargs: dict[str, Any] = {"asynchronous": asynchronous}
            if message is not None:
                kwargs["message"] = message
            if offsets is not None:
                kwargs["offsets"] = offsets
            result: list[TopicPartition] | None = self._consumer.commit(**kwargs)
            return result

    def close(self) -> None:
        """Commit what was processed, leave the group, stop following the application."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._leave("closing")
        for leaving in self._leaving:
            leaving.join(_LEAVE_WAIT_S)
        if self._owns_active:
            self._active.close()

    def __enter__(self) -> FailoverConsumer:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    # ------------------------------------------------------------------ following the switch

    def _ensure(self) -> Consumer | None:
        state = self._active.state()
        wanted = None if state.cluster is None else (state.cluster, state.epoch)
        if self._joined is not None and self._joined != wanted:
            self._leave(state.reason if state.cluster is None else f"now active: {state.cluster}")
        if wanted is None or not self._names:
            return self._consumer
        if self._consumer is None:
            self._join(state)
        return self._consumer

    def _join(self, state: ActiveState) -> None:
        assert state.cluster is not None and state.document is not None
        cluster = state.cluster
        known_cluster(self._app, cluster)
        try:
            cutoffs = self._app.cutoffs(self._active.coordinator, state.document.failover_id)
        except CoordinatorUnavailableError as err:
            log.warning("application %s: cannot read the failover's cut-offs yet: %s",
                        self._app.name, err)  # fmt: skip
            return
        consumer = Consumer(self._app.client_config(cluster, self._config))
        self._cutoffs = cutoffs
        self._held = {}
        self._consumer = consumer
        self._joined = (cluster, state.epoch)
        self._subscribe(consumer, cluster)
        log.info("application %s: consuming on %s (epoch %d)", self._app.name, cluster,
                 state.epoch)  # fmt: skip

    def _subscribe(self, consumer: Consumer, cluster: str) -> None:
        self._logical = self._app.logical_topics(self._names, cluster)
        consumer.subscribe(
            [topic.pattern() for topic in self._logical],
            on_assign=self._on_assign,
            on_revoke=self._on_revoke,
            on_lost=self._on_lost,
        )

    def _leave(self, why: str) -> None:
        consumer, self._consumer = self._consumer, None
        joined, self._joined = self._joined, None
        self._held = {}
        if consumer is None:
            return
        # Committing and leaving the group wait for the old cluster's coordinator: for as long
        # as librdkafka's timeouts when that cluster is gone. So they run on their own thread and
        # the new cluster is joined meanwhile. (A planned switch leaves a lease between none and
        # the new cluster, and its executor waits for this commit.)
        leaving = threading.Thread(
            target=self._commit_and_close,
            args=(consumer, joined[0] if joined else "?", why),
            name=f"drsvc-leave-{self._app.name}",
            daemon=True,
        )
        self._leaving = [t for t in self._leaving if t.is_alive()] + [leaving]
        leaving.start()

    def _commit_and_close(self, consumer: Consumer, cluster: str, why: str) -> None:
        try:
            consumer.commit(asynchronous=False)
        except KafkaException as err:
            if err.args[0].code() != KafkaError._NO_OFFSET:
                log.warning("application %s: committing on %s before leaving: %s",
                            self._app.name, cluster, err)  # fmt: skip
        consumer.close()
        log.info("application %s: stopped consuming on %s (%s)", self._app.name, cluster, why)

    # ------------------------------------------------------------------ rebalances

    def _on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        user = self._callbacks.get("assign")
        if user is not None:
            user(self, partitions)
        if self._cooperative:
            consumer.incremental_assign(partitions)
        else:
            consumer.assign(partitions)
        held: dict[Partition, dict[Partition, int]] = {}
        for tp in partitions:
            logical = self._logical_of(tp.topic)
            if logical is None:
                continue
            blockers = drain_blockers((tp.topic, tp.partition), self._cutoffs, logical)
            if blockers:
                held[(tp.topic, tp.partition)] = blockers
        if held:
            # Paused before anything is fetched: the local records wait for the older ones.
            consumer.pause([TopicPartition(t, p) for t, p in held])
            self._held.update(held)
            self._next_gate_check = 0.0

    def _on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self._forget(consumer, partitions, "revoke")
        if self._cooperative:
            consumer.incremental_unassign(partitions)
        else:
            consumer.unassign()

    def _on_lost(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self._forget(consumer, partitions, "lost")

    def _forget(self, consumer: Consumer, partitions: list[TopicPartition], what: str) -> None:
        user = self._callbacks.get(what)
        if user is not None:
            user(self, partitions)
        if consumer is not self._consumer:
            return  # a consumer being closed after a switch: the held ones are the new one's
        for tp in partitions:
            self._held.pop((tp.topic, tp.partition), None)

    def _follow_topology(self, consumer: Consumer) -> None:
        """Read the topology file again when it changed: a cluster added to it (a new source
        of an aggregate cluster) adds its copies to the subscription, without a restart."""
        now = time.monotonic()
        if self._topology_file is None or now < self._next_topology_check:
            return
        self._next_topology_check = now + _TOPOLOGY_CHECK_S
        stamp = _stamp(self._topology_file)
        if stamp == self._topology_stamp:
            return
        self._topology_stamp = stamp
        try:
            changed = ClientApplication.of(self._app.name, self._topology_file)
        except DrsvcError as err:
            log.error("application %s: keeping the topology read before, the changed file is "
                      "not usable: %s", self._app.name, err)  # fmt: skip
            return
        before = [t.pattern() for t in self._logical]
        self._app = changed
        if self._joined is not None:
            after = [t.pattern() for t in self._app.logical_topics(self._names, self._joined[0])]
            if after != before:
                log.info("application %s: the topology changed; reading %s", self._app.name,
                         ", ".join(after))  # fmt: skip
                self._subscribe(consumer, self._joined[0])

    def _logical_of(self, topic: str) -> LogicalTopic | None:
        return next((lt for lt in self._logical if lt.is_member(topic)), None)

    def _release_drained(self, consumer: Consumer) -> None:
        """Resume the held-back local partitions whose remote copies the group has read up to
        the cut-off (here, or committed by another member)."""
        now = time.monotonic()
        if not self._held or now < self._next_gate_check:
            return
        self._next_gate_check = now + _GATE_CHECK_S
        wanted = {tp for blockers in self._held.values() for tp in blockers}
        asked = [TopicPartition(t, p) for t, p in sorted(wanted)]
        positions: dict[Partition, int] = {}
        try:
            for tp in consumer.committed(asked, timeout=5):
                positions[(tp.topic, tp.partition)] = tp.offset
        except KafkaException as err:
            log.warning("application %s: reading committed offsets: %s", self._app.name, err)
        mine = {(tp.topic, tp.partition) for tp in consumer.assignment()}
        for tp in consumer.position([tp for tp in asked if (tp.topic, tp.partition) in mine]):
            key = (tp.topic, tp.partition)
            positions[key] = max(positions.get(key, -1), tp.offset)
        released = [local for local, blockers in self._held.items() if drained(blockers, positions)]
        if released:
            consumer.resume([TopicPartition(t, p) for t, p in released])
            for local in released:
                del self._held[local]
            log.info("application %s: reading %s after the remote copies' cut-off",
                     self._app.name, ", ".join(f"{t}-{p}" for t, p in released))  # fmt: skip


def _stamp(path: Path | None) -> tuple[int, int] | None:
    """What tells a changed file from the one read before (modification time and size)."""
    if path is None:
        return None
    try:
        status = path.stat()
    except OSError:
        return None
    return (status.st_mtime_ns, status.st_size)
