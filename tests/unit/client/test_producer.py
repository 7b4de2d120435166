"""FailoverProducer on the fake clock: how long it may still deliver to a cluster it leaves
(issue 32: the lease of the last answer that named that cluster bounds it, however late the
client hears of the switch), and the epoch header on every record."""

from __future__ import annotations

from typing import Any

import pytest
from following_fakes import RecordingClients, Traffic, follower, topology, write
from memory_coordination import FakeClock, MemoryCoordinator

from drsvc.client.producer import FailoverProducer
from drsvc.errors import ConfigError, NoActiveClusterError
from failover.active import lease_wait_s

pytest_plugins = ["failover_fixtures"]

LEASE_S = 15.0
MARGIN_S = 0.5


@pytest.fixture
def traffic(clock: FakeClock) -> Traffic:
    """The producers the client builds: recording ones, through the port's factory."""
    traffic = Traffic(clock)
    traffic.clients = RecordingClients(topology(LEASE_S), producer_class=traffic.producer_class())
    return traffic


def _producer(
    store: MemoryCoordinator,
    clock: FakeClock,
    traffic: Traffic,
    config: dict[str, Any] | None = None,
    lease_s: float = LEASE_S,
) -> tuple[Any, FailoverProducer]:
    active = follower(store, clock, lease_s=lease_s)
    producer = FailoverProducer(
        "orders",
        active.application.topology,
        config or {},
        active=active,
        clock=clock.monotonic,
        clients=traffic.clients,
    )
    return active, producer


def _producing_on_east(
    store: MemoryCoordinator, clock: FakeClock, traffic: Traffic
) -> tuple[Any, FailoverProducer, float]:
    """East is active (epoch 1); the client heard so (at the time returned) and produced x."""
    write(store, "east", 1)
    active, producer = _producer(store, clock, traffic)
    active.watch_once()
    heard = clock.monotonic()
    active.notify_changes()
    producer.produce("orders", b"x")
    return active, producer, heard


def test_a_client_that_hears_none_late_stops_delivering_to_the_old_cluster_in_time(
    store: MemoryCoordinator, clock: FakeClock, traffic: Traffic
) -> None:
    active, producer, old_answer_sent = _producing_on_east(store, clock, traffic)
    clock.advance(0.2)
    write(store, None, 2)  # the executor's none, acknowledged now
    activation = clock.monotonic() + lease_wait_s(LEASE_S)
    # The client's Consul agent does not answer for 7 s: its lease on east still holds, and
    # it goes on producing there, as it may (within the first half of the lease).
    clock.advance(7)
    assert active.cluster == "east"
    producer.produce("orders", b"y")
    clock.advance(3)
    active.watch_once()  # now it hears none, 10 s late
    active.notify_changes()
    producer.close()
    assert [(c, v) for c, _, v, _ in traffic.produced] == [("east", b"x"), ("east", b"y")]
    assert traffic.delivering_until("east") > 0  # it did use what the lease allowed
    assert traffic.delivering_until("east") <= old_answer_sent + LEASE_S - MARGIN_S
    assert traffic.delivering_until("east") < activation


def test_a_client_that_hears_none_at_once_flushes_until_the_old_lease_ends(
    store: MemoryCoordinator, clock: FakeClock, traffic: Traffic
) -> None:
    active, producer, old_answer_sent = _producing_on_east(store, clock, traffic)
    write(store, None, 2)
    active.watch_once()
    active.notify_changes()
    producer.close()
    assert traffic.delivering_until("east") == pytest.approx(old_answer_sent + LEASE_S - MARGIN_S)


def test_after_the_lease_lapsed_nothing_more_is_flushed(
    store: MemoryCoordinator, clock: FakeClock, traffic: Traffic
) -> None:
    active, producer, _ = _producing_on_east(store, clock, traffic)
    clock.advance(LEASE_S)
    active.notify_changes()  # the notifier wakes at the deadline
    producer.close()
    assert traffic.flushing == []


def test_close_flushes_only_while_the_lease_holds(
    store: MemoryCoordinator, clock: FakeClock, traffic: Traffic
) -> None:
    _, producer, heard = _producing_on_east(store, clock, traffic)
    assert producer.close(timeout=60) == 1  # handed back, not delivered after the lease
    assert traffic.delivering_until("east") == pytest.approx(heard + LEASE_S - MARGIN_S)


