"""A sequence-numbered producer that logs every record the cluster acknowledged.

Plain producers are idempotent (``acks=all``): a record is logged when its delivery report says
where it landed. Transactional producers write transactions of ``transaction_size`` records and
abort a seeded share of them; their records are logged once the commit or the abort returned,
flagged ``aborted`` accordingly. A transaction whose outcome is unknown (a fatal error before
the commit returned) is not logged: its records are neither promised nor forbidden. Sequence
numbers grow with every record attempted, so failed and aborted records leave gaps.
"""

from __future__ import annotations

import hashlib
import logging
import random
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, cast

from confluent_kafka import TIMESTAMP_LOG_APPEND_TIME, KafkaError, KafkaException, Producer

from chaos.workload.client_logs import client_logger
from chaos.workload.shapes import PlannedRecord, RecordFactory, Shape
from drsvc.verify.histories import PRODUCED, HistoryTable, ProducedRecord

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ProducerSpec:
    """One producer of a workload: who, where, how fast, and whether in transactions."""

    producer_id: str
    cluster: str
    topics: tuple[str, ...]
    transactional: bool = False
    abort_ratio: float = 0.0
    transaction_size: int = 20
    #: records per second; 0: as fast as the cluster takes them
    rate: float = 0.0
    #: stop after this many records (None: until stopped)
    max_records: int | None = None
    config: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not 0 <= self.abort_ratio <= 1:
            raise ValueError(f"{self.producer_id}: abort_ratio must lie in [0, 1]")
        if self.transaction_size < 1:
            raise ValueError(f"{self.producer_id}: transaction_size must be >= 1")


@dataclass
class ProducerStats:
    attempted: int = 0
    acknowledged: int = 0
    aborted: int = 0
    failed: int = 0
    unknown: int = 0
    errors: list[str] = field(default_factory=list)


class _Transaction:
    """The delivery reports of one open transaction."""

    def __init__(self) -> None:
        self.delivered: list[tuple[int, PlannedRecord, Any, int]] = []
        self.failures: list[str] = []

    def callback(
        self, seq: int, planned: PlannedRecord, timestamp_ms: int
    ) -> Callable[[Any, Any], None]:
        def on_delivery(err: Any, msg: Any) -> None:
            if err is not None:
                self.failures.append(str(err))
            else:
                self.delivered.append((seq, planned, msg, timestamp_ms))

        return on_delivery


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def stored_timestamp(msg: Any, requested_ms: int, topic_stamps: bool = False) -> int:
    """The timestamp the broker stored for a delivered record: the one the producer set, unless
    the topic stamps records itself (``topic_stamps``: LogAppendTime). The workload's topics keep
    the producer's (CreateTime, as the runner creates them).

    A delivery report's timestamp is not trusted on a CreateTime topic: when a retried batch is
    one the broker already holds (a broker restarted after writing it, before answering), the
    broker answers with the batch's largest timestamp as a log-append time, and librdkafka then
    reports that value, typed LogAppendTime, for every record of the batch, while the log kept
    each record's own."""
    if topic_stamps:
        kind, reported = msg.timestamp()
        if kind == TIMESTAMP_LOG_APPEND_TIME:
            return int(reported)
    return requested_ms


