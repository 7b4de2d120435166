"""The application's active cluster as a client sees it: watched in Consul, held with a lease.

A watcher thread follows ``drsvc/<ns>/apps/<app>/active`` with blocking queries. Every answer
renews the lease from the moment its request was sent (:func:`failover.active.lease_deadline_s`);
the cluster is usable only while the lease holds and the key names one
(:func:`failover.active.usable_cluster`). A second thread wakes at the lease's deadline, so a
client whose Consul agent stopped answering is told to stop even while the watch hangs.

Which values count. The executor writes the key as a versioned document whose epoch only grows.
A client acts on:

* a document whose epoch is not lower than the highest it has seen (nor names another cluster at
  the epoch it already heard);
* an absent key: the application's preferred cluster at epoch 0, under the lease the topology
  configures. A new application starts there before any failover wrote its document, and every
  client of one topology agrees on it. **Not when the client has a Consul ACL token**: under
  default-deny ACLs Consul answers a read the token may not make with 404, exactly as for an
  absent key, so with a token an absent key counts as ``unreadable`` and :meth:`watch_once`
  raises a :class:`ConfigError` naming the key; the preferred cluster is never guessed from a
  refusal. drsvc creates every active key when it starts, so a running estate has none absent.

Anything else counts as none, with its reason as the state's ``reason``: ``not-a-document`` (a
plain alias or ``none`` typed by hand: it has no epoch, so it could undo a switch unseen),
``stale-epoch`` (older than what was heard, an absent key after a document included) or
``unreadable``. Each such value is counted once in :attr:`ActiveCluster.rejected_values` and
logged as a warning.

The watch period is a quarter of the shorter of the document's lease and the configured one,
recomputed with every answer (and the request's timeout with it), so neither a document written
under a shorter lease nor a topology that lowered it lets the lease lapse between two answers.

For each value it acted on (cluster and epoch), the client remembers when the lease of the last
answer naming it ends (:meth:`ActiveCluster.lease_end_s`): the executor waits that lease out after
writing none, so it bounds what may still reach the old cluster after a switch (a producer's
flush, a consumer's last commit), whenever the client hears of the switch.

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

from drsvc.adapters.consul_access import ConsulAccess
from drsvc.adapters.consul_coordination import ConsulCoordinator
from drsvc.adapters.coordination import Coordinator, Entry
from drsvc.client.application import ClientApplication, consul_address
from drsvc.errors import ConfigError, CoordinatorUnavailableError, DrsvcError
from drsvc.topology.models import Topology
from failover.active import ActiveDocument, decode_active, lease_deadline_s, usable_cluster
from failover.errors import ActiveFormatError

__all__ = ["REJECTION_REASONS", "ActiveCluster", "ActiveState"]

log = logging.getLogger(__name__)

#: a blocking query returns at least this often relative to the lease, so a healthy client
#: renews it several times before it lapses
_WATCHES_PER_LEASE = 4
#: the least a watch request is given beyond Consul's own wait (and its jitter) to answer
_MIN_REQUEST_SLACK_S = 0.5
_RETRY_S = 0.2

#: why a value of the key counts as none although it may name a cluster
REJECTION_REASONS = ("not-a-document", "stale-epoch", "unreadable")


@dataclass(frozen=True)
class ActiveState:
    """What a client may do now."""

    #: the cluster to produce to and consume from; None: stop
    cluster: str | None
    #: the document last read (None before the first answer, or when the key is unreadable)
    document: ActiveDocument | None
    #: why ``cluster`` is what it is: active, switching, lease-lapsed, not-heard-yet, or one of
    #: :data:`REJECTION_REASONS`
    reason: str
    #: until when the lease holds (monotonic seconds; 0 when there is none)
    lease_deadline_s: float = 0.0

    @property
    def epoch(self) -> int:
        return -1 if self.document is None else self.document.epoch


class ActiveCluster:
    """Follows where application ``app`` of ``topology`` is active (thread-safe).

    ``consul`` is a ``host:port``, optionally after ``https://`` (default: DRSVC_CONSUL_HTTP_ADDR,
    CONSUL_HTTP_ADDR, the topology's ``consul.address``, else the local environment's agent).
    ``consul_access`` says how to reach it (default: resolved from the environment over the
    topology's ``consul`` block, with the ``application`` role's token); tests may pass a
    ``coordinator`` and a ``clock`` instead, and a ``consul_access`` to say whether it has a
    token. Call :meth:`start` (or use it as a context manager) to begin watching.
    """

    def __init__(
        self,
        app: str,
        topology: Topology | str | Path,
        *,
        consul: str | None = None,
        consul_access: ConsulAccess | None = None,
        coordinator: Coordinator | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.application = ClientApplication.of(app, topology)
        self._configured_lease_ms = round(self.application.application.lease_s * 1000)
        self._wait_s = self._configured_lease_ms / 1000 / _WATCHES_PER_LEASE
        if coordinator is None and consul_access is None:
            consul_access = ConsulAccess.from_env(
                self.application.topology.consul, role="application", address=consul
            )
        self._access = consul_access
        #: where Consul is, when this object talks to it itself (None: a coordinator was given)
        self._address: str | None = None
        if coordinator is None:
            assert consul_access is not None
            self._address = consul_address(consul or consul_access.address)
        #: with an ACL token, Consul answers a denied read with 404, as for an absent key
        self._absent_is_unreadable = consul_access is not None and consul_access.has_token
        #: the watch's own coordinator: used by the watch thread only
        self.coordinator = coordinator if coordinator is not None else self._watcher(self._wait_s)
        self._readers = threading.local()
        self._clock = clock
        self._cond = threading.Condition()
        #: the last value read, accepted or not (what the state shows)
        self._document: ActiveDocument | None = None
        #: the last value acted on, and when the request that returned it was sent
        self._accepted: ActiveDocument | None = None
        self._heard_at: float | None = None
        #: why the last value read counts as none (None: it counts)
        self._rejected: str | None = None
        self._last_rejected: tuple[int | None, str | None] | None = None
        self._rejections: dict[str, int] = dict.fromkeys(REJECTION_REASONS, 0)
        self._highest_epoch = -1
        self._lease_ends: dict[tuple[str, int], float] = {}
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

    def now(self) -> float:
        """The time on the clock its leases are measured by (monotonic seconds)."""
        return self._clock()

    @property
    def wait_s(self) -> float:
        """How long a blocking query of the key waits for a change now."""
        return self._wait_s

    @property
    def rejected_values(self) -> dict[str, int]:
        """How many values of the key counted as none although they may name a cluster, by
        reason (:data:`REJECTION_REASONS`); each value is counted once however often read."""
        with self._cond:
            return dict(self._rejections)

    def lease_end_s(self, cluster: str, epoch: int) -> float:
        """When (on the client's clock) the lease of the last answer that named ``cluster`` at
        ``epoch`` ends; 0 when no answer named it lately. Nothing may reach ``cluster`` on the
        strength of that value after it."""
        with self._cond:
            return self._lease_ends.get((cluster, epoch), 0.0)

    def reader(self) -> Coordinator:
        """A coordinator for reads (a failover's record) from the calling thread. Never the
        watch's own: Consul's HTTP client keeps one session per thread of use."""
        if self._address is None:
            return self.coordinator
        reader: Coordinator | None = getattr(self._readers, "coordinator", None)
        if reader is None:
            reader = ConsulCoordinator(self._address, access=self._access)
            self._readers.coordinator = reader
        return reader

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
        """One blocking query of the key; its answer renews the lease (if it counts)."""
        sent = self._clock()
        try:
            entry, index = self.coordinator.watch(
                self.application.active_key, self._index, self._wait_s
            )
        except CoordinatorUnavailableError as err:
            self._set_problem(f"Consul unreachable: {err}")
            raise
        if entry is None and self._absent_is_unreadable:
            self._absent_under_acls(index)
        try:
            document = decode_active(
                None if entry is None else entry.value,
                self.application.application.preferred,
                lease_ms=self._configured_lease_ms,
            )
        except ActiveFormatError as err:
            # Never guess a cluster: an unreadable key means no usable one until it is fixed.
            self._reject(entry, None, "unreadable", str(err), index)
            return
        why = self._refusal(entry, document)
        if why is not None:
            self._reject(entry, document, why[0], why[1], index)
            return
        with self._cond:
            self._document = self._accepted = document
            self._heard_at, self._index = sent, index
            self._rejected, self._last_rejected, self._problem = None, None, ""
            self._highest_epoch = max(self._highest_epoch, document.epoch)
            if document.cluster is not None:
                self._lease_ends = {
                    value: end for value, end in self._lease_ends.items() if end > sent
                }
                self._lease_ends[(document.cluster, document.epoch)] = lease_deadline_s(
                    document, sent
                )
            self._cond.notify_all()
        self._follow_lease(document)

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

    # ------------------------------------------------------------------ which values count

    def _refusal(self, entry: Entry | None, document: ActiveDocument) -> tuple[str, str] | None:
        """Why ``document`` (read from ``entry``) counts as none; None when it counts."""
        if entry is not None and not document.versioned:
            return (
                "not-a-document",
                f"the key holds {entry.value.strip()!r}, not a document drsvc wrote (a value "
                "without an epoch could undo a switch unseen; only a failover changes the key)",
            )
        with self._cond:
            highest, accepted = self._highest_epoch, self._accepted
        if document.epoch < highest:
            what = "an absent key (epoch 0)" if entry is None else f"epoch {document.epoch}"
            return "stale-epoch", f"{what} is older than epoch {highest}, already heard"
        if (
            accepted is not None
            and accepted.versioned
            and accepted.epoch == document.epoch
            and accepted.cluster != document.cluster
        ):
            return (
                "stale-epoch",
                f"epoch {document.epoch} now names {document.cluster or 'none'}, where it named "
                f"{accepted.cluster or 'none'}: one epoch has one value",
            )
        return None

    def _absent_under_acls(self, index: int) -> None:
        """Stop, and raise: the key read as absent, which under ACLs may be a refusal."""
        assert self._access is not None and self._access.token is not None
        key = self.application.active_key
        detail = (
            f"Consul answered that {key} does not exist, which is also its answer when the ACL "
            f"token (from {self._access.token.origin}) may not read the key: grant the token "
            "read on it, or start drsvc, which creates it (with a token an absent key never "
            "means the preferred cluster)"
        )
        # Logged once, by the watch loop that catches the error, not here as well.
        self._reject(None, None, "unreadable", detail, index, log_it=False)
        raise ConfigError(f"application '{self.application.name}': cannot read {key}: {detail}")

    def _reject(
        self,
        entry: Entry | None,
        document: ActiveDocument | None,
        reason: str,
        detail: str,
        index: int,
        *,
        log_it: bool = True,
    ) -> None:
        value = (None, None) if entry is None else (entry.index, entry.value)
        with self._cond:
            first_read = value != self._last_rejected
            if first_read:
                self._rejections[reason] += 1
            self._document, self._rejected, self._last_rejected = document, reason, value
            self._index = index
            self._cond.notify_all()
        if first_read and log_it:
            log.warning(
                "application %s: the active key %s counts as no active cluster (%s): %s",
                self.application.name,
                self.application.active_key,
                reason,
                detail,
            )

    def _follow_lease(self, document: ActiveDocument) -> None:
        """Watch a quarter of the shorter lease: the document's (what the executor waits out)
        or the configured one (what a topology that lowered it promises)."""
        wait_s = min(document.lease_ms, self._configured_lease_ms) / 1000 / _WATCHES_PER_LEASE
        if wait_s == self._wait_s:
            return
        log.info("application %s: watching the active key every %.2f s (lease %d ms)",
                 self.application.name, wait_s, document.lease_ms)  # fmt: skip
        self._wait_s = wait_s
        if self._address is not None:
            # Only the watch thread uses it, and this is the watch thread.
            self.coordinator = self._watcher(wait_s)

    def _watcher(self, wait_s: float) -> Coordinator:
        """A coordinator for blocking queries of ``wait_s``. py-consul gives such a request
        Consul's wait and its jitter (wait/16) plus this timeout: about half the lease in all,
        so a request that hangs is given up while the lease leaves time for another."""
        assert self._address is not None
        return ConsulCoordinator(
            self._address, timeout_s=max(_MIN_REQUEST_SLACK_S, wait_s), access=self._access
        )

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
        if self._rejected is not None:
            return ActiveState(None, self._document, self._rejected)
        document, heard = self._accepted, self._heard_at
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
