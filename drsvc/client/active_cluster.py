"""The application's active cluster as a client sees it: watched in Consul, held with a lease.

A watcher thread follows ``drsvc/<ns>/apps/<app>/active`` with blocking queries. Every answer
renews the lease from the moment its request was sent (:func:`failover.active.lease_deadline_s`);
the cluster is usable only while the lease holds and the key names one
(:func:`failover.active.usable_cluster`). A second thread wakes at the lease's deadline, so a
client whose Consul agent stopped answering is told to stop even while the watch hangs.

Listeners (:meth:`ActiveCluster.subscribe`) are called with every change of the usable cluster,
in order, from the notifier thread; :meth:`ActiveCluster.changes` iterates over the same changes.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from drsvc.adapters.consul_coordination import ConsulCoordinator
from drsvc.adapters.coordination import Coordinator
from drsvc.client.application import ClientApplication, consul_address
from drsvc.errors import ConfigError, CoordinatorUnavailableError, DrsvcError
from drsvc.topology.models import Topology
from failover.active import ActiveDocument, decode_active, lease_deadline_s, usable_cluster
from failover.errors import ActiveFormatError

__all__ = ["ActiveCluster", "ActiveState"]

log = logging.getLogger(__name__)

#: a blocking query returns at least this often relative to the lease, so a healthy client
#: renews it several times before it lapses
_WATCHES_PER_LEASE = 4
_RETRY_S = 0.2


@dataclass(frozen=True)
class ActiveState:
    """What a client may do now."""

    #: the cluster to produce to and consume from; None: stop
    cluster: str | None
    #: the document last read (None before the first answer)
    document: ActiveDocument | None
    #: why ``cluster`` is what it is: active, switching, lease-lapsed or not-heard-yet
    reason: str
    #: until when the lease holds (monotonic seconds; 0 when there is none)
    lease_deadline_s: float = 0.0

    @property
    def epoch(self) -> int:
        return -1 if self.document is None else self.document.epoch


class ActiveCluster:
    """Follows where application ``app`` of ``topology`` is active (thread-safe).

    ``consul`` is a ``host:port`` (default: DRSVC_CONSUL_HTTP_ADDR, else the local environment's
    agent); tests may pass a ``coordinator`` and a ``clock`` instead. Call :meth:`start` (or use
    it as a context manager) to begin watching.
    """

    def __init__(
        self,
        app: str,
        topology: Topology | str | Path,
        *,
        consul: str | None = None,
        coordinator: Coordinator | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.application = ClientApplication.of(app, topology)
        self._lease_s = self.application.application.lease_s
        wait_s = self._lease_s / _WATCHES_PER_LEASE
        if coordinator is None:
            # The request timeout outlasts the blocking wait (Consul adds up to 1/16 of jitter).
            coordinator = ConsulCoordinator(consul_address(consul), timeout_s=wait_s * 1.5 + 1)
        self.coordinator = coordinator
        self._wait_s = wait_s
        self._clock = clock
        self._cond = threading.Condition()
        self._document: ActiveDocument | None = None
        self._heard_at: float | None = None
        self._index = 0
        self._problem = ""
        self._notified: ActiveState | None = None
        self._listeners: list[Callable[[ActiveState], None]] = []
        self._history: list[ActiveState] = []
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    # ------------------------------------------------------------------ life

    def start(self) -> ActiveCluster:
        if self._threads:
            return self
        for target, name in ((self._watch_loop, "watch"), (self._notify_loop, "notify")):
            thread = threading.Thread(
                target=target, name=f"drsvc-active-{self.application.name}-{name}", daemon=True
            )
            self._threads.append(thread)
            thread.start()
        return self

    def close(self) -> None:
        self._stop.set()
        with self._cond:
            self._cond.notify_all()
        for thread in self._threads:
            if thread is not threading.current_thread():
                thread.join(self._wait_s * 2 + 5)

    def __enter__(self) -> ActiveCluster:
        return self.start()

    def __exit__(self, *_: object) -> None:
        self.close()

    # ------------------------------------------------------------------ reading

    def state(self) -> ActiveState:
        """What the client may do now."""
        with self._cond:
            return self._state_locked(self._clock())

    @property
    def cluster(self) -> str | None:
        """The cluster to use now, or None: stop producing and consuming."""
        return self.state().cluster

    def wait(self, timeout_s: float | None = None) -> ActiveState:
        """Wait until a cluster is usable (or ``timeout_s`` passed); return the state then."""
        deadline = None if timeout_s is None else self._clock() + timeout_s
        with self._cond:
            while True:
                state = self._state_locked(self._clock())
                if state.cluster is not None or self._stop.is_set():
                    return state
                left = None if deadline is None else deadline - self._clock()
                if left is not None and left <= 0:
                    return state
                self._cond.wait(_RETRY_S if left is None else min(left, _RETRY_S))

    def subscribe(self, listener: Callable[[ActiveState], None]) -> Callable[[], None]:
        """Call ``listener`` with every change of the usable cluster from now on (from the
        notifier thread: keep it short). Returns a function that unsubscribes it."""
        with self._cond:
            self._listeners.append(listener)

        def unsubscribe() -> None:
            with self._cond:
                if listener in self._listeners:
                    self._listeners.remove(listener)

        return unsubscribe

    def changes(self, timeout_s: float | None = None) -> Iterator[ActiveState]:
        """Every change of the usable cluster from now on, until closed (or ``timeout_s`` of
        silence)."""
        with self._cond:
            seen = len(self._history)
        while not self._stop.is_set():
            with self._cond:
                if seen >= len(self._history):
                    self._cond.wait(timeout_s)
                    if seen >= len(self._history):
                        return
                pending = self._history[seen:]
                seen = len(self._history)
            yield from pending

    # ------------------------------------------------------------------ one step each (tests)

    def watch_once(self) -> None:
        """One blocking query of the key; its answer renews the lease."""
        sent = self._clock()
        try:
            entry, index = self.coordinator.watch(
                self.application.active_key, self._index, self._wait_s
            )
        except CoordinatorUnavailableError as err:
            self._set_problem(f"Consul unreachable: {err}")
            raise
        try:
            document = decode_active(
                None if entry is None else entry.value, self.application.application.preferred
            )
        except ActiveFormatError as err:
            # Never guess a cluster: an unreadable key means no usable one until it is fixed.
            self._set_problem(f"unreadable active key {self.application.active_key}: {err}")
            with self._cond:
                self._document, self._heard_at, self._index = None, None, index
                self._cond.notify_all()
            return
        with self._cond:
            self._document, self._heard_at, self._index = document, sent, index
            self._problem = ""
            self._cond.notify_all()

    def notify_changes(self) -> ActiveState:
        """Tell the listeners if the usable cluster changed since they were last told."""
        with self._cond:
            state = self._state_locked(self._clock())
            previous = self._notified
            if previous is not None and (previous.cluster, previous.epoch) == (
                state.cluster,
                state.epoch,
            ):
                return state
            if previous is None and state.reason == "not-heard-yet":
                return state
            self._notified = state
            self._history.append(state)
            listeners = list(self._listeners)
            self._cond.notify_all()
        log.info(
            "application %s: %s (epoch %d, %s)",
            self.application.name,
            state.cluster or "no active cluster",
            state.epoch,
            state.reason,
        )
        for listener in listeners:
            try:
                listener(state)
            except Exception:  # a listener's failure must not stop the others being told
                log.exception("a listener of application %s failed", self.application.name)
        return state

    # ------------------------------------------------------------------ threads

    def _watch_loop(self) -> None:
        while not self._stop.is_set():
            try:
                self.watch_once()
            except CoordinatorUnavailableError:
                self._stop.wait(_RETRY_S)
            except DrsvcError as err:
                self._set_problem(str(err))
                self._stop.wait(_RETRY_S)

    def _notify_loop(self) -> None:
        while not self._stop.is_set():
            state = self.notify_changes()
            with self._cond:
                # Wake at the lease's deadline (or at the next answer, whichever comes first).
                left = state.lease_deadline_s - self._clock() if state.cluster else self._wait_s
                self._cond.wait(max(0.01, min(left, self._wait_s)))

    def _set_problem(self, problem: str) -> None:
        with self._cond:
            if problem != self._problem:
                log.warning("application %s: %s", self.application.name, problem)
            self._problem = problem

    def _state_locked(self, now: float) -> ActiveState:
        document, heard = self._document, self._heard_at
        if document is None or heard is None:
            return ActiveState(None, document, "not-heard-yet")
        deadline = lease_deadline_s(document, heard)
        cluster = usable_cluster(document, heard, now)
        if cluster is not None:
            return ActiveState(cluster, document, "active", deadline)
        if document.cluster is None:
            return ActiveState(None, document, "switching", deadline)
        return ActiveState(None, document, "lease-lapsed", deadline)


def known_cluster(application: ClientApplication, alias: str) -> None:
    """Raise :class:`ConfigError` when ``alias`` is no cluster of the topology."""
    if alias not in application.topology.clusters:
        raise ConfigError(
            f"application '{application.name}' is active on '{alias}', which the topology does "
            f"not define (clusters: {', '.join(sorted(application.topology.clusters))})"
        )
