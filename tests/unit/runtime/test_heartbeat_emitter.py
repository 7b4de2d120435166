"""The emitter against a fake producer: what it writes, and how it behaves through an outage."""

from __future__ import annotations

import itertools
import logging
import threading
import time
from dataclasses import dataclass, field

import pytest
from confluent_kafka import KafkaError, Message
from fake_kafka import FakeClock, FakeCluster, FakeKafkaClients
from prometheus_client import CollectorRegistry

from drsvc.errors import ConfigError, KafkaUnavailableError
from drsvc.runtime.heartbeats.emitter import (
    DeliveryCallback,
    EmitterSettings,
    HeartbeatEmitter,
    producer_config,
)
from drsvc.runtime.heartbeats.metrics import heartbeat_metrics
from failover import heartbeats


@dataclass
class FakeProducer:
    """Keeps produced records; :meth:`poll` reports them delivered or failed, as told."""

    fail_with: int | None = None
    sent: list[tuple[str, bytes, bytes]] = field(default_factory=list)
    pending: list[DeliveryCallback] = field(default_factory=list)

    def produce(
        self, topic: str, value: bytes, key: bytes, *, on_delivery: DeliveryCallback
    ) -> None:
        self.sent.append((topic, value, key))
        self.pending.append(on_delivery)

    def poll(self, timeout: float) -> int:
        served, self.pending = self.pending, []
        for callback in served:
            error = None if self.fail_with is None else KafkaError(self.fail_with)
            callback(error, Message(topic="heartbeats"))
        return len(served)

    def flush(self, timeout: float) -> int:
        self.poll(0)
        return 0


class TopicCreator:
    """Answers topic creation with the given items in turn (the last one from then on); an
    exception is raised. Counts the calls."""

    def __init__(self, answers: list[object]) -> None:
        self.answers = answers
        self.calls = 0

    def __call__(self) -> object:
        self.calls += 1
        answer = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        if isinstance(answer, Exception):
            raise answer
        return answer


def make_emitter(
    ensure: TopicCreator | None = None, interval_s: float = 1.0
) -> tuple[HeartbeatEmitter, FakeClock, CollectorRegistry]:
    """An emitter for east on a fake clock; by default its topic exists already. The tests
    hand it their producer (``emit_once``)."""
    ensure_topic = ensure or TopicCreator([False])
    clock = FakeClock(monotonic=1000.0, wall=1_700_000_000.0)
    registry = CollectorRegistry()
    emitter = HeartbeatEmitter(
        EmitterSettings(
            cluster="east", client={"bootstrap.servers": "127.0.0.1:1"}, interval_s=interval_s
        ),
        metrics=heartbeat_metrics(registry),
        ensure_topic=ensure_topic,
        clock=clock,
    )
    return emitter, clock, registry


def metric(registry: CollectorRegistry, name: str) -> float:
    value = registry.get_sample_value(name, {"cluster": "east"})
    return 0.0 if value is None else value


def test_heartbeats_carry_the_cluster_emitter_and_a_sequence() -> None:
    producer = FakeProducer()
    emitter, clock, registry = make_emitter()
    for _ in range(3):
        emitter.emit_once(producer, clock.monotonic())
        clock.advance(1)
    producer.poll(0)
    beats = [heartbeats.decode(value) for _topic, value, _key in producer.sent]
    assert [b.sequence for b in beats] == [0, 1, 2]
    assert {(b.source, b.emitter_id) for b in beats} == {("east", emitter.emitter_id)}
    # the wall time of the clock when each was sent
    assert [b.emitted_at_ms for b in beats] == [1_700_000_000_000 + 1000 * n for n in range(3)]
    assert {(topic, key) for topic, _value, key in producer.sent} == {("heartbeats", b"east")}
    assert emitter.stats.delivered == 3
    assert emitter.stats.last_delivered_at == clock.monotonic()
    assert metric(registry, "drsvc_heartbeats_emitted_total") == 3


def test_an_outage_is_logged_once_and_its_end_once(caplog: pytest.LogCaptureFixture) -> None:
    producer = FakeProducer(fail_with=KafkaError._MSG_TIMED_OUT)
    emitter, clock, registry = make_emitter()
    with caplog.at_level(logging.INFO, logger="drsvc.runtime.heartbeats.emitter"):
        for _ in range(10):
            emitter.emit_once(producer, clock.monotonic())
            producer.poll(0)
            clock.advance(1)
        producer.fail_with = None
        emitter.emit_once(producer, clock.monotonic())
        producer.poll(0)
    messages = [r.getMessage() for r in caplog.records]
    assert len(messages) == 2, messages
    assert messages[0].startswith("heartbeats to east failing: Local: Message timed out")
    assert "working again after 10 failed attempt(s) over 10.0s" in messages[1]
    assert metric(registry, "drsvc_heartbeat_emit_failures_total") == 10
    assert metric(registry, "drsvc_heartbeats_emitted_total") == 1


