"""Where the controller's observations come from: one per cluster and vantage point per cycle.

* ``probe@<replica>``: the controller itself asks the cluster for its metadata; a cluster that
  answers while partitions of the applications' topics have no leader counts as unreachable.
* ``consul``: the health of the cluster's ``kafka-<alias>`` service, whose TCP checks run on the
  Consul agent of the cluster's own site (a site lost with its agent turns critical once Consul
  notices the agent is gone).
* ``heartbeats@<C>``: the cluster's heartbeats as they arrive on cluster C (copied there by the
  flow into C, or, on the cluster itself, written by its emitter): whether the cluster still
  writes and its writes still reach C. Says nothing before the stream was first seen, and, for
  another cluster C, while C's own heartbeats are not fresh on C (C itself cannot be read, so no
  silence there says anything about the cluster). A fresh stream reached the cluster when its
  last heartbeat arrived, and that is the time the observation carries.

Independence. The decision needs ``min_vantages`` vantage points that see the cluster from
different places (:attr:`failover.dr_decision.Observation.viewpoint`). The controller's own probe
of a cluster and that cluster's own heartbeats read by the controller (``heartbeats@X`` about X)
both travel the controller's own path to X, so they are one viewpoint, ``controller``: a network
partition between the controller and X silences both while X serves its clients. Each source
also says, before the controller starts, whether it can see a cluster at all and from where
(``viewpoint``), so that a controller that could only ever see a cluster through its own
connectivity refuses to start (:mod:`drsvc.runtime.controller.vantages`).

Each source may say nothing (no observation) when it cannot tell: a service that is not
registered, or Consul itself unreachable. The decision needs enough fresh vantage points to agree
(:func:`failover.dr_decision.cluster_health`), so a vantage that went silent never decides.

A cycle does not wait for a slow answer (a dead cluster's probe takes its whole timeout):
:class:`Observer` keeps each ask running in the background and hands the cycle the newest answer
of every vantage point, each stamped with the time it was given, so the decision is made on time
and judges every answer by its own age. Just before a move, :meth:`Observer.fresh` asks again
about the two clusters concerned: only answers to asks made after the decision count (and an
earlier "unreachable" of a source whose new ask is still waiting for a dead cluster).
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from concurrent.futures import FIRST_EXCEPTION, Future, ThreadPoolExecutor, wait

from drsvc.adapters.consul_client import ConsulClient
from drsvc.errors import CredentialsRefusedError, DrsvcError
from failover import naming
from failover.dr_decision import Observation
from failover.heartbeats import Freshness

__all__ = ["CONTROLLER_VIEWPOINT", "ConsulHealth", "DirectProbe", "HeartbeatArrivals", "Observer"]

log = logging.getLogger(__name__)

Source = Callable[[str, float], Observation | None]

#: The viewpoint of whatever the controller process itself reads from a cluster.
CONTROLLER_VIEWPOINT = "controller"


class DirectProbe:
    """The controller's own probe of a cluster (metadata within a short timeout)."""

    def __init__(self, replica: str, reachable: Callable[[str], bool]) -> None:
        self.vantage = f"probe@{replica}"
        self._reachable = reachable

    def viewpoint(self, cluster: str) -> str | None:
        return CONTROLLER_VIEWPOINT

    def __call__(self, cluster: str, now_s: float) -> Observation | None:
        # Stamped when the answer came: "reached at" must not be earlier than it really was
        # (the threshold counts from the last time a vantage point reached the cluster).
        asked = time.monotonic()
        try:
            answered = self._reachable(cluster)
        except CredentialsRefusedError as err:
            # Refused credentials say nothing about the cluster's health: this vantage abstains
            # (counting it as "down" would let a wrong password fail applications over).
            log.error("controller probe of %s: %s", cluster, err)
            return None
        except DrsvcError as err:
            return Observation(
                cluster, self.vantage, False, now_s + _since(asked), str(err), CONTROLLER_VIEWPOINT
            )
        return Observation(
            cluster, self.vantage, answered, now_s + _since(asked), viewpoint=CONTROLLER_VIEWPOINT
        )


