"""An application's producer and consumer that follow its failovers (on :mod:`drsvc.client`),
writing the same ``produced`` and ``consumed`` histories as the rest of the workload.

The producer writes sequence-numbered records (:class:`~chaos.workload.shapes.RecordFactory`)
to the application's topic on whichever cluster is active and logs each acknowledged one with
the cluster it went to; while no cluster is active it waits (the record is not taken). The
consumer reads the application's logical topic (the local topic and the remote copies) on the
active cluster, logs each record it processed with the cluster, and commits what it processed
every half second, synchronously, logging each confirmed commit with its cluster (``commits``).
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, cast

from drsvc.client import FailoverConsumer, FailoverProducer, NoActiveClusterError
from drsvc.verify.histories import (
    COMMITS,
    CONSUMED,
    PRODUCED,
    Commit,
    ConsumedRecord,
    HistoryTable,
    ProducedRecord,
)
from drsvc.verify.identity import parse
from failover.epoch_header import EPOCH_HEADER, encode_epoch

from .producer import stored_timestamp
from .shapes import PlannedRecord, RecordFactory, Shape

log = logging.getLogger(__name__)

#: how often the consumer commits what it processed
COMMIT_INTERVAL_S = 0.5

#: librdkafka's lines of the followers go here (never to a terminal)
CLIENT_LOGGER = "chaos.kafka.following"


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class FollowingProducer:
    """Producer ``producer_id`` of application ``app`` at ``rate`` records per second."""

    def __init__(
        self,
        app: str,
        topology: Path,
        topic: str,
        producer_id: str,
        history_dir: Path,
        consul: str,
        rate: float,
        shape: Shape | None = None,
        seed: int = 0,
        config: Mapping[str, Any] | None = None,
    ) -> None:
        self.topic = topic
        self.producer_id = producer_id
        self.rate = rate
        self.history = HistoryTable(history_dir, PRODUCED, flush_every=2000)
        self.acknowledged = 0
        self.failed = 0
        self.errors: list[str] = []
        self._factory = RecordFactory(producer_id, (topic,), shape or Shape(), seed)
        self._producer = FailoverProducer(
            app,
            topology,
            {
                "logger": logging.getLogger(CLIENT_LOGGER),
                "linger.ms": 5,
                "acks": "all",
                "enable.idempotence": True,
                **(config or {}),
            },
            consul=consul,
        )
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"follow-{producer_id}", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(60)
        left = self._producer.close(30)
        if left:
            self.errors.append(f"{left} records unacknowledged at close")
        self.history.flush()

    def _delivered(
        self, seq: int, planned: PlannedRecord, landed: list[str], timestamp_ms: int
    ) -> Any:
        def done(err: Any, msg: Any) -> None:
            if err is not None:
                self.failed += 1
                if len(self.errors) < 20:
                    self.errors.append(str(err))
                return
            value = planned.value
            self.history.append(
                ProducedRecord(
                    self.producer_id,
                    seq,
                    landed[0],
                    self.topic,
                    msg.partition(),
                    msg.offset(),
                    planned.key,
                    hashlib.sha256(value).hexdigest(),
                    len(value),
                    # what the log holds: the client stamps the epoch it joined under last
                    [*planned.headers, (EPOCH_HEADER, encode_epoch(int(landed[1])))]
                    if len(landed) > 1
                    else planned.headers,
                    stored_timestamp(msg, timestamp_ms),
                    False,
                    False,
                    _now_ms(),
                )
            )
            self.acknowledged += 1

        return done

    def _run(self) -> None:
        seq = 0
        started = time.monotonic()
        planned = self._factory.record(seq)
        while not self._stop.is_set():
            due = started + seq / self.rate
            early = due - time.monotonic()
            if early > 0:  # (a negative timeout would make poll wait for ever)
                self._producer.poll(min(0.05, early))
                continue
            landed: list[str] = []
            timestamp_ms = _now_ms()
            try:
                self._producer.produce(
                    self.topic,
                    planned.value,
                    planned.key,
                    on_delivery=self._delivered(seq, planned, landed, timestamp_ms),
                    timestamp=timestamp_ms,
                    headers=cast(list[tuple[str, str | bytes | None]], planned.headers),
                )
            except (NoActiveClusterError, BufferError):
                self._producer.poll(0.1)  # switching, or the queue is full: this record again
                continue
            joined = self._producer.joined
            landed.extend(("?",) if joined is None else (joined[0], str(joined[1])))
            seq += 1
            planned = self._factory.record(seq)
            if time.monotonic() - due > 1:
                started = time.monotonic() - seq / self.rate  # no burst after a switch
            self._producer.poll(0)


class FollowingConsumer:
    """A member of the application's group reading its logical topic where it is active."""

    def __init__(
        self,
        app: str,
        topology: Path,
        topic: str,
        group: str,
        member: str,
        history_dir: Path,
        consul: str,
    ) -> None:
        self.group = group
        self.member = member
        self.history = HistoryTable(history_dir, CONSUMED, flush_every=2000)
        self.commits = HistoryTable(history_dir, COMMITS, flush_every=500)
        self.processed = 0
        #: per cluster, when the last record read there was processed
        self.last_read_ms: dict[str, int] = {}
        self.errors: list[str] = []
        self._consumer = FailoverConsumer(
            app,
            topology,
            {
                "logger": logging.getLogger(CLIENT_LOGGER),
                "group.id": group,
                "auto.offset.reset": "earliest",
                # Committed by hand, synchronously, so that each commit is logged with the
                # cluster it went to and when that cluster confirmed it.
                "enable.auto.commit": False,
                "isolation.level": "read_committed",
                # a member left behind on a lost cluster expires sooner once it is back
                "session.timeout.ms": 10000,
            },
            consul=consul,
        )
        self._consumer.subscribe([topic])
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"follow-{member}", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(60)
        self._commit()
        self._consumer.close()
        self.history.flush()
        self.commits.flush()

    def _commit(self) -> None:
        """Commit what was processed where the consumer reads now; log what was confirmed."""
        cluster = self._consumer.cluster
        try:
            committed = self._consumer.commit(asynchronous=False)
        except NoActiveClusterError:
            return  # switching: what was processed before was committed at the switch
        except Exception as err:  # no offset to commit, or the cluster refused: noted
            if "NO_OFFSET" not in str(err) and len(self.errors) < 20:
                self.errors.append(repr(err))
            return
        if cluster is None:
            return
        now = _now_ms()
        self.commits.extend(
            Commit(self.group, self.member, cluster, tp.topic, tp.partition, tp.offset, now)
            for tp in committed or []
            if tp.error is None and tp.offset >= 0 and tp.topic is not None
        )

    def _run(self) -> None:
        last_commit = time.monotonic()
        since_commit = 0
        while not self._stop.is_set():
            if since_commit and time.monotonic() - last_commit >= COMMIT_INTERVAL_S:
                self._commit()
                since_commit, last_commit = 0, time.monotonic()
            try:
                messages = self._consumer.consume(200, 0.2)
            except Exception as err:  # noted; the history says what was read
                self.errors.append(repr(err))
                time.sleep(0.2)
                continue
            cluster = self._consumer.cluster
            rows = []
            for msg in messages:
                if msg.error() is not None or cluster is None:
                    continue
                identity = parse(msg.value())
                now = _now_ms()
                self.last_read_ms[cluster] = now
                rows.append(
                    ConsumedRecord(
                        self.group,
                        self.member,
                        cluster,
                        msg.topic() or "",
                        msg.partition() or 0,
                        msg.offset() or 0,
                        identity[0] if identity else None,
                        identity[1] if identity else None,
                        now,
                    )
                )
            self.history.extend(rows)
            self.processed += len(rows)
            since_commit += len(rows)
