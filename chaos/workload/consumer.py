"""A consumer group member that logs every record it processes and every offset it commits.

It reads ``read_committed`` from the earliest offset of a new group, commits synchronously every
``commit_every`` records or ``commit_interval_s`` (whichever comes first) and once more when it
stops, and logs each commit as the broker confirmed it. A record counts as processed when it was
returned by the consumer and logged; the history is what the consistency job compares with what
the producers wrote.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from chaos.workload.client_logs import client_logger
from drsvc.verify.histories import COMMITS, CONSUMED, Commit, ConsumedRecord, HistoryTable
from drsvc.verify.identity import parse

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ConsumerSpec:
    """One member of a consumer group of the workload."""

    group: str
    cluster: str
    topics: tuple[str, ...]
    member: str = "m0"
    commit_every: int = 500
    commit_interval_s: float = 1.0
    config: dict[str, Any] = field(default_factory=dict)


@dataclass
class ConsumerStats:
    processed: int = 0
    commits: int = 0
    errors: list[str] = field(default_factory=list)


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class HistoryConsumer:
    """Runs one :class:`ConsumerSpec` on a thread of its own: :meth:`start`, :meth:`stop`."""

    def __init__(
        self,
        spec: ConsumerSpec,
        bootstrap_servers: str,
        consumed: HistoryTable,
        commits: HistoryTable,
        settings: Mapping[str, str] | None = None,
    ) -> None:
        if consumed.schema is not CONSUMED or commits.schema is not COMMITS:
            raise ValueError("a consumer writes the consumed and commits histories")
        self.spec = spec
        self.bootstrap_servers = bootstrap_servers
        #: client security settings (the application principal's on secured clusters)
        self.settings = dict(settings or {})
        self.consumed = consumed
        self.commits = commits
        self.stats = ConsumerStats()
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._run, name=f"consumer-{spec.group}-{spec.member}", daemon=True
        )

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout_s: float = 60.0) -> ConsumerStats:
        """Stop consuming, commit what was processed, leave the group, flush the histories."""
        self._stop.set()
        self._thread.join(timeout_s)
        if self._thread.is_alive():
            log.warning("consumer %s did not stop within %.0f s", self.spec.member, timeout_s)
        self.consumed.flush()
        self.commits.flush()
        return self.stats

    @property
    def running(self) -> bool:
        return self._thread.is_alive()

    def _config(self) -> dict[str, Any]:
        config: dict[str, Any] = {
            "bootstrap.servers": self.bootstrap_servers,
            "group.id": self.spec.group,
            "client.id": f"chaos-{self.spec.group}-{self.spec.member}",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
            "logger": client_logger(),
            **self.settings,
        }
        config.update(self.spec.config)
        return config

    def _run(self) -> None:
        consumer = Consumer(self._config())
        try:
            consumer.subscribe(list(self.spec.topics))
            since_commit, last_commit = 0, time.monotonic()
            while not self._stop.is_set():
                batch = consumer.consume(500, 0.2)
                rows = []
                for msg in batch:
                    error = msg.error()
                    if error is not None:
                        if error.code() != KafkaError._PARTITION_EOF:
                            self.stats.errors.append(str(error))
                        continue
                    topic, partition, offset = msg.topic(), msg.partition(), msg.offset()
                    if topic is None or partition is None or offset is None:
                        continue
                    identity = parse(msg.value())
                    rows.append(
                        ConsumedRecord(
                            self.spec.group,
                            self.spec.member,
                            self.spec.cluster,
                            topic,
                            partition,
                            offset,
                            identity[0] if identity else None,
                            identity[1] if identity else None,
                            _now_ms(),
                        )
                    )
                self.consumed.extend(rows)
                self.stats.processed += len(rows)
                since_commit += len(rows)
                due = time.monotonic() - last_commit >= self.spec.commit_interval_s
                if since_commit and (since_commit >= self.spec.commit_every or due):
                    self._commit(consumer)
                    since_commit, last_commit = 0, time.monotonic()
            if since_commit:
                self._commit(consumer)
        except Exception as err:
            log.exception("consumer %s stopped", self.spec.member)
            self.stats.errors.append(repr(err))
        finally:
            consumer.close()

    def _commit(self, consumer: Consumer) -> None:
        try:
            committed: list[TopicPartition] | None = consumer.commit(asynchronous=False)
        except KafkaException as exc:
            error: KafkaError = exc.args[0]
            if error.code() != KafkaError._NO_OFFSET:
                self.stats.errors.append(str(error))
            return
        now = _now_ms()
        rows = [
            Commit(
                self.spec.group,
                self.spec.member,
                self.spec.cluster,
                tp.topic,
                tp.partition,
                tp.offset,
                now,
            )
            for tp in committed or []
            if tp.error is None and tp.offset >= 0
        ]
        self.commits.extend(rows)
        self.stats.commits += 1