def _since(asked: float) -> float:
    return time.monotonic() - asked


class ConsulHealth:
    """The site agents' view: are the TCP checks of ``kafka-<alias>`` passing? ``client`` makes
    a Consul client; each thread that asks gets its own (a client's HTTP session is not shared
    across threads)."""

    vantage = "consul"

    def __init__(self, client: Callable[[], ConsulClient]) -> None:
        self._client = client
        self._local = threading.local()

    def _consul(self) -> ConsulClient:
        consul: ConsulClient | None = getattr(self._local, "consul", None)
        if consul is None:
            consul = self._local.consul = self._client()
        return consul

    def viewpoint(self, cluster: str) -> str | None:
        """``consul`` when ``kafka-<cluster>`` is registered with health checks (asks Consul;
        raises :class:`DrsvcError` when it cannot be reached), else None."""
        entries = self._consul().service_health(naming.kafka_service(cluster))
        checked = any(entry["Checks"] for entry in entries)
        return self.vantage if checked else None

    def __call__(self, cluster: str, now_s: float) -> Observation | None:
        try:
            entries = self._consul().service_health(naming.kafka_service(cluster))
        except DrsvcError as err:
            log.debug("consul health of %s: %s", cluster, err)
            return None  # Consul unreachable: this vantage says nothing
        if not entries:
            return None  # not registered: nothing to tell
        passing = all(
            check["Status"] == "passing" for entry in entries for check in entry["Checks"]
        )
        return Observation(cluster, self.vantage, passing, now_s)


class HeartbeatArrivals:
    """The vantage point of cluster ``observer``: do each cluster's heartbeats still arrive
    there? ``freshness`` gives every (observing cluster, source) pair's freshness now (a
    :class:`drsvc.runtime.heartbeats.observer.HeartbeatObserver` running in this process);
    ``fresh_within_s``: the longest silence of a live stream (a few heartbeat intervals);
    ``carries``: the other clusters whose heartbeats a flow copies to ``observer``.

    The controller reads ``observer`` itself, so what it says about ``observer`` comes from the
    controller's own viewpoint (the same as its probe's); what it says about another cluster
    comes from ``observer``'s."""

    def __init__(
        self,
        observer: str,
        freshness: Callable[[], Mapping[tuple[str, str], Freshness]],
        fresh_within_s: float,
        carries: Collection[str] = (),
    ) -> None:
        self.observer = observer
        self.vantage = f"heartbeats@{observer}"
        self._freshness = freshness
        self._fresh_within_s = fresh_within_s
        self._carries = frozenset(carries) - {observer}

    def viewpoint(self, cluster: str) -> str | None:
        if cluster == self.observer:
            return CONTROLLER_VIEWPOINT
        return self.vantage if cluster in self._carries else None

    def __call__(self, cluster: str, now_s: float) -> Observation | None:
        seen_from = CONTROLLER_VIEWPOINT if cluster == self.observer else ""
        pairs = self._freshness()
        stream = pairs.get((self.observer, cluster))
        if stream is None or not stream.seen:
            return None  # never seen here: heartbeats may not run, or not reach this cluster
        if cluster != self.observer:
            own = pairs.get((self.observer, self.observer))
            if own is None or not own.seen or own.seconds > self._fresh_within_s:
                return None  # this cluster cannot be read (or writes nothing): no evidence
        if stream.seconds <= self._fresh_within_s:
            return Observation(
                cluster, self.vantage, True, now_s - stream.seconds,
                f"last heartbeat {stream.seconds:.1f}s ago", seen_from,
            )  # fmt: skip
        return Observation(
            cluster, self.vantage, False, now_s, f"no heartbeat for {stream.seconds:.1f}s",
            seen_from,
        )  # fmt: skip


