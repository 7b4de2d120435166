"""A confluent-kafka consumer that follows its application's active cluster.

``FailoverConsumer(app, topology, config)`` reads the application's logical topics on whichever
cluster is active: subscribing to ``orders`` reads the local ``orders`` and every remote copy of it
there (``east.orders`` ...), copies created later included. When a cluster is active again after a
switch it joins the group there, where the failover set the group's offsets.

Across a switch, a key's older records lie in a remote copy (``east.orders`` on west) and its
newer ones in the local topic: each local partition is held paused until the group has read the
remote copies' same partitions up to the failover's cut-off, so per-key order holds.

Leaving a cluster. The consumer follows the application's active cluster on its own, not only
inside ``poll``/``consume``. Once the key says none or names another cluster, no more records are
handed out from the old cluster: the application's next call commits what it processed and
closes the membership there. If the application does not call within the lease of the last
answer naming the old cluster (less ``min(1.5 s, lease/4)``), or that lease is about to end
without an answer at all, a guard thread leaves for it, so the group has no member left on the
old cluster for the failover to wait for. Nothing is committed to a cluster later than half a
second before that lease ends: :meth:`FailoverConsumer.commit` raises
:class:`NoActiveClusterError` instead, and automatic commits (``enable.auto.commit``, on by
default) are made by this class, within the lease, not by librdkafka in the background, which
would go on committing to the old cluster after a switch.

"Processed" means returned by an earlier ``poll``/``consume`` call, or covered by a ``commit``
or ``close`` call. With ``enable.auto.offset.store`` (on by default) this class stores each
call's offsets at the next call, so a batch still in the application's hands when the guard
has to leave for it is not committed: it is read again on the new cluster.

Threads. confluent-kafka's consumer is not to be used from two threads at once. Every call into
it is made under one lock; ``consume`` holds it for slices of at most 0.2 s. The follower's
notifier thread never takes that lock (it tells other clients too): it only wakes the guard. The
guard takes the lock between the application's calls, or leaves the work to the application's
thread, which checks the same deadlines at every slice. A consumer being left is handed to a
thread of its own, which commits and closes it: nothing else touches it then.

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

from drsvc.client.active_cluster import ActiveCluster, ActiveState, known_cluster
from drsvc.client.application import ClientApplication
from drsvc.client.origins import origin_of
from drsvc.errors import (
    ConfigError,
    CoordinatorUnavailableError,
    DrsvcError,
    NoActiveClusterError,
)
from drsvc.kafka.clients import KafkaClients
from drsvc.kafka.hot import KafkaException
from drsvc.kafka.types import Consumer, KafkaError, Message, TopicPartition
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
#: no commit is sent to a cluster later than this before the lease of the answer naming it ends
_LEASE_MARGIN_S = 0.5
#: the guard leaves a cluster for the application this long before that lease ends (at most a
#: quarter of the lease: a healthy watch renews it every quarter), so a last commit can be made
_LEAVE_LEAD_S = 1.5
#: how often the guard looks at the deadlines (it is also woken by every change)
_GUARD_TICK_S = 0.25
#: librdkafka's default interval of automatic commits
_AUTO_COMMIT_INTERVAL_MS = 5000
#: how often a topology file is looked at for changes (a source added to an aggregate cluster)
_TOPOLOGY_CHECK_S = 2.0


class FailoverConsumer:
    """``Consumer`` (poll, consume, commit, close, subscribe ...) over the active cluster of
    application ``app`` of ``topology`` (a path or a loaded topology). ``config`` is a
    confluent-kafka configuration with ``group.id`` and without ``bootstrap.servers`` (security
    settings come from the topology too); ``consul`` a ``host:port`` (default as the CLI finds
    it). ``clients`` builds the underlying consumers (default: a factory of the application's
    topology, made when a cluster is joined)."""

    def __init__(
        self,
        app: str,
        topology: Topology | str | Path,
        config: Mapping[str, Any],
        *,
        consul: str | None = None,
        active: ActiveCluster | None = None,
        clients: KafkaClients | None = None,
    ) -> None:
        if not config.get("group.id"):
            raise ConfigError(f"the consumer of application '{app}' needs a group.id")
        self._owns_active = active is None
        self._active = active if active is not None else ActiveCluster(app, topology, consul=consul)
        self._app = self._active.application
        self._app.client_config(self._app.application.preferred, config)  # refuses servers early
        self._clients = clients
        self._topology_file = None if isinstance(topology, Topology) else Path(topology)
        self._topology_stamp = _stamp(self._topology_file)
        self._next_topology_check = time.monotonic() + _TOPOLOGY_CHECK_S
        # Lease ends are measured on the follower's clock: so is every deadline here.
        self._clock = self._active.now
        self._auto_commit = _flag(config.get("enable.auto.commit", True))
        self._auto_store = _flag(config.get("enable.auto.offset.store", True))
        interval_ms = int(config.get("auto.commit.interval.ms", _AUTO_COMMIT_INTERVAL_MS))
        self._commit_interval_s = interval_ms / 1000
        self._next_auto_commit = 0.0
        # Remote copies created while running are found through the pattern subscription at
        # the next metadata refresh: keep it short unless the application chose. Commits and
        # offset stores are this class's (within the lease, and only of processed messages).
        own = self._app.client_settings(config)
        underlying = {k: v for k, v in own.items() if k != "auto.commit.interval.ms"}
        self._config = {
            "topic.metadata.refresh.interval.ms": 5000,
            **underlying,
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
        }
        self._cooperative = "cooperative" in str(config.get("partition.assignment.strategy", ""))
        self._lock = threading.RLock()
        self._consumer: Consumer | None = None
        self._joined: tuple[str, int] | None = None
        #: the messages the last consume call returned, whose offsets are not stored yet
        self._returned: list[Message] = []
        self._names: list[str] = []
        self._logical: list[LogicalTopic] = []
        self._callbacks: dict[str, RebalanceCallback | None] = {}
        self._cutoffs: dict[Partition, int] = {}
        self._held: dict[Partition, dict[Partition, int]] = {}
        self._next_gate_check = 0.0
        self._closed = False
        self._leaving: list[threading.Thread] = []
        #: the lease of the document the joined cluster was read from (seconds)
        self._joined_lease_s = 0.0
        self._wake = threading.Event()
        self._unsubscribe = self._active.subscribe(self._on_change)
        self._guard = threading.Thread(
            target=self._guard_loop, name=f"drsvc-guard-{self._app.name}", daemon=True
        )
        self._guard.start()
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
        with self._lock:
            # Calling again says the messages of the last call were processed.
            self._store_returned()
        while True:
            left = None if deadline is None else deadline - time.monotonic()
            with self._lock:
                if self._closed:
                    raise RuntimeError("consumer closed")
                consumer = self._ensure()
                if consumer is not None:
                    self._follow_topology(consumer)
                    self._release_drained(consumer)
                    self._auto_commit_due(consumer)
                    slice_s = _SLICE_S if left is None else max(0.0, min(left, _SLICE_S))
                    messages: list[Message] = consumer.consume(num_messages, slice_s)
                    if messages:
                        self._returned = messages
                        return messages
            if consumer is None:
                pause_s = _SLICE_S if left is None else max(0.0, min(left, _SLICE_S))
                if self._active.cluster is None:
                    self._active.wait(pause_s)  # returns early once a cluster is usable
                else:
                    time.sleep(pause_s)  # not subscribed, or the cut-offs are not readable yet
            if left is not None and left <= 0:
                return []

    def store_offsets(
        self, message: Message | None = None, offsets: list[TopicPartition] | None = None
    ) -> None:
        """Mark ``message`` (or ``offsets``) processed, for the next commit (with
        ``enable.auto.offset.store`` off)."""
        with self._lock:
            consumer = self._usable("store offsets")
            if message is not None:
                consumer.store_offsets(message=message)
            else:
                consumer.store_offsets(offsets=offsets)

    def commit(
        self,
        message: Message | None = None,
        offsets: list[TopicPartition] | None = None,
        asynchronous: bool = True,
    ) -> list[TopicPartition] | None:
        """Commit on the active cluster (what was processed, or ``message``/``offsets`` read
        since the last switch). Raises :class:`NoActiveClusterError` when no cluster is joined,
        or when the lease of the answer naming the joined one ends within half a second:
        nothing is committed to a cluster after the failover may have set the group's offsets
        elsewhere."""
        with self._lock:
            if message is None and offsets is None:
                # Calling commit says the messages of the last call were processed: if the
                # consumer leaves its cluster now, they are committed on the way out.
                self._store_returned()
            consumer = self._usable("commit")
            kwargs: dict[str, Any] = {"asynchronous": asynchronous}
            if message is not None:
                kwargs["message"] = message
            if offsets is not None:
                kwargs["offsets"] = offsets
            result: list[TopicPartition] | None = consumer.commit(**kwargs)
            return result

    def close(self) -> None:
        """Commit what was processed (within the lease), leave the group, stop following the
        application."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._store_returned()  # closing says the last messages were processed too
            self._leave("closing")
        self._unsubscribe()
        self._wake.set()
        self._guard.join(_LEAVE_WAIT_S)
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
        state = self._follow(by_application=True)
        wanted = None if state.cluster is None else (state.cluster, state.epoch)
        if wanted is None or not self._names:
            return self._consumer
        if self._consumer is None and self._clock() < self._leave_by(wanted, state):
            self._join(state)
        return self._consumer

    def _follow(self, *, by_application: bool) -> ActiveState:
        """Leave the joined cluster (under the lock) when the state no longer names it and the
        application is here to have processed what it read (``by_application``), or when the
        lease of the last answer naming it is about to end, whoever calls."""
        state = self._active.state()
        joined = self._joined
        if joined is None:
            return state
        wanted = None if state.cluster is None else (state.cluster, state.epoch)
        if joined != wanted and by_application:
            self._leave(state.reason if state.cluster is None else f"now active: {state.cluster}")
        elif self._clock() >= self._leave_by(joined):
            self._leave(
                f"the lease on {joined[0]} ends in less than {self._lead_s(self._joined_lease_s)}"
                " s" + ("" if joined == wanted else f" ({state.reason})")
            )
        return state

    def _leave_by(self, value: tuple[str, int], state: ActiveState | None = None) -> float:
        """When the guard leaves ``value`` (a cluster and epoch) at the latest."""
        lease_s = self._joined_lease_s
        if state is not None and state.document is not None:
            lease_s = state.document.lease_ms / 1000
        return self._active.lease_end_s(*value) - self._lead_s(lease_s)

    @staticmethod
    def _lead_s(lease_s: float) -> float:
        return min(_LEAVE_LEAD_S, lease_s / 4)

    def _on_change(self, state: ActiveState) -> None:
        """From the follower's notifier: wake the guard; never wait for the consumer's lock."""
        self._wake.set()

    def _guard_loop(self) -> None:
        """Leave the old cluster for an application that does not call in time."""
        while not self._closed:
            if self._lock.acquire(timeout=_GUARD_TICK_S):
                try:
                    if not self._closed:
                        self._follow(by_application=False)
                    joined = self._joined
                    left = (
                        _GUARD_TICK_S if joined is None else self._leave_by(joined) - self._clock()
                    )
                finally:
                    self._lock.release()
                self._wake.wait(max(0.01, min(left, _GUARD_TICK_S)))
                self._wake.clear()

    def _commit_deadline(self) -> float:
        """The last moment a commit may be sent to the joined cluster (0: none joined)."""
        if self._joined is None:
            return 0.0
        return self._active.lease_end_s(*self._joined) - _LEASE_MARGIN_S

    def _usable(self, what: str) -> Consumer:
        """The joined consumer, if ``what`` may still reach its cluster (under the lock)."""
        self._follow(by_application=True)
        consumer = self._consumer
        if consumer is None or self._joined is None:
            raise NoActiveClusterError(
                f"application '{self._app.name}' has no active cluster to {what} to; what "
                "was processed before the switch was committed then"
            )
        left = self._commit_deadline() - self._clock()
        if left <= 0:
            raise NoActiveClusterError(
                f"application '{self._app.name}': the lease on {self._joined[0]} (epoch "
                f"{self._joined[1]}) ends in {left + _LEASE_MARGIN_S:.2f} s; a {what} now could "
                "reach it after a failover set the group's offsets elsewhere"
            )
        return consumer

    def _store_returned(self) -> None:
        """Store the offsets of the messages the last consume call returned (processed now)."""
        returned, self._returned = self._returned, []
        consumer = self._consumer
        if not self._auto_store or not returned or consumer is None:
            return
        ends: dict[Partition, int] = {}
        for message in returned:
            if message.error() is None:
                key = (message.topic() or "", message.partition() or 0)
                ends[key] = max(ends.get(key, 0), (message.offset() or 0) + 1)
        if not ends:
            return
        try:
            consumer.store_offsets(offsets=[TopicPartition(t, p, o) for (t, p), o in ends.items()])
        except KafkaException as err:
            # A partition revoked since: its new owner reads it from the last commit.
            log.debug("application %s: storing offsets: %s", self._app.name, err)

    def _auto_commit_due(self, consumer: Consumer) -> None:
        """librdkafka's automatic commit, made here: only within the lease."""
        now = self._clock()
        if not self._auto_commit or now < self._next_auto_commit:
            return
        self._next_auto_commit = now + self._commit_interval_s
        if now < self._commit_deadline():
            _commit_quietly(consumer, self._app.name, asynchronous=True)

    def _join(self, state: ActiveState) -> None:
        assert state.cluster is not None and state.document is not None
        cluster = state.cluster
        known_cluster(self._app, cluster)
        try:
            # Not the watch thread's coordinator: one HTTP session serves one thread.
            cutoffs = self._app.cutoffs(self._active.reader(), state.document.failover_id)
        except CoordinatorUnavailableError as err:
            log.warning("application %s: cannot read the failover's cut-offs yet: %s",
                        self._app.name, err)  # fmt: skip
            return
        clients = self._clients if self._clients is not None else self._app.kafka_clients(cluster)
        consumer = clients.consumer(cluster, self._config)
        self._cutoffs = cutoffs
        self._held = {}
        self._returned = []
        self._consumer = consumer
        self._joined = (cluster, state.epoch)
        self._joined_lease_s = state.document.lease_ms / 1000
        self._next_auto_commit = self._clock() + self._commit_interval_s
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
        commit_until = self._commit_deadline()
        consumer, self._consumer = self._consumer, None
        joined, self._joined = self._joined, None
        self._held = {}
        self._returned = []  # maybe still in the application's hands: read again elsewhere
        if consumer is None:
            return
        # Committing and leaving the group wait for the old cluster's coordinator: for as long
        # as librdkafka's timeouts when that cluster is gone. So they run on their own thread and
        # the new cluster is joined meanwhile. (A planned switch leaves a lease between none and
        # the new cluster, and its executor waits for the group to leave the old cluster.)
        leaving = threading.Thread(
            target=self._commit_and_close,
            args=(consumer, joined[0] if joined else "?", why, commit_until),
            name=f"drsvc-leave-{self._app.name}",
            daemon=True,
        )
        self._leaving = [t for t in self._leaving if t.is_alive()] + [leaving]
        leaving.start()

    def _commit_and_close(
        self, consumer: Consumer, cluster: str, why: str, commit_until: float
    ) -> None:
        if self._clock() < commit_until:
            _commit_quietly(consumer, self._app.name, asynchronous=False)
        else:
            log.warning("application %s: the lease on %s has ended; leaving it without a last "
                        "commit (what was processed since the last one is read again)",
                        self._app.name, cluster)  # fmt: skip
        # Auto-commit is off underneath: closing commits nothing more, it only leaves the group.
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
        if (
            self._auto_commit
            and consumer is self._consumer
            and self._clock() < self._commit_deadline()
        ):
            # What librdkafka's automatic commit does before a partition is handed over.
            _commit_quietly(consumer, self._app.name, asynchronous=False)
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


def _commit_quietly(consumer: Consumer, app: str, *, asynchronous: bool) -> None:
    """Commit the stored offsets; having nothing new to commit is no error."""
    try:
        if asynchronous:
            consumer.commit(asynchronous=True)
        else:
            consumer.commit(asynchronous=False)
    except KafkaException as err:
        if err.args[0].code() != KafkaError._NO_OFFSET:
            log.warning("application %s: committing: %s", app, err)


def _flag(value: object) -> bool:
    """A librdkafka boolean setting, given as a bool or as its text."""
    if isinstance(value, str):
        return value.strip().lower() in ("true", "1", "yes", "on")
    return bool(value)


def _stamp(path: Path | None) -> tuple[int, int] | None:
    """What tells a changed file from the one read before (modification time and size)."""
    if path is None:
        return None
    try:
        status = path.stat()
    except OSError:
        return None
    return (status.st_mtime_ns, status.st_size)
