"""A confluent-kafka producer that follows its application's active cluster.

``FailoverProducer(app, topology, config)`` produces to whichever cluster is active. When the
key says none, or its lease lapses, it stops at once: new records are refused with
:class:`NoActiveClusterError` (retry them later), and the records still queued for the old cluster
are flushed while the lease allows, then purged. A purged record is handed back to the caller
through its delivery callback with a ``_PURGE_QUEUE`` error (never sent) or ``_PURGE_INFLIGHT``
(sent, outcome unknown): nothing is dropped silently. The first record after the switch creates a
producer on the new cluster.

Delivery callbacks of records retired at a switch run on the thread that noticed the switch (the
follower's notifier thread); the others run in ``poll``/``flush`` as usual.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from confluent_kafka import Producer

from drsvc.client.active_cluster import ActiveCluster, ActiveState, known_cluster
from drsvc.errors import NoActiveClusterError
from drsvc.topology.models import Topology

__all__ = ["FailoverProducer"]

log = logging.getLogger(__name__)

#: flushing the old cluster's records ends this long before the lease does
_LEASE_MARGIN_S = 0.5
#: how long the delivery reports of purged records are served
_PURGED_REPORTS_S = 1.0


class FailoverProducer:
    """``Producer`` (produce, poll, flush, len, close) over the active cluster of application
    ``app`` of ``topology`` (a path or a loaded topology). ``config`` is a confluent-kafka
    configuration without ``bootstrap.servers``; ``consul`` a ``host:port`` (default as the CLI
    finds it)."""

    def __init__(
        self,
        app: str,
        topology: Topology | str | Path,
        config: Mapping[str, Any],
        *,
        consul: str | None = None,
        active: ActiveCluster | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._owns_active = active is None
        self._active = active if active is not None else ActiveCluster(app, topology, consul=consul)
        self._app = self._active.application
        self._app.client_config(self._app.application.preferred, config)  # refuses servers early
        self._config = dict(config)
        self._clock = clock
        self._lock = threading.RLock()
        self._producer: Producer | None = None
        self._joined: tuple[str, int] | None = None
        self._closed = False
        self._unsubscribe = self._active.subscribe(self._on_change)
        self._active.start()

    @property
    def cluster(self) -> str | None:
        """The cluster it produces to now (None: none)."""
        return None if self._joined is None else self._joined[0]

    def produce(
        self,
        topic: str,
        value: str | bytes | None = None,
        key: str | bytes | None = None,
        partition: int = -1,
        on_delivery: Callable[..., None] | None = None,
        timestamp: int = 0,
        headers: Any = None,
    ) -> None:
        """Produce to ``topic`` on the active cluster. Raises :class:`NoActiveClusterError`
        while there is none (the record was not taken: retry it), ``BufferError`` when the queue
        is full, as confluent-kafka does."""
        kwargs: dict[str, Any] = {"partition": partition, "timestamp": timestamp}
        if on_delivery is not None:
            kwargs["on_delivery"] = on_delivery
        if headers is not None:
            kwargs["headers"] = headers
        with self._lock:
            # Under the lock: a record is never queued into a producer being retired.
            self._ensure().produce(topic, value, key, **kwargs)

    def poll(self, timeout: float = 0) -> int:
        producer = self._producer
        if producer is None:
            time.sleep(max(0.0, timeout))
            return 0
        served: int = producer.poll(timeout)
        return served

    def flush(self, timeout: float = -1) -> int:
        """Wait for the active cluster's deliveries; returns how many are still pending."""
        producer = self._producer
        if producer is None:
            return 0
        left: int = producer.flush(timeout)
        return left

    def __len__(self) -> int:
        producer = self._producer
        return 0 if producer is None else len(producer)

    def close(self, timeout: float = 30.0) -> int:
        """Flush (up to ``timeout``), hand back what did not make it, stop following."""
        with self._lock:
            if self._closed:
                return 0
            self._closed = True
            left = self._retire(timeout, "closing")
        self._unsubscribe()
        if self._owns_active:
            self._active.close()
        return left

    def __enter__(self) -> FailoverProducer:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    # ------------------------------------------------------------------ following the switch

    def _ensure(self) -> Producer:
        if self._closed:
            raise RuntimeError("producer closed")
        state = self._active.state()
        wanted = None if state.cluster is None else (state.cluster, state.epoch)
        if self._joined is not None and self._joined != wanted:
            self._retire(self._budget(state), _why(state))
        if state.cluster is None or wanted is None:
            raise NoActiveClusterError(
                f"application '{self._app.name}' has no active cluster now ({state.reason}); "
                "retry the record later",
                delay=0.2,
            )
        if self._producer is None:
            known_cluster(self._app, state.cluster)
            self._producer = Producer(self._app.client_config(state.cluster, self._config))
            self._joined = wanted
            log.info("application %s: producing to %s (epoch %d)", self._app.name,
                     state.cluster, state.epoch)  # fmt: skip
        return self._producer

    def _on_change(self, state: ActiveState) -> None:
        """From the follower: stop using the old cluster at once, not at the next produce."""
        with self._lock:
            wanted = None if state.cluster is None else (state.cluster, state.epoch)
            if self._joined is not None and self._joined != wanted:
                self._retire(self._budget(state), _why(state))

    def _budget(self, state: ActiveState) -> float:
        if state.reason == "switching":
            return max(0.0, state.lease_deadline_s - self._clock() - _LEASE_MARGIN_S)
        return 0.0  # the lease lapsed (or another cluster is active): nothing more may be sent

    def _retire(self, flush_s: float, why: str) -> int:
        """Flush the current producer for up to ``flush_s``, purge what is left (each purged
        record's callback gets the purge error), and drop it. Returns how many were purged."""
        producer, self._producer = self._producer, None
        joined, self._joined = self._joined, None
        if producer is None:
            return 0
        left: int = producer.flush(flush_s) if flush_s > 0 else len(producer)
        if left:
            producer.purge(in_queue=True, in_flight=True, blocking=False)
            producer.flush(_PURGED_REPORTS_S)
            log.warning("application %s: %d record(s) for %s handed back undelivered (%s)",
                        self._app.name, left, joined[0] if joined else "?", why)  # fmt: skip
        log.info("application %s: stopped producing to %s (%s)", self._app.name,
                 joined[0] if joined else "?", why)  # fmt: skip
        return left


def _why(state: ActiveState) -> str:
    return state.reason if state.cluster is None else f"now active: {state.cluster}"