def test_no_heartbeat_before_the_topic_is_there_and_creation_is_retried_not_hammered() -> None:
    producer = FakeProducer()
    down = KafkaUnavailableError("cluster metadata unavailable: transport failure")
    creator = TopicCreator([down, down, True])
    emitter, clock, registry = make_emitter(ensure=creator)
    emitter.emit_once(producer, clock.monotonic())  # first try: fails
    for _ in range(4):  # within ensure_retry_s: no new attempt, still counted as failures
        clock.advance(1)
        emitter.emit_once(producer, clock.monotonic())
    assert producer.sent == []
    clock.advance(1)  # 5 s after the first try: tries again, fails again
    emitter.emit_once(producer, clock.monotonic())
    clock.advance(5)
    emitter.emit_once(producer, clock.monotonic())  # third try: created
    producer.poll(0)
    assert len(producer.sent) == 1
    assert creator.calls == 3
    assert metric(registry, "drsvc_heartbeat_emit_failures_total") == 6
    assert emitter.stats.delivered == 1


def test_a_permanent_topic_error_keeps_the_emitter_trying(caplog: pytest.LogCaptureFixture) -> None:
    producer = FakeProducer()
    refused = ConfigError("cannot create topic heartbeats: Authorization failed")
    emitter, clock, _registry = make_emitter(ensure=TopicCreator([refused]))
    with caplog.at_level(logging.WARNING):
        emitter.emit_once(producer, clock.monotonic())
    assert "Authorization failed" in caplog.text
    assert emitter.stats.failed == 1


def test_failing_heartbeats_make_it_look_at_the_topic_again_but_not_every_time() -> None:
    # A deleted topic shows as timed-out heartbeats: the cluster does not create it on write.
    producer = FakeProducer(fail_with=KafkaError._MSG_TIMED_OUT)
    creator = TopicCreator([False, True, False])
    emitter, clock, _registry = make_emitter(ensure=creator)
    for _ in range(5):  # t = 0..4: the first check finds the topic; heartbeats time out
        emitter.emit_once(producer, clock.monotonic())
        producer.poll(0)
        clock.advance(1)
    assert creator.calls == 1
    assert len(producer.sent) == 5, "heartbeats keep going out meanwhile"
    producer.fail_with = None
    emitter.emit_once(producer, clock.monotonic())  # t = 5: due again, creates it
    producer.poll(0)
    assert creator.calls == 2
    for _ in range(10):  # all well again: no more checks
        clock.advance(1)
        emitter.emit_once(producer, clock.monotonic())
        producer.poll(0)
    assert creator.calls == 2
    assert len(producer.sent) == 16
    assert emitter.stats.delivered == 11


def test_run_emits_every_interval_until_stopped() -> None:
    east = FakeCluster("east")
    east.create_topic("heartbeats")
    clients = FakeKafkaClients(east)
    emitter = HeartbeatEmitter(
        EmitterSettings(cluster="east", client={}, interval_s=2.0),
        metrics=heartbeat_metrics(CollectorRegistry()),
        clients=clients,
        ensure_topic=TopicCreator([False]),
    )
    thread = threading.Thread(target=emitter.run)
    thread.start()
    try:
        deadline = time.monotonic() + 10
        while emitter.stats.delivered < 5 and time.monotonic() < deadline:
            threading.Event().wait(0.01)
    finally:
        emitter.stop()
        thread.join(5)
    assert not thread.is_alive()
    (producer,) = clients.producers
    assert producer.config["client.id"] == "drsvc-heartbeats-east"
    assert producer.config["bootstrap.servers"] == east.bootstrap
    beats = [heartbeats.decode(value) for value in east.values("heartbeats", 0)]
    assert len(beats) >= 5
    # one per interval of the factory's clock, in order
    assert [b.sequence for b in beats] == list(range(len(beats)))
    sent = [b.emitted_at_ms for b in beats]
    assert {later - earlier for earlier, later in itertools.pairwise(sent)} == {2000}


def test_producer_drops_a_heartbeat_after_a_few_intervals() -> None:
    settings = EmitterSettings(cluster="east", client={"bootstrap.servers": "b:1"}, interval_s=2)
    config = producer_config(settings)
    assert config["message.timeout.ms"] == 6000
    assert config["request.timeout.ms"] < config["message.timeout.ms"]
    assert config["linger.ms"] == 0
    assert not any(key.startswith(("bootstrap", "security", "sasl", "ssl")) for key in config)


def test_interval_must_be_positive() -> None:
    with pytest.raises(ConfigError, match="interval"):
        EmitterSettings(cluster="east", client={}, interval_s=0)