def test_every_record_carries_the_epoch_it_was_produced_under(
    store: MemoryCoordinator, clock: FakeClock, traffic: Traffic
) -> None:
    write(store, "east", 7)
    active, producer = _producer(store, clock, traffic)
    active.watch_once()
    producer.produce("orders", b"a")
    producer.produce("orders", b"b", headers=[("trace", b"1")])
    producer.produce("orders", b"c", headers={"trace": b"2", "drsvc.epoch": b"999"})
    producer.produce("orders", b"d", headers=[("drsvc.epoch", b"999"), ("trace", None)])
    write(store, None, 8)
    active.watch_once()
    write(store, "west", 9)
    active.watch_once()
    active.notify_changes()  # east is retired: its flush runs the fake clock on to its lease
    for retiring in producer._retiring:
        retiring.join()
    active.watch_once()  # a fresh answer naming west
    producer.produce("orders", b"e")
    producer.close()
    assert [(c, v, list(h or [])) for c, _, v, h in traffic.produced] == [
        ("east", b"a", [("drsvc.epoch", b"7")]),
        ("east", b"b", [("trace", b"1"), ("drsvc.epoch", b"7")]),
        ("east", b"c", [("trace", b"2"), ("drsvc.epoch", b"7")]),
        ("east", b"d", [("trace", None), ("drsvc.epoch", b"7")]),
        ("west", b"e", [("drsvc.epoch", b"9")]),
    ]


def test_a_record_is_taken_only_while_it_would_expire_within_the_lease(
    store: MemoryCoordinator, clock: FakeClock, traffic: Traffic
) -> None:
    """A frozen process's queue is sent when it wakes, before any code of it runs: every queued
    record must time out in the client before the lease it was taken under ends."""
    write(store, "east", 1)
    active, producer = _producer(store, clock, traffic)
    active.watch_once()
    heard = clock.monotonic()
    producer.produce("orders", b"x")
    assert traffic.configs[-1]["message.timeout.ms"] == LEASE_S * 1000 / 2
    clock.advance(LEASE_S / 2 - 0.1)
    producer.produce("orders", b"y")  # expires by heard + lease - 0.1 at the latest
    clock.advance(0.2)
    assert active.cluster == "east"  # the lease holds, but a record taken now could outlive it
    with pytest.raises(NoActiveClusterError, match="half its lease"):
        producer.produce("orders", b"z")
    active.watch_once()  # a fresh answer: records are taken again
    producer.produce("orders", b"z")
    assert clock.monotonic() - heard < LEASE_S
    producer.close()


def test_an_application_timeout_below_half_the_lease_stands(
    store: MemoryCoordinator, clock: FakeClock, traffic: Traffic
) -> None:
    write(store, "east", 1)
    active, producer = _producer(store, clock, traffic, {"delivery.timeout.ms": 3000})
    active.watch_once()
    producer.produce("orders", b"x")
    config = traffic.configs[-1]
    assert config["message.timeout.ms"] == 3000
    assert "delivery.timeout.ms" not in config
    producer.close()


def test_a_linger_that_a_record_could_not_leave_within_is_refused_with_the_reason(
    store: MemoryCoordinator, clock: FakeClock, traffic: Traffic
) -> None:
    write(store, "east", 1, lease_ms=2000)
    active, producer = _producer(store, clock, traffic, {"linger.ms": 1000}, lease_s=2)
    active.watch_once()
    with pytest.raises(ConfigError, match=r"linger\.ms 1000 is not below 1000 ms"):
        producer.produce("orders", b"x")
    producer.close()


def test_security_settings_other_than_the_topologys_are_refused_when_the_producer_is_made(
    store: MemoryCoordinator, clock: FakeClock, traffic: Traffic
) -> None:
    # The topology says how every cluster authenticates; refused at once, not at a switch.
    with pytest.raises(ConfigError, match=r"sasl\.username"):
        _producer(store, clock, traffic, {"sasl.username": "someone"})
    with pytest.raises(ConfigError, match=r"bootstrap\.servers: leave it out"):
        _producer(store, clock, traffic, {"bootstrap.servers": "elsewhere:9092"})
    assert traffic.configs == []