class Observer:
    """Asks every source about every cluster, each ask in the background: a cycle waits at most
    ``wait_s`` and gets the newest answer of each (cluster, source); an ask still running is
    not asked again until it ends. Asks are numbered in the order they are made, so that
    :meth:`fresh` can tell an answer to an ask made after a moment (:meth:`mark`) from an older
    one. Safe to use from several threads (the loop and the moves)."""

    def __init__(self, sources: Sequence[Source], wait_s: float, max_workers: int = 16) -> None:
        self._sources = list(sources)
        self._wait_s = wait_s
        self._pool = ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="observe")
        self._guard = threading.Lock()
        self._numbers = itertools.count(1)
        self._asked = 0
        #: the ask in flight per (cluster, source index), with its number
        self._running: dict[tuple[str, int], tuple[int, Future[Observation | None]]] = {}
        #: the newest answer per (cluster, source index), with the number of its ask
        self._newest: dict[tuple[str, int], tuple[int, Observation]] = {}

    def observe(self, clusters: Iterable[str], now_s: float) -> list[Observation]:
        """The newest observation of each cluster by each source (some from earlier cycles:
        their own ``at_s`` says how old they are)."""
        with self._guard:
            for key in self._keys(clusters):
                if key not in self._running:
                    self._ask(key, now_s)
            pending = [future for _, future in self._running.values()]
        wait(pending, timeout=self._wait_s, return_when=FIRST_EXCEPTION)
        with self._guard:
            self._collect()
            return [answer for _, answer in self._newest.values()]

    def mark(self) -> int:
        """The number of the last ask made so far."""
        with self._guard:
            return self._asked

    def fresh(
        self, clusters: Collection[str], now_s: float, after: int, wait_s: float
    ) -> list[Observation]:
        """Answers about ``clusters`` to asks made after ``after`` (a :meth:`mark`): an ask
        already made since is waited for (moves decided together share their asks), every other
        source is asked now. Waits at most ``wait_s``.

        A source whose new ask has not answered by then keeps its earlier answer only if that
        said unreachable: it has not reached the cluster since, and a cluster that answers again
        answers a metadata request well within the wait, whereas a dead cluster's probe never
        answers sooner than its timeout. An earlier "reachable" is never carried forward, so a
        slow answer can only make a move stand down, never let one through."""
        keys = self._keys(clusters)
        with self._guard:
            pending = []
            for key in keys:
                running = self._running.get(key)
                newest = self._newest.get(key)
                if running is not None and running[0] > after:
                    pending.append(running[1])
                elif newest is None or newest[0] <= after:
                    pending.append(self._ask(key, now_s))
        wait(pending, timeout=wait_s)
        with self._guard:
            self._collect()
            found = []
            for key in keys:
                newest = self._newest.get(key)
                running = self._running.get(key)
                if newest is None:
                    continue
                number, answer = newest
                answered_since = number > after
                still_asking = running is not None and running[0] > after
                if answered_since or (still_asking and not answer.reachable):
                    found.append(answer)
            return found

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)

    def _keys(self, clusters: Iterable[str]) -> list[tuple[str, int]]:
        return [(cluster, index) for cluster in clusters for index in range(len(self._sources))]

    def _ask(self, key: tuple[str, int], now_s: float) -> Future[Observation | None]:
        """Ask (under the guard); a newer ask replaces an older one still in flight, whose
        answer is then dropped."""
        number = self._asked = next(self._numbers)
        future = self._pool.submit(self._sources[key[1]], key[0], now_s)
        self._running[key] = (number, future)
        return future

    def _collect(self) -> None:
        """Take in the answers that came (under the guard)."""
        for key, (number, future) in list(self._running.items()):
            if not future.done():
                continue
            del self._running[key]
            try:
                answer = future.result()
            except Exception as err:  # a source's bug must not stop the controller
                log.error("observing %s: %s", key[0], err)
                answer = None
            if answer is None:
                self._newest.pop(key, None)  # the source cannot tell now
            else:
                self._newest[key] = (number, answer)
