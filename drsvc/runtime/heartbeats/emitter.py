"""The heartbeat emitter of one cluster: a heartbeat record every interval, whatever happens.

The emitter creates the heartbeats topic if it is missing, then writes one record per interval on
its own thread. It never stops on its own: while the cluster is down every attempt fails, the
failures are counted and logged once per outage, and the first heartbeat after the cluster returns
ends the outage.

A heartbeat that cannot be delivered within a few intervals is dropped by the producer
(``message.timeout.ms``). That is deliberate: heartbeats queued during an outage and delivered in a
burst afterwards would advance the observed offset for records that say nothing about the present.
After a recovery an observer sees at most the last few queued heartbeats land, then one per
interval.
"""

from __future__ import annotations

import logging
import secrets
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from drsvc.errors import ConfigError, DrsvcError, KafkaUnavailableError
from drsvc.kafka.clients import KafkaClients
from drsvc.kafka.clock import Clock
from drsvc.kafka.errors import translated
from drsvc.kafka.types import KafkaError, Message
from drsvc.runtime.heartbeats.client_logs import kafka_client_logger
from drsvc.runtime.heartbeats.metrics import HeartbeatMetrics, heartbeat_metrics
from drsvc.runtime.heartbeats.outage import OutageLog
from drsvc.runtime.heartbeats.topic import HEARTBEAT_RETENTION_MS, ensure_heartbeat_topic
from failover import heartbeats, naming

log = logging.getLogger(__name__)

DeliveryCallback = Callable[[KafkaError | None, Message], None]


class HeartbeatProducer(Protocol):
    """What the emitter needs of a producer (a confluent-kafka ``Producer``, or a fake)."""

    def produce(
        self, topic: str, value: bytes, key: bytes, *, on_delivery: DeliveryCallback
    ) -> None: ...

    def poll(self, timeout: float) -> int: ...

    def flush(self, timeout: float) -> int: ...


@dataclass(frozen=True)
class EmitterSettings:
    """Settings of one cluster's emitter."""

    cluster: str
    #: librdkafka settings of a client of the cluster (bootstrap servers, security)
    client: Mapping[str, str]
    topic: str = naming.DEFAULT_HEARTBEATS_TOPIC
    interval_s: float = 1.0
    #: how long a heartbeat may wait for the cluster before it is dropped; None: three intervals
    message_timeout_ms: int | None = None
    retention_ms: int = HEARTBEAT_RETENTION_MS
    #: how often to check the topic (create it if missing) while heartbeats fail
    ensure_retry_s: float = 5.0
    #: longest wait for one such check, during which no heartbeat is attempted
    ensure_timeout_s: float = 2.0

    def __post_init__(self) -> None:
        if self.interval_s <= 0:
            raise ConfigError(f"heartbeat interval must be positive (got {self.interval_s})")

    @property
    def delivery_timeout_ms(self) -> int:
        if self.message_timeout_ms is not None:
            return self.message_timeout_ms
        return max(1000, int(3 * self.interval_s * 1000))


def producer_config(settings: EmitterSettings) -> dict[str, Any]:
    """The emitter's own settings of its producer (the client factory adds where the cluster is
    and how to reach it): every record acknowledged by all in-sync replicas, nothing held back
    by batching, nothing delivered after a few intervals, quick reconnects."""
    timeout_ms = settings.delivery_timeout_ms
    return dict(
        {
            "acks": "all",
            "linger.ms": 0,
            # A lost or doubled heartbeat is harmless; idempotence would add nothing but state.
            "enable.idempotence": False,
            "message.timeout.ms": timeout_ms,
            "request.timeout.ms": max(500, min(30_000, timeout_ms - 100)),
            # librdkafka's default backs off up to 10 s between reconnects, which would delay
            # the first heartbeat after a broker restart by as much.
            "reconnect.backoff.max.ms": 1000,
            "socket.connection.setup.timeout.ms": max(1000, min(10_000, timeout_ms)),
            "client.id": naming.heartbeats_client_id(settings.cluster),
            "log_level": 3,
            "logger": kafka_client_logger(),
        }
    )


@dataclass
class EmitterStats:
    """Counters of one emitter (monotonic, never reset)."""

    attempted: int = 0
    delivered: int = 0
    failed: int = 0
    #: monotonic time of the last acknowledged heartbeat
    last_delivered_at: float | None = None


