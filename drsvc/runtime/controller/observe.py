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

Each source may say nothing (no observation) when it cannot tell: a service that is not
registered, or Consul itself unreachable. The decision needs enough fresh vantage points to agree
(:func:`failover.dr_decision.cluster_health`), so a vantage that went silent never decides.

A cycle does not wait for a slow answer (a dead cluster's probe takes its whole timeout):
:class:`Observer` keeps each ask running in the background and hands the cycle the newest answer
of every vantage point, each stamped with the time it was given, so the decision is made on time
and judges every answer by its own age.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import FIRST_EXCEPTION, Future, ThreadPoolExecutor, wait

from drsvc.adapters.consul_client import ConsulClient
from drsvc.errors import DrsvcError
from failover.dr_decision import Observation
from failover.heartbeats import Freshness

__all__ = ["ConsulHealth", "DirectProbe", "HeartbeatArrivals", "Observer"]

log = logging.getLogger(__name__)

Source = Callable[[str, float], Observation | None]


class DirectProbe:
    """The controller's own probe of a cluster (metadata within a short timeout)."""

    def __init__(self, replica: str, reachable: Callable[[str], bool]) -> None:
        self.vantage = f"probe@{replica}"
        self._reachable = reachable

    def __call__(self, cluster: str, now_s: float) -> Observation | None:
        # Stamped when the answer came: "reached at" must not be earlier than it really was
        # (the threshold counts from the last time a vantage point reached the cluster).
        asked = time.monotonic()
        try:
            answered = self._reachable(cluster)
        except DrsvcError as err:
            return Observation(cluster, self.vantage, False, now_s + _since(asked), str(err))
        return Observation(cluster, self.vantage, answered, now_s + _since(asked))


def _since(asked: float) -> float:
    return time.monotonic() - asked


class ConsulHealth:
    """The site agents' view: are the TCP checks of ``kafka-<alias>`` passing?"""

    vantage = "consul"

    def __init__(self, consul: ConsulClient) -> None:
        self._consul = consul

    def __call__(self, cluster: str, now_s: float) -> Observation | None:
        try:
            entries = self._consul.service_health(f"kafka-{cluster}")
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
    ``fresh_within_s``: the longest silence of a live stream (a few heartbeat intervals)."""

    def __init__(
        self,
        observer: str,
        freshness: Callable[[], Mapping[tuple[str, str], Freshness]],
        fresh_within_s: float,
    ) -> None:
        self.observer = observer
        self.vantage = f"heartbeats@{observer}"
        self._freshness = freshness
        self._fresh_within_s = fresh_within_s

    def __call__(self, cluster: str, now_s: float) -> Observation | None:
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
                f"last heartbeat {stream.seconds:.1f}s ago",
            )  # fmt: skip
        return Observation(
            cluster, self.vantage, False, now_s, f"no heartbeat for {stream.seconds:.1f}s"
        )


class Observer:
    """Asks every source about every cluster, each ask in the background: a cycle waits at most
    ``wait_s`` and gets the newest answer of each (cluster, source); an ask still running is
    not asked again until it ends."""

    def __init__(self, sources: Sequence[Source], wait_s: float, max_workers: int = 8) -> None:
        self._sources = list(sources)
        self._wait_s = wait_s
        self._pool = ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="observe")
        self._running: dict[tuple[str, int], Future[Observation | None]] = {}
        self._newest: dict[tuple[str, int], Observation] = {}

    def observe(self, clusters: Iterable[str], now_s: float) -> list[Observation]:
        """The newest observation of each cluster by each source (some from earlier cycles:
        their own ``at_s`` says how old they are)."""
        for cluster in clusters:
            for index, source in enumerate(self._sources):
                key = (cluster, index)
                if key not in self._running:
                    self._running[key] = self._pool.submit(source, cluster, now_s)
        wait(list(self._running.values()), timeout=self._wait_s, return_when=FIRST_EXCEPTION)
        for key, future in list(self._running.items()):
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
                self._newest[key] = answer
        return list(self._newest.values())

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
