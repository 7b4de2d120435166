"""Topic discovery on a thread of its own: the copy loop starts it and takes its result later.

The refresh functions here block on events the test sets, so every interleaving is forced, not
hoped for; every wait has a timeout so a mistake fails instead of hanging.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest

from drsvc.errors import KafkaUnavailableError
from drsvc.runtime.replication.discovery import TopicDiscovery
from drsvc.runtime.replication.topics import MirroredTopic

WAIT_S = 10.0


class Gate:
    """A refresh that answers ``{}`` tagged by call number once the test lets it."""

    def __init__(self) -> None:
        self.calls = 0
        self.entered = threading.Event()
        self.release = threading.Event()
        self.answers: list[dict[str, MirroredTopic]] = []

    def __call__(self) -> dict[str, MirroredTopic]:
        self.calls += 1
        self.entered.set()
        assert self.release.wait(WAIT_S), "the test never released the refresh"
        answer: dict[str, MirroredTopic] = {}
        self.answers.append(answer)
        return answer


def wait_until(check: Callable[[], bool]) -> None:
    done = threading.Event()
    for _ in range(int(WAIT_S / 0.01)):
        if check():
            return
        done.wait(0.01)
    raise AssertionError("condition never held")


def test_start_returns_while_the_refresh_still_runs_and_take_hands_over_its_result_once() -> None:
    gate = Gate()
    discovery = TopicDiscovery(gate, background=True, name="east->west")

    discovery.start()
    assert gate.entered.wait(WAIT_S)
    assert discovery.in_flight
    assert discovery.take() is None

    gate.release.set()
    wait_until(lambda: not discovery.in_flight)
    found = discovery.take()
    assert found is not None
    assert found.mirrored is gate.answers[0]
    assert discovery.take() is None


def test_a_start_while_one_runs_starts_nothing_more() -> None:
    gate = Gate()
    discovery = TopicDiscovery(gate, background=True, name="east->west")
    discovery.start()
    assert gate.entered.wait(WAIT_S)
    discovery.start()
    discovery.start()
    gate.release.set()
    wait_until(lambda: not discovery.in_flight)
    assert gate.calls == 1


def test_a_discovery_run_now_waits_for_the_one_under_way_and_the_older_result_is_dropped() -> None:
    gate = Gate()
    discovery = TopicDiscovery(gate, background=True, name="east->west")
    discovery.start()
    assert gate.entered.wait(WAIT_S)

    found_now: list[object] = []
    caller = threading.Thread(target=lambda: found_now.append(discovery.discover_now()))
    caller.start()
    gate.release.set()
    caller.join(WAIT_S)

    assert gate.calls == 2
    now = found_now[0]
    assert getattr(now, "mirrored", None) is gate.answers[1]
    # The background discovery finished first, with older news: it is not handed over later.
    wait_until(lambda: not discovery.in_flight)
    assert discovery.take() is None


def test_an_unreachable_cluster_is_reported_and_anything_else_is_handed_to_the_loop() -> None:
    def unreachable() -> dict[str, MirroredTopic]:
        raise KafkaUnavailableError("listing topics: timed out")

    def broken() -> dict[str, MirroredTopic]:
        raise ValueError("a bug")

    found = TopicDiscovery(unreachable, background=False, name="f").discover_now()
    assert found.mirrored is None
    assert found.unavailable == "listing topics: timed out"
    assert found.crash is None

    found = TopicDiscovery(broken, background=False, name="f").discover_now()
    assert isinstance(found.crash, ValueError)


def test_without_a_thread_start_discovers_in_the_caller() -> None:
    calls: list[str] = []

    def refresh() -> dict[str, MirroredTopic]:
        calls.append(threading.current_thread().name)
        return {}

    discovery = TopicDiscovery(refresh, background=False, name="f")
    discovery.start()
    assert calls == [threading.current_thread().name]
    found = discovery.take()
    assert found is not None
    assert found.mirrored == {}
    assert not discovery.in_flight


@pytest.mark.parametrize("background", [True, False])
def test_generations_only_grow(background: bool) -> None:
    discovery = TopicDiscovery(dict, background=background, name="f")
    generations = []
    for _ in range(3):
        discovery.start()
        wait_until(lambda: not discovery.in_flight)
        found = discovery.take()
        assert found is not None
        generations.append(found.generation)
    generations.append(discovery.discover_now().generation)
    assert generations == [1, 2, 3, 4]
