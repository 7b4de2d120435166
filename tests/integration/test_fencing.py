"""Fencing transactional ids on real brokers: a producer that began a transaction and wrote
records is fenced by :func:`fence_transactional_ids`; its commit then fails and a read_committed
reader never sees what it wrote. A cluster that does not answer costs the bound, not more."""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from replication_support import create, watermarks

from drsvc.devenv.environment import EnvironmentInfo
from drsvc.runtime.failover.fencing import fence_transactional_ids


def _zombie(bootstrap: str, topic: str, transactional_id: str, count: int) -> Producer:
    """A transactional producer with an open transaction holding ``count`` records, all on
    the log (flushed), as a producer paused before its commit leaves them."""
    producer = Producer(
        {"bootstrap.servers": bootstrap, "transactional.id": transactional_id, "linger.ms": 5}
    )
    producer.init_transactions(30)
    producer.begin_transaction()
    for i in range(count):
        producer.produce(topic, value=f"zombie-{i}".encode(), partition=0)
    assert producer.flush(30) == 0
    return producer


def _values(
    bootstrap: str, topic: str, isolation: str = "read_committed", timeout_s: float = 60.0
) -> list[bytes]:
    """What a reader finds in partition 0 up to its end (transaction markers, and aborted
    records for read_committed, are skipped, so the end is judged by position, not by the
    last offset read)."""
    end = watermarks(bootstrap, topic)[0][1]
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"drsvc-test-fencing-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False,
            "isolation.level": isolation,
        }
    )
    values: list[bytes] = []
    try:
        partition = TopicPartition(topic, 0, 0)
        consumer.assign([partition])
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            for msg in consumer.consume(1000, 0.5):
                if msg.error() is None:
                    values.append(msg.value() or b"")
            if consumer.position([partition])[0].offset >= end:
                return values
        raise AssertionError(f"a {isolation} reader did not reach {end} in {topic}")
    finally:
        consumer.close()


def test_a_fenced_producer_cannot_commit_what_it_wrote(cluster_pair: EnvironmentInfo) -> None:
    east = cluster_pair.clusters["east"]
    topic = f"fencing-{uuid.uuid4().hex[:8]}"
    create(east, topic, 1)
    transactional_id = f"orders-tx-{uuid.uuid4().hex[:8]}"
    zombie = _zombie(east, topic, transactional_id, 10)
    never_used = f"orders-tx-unused-{uuid.uuid4().hex[:8]}"

    report = fence_transactional_ids(
        "east", {"bootstrap.servers": east}, [transactional_id, never_used], timeout_s=60
    )

    assert report.fenced == (transactional_id, never_used), report.detail()
    assert report.complete and report.took_s < 60
    with pytest.raises(KafkaException) as fenced:
        zombie.commit_transaction(30)
    error = fenced.value.args[0]
    assert error.fatal() or error.txn_requires_abort(), error
    # the records were on the log (a read_uncommitted reader sees them) and no read_committed
    # reader ever will: the fencing aborted their transaction
    assert len(_values(east, topic, "read_uncommitted")) == 10
    assert _values(east, topic) == []


def test_a_fenced_producer_cannot_start_again_either(cluster_pair: EnvironmentInfo) -> None:
    east = cluster_pair.clusters["east"]
    topic = f"fencing-{uuid.uuid4().hex[:8]}"
    create(east, topic, 1)
    transactional_id = f"orders-tx-{uuid.uuid4().hex[:8]}"
    zombie = _zombie(east, topic, transactional_id, 3)
    report = fence_transactional_ids("east", {"bootstrap.servers": east}, [transactional_id])
    assert report.complete, report.detail()

    # the paused producer wakes and tries to go on: abort, then a new transaction
    failures: list[Any] = []
    try:
        zombie.abort_transaction(30)
        zombie.begin_transaction()
        zombie.produce(topic, value=b"after-fencing", partition=0, on_delivery=failures.append)
        zombie.flush(30)
        zombie.commit_transaction(30)
    except KafkaException as err:
        failures.append(err)
    assert failures, "a fenced producer went on writing"
    assert b"after-fencing" not in _values(east, topic)


def test_a_cluster_that_does_not_answer_is_reported_within_the_bound() -> None:
    started = time.monotonic()
    report = fence_transactional_ids(
        "gone", {"bootstrap.servers": "127.0.0.1:9"}, ["tx-a", "tx-b"], timeout_s=3
    )
    took = time.monotonic() - started
    assert report.fenced == () and [f.transactional_id for f in report.failed] == ["tx-a", "tx-b"]
    assert all(f.reason for f in report.failed)
    assert took < 3 + 5, f"fencing an unreachable cluster took {took:.1f}s"
