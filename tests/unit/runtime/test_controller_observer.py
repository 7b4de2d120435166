"""The controller's observer: a slow vantage point never holds a cycle up, and its answer is
used, with its own time, once it comes."""

from __future__ import annotations

import threading
import time

from drsvc.runtime.controller.observe import DirectProbe, Observer
from failover.dr_decision import Observation


def test_a_slow_source_does_not_hold_the_cycle_and_its_answer_comes_later() -> None:
    release = threading.Event()

    def fast(cluster: str, now_s: float) -> Observation:
        return Observation(cluster, "consul", False, now_s)

    def slow(cluster: str, now_s: float) -> Observation:
        release.wait(5)
        return Observation(cluster, "probe", False, now_s + 2)

    observer = Observer([fast, slow], wait_s=0.05)
    try:
        started = time.monotonic()
        first = observer.observe(["east"], 100.0)
        assert time.monotonic() - started < 1
        assert [(o.vantage, o.at_s) for o in first] == [("consul", 100.0)]
        # The slow ask is still running: it is not asked again; the fast one is.
        release.set()
        time.sleep(0.1)
        second = observer.observe(["east"], 101.0)
        assert sorted((o.vantage, o.at_s) for o in second) == [
            ("consul", 101.0),
            ("probe", 102.0),
        ]
    finally:
        observer.close()


def test_a_source_that_cannot_tell_any_more_drops_its_old_answer() -> None:
    answers: list[bool | None] = [True, None]

    def source(cluster: str, now_s: float) -> Observation | None:
        reachable = answers.pop(0)
        return None if reachable is None else Observation(cluster, "consul", reachable, now_s)

    observer = Observer([source], wait_s=1)
    try:
        assert len(observer.observe(["east"], 1.0)) == 1
        assert observer.observe(["east"], 2.0) == []
    finally:
        observer.close()


def test_a_source_that_raises_is_logged_and_says_nothing() -> None:
    def broken(cluster: str, now_s: float) -> Observation:
        raise RuntimeError("bug")

    observer = Observer([broken], wait_s=1)
    try:
        assert observer.observe(["east"], 1.0) == []
    finally:
        observer.close()


def test_the_probe_stamps_its_answer_with_the_time_it_came() -> None:
    def reachable(cluster: str) -> bool:
        time.sleep(0.2)
        return True

    seen = DirectProbe("c1", reachable)("east", 50.0)
    assert seen is not None and seen.reachable
    assert 50.15 <= seen.at_s < 51.0
