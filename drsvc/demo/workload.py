"""The demo's application: orders written and read through :mod:`drsvc.client`, with a history.

A producer writes sequence-numbered orders at a steady rate to the application's active cluster
and notes each acknowledged one (cluster, partition, offset); a consumer group reads them and
notes each record it processes and on which cluster. Both follow failovers by themselves. The
history is what the verdict is computed from: which acknowledged orders were read, which twice,
which never.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from drsvc.client import FailoverConsumer, FailoverProducer, NoActiveClusterError
from drsvc.kafka.types import KafkaError, Message
from drsvc.verify.identity import parse, value_prefix

__all__ = ["Acked", "OrdersWorkload", "Read"]

#: librdkafka's own lines go to the demo's log file, never the screen
CLIENT_LOGGER = "drsvc.kafka.demo"


@dataclass(frozen=True)
class Acked:
    """An acknowledged order; ``at``: wall-clock seconds of the acknowledgement."""

    seq: int
    cluster: str
    partition: int
    offset: int
    at: float
    key: bytes = b""
    value_sha256: str = ""
    value_size: int = 0
    timestamp_ms: int = 0
    #: the epoch the producer stamped in the record's drsvc.epoch header (None: unknown)
    epoch: int | None = None


@dataclass(frozen=True)
class Read:
    seq: int
    cluster: str
    topic: str
    partition: int
    offset: int
    at: float


@dataclass
class History:
    acked: list[Acked] = field(default_factory=list)
    read: list[Read] = field(default_factory=list)
    failed: int = 0


class OrdersWorkload:
    """A producer and a consumer group of application ``app`` on threads of their own."""

    def __init__(
        self,
        app: str,
        topology: Path,
        topic: str,
        group: str,
        consul: str,
        *,
        rate_per_s: float = 200.0,
        run_id: str = "",
    ) -> None:
        logger = logging.getLogger(CLIENT_LOGGER)
        common: Mapping[str, Any] = {"logger": logger}
        self.topic = topic
        self.history = History()
        self._run_id = run_id
        self._rate = rate_per_s
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._producing = threading.Event()
        self._producing.set()
        #: set by the producer thread once paused with every delivery report served
        self._settled = threading.Event()
        # Idempotent: without it, a batch retried while east is being lost can land after a
        # later one, and the records whose acknowledgement was lost then read out of order.
        self.producer = FailoverProducer(
            app,
            topology,
            {**common, "linger.ms": 5, "acks": "all", "enable.idempotence": True},
            consul=consul,
        )
        self.consumer = FailoverConsumer(
            app,
            topology,
            {
                **common,
                "group.id": group,
                "auto.offset.reset": "earliest",
                "enable.auto.commit": True,
                "auto.commit.interval.ms": 500,
                # a member left behind on a lost cluster expires sooner once it is back
                "session.timeout.ms": 10000,
            },
            consul=consul,
        )
        self.consumer.subscribe([topic])
        self._threads = [
            threading.Thread(target=self._produce, name="demo-producer", daemon=True),
            threading.Thread(target=self._consume, name="demo-consumer", daemon=True),
        ]

    def start(self) -> OrdersWorkload:
        for thread in self._threads:
            thread.start()
        return self

    def pause_producing(self, timeout_s: float = 30.0) -> bool:
        """Stop writing orders and wait until every order already written has its delivery
        report (acknowledged or failed), so the acknowledged orders no longer change: a verdict
        taken before that can miss an order acknowledged a moment later. False if reports were
        still pending after ``timeout_s``."""
        self._producing.clear()
        return self._settled.wait(timeout_s)

    def snapshot(self) -> History:
        """A copy of the history as it is now (the threads keep appending to the live one)."""
        with self._lock:
            return History(list(self.history.acked), list(self.history.read), self.history.failed)

    # -- threads -------------------------------------------------------------------------------

    def _produce(self) -> None:
        seq = 0
        interval = 1.0 / self._rate
        next_at = time.monotonic()
        while not self._stop.is_set():
            if not self._producing.is_set():
                # Flushed on this thread, so the last delivery callbacks have run when it is set.
                if not self._settled.is_set() and self.producer.flush(1.0) == 0:
                    self._settled.set()
                self.producer.poll(0.1)
                continue
            now = time.monotonic()
            if now < next_at:
                self.producer.poll(min(0.05, next_at - now))
                continue
            # the value says who wrote it: the Spark check finds each order by it
            value = value_prefix(self._run_id, seq) + b"order"
            # The cluster it went to is known once produce() has joined one; the callback runs
            # later, from poll(), and reads it then.
            landed: list[str] = []
            # The history keeps the timestamp set here: a delivery report's is not the stored
            # one when the broker answers a resent batch it already held (it then reports the
            # batch's largest timestamp for all of its records).
            timestamp_ms = time.time_ns() // 1_000_000
            try:
                self.producer.produce(
                    self.topic,
                    value,
                    f"customer-{seq % 50}".encode(),
                    on_delivery=self._delivered(seq, landed, value, timestamp_ms),
                    timestamp=timestamp_ms,
                )
            except (NoActiveClusterError, BufferError):
                self.producer.poll(0.1)  # switching, or the queue is full: try this one again
                continue
            # The cluster and the epoch it stamped, read together (a switch may come between).
            joined = self.producer.joined
            landed.extend(("?",) if joined is None else (joined[0], str(joined[1])))
            seq += 1
            next_at += interval
            if next_at < now - 1:
                next_at = now  # do not burst to catch up after a switch
            self.producer.poll(0)

    def _delivered(self, seq: int, landed: list[str], value: bytes, timestamp_ms: int) -> Any:
        def done(err: KafkaError | None, msg: Message) -> None:
            with self._lock:
                if err is not None:
                    self.history.failed += 1
                    return
                self.history.acked.append(
                    Acked(
                        seq,
                        landed[0] if landed else "?",
                        msg.partition() or 0,
                        msg.offset() or 0,
                        time.time(),
                        msg.key() or b"",
                        hashlib.sha256(value).hexdigest(),
                        len(value),
                        timestamp_ms,
                        int(landed[1]) if len(landed) > 1 else None,
                    )
                )

        return done

    def _consume(self) -> None:
        while not self._stop.is_set():
            msg = self.consumer.poll(0.2)
            cluster = self.consumer.cluster
            if msg is None or msg.error() is not None or cluster is None:
                continue
            identity = parse(msg.value())
            if identity is None or identity[0] != self._run_id:
                continue  # an earlier demo's orders
            seq = identity[1]
            with self._lock:
                self.history.read.append(
                    Read(
                        seq,
                        cluster,
                        msg.topic() or "",
                        msg.partition() or 0,
                        msg.offset() or 0,
                        time.time(),
                    )
                )

    # -- reading ---------------------------------------------------------------------------------

    def counts(self) -> tuple[int, int]:
        with self._lock:
            return len(self.history.acked), len(self.history.read)

    def first_read_on(self, cluster: str, after: float) -> float | None:
        with self._lock:
            return next(
                (r.at for r in self.history.read if r.cluster == cluster and r.at >= after), None
            )

    def close(self) -> History:
        self._stop.set()
        for thread in self._threads:
            thread.join(30)
        self.producer.close(10)
        self.consumer.close()
        return self.history
