"""The client's view of the active cluster, one watch and one notification at a time, on the
in-memory coordinator and a fake clock (the threads only repeat these steps)."""

from __future__ import annotations

import re

import pytest
from following_fakes import KEY, topology, write
from memory_coordination import FakeClock, MemoryCoordinator

from drsvc.client.active_cluster import ActiveCluster, ActiveState
from drsvc.client.application import ClientApplication
from drsvc.errors import ConfigError, CoordinatorUnavailableError
from drsvc.kafka.clients import CLIENT_DEFAULTS

pytest_plugins = ["failover_fixtures"]

#: the lease of the topology and of the documents written
LEASE_S = 4


@pytest.fixture
def active(store: MemoryCoordinator, clock: FakeClock) -> ActiveCluster:
    return ActiveCluster("orders", topology(LEASE_S), coordinator=store, clock=clock.monotonic)


def test_nothing_is_usable_before_consul_answered(active: ActiveCluster) -> None:
    assert active.state() == ActiveState(None, None, "not-heard-yet")


def test_an_absent_key_means_the_preferred_cluster(active: ActiveCluster) -> None:
    active.watch_once()
    assert active.cluster == "east"
    assert active.state().epoch == 0


def test_the_lease_lapses_without_answers_and_an_answer_renews_it(
    active: ActiveCluster, store: MemoryCoordinator, clock: FakeClock
) -> None:
    write(store, "west", 3, LEASE_S * 1000)
    active.watch_once()
    assert active.state().cluster == "west"
    clock.advance(3.9)
    assert active.cluster == "west"
    store.unavailable = True
    with pytest.raises(CoordinatorUnavailableError):
        active.watch_once()
    clock.advance(0.1)
    state = active.state()
    assert (state.cluster, state.reason, state.epoch) == (None, "lease-lapsed", 3)
    store.unavailable = False
    active.watch_once()
    assert active.cluster == "west"


def test_the_lease_runs_from_when_the_request_was_sent(
    active: ActiveCluster, store: MemoryCoordinator, clock: FakeClock
) -> None:
    write(store, "west", 3, LEASE_S * 1000)
    active.watch_once()
    # A blocking watch that answers after its wait (the in-memory one advances the clock).
    active.watch_once()
    heard = clock.monotonic() - active._wait_s  # the second request left one wait ago
    assert active.state().lease_deadline_s == pytest.approx(heard + 4.0)


def test_none_means_stop_and_listeners_hear_each_change_once(
    active: ActiveCluster, store: MemoryCoordinator
) -> None:
    heard: list[tuple[str | None, int, str]] = []
    active.subscribe(lambda s: heard.append((s.cluster, s.epoch, s.reason)))
    write(store, "east", 1, LEASE_S * 1000)
    active.watch_once()
    active.notify_changes()
    active.notify_changes()
    write(store, None, 2, LEASE_S * 1000)
    active.watch_once()
    active.notify_changes()
    write(store, "west", 3, LEASE_S * 1000)
    active.watch_once()
    active.notify_changes()
    assert heard == [("east", 1, "active"), (None, 2, "switching"), ("west", 3, "active")]
    assert [s.cluster for s in active._history] == ["east", None, "west"]


def test_an_unreadable_key_is_never_guessed_at(
    active: ActiveCluster, store: MemoryCoordinator
) -> None:
    write(store, "east", 1, LEASE_S * 1000)
    active.watch_once()
    store.put(KEY, '{"cluster": 5}')
    active.watch_once()
    assert active.state().cluster is None


def test_a_failing_listener_does_not_keep_the_others_from_hearing(
    active: ActiveCluster, store: MemoryCoordinator
) -> None:
    heard: list[str | None] = []

    def broken(_: ActiveState) -> None:
        raise RuntimeError("boom")

    active.subscribe(broken)
    unsubscribe = active.subscribe(lambda s: heard.append(s.cluster))
    active.watch_once()
    active.notify_changes()
    unsubscribe()
    write(store, None, 1, LEASE_S * 1000)
    active.watch_once()
    active.notify_changes()
    assert heard == ["east"]


def test_client_settings_come_from_the_topology_and_may_not_name_servers() -> None:
    app = ClientApplication.of("orders", topology(LEASE_S))
    # The port's factory merges them: its defaults, librdkafka's own log level for an
    # application, the application's settings, the topology's.
    assert app.client_config("west", {"group.id": "g"}) == {
        **CLIENT_DEFAULTS,
        "log_level": 6,
        "bootstrap.servers": "127.0.0.1:9093",
        "security.protocol": "PLAINTEXT",
        "group.id": "g",
    }
    assert app.client_config("west", {"group.id": "g", "log_level": 3})["log_level"] == 3
    with pytest.raises(ConfigError, match=r"bootstrap\.servers"):
        app.client_config("west", {"bootstrap.servers": "elsewhere:9092"})
    assert [t.pattern() for t in app.logical_topics(["orders"], "west")] == [
        "^(orders|(east|west)[.]orders)$"
    ]


def test_a_failover_record_that_is_missing_is_an_error_not_an_empty_cutoff(
    store: MemoryCoordinator,
) -> None:
    app = ClientApplication.of("orders", topology(LEASE_S))
    assert app.cutoffs(store, None) == {}
    with pytest.raises(ConfigError, match="f-9"):
        app.cutoffs(store, "f-9")


def test_an_unknown_application_is_named() -> None:
    with pytest.raises(ConfigError, match="nope"):
        ClientApplication.of("nope", topology(LEASE_S))


def test_an_application_may_repeat_the_topologys_security_settings_but_not_change_them() -> None:
    app = ClientApplication.of("orders", topology(LEASE_S))
    # The same value as the topology gives the preferred cluster: harmless, dropped.
    same = app.client_settings({"group.id": "g", "security.protocol": "PLAINTEXT"})
    assert same == {"log_level": 6, "group.id": "g"}
    for key, value in (
        ("security.protocol", "SASL_SSL"),
        ("sasl.password", "not-in-any-message"),
        ("enable.ssl.certificate.verification", "false"),
    ):
        with pytest.raises(ConfigError, match=re.escape(key)) as refused:
            app.client_settings({"group.id": "g", key: value})
        assert "not-in-any-message" not in str(refused.value)
        with pytest.raises(ConfigError, match=re.escape(key)):
            app.client_config("east", {"group.id": "g", key: value})
