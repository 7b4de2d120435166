"""Smoke check of the local environment: a record through every cluster, a Consul KV round trip.

It proves the environment is usable end to end, not just that processes run.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from drsvc.adapters.consul_client import ConsulClient
from drsvc.devenv.environment import EnvironmentInfo
from drsvc.errors import KafkaUnavailableError, LocalEnvError
from drsvc.kafka.admin import create_topic
from drsvc.kafka.clients import KafkaClients
from drsvc.kafka.clock import Clock
from drsvc.kafka.errors import translated
from drsvc.kafka.types import KafkaError, Message, TopicPartition
from failover import naming

SMOKE_TOPIC = naming.SMOKE_TOPIC


@dataclass(frozen=True)
class SmokeResult:
    cluster: str
    round_trip_ms: float


def kafka_round_trip(
    alias: str, bootstrap_servers: str, timeout_s: float = 30.0, *, clock: Clock | None = None
) -> SmokeResult:
    """Produce one uniquely-keyed record to ``drsvc-smoke`` and read it back. The local
    environment's clusters take plaintext clients: the bootstrap servers are all they need."""
    clients = KafkaClients.for_configs(
        {alias: {"bootstrap.servers": bootstrap_servers}}, clock=clock
    )
    clock = clients.clock
    create_topic(clients.admin(alias), SMOKE_TOPIC, partitions=1)
    token = uuid.uuid4().hex
    started = clock.monotonic()
    producer = clients.producer(alias, {"acks": "all"})
    delivered: list[tuple[int, int]] = []
    errors: list[str] = []

    def on_delivery(err: KafkaError | None, msg: Message) -> None:
        if err is not None:
            errors.append(err.str())
        else:
            delivered.append((msg.partition() or 0, msg.offset() or 0))

    with translated("producing the smoke record", alias):
        producer.produce(SMOKE_TOPIC, key=token.encode(), value=b"smoke", on_delivery=on_delivery)
        producer.flush(timeout_s)
    if errors or not delivered:
        raise KafkaUnavailableError(f"{alias}: smoke record not delivered: {errors or 'timeout'}")
    partition, offset = delivered[0]
    consumer = clients.consumer(
        alias,
        {
            "group.id": naming.smoke_group(token),
            "enable.auto.commit": "false",
            "auto.offset.reset": "earliest",
        },
    )
    try:
        with translated("reading the smoke record back", alias):
            consumer.assign([TopicPartition(SMOKE_TOPIC, partition, offset)])
            deadline = clock.monotonic() + timeout_s
            while clock.monotonic() < deadline:
                msg = consumer.poll(0.5)
                if msg is None or msg.error() is not None:
                    continue
                if msg.key() == token.encode():
                    return SmokeResult(alias, (clock.monotonic() - started) * 1000)
    finally:
        consumer.close()
    raise KafkaUnavailableError(f"{alias}: smoke record not read back within {timeout_s:.0f}s")


def consul_round_trip(http_addr: str) -> None:
    client = ConsulClient(http_addr)
    token = uuid.uuid4().hex
    client.kv_put(naming.SMOKE_KEY, token)
    if client.kv_get(naming.SMOKE_KEY) != token:
        raise LocalEnvError(f"Consul at {http_addr} did not return the value just written")


def run_smoke(info: EnvironmentInfo) -> list[SmokeResult]:
    if not info.clusters or info.consul_http_addr is None:
        raise LocalEnvError("the local environment is not running; start it with 'drsvc dev up'")
    consul_round_trip(info.consul_http_addr)
    return [kafka_round_trip(alias, bs) for alias, bs in sorted(info.clusters.items())]