class HeartbeatEmitter:
    """Writes a heartbeat of ``settings.cluster`` every interval until :meth:`stop`.

    Its producer and admin client come from ``clients``, a factory that knows the cluster
    (default: one over ``settings.client``); ``ensure_topic`` replaces the topic check (for
    tests); ``clock`` (default: the factory's) gives the ticks and the heartbeats' wall time.
    """

    def __init__(
        self,
        settings: EmitterSettings,
        *,
        metrics: HeartbeatMetrics | None = None,
        clients: KafkaClients | None = None,
        ensure_topic: Callable[[], object] | None = None,
        clock: Clock | None = None,
    ) -> None:
        self.settings = settings
        self.stats = EmitterStats()
        self.emitter_id = secrets.randbits(64)
        self._metrics = metrics if metrics is not None else heartbeat_metrics()
        self._clients = (
            clients
            if clients is not None
            else KafkaClients.for_configs({settings.cluster: settings.client}, clock=clock)
        )
        self._ensure_topic = ensure_topic or self._create_topic
        self._clock: Clock = clock if clock is not None else self._clients.clock
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._outage = OutageLog(f"heartbeats to {settings.cluster}", log)
        self._topic_ready = False
        #: a heartbeat failed: the topic may have been deleted, look again when next due
        self._recheck_topic = False
        self._next_ensure = 0.0
        self._ensure_error = "the heartbeats topic is not ready yet"
        self._key = heartbeats.encode_key(settings.cluster)

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> None:
        """Emit on a thread of its own."""
        if self._thread is not None:
            return
        self._thread = threading.Thread(
            target=self.run, name=f"heartbeats-{self.settings.cluster}", daemon=True
        )
        self._thread.start()

    def request_stop(self) -> None:
        """Ask the emitter to stop, without waiting for its thread."""
        self._stop.set()

    def stop(self, timeout_s: float = 10.0) -> None:
        """Stop and wait for the thread (it flushes for at most two seconds)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout_s)

    def run(self) -> None:
        """Emit until stopped (the thread's body; callable directly too)."""
        producer: HeartbeatProducer = self._clients.producer(
            self.settings.cluster, producer_config(self.settings)
        )
        interval = self.settings.interval_s
        next_tick = self._clock.monotonic()
        # An emitter that died would make its cluster look dead: it survives anything.
        crashes = OutageLog(f"heartbeat emitter of {self.settings.cluster}", log)
        try:
            while not self._stop.is_set():
                try:
                    now = self._clock.monotonic()
                    if now >= next_tick:
                        self.emit_once(producer, now)
                        next_tick += interval
                        if next_tick <= now:
                            # Fell behind (a slow topic check): skip the missed ticks, no burst.
                            next_tick = now + interval
                    producer.poll(max(0.0, min(0.1, next_tick - self._clock.monotonic())))
                    crashes.succeeded(self._clock.monotonic())
                except Exception as err:
                    crashes.failed(repr(err), self._clock.monotonic(), with_traceback=True)
                    self._stop.wait(interval)
        finally:
            producer.flush(min(2.0, interval))

    # ------------------------------------------------------------------ one heartbeat

    def emit_once(self, producer: HeartbeatProducer, now: float) -> None:
        """Attempt one heartbeat at ``now``; the outcome arrives through :meth:`_on_delivery`."""
        if not self._topic_ready:
            if not self._try_ensure_topic(now):
                self._failed(self._ensure_error, now)
                return
        elif self._recheck_topic and now >= self._next_ensure:
            # A deleted topic shows only as timed-out heartbeats (the cluster does not create
            # topics on write), so look while they fail; the heartbeat goes out either way.
            self._recheck_topic = not self._try_ensure_topic(now)
        beat = heartbeats.Heartbeat(
            source=self.settings.cluster,
            emitted_at_ms=self._clock.time_ms(),
            emitter_id=self.emitter_id,
            sequence=self.stats.attempted,
        )
        self.stats.attempted += 1
        try:
            with translated("sending a heartbeat"):
                producer.produce(
                    self.settings.topic,
                    heartbeats.encode(beat),
                    self._key,
                    on_delivery=self._on_delivery,
                )
        except BufferError:
            self._failed("the producer queue is full", now)
        except DrsvcError as err:
            self._failed(str(err), now)

    def _on_delivery(self, err: KafkaError | None, _msg: Message) -> None:
        now = self._clock.monotonic()
        if err is None:
            self.stats.delivered += 1
            self.stats.last_delivered_at = now
            self._recheck_topic = False  # delivered: the topic is there
            self._metrics.emitted.labels(cluster=self.settings.cluster).inc()
            self._outage.succeeded(now)
            return
        self._recheck_topic = True
        self._failed(err.str(), now)

    def _failed(self, reason: str, now: float) -> None:
        self.stats.failed += 1
        self._metrics.emit_failures.labels(cluster=self.settings.cluster).inc()
        self._outage.failed(reason, now)

    def _try_ensure_topic(self, now: float) -> bool:
        if now < self._next_ensure:
            return False
        self._next_ensure = now + self.settings.ensure_retry_s
        try:
            created = self._ensure_topic()
        except (KafkaUnavailableError, ConfigError) as err:
            self._ensure_error = f"cannot create or find topic {self.settings.topic}: {err}"
            return False
        if created:
            log.info(
                "created heartbeats topic %s on %s", self.settings.topic, self.settings.cluster
            )
        self._topic_ready = True
        return True

    def _create_topic(self) -> bool:
        admin = self._clients.admin(self.settings.cluster)
        return ensure_heartbeat_topic(
            admin,
            self.settings.topic,
            retention_ms=self.settings.retention_ms,
            timeout_s=self.settings.ensure_timeout_s,
        )
