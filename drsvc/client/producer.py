"""A confluent-kafka producer that follows its application's active cluster.

``FailoverProducer(app, topology, config)`` produces to whichever cluster is active. When the
key says none, or its lease lapses, it stops at once: new records are refused with
:class:`NoActiveClusterError` (retry them later), and the records still queued for the old cluster
are flushed while the lease of the last answer that named that cluster holds (less a margin),
then purged. That lease, not the one of the answer that said none, is what the executor waits out
before it activates the next cluster, so a client that hears of a switch late never delivers to
the old cluster after the new one is active. A purged record is handed back to the caller through
its delivery callback with a ``_PURGE_QUEUE`` error (never sent) or ``_PURGE_INFLIGHT`` (sent,
outcome unknown): nothing is dropped silently. The first record after the switch creates a
producer on the new cluster.

Every record carries the header ``drsvc.epoch`` (:mod:`failover.epoch_header`): the epoch of the
active-cluster document under which the producer joined its cluster, after any headers the
application passed. The replication engine and the verify job compare it with the epoch active
when the record was appended, which catches what the lease alone cannot (a paused process whose
queued batches went out after the switch).

Delivery callbacks of records retired at a switch run on a thread that flushes and purges the old
producer (so nothing waits for it); the others run in ``poll``/``flush`` as usual.

A paused process (SIGSTOP, a frozen VM) cannot act on its lease, and when it wakes librdkafka's
own threads send what was queued before the application's code runs again: purging on waking
comes too late. So every record must expire in the client before the lease it was queued under
ends: the producer's ``message.timeout.ms`` is at most half the document's lease, and a record is
taken only while the last answer that named the cluster leaves at least that much of its lease
(``produce`` raises :class:`NoActiveClusterError` otherwise, as while switching). A record queued
at ``p < sent + lease - timeout`` is failed locally with ``_MSG_TIMED_OUT`` by
``p + timeout < sent + lease``, before the executor can activate another cluster. A healthy client
hears from Consul every quarter lease, so the rule only bites when Consul has not answered for
half a lease. Records already on the wire when the process froze are the residual (see
"Fencing" in ``docs/failover.md``).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from drsvc.client.active_cluster import ActiveCluster, ActiveState, known_cluster
from drsvc.errors import ConfigError, NoActiveClusterError
from drsvc.kafka.clients import KafkaClients
from drsvc.kafka.types import Producer
from drsvc.topology.models import Topology
from failover.epoch_header import EPOCH_HEADER, encode_epoch

__all__ = ["FailoverProducer"]

log = logging.getLogger(__name__)

#: delivering to a cluster ends this long before the lease of the last answer naming it does
_LEASE_MARGIN_S = 0.5
#: a flush on the way out is cut into slices this long, each bounded by the lease anew
_FLUSH_SLICE_S = 0.5
#: how long the delivery reports of purged records are served
_PURGED_REPORTS_S = 1.0
#: a record may wait in the client's queue at most this share of the lease (see the module doc)
_QUEUE_SHARE_OF_LEASE = 0.5
#: the producer settings that bound how long a record may wait before it is sent
_TIMEOUT_SETTINGS = ("message.timeout.ms", "delivery.timeout.ms")
#: the producer settings that hold a record back on purpose
_LINGER_SETTINGS = ("linger.ms", "queue.buffering.max.ms")

Header = tuple[str, str | bytes | None]


class FailoverProducer:
    """``Producer`` (produce, poll, flush, len, close) over the active cluster of application
    ``app`` of ``topology`` (a path or a loaded topology). ``config`` is a confluent-kafka
    configuration without ``bootstrap.servers`` (security settings come from the topology too);
    ``consul`` a ``host:port`` (default as the CLI finds it). ``clients`` builds the underlying
    producers (default: a factory of the application's topology, made when a cluster is
    joined)."""

    def __init__(
        self,
        app: str,
        topology: Topology | str | Path,
        config: Mapping[str, Any],
        *,
        consul: str | None = None,
        active: ActiveCluster | None = None,
        clock: Callable[[], float] | None = None,
        clients: KafkaClients | None = None,
    ) -> None:
        self._owns_active = active is None
        self._active = active if active is not None else ActiveCluster(app, topology, consul=consul)
        self._app = self._active.application
        self._app.client_config(self._app.application.preferred, config)  # refuses servers early
        self._config = self._app.client_settings(config)
        self._clients = clients
        # Lease ends are measured on the follower's clock (the default): budgets must be too.
        self._clock = clock if clock is not None else self._active.now
        self._lock = threading.RLock()
        self._producer: Producer | None = None
        self._joined: tuple[str, int] | None = None
        self._epoch_header: Header = (EPOCH_HEADER, b"")
        #: how long a record may wait in the current producer's queue (seconds)
        self._queue_timeout_s = 0.0
        self._closed = False
        #: producers being flushed and purged after a switch, each on its own thread
        self._retiring: list[threading.Thread] = []
        self._unsubscribe = self._active.subscribe(self._on_change)
        self._active.start()

    @property
    def cluster(self) -> str | None:
        """The cluster it produces to now (None: none)."""
        return None if self._joined is None else self._joined[0]

    @property
    def joined(self) -> tuple[str, int] | None:
        """The cluster it produces to now and the epoch it joined under (what every record's
        ``drsvc.epoch`` header carries), read together; None while it produces nowhere."""
        return self._joined

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
        """Produce to ``topic`` on the active cluster, with the epoch header added to
        ``headers`` (a list of pairs or a dict). Raises :class:`NoActiveClusterError` while
        there is none (the record was not taken: retry it), ``BufferError`` when the queue is
        full, as confluent-kafka does."""
        with self._lock:
            # Under the lock: a record is never queued into a producer being retired, and its
            # epoch is the one of the producer it is queued into.
            producer = self._ensure()
            stamp = self._epoch_header
            if headers is None:
                stamped: Any = [stamp]
            elif isinstance(headers, Mapping):
                stamped = [*((k, v) for k, v in headers.items() if k != EPOCH_HEADER), stamp]
            else:
                stamped = [*(h for h in headers if h[0] != EPOCH_HEADER), stamp]
            # Positional (topic, value, key, partition, callback, on_delivery, timestamp,
            # headers): confluent-kafka parses keywords at a third more cost per record.
            producer.produce(topic, value, key, partition, on_delivery, None, timestamp, stamped)

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
        """Flush (up to ``timeout``, and only while the lease allows), hand back what did not
        make it, stop following."""
        with self._lock:
            if self._closed:
                return 0
            self._closed = True
            left = self._retire(timeout, "closing")
        self._unsubscribe()
        for retiring in self._retiring:
            # Their lease bounds them; they hand back what the old cluster did not take.
            retiring.join(timeout)
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
            self._detach(_why(state))
        if state.cluster is None or wanted is None:
            raise NoActiveClusterError(
                f"application '{self._app.name}' has no active cluster now ({state.reason}); "
                "retry the record later",
                delay=0.2,
            )
        if self._producer is None:
            known_cluster(self._app, state.cluster)
            overlay = dict(self._config)
            self._queue_timeout_s = _bound_queue_time(overlay, state)
            clients = self._clients
            if clients is None:
                clients = self._app.kafka_clients(state.cluster)
            self._producer = clients.producer(state.cluster, overlay)
            self._joined = wanted
            self._epoch_header = (EPOCH_HEADER, encode_epoch(state.epoch))
            log.info("application %s: producing to %s (epoch %d)", self._app.name,
                     state.cluster, state.epoch)  # fmt: skip
        if self._clock() >= state.lease_deadline_s - self._queue_timeout_s:
            # Queued now, the record could outlive the lease in a process that froze.
            raise NoActiveClusterError(
                f"application '{self._app.name}' has not heard where it is active for over "
                f"half its lease; retry the record later",
                delay=0.2,
            )
        return self._producer

    def _on_change(self, state: ActiveState) -> None:
        """From the follower: stop using the old cluster at once, not at the next produce."""
        with self._lock:
            wanted = None if state.cluster is None else (state.cluster, state.epoch)
            if self._joined is not None and self._joined != wanted:
                self._detach(_why(state))

    def _detach(self, why: str) -> None:
        """Stop queueing into the current producer now; flush and purge it on a thread of its
        own, so neither the application's produce nor the follower's notifier (which tells the
        application's other clients too) waits out the old cluster's lease."""
        producer, self._producer = self._producer, None
        joined, self._joined = self._joined, None
        if producer is None or joined is None:
            return
        retiring = threading.Thread(
            target=self._retire_detached,
            args=(producer, joined, why),
            name=f"drsvc-retire-{self._app.name}",
            daemon=True,
        )
        self._retiring = [t for t in self._retiring if t.is_alive()] + [retiring]
        retiring.start()

    def _budget(self, joined: tuple[str, int]) -> float:
        """How much longer records may still be delivered to the joined cluster: until the
        lease of the last answer that named it (at the epoch joined) ends, less a margin."""
        end = self._active.lease_end_s(*joined)
        return end - self._clock() - _LEASE_MARGIN_S

    def _retire(self, timeout_s: float | None, why: str) -> int:
        """Retire the current producer (see :meth:`_retire_detached`) on this thread."""
        producer, self._producer = self._producer, None
        joined, self._joined = self._joined, None
        if producer is None or joined is None:
            return 0
        return self._retire_detached(producer, joined, why, timeout_s)

    def _retire_detached(
        self, producer: Producer, joined: tuple[str, int], why: str, timeout_s: float | None = None
    ) -> int:
        """Flush ``producer`` while the lease allows (and at most ``timeout_s``; None: the lease
        alone bounds it), purge what is left (each purged record's callback gets the purge
        error). Returns how many were purged."""
        left = self._drain(producer, joined, timeout_s)
        if left:
            producer.purge(in_queue=True, in_flight=True, blocking=False)
            producer.flush(_PURGED_REPORTS_S)
            log.warning("application %s: %d record(s) for %s handed back undelivered (%s)",
                        self._app.name, left, joined[0], why)  # fmt: skip
        log.info("application %s: stopped producing to %s (%s)", self._app.name, joined[0], why)
        return left

    def _drain(self, producer: Producer, joined: tuple[str, int], timeout_s: float | None) -> int:
        """Flush in slices, each bounded by the lease as it stands then (an answer that names
        the cluster again while closing extends it; nothing else does). Returns what is left."""
        until = None if timeout_s is None else self._clock() + timeout_s
        left: int = len(producer)
        while left:
            budget = self._budget(joined)
            if until is not None:
                budget = min(budget, until - self._clock())
            if budget <= 0:
                break
            left = producer.flush(min(budget, _FLUSH_SLICE_S))
        return left


def _bound_queue_time(config: dict[str, Any], state: ActiveState) -> float:
    """Set the message timeout in the producer's settings ``config`` to at most half the lease
    of the document it joins under (the application's own setting stands where it is lower);
    returns it in seconds."""
    assert state.document is not None
    bound_ms = max(1, int(state.document.lease_ms * _QUEUE_SHARE_OF_LEASE))
    asked = [int(config[k]) for k in _TIMEOUT_SETTINGS if k in config]
    timeout_ms = min([bound_ms, *asked])
    for setting in _TIMEOUT_SETTINGS:
        config.pop(setting, None)
    for setting in _LINGER_SETTINGS:
        if setting in config and float(config[setting]) >= timeout_ms:
            # librdkafka refuses a linger that is not below the message timeout
            raise ConfigError(
                f"{setting} {config[setting]} is not below {timeout_ms} ms, half the lease of "
                f"the application's active document ({state.document.lease_ms} ms): a record must "
                "be able to leave the queue within it; lower it"
            )
    config["message.timeout.ms"] = timeout_ms
    return timeout_ms / 1000.0


def _why(state: ActiveState) -> str:
    return state.reason if state.cluster is None else f"now active: {state.cluster}"