class SequenceProducer:
    """Runs one :class:`ProducerSpec` on a thread of its own: :meth:`start`, :meth:`stop`."""

    def __init__(
        self,
        spec: ProducerSpec,
        bootstrap_servers: str,
        history: HistoryTable,
        shape: Shape | None = None,
        seed: int = 0,
        settings: Mapping[str, str] | None = None,
    ) -> None:
        if history.schema is not PRODUCED:
            raise ValueError("a producer writes the produced history")
        self.spec = spec
        self.bootstrap_servers = bootstrap_servers
        #: client security settings (the application principal's on secured clusters)
        self.settings = dict(settings or {})
        self.history = history
        self.stats = ProducerStats()
        self._factory = RecordFactory(spec.producer_id, spec.topics, shape or Shape(), seed)
        self._rng = random.Random(f"{seed}/{spec.producer_id}/aborts")
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._run, name=f"producer-{spec.producer_id}", daemon=True
        )

    # -- control ---------------------------------------------------------------------------

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout_s: float = 60.0) -> ProducerStats:
        """Stop producing, wait for outstanding acknowledgements, and flush the history."""
        self._stop.set()
        self._thread.join(timeout_s)
        if self._thread.is_alive():
            log.warning("producer %s did not stop within %.0f s", self.spec.producer_id, timeout_s)
        self.history.flush()
        return self.stats

    def join(self, timeout_s: float | None = None) -> None:
        self._thread.join(timeout_s)

    @property
    def running(self) -> bool:
        return self._thread.is_alive()

    # -- the loop --------------------------------------------------------------------------

    def _config(self) -> dict[str, Any]:
        config: dict[str, Any] = {
            "bootstrap.servers": self.bootstrap_servers,
            "acks": "all",
            "enable.idempotence": True,
            "linger.ms": 5,
            "client.id": f"chaos-{self.spec.producer_id}",
            "logger": client_logger(),
            **self.settings,
        }
        if self.spec.transactional:
            config["transactional.id"] = f"chaos-{self.spec.producer_id}"
        config.update(self.spec.config)
        return config

    def _done(self) -> bool:
        limit = self.spec.max_records
        return self._stop.is_set() or (limit is not None and self.stats.attempted >= limit)

    def _run(self) -> None:
        producer = Producer(self._config())
        try:
            if self.spec.transactional:
                self._run_transactions(producer)
            else:
                self._run_plain(producer)
        except Exception as err:  # the history says what was acknowledged; say why it stopped
            log.exception("producer %s stopped", self.spec.producer_id)
            self.stats.errors.append(repr(err))
        finally:
            remaining = producer.flush(30)
            if remaining:
                self.stats.errors.append(f"{remaining} records unacknowledged at stop")

    def _row(
        self, seq: int, planned: PlannedRecord, msg: Any, aborted: bool, timestamp_ms: int
    ) -> ProducedRecord:
        value = planned.value
        return ProducedRecord(
            self.spec.producer_id,
            seq,
            self.spec.cluster,
            planned.topic,
            msg.partition(),
            msg.offset(),
            planned.key,
            hashlib.sha256(value).hexdigest(),
            len(value),
            planned.headers,
            stored_timestamp(msg, timestamp_ms),
            self.spec.transactional,
            aborted,
            _now_ms(),
        )

    def _produce(
        self,
        producer: Producer,
        planned: PlannedRecord,
        callback: Callable[..., None],
        timestamp_ms: int,
    ) -> None:
        while True:
            try:
                producer.produce(
                    planned.topic,
                    planned.value,
                    planned.key,
                    headers=cast(list[tuple[str, str | bytes | None]], planned.headers),
                    timestamp=timestamp_ms,
                    on_delivery=callback,
                )
                return
            except BufferError:
                producer.poll(0.05)

    def _pace(self, started: float) -> None:
        if self.spec.rate > 0:
            due = started + self.stats.attempted / self.spec.rate
            delay = due - time.monotonic()
            if delay > 0:
                self._stop.wait(delay)

    def _run_plain(self, producer: Producer) -> None:
        started = time.monotonic()
        while not self._done():
            seq = self.stats.attempted
            planned = self._factory.record(seq)
            timestamp_ms = _now_ms()

            def delivered(
                err: Any,
                msg: Any,
                seq: int = seq,
                planned: PlannedRecord = planned,
                timestamp_ms: int = timestamp_ms,
            ) -> None:
                if err is not None:
                    self.stats.failed += 1
                    if len(self.stats.errors) < 20:
                        self.stats.errors.append(str(err))
                    return
                self.history.append(self._row(seq, planned, msg, False, timestamp_ms))
                self.stats.acknowledged += 1

            self._produce(producer, planned, delivered, timestamp_ms)
            self.stats.attempted += 1
            producer.poll(0)
            self._pace(started)
        producer.flush(30)

    def _run_transactions(self, producer: Producer) -> None:
        producer.init_transactions(30)
        started = time.monotonic()
        while not self._done():
            txn = _Transaction()
            producer.begin_transaction()
            for _ in range(self.spec.transaction_size):
                if self._done():
                    break
                seq = self.stats.attempted
                planned = self._factory.record(seq)
                timestamp_ms = _now_ms()
                self._produce(
                    producer, planned, txn.callback(seq, planned, timestamp_ms), timestamp_ms
                )
                self.stats.attempted += 1
                producer.poll(0)
                self._pace(started)
            producer.flush(60)  # every delivery report of the transaction is in
            abort = bool(txn.failures) or self._rng.random() < self.spec.abort_ratio
            outcome = self._finish(producer, abort)
            if outcome is None:
                self.stats.unknown += len(txn.delivered)
                self.stats.errors.extend(txn.failures[:5])
                return
            rows = [self._row(seq, p, msg, outcome, ts) for seq, p, msg, ts in txn.delivered]
            self.history.extend(rows)
            if outcome:
                self.stats.aborted += len(rows)
            else:
                self.stats.acknowledged += len(rows)

    def _finish(self, producer: Producer, abort: bool) -> bool | None:
        """Commit or abort the open transaction; True: aborted, False: committed, None: the
        outcome is unknown (the producer cannot go on)."""
        try:
            if abort:
                producer.abort_transaction(60)
                return True
            producer.commit_transaction(60)
            return False
        except KafkaException as exc:
            error: KafkaError = exc.args[0]
            self.stats.errors.append(str(error))
            if error.txn_requires_abort():
                producer.abort_transaction(60)
                return True
            return None
