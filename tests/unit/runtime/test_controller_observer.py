"""The controller's observer: a slow vantage point never holds a cycle up, and its answer is
used, with its own time, once it comes."""

from __future__ import annotations

import threading
import time

from drsvc.runtime.controller.observe import DirectProbe, HeartbeatArrivals, Observer
from failover.dr_decision import ClusterHealth, ControllerSettings, Observation, cluster_health
from failover.heartbeats import Freshness, FreshnessState


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


def stream(seconds: float, advances: int = 3) -> Freshness:
    state = FreshnessState.STALE if seconds > 5 else FreshnessState.FRESH
    return Freshness(seconds, state, 10 if advances else None, advances)


def arrivals(pairs: dict[tuple[str, str], Freshness]) -> HeartbeatArrivals:
    return HeartbeatArrivals("west", lambda: pairs, fresh_within_s=3.0)


def test_fresh_heartbeats_reached_the_cluster_when_the_last_one_arrived() -> None:
    seen = arrivals({("west", "west"): stream(0.5), ("west", "east"): stream(1.5)})("east", 100.0)
    assert seen == Observation("east", "heartbeats@west", True, 98.5, "last heartbeat 1.5s ago")


def test_silent_heartbeats_say_the_cluster_no_longer_reaches_this_one() -> None:
    seen = arrivals({("west", "west"): stream(0.5), ("west", "east"): stream(7.0)})("east", 100.0)
    assert seen is not None and (seen.reachable, seen.at_s) == (False, 100.0)


def test_no_evidence_says_nothing() -> None:
    fresh_west = stream(0.5)
    # never seen here: heartbeats may not run at all
    assert arrivals({("west", "west"): fresh_west})("east", 100.0) is None
    never = stream(9.0, advances=0)
    assert arrivals({("west", "west"): fresh_west, ("west", "east"): never})("east", 100.0) is None
    # west itself is not read (or writes nothing): east's silence there proves nothing
    west_silent = {("west", "west"): stream(9.0), ("west", "east"): stream(9.0)}
    assert arrivals(west_silent)("east", 100.0) is None
    # but west's own silence is evidence about west
    own = arrivals(west_silent)("west", 100.0)
    assert own is not None and not own.reachable


# -- one vantage point, however many sources (issue 32) ---------------------------------------


def test_the_controllers_probe_and_the_clusters_own_heartbeats_are_one_vantage_point() -> None:
    # A partition between the controller and east: its probe fails and east's own heartbeats,
    # which it reads from east, go silent, while east serves its clients. Two sources, one
    # vantage point: nothing is decided on them.
    probe = DirectProbe("c1", lambda cluster: False)("east", 100.0)
    silent = {("east", "east"): stream(9.0)}
    own = HeartbeatArrivals("east", lambda: silent, fresh_within_s=3.0)("east", 100.0)
    assert probe is not None and own is not None
    health, why = cluster_health("east", [probe, own], ControllerSettings(min_vantages=2), 100.5)
    assert health is ClusterHealth.UNCERTAIN, why
    # Copied to west and silent there too: another place in the network agrees.
    pairs = {("west", "west"): stream(0.5), ("west", "east"): stream(9.0)}
    there = arrivals(pairs)("east", 100.0)
    assert there is not None
    health, why = cluster_health(
        "east", [probe, own, there], ControllerSettings(min_vantages=2), 100.5
    )
    assert health is ClusterHealth.DOWN, why


def test_each_source_says_where_it_sees_a_cluster_from() -> None:
    probe = DirectProbe("c1", lambda cluster: True)
    assert probe.viewpoint("east") == "controller"
    on_west = HeartbeatArrivals("west", dict, fresh_within_s=3.0, carries={"east"})
    assert on_west.viewpoint("west") == "controller"  # read by the controller itself
    assert on_west.viewpoint("east") == "heartbeats@west"
    assert on_west.viewpoint("south") is None  # no flow copies south's heartbeats to west


# -- the fresh look before a move ---------------------------------------------------------------


def test_a_fresh_look_counts_only_asks_made_after_the_mark() -> None:
    answers = iter([False, True, True])
    asked: list[float] = []

    def source(cluster: str, now_s: float) -> Observation:
        asked.append(now_s)
        return Observation(cluster, "consul", next(answers), now_s)

    observer = Observer([source], wait_s=1)
    try:
        assert [o.reachable for o in observer.observe(["east"], 1.0)] == [False]
        mark = observer.mark()
        # The cycle's answer came before the mark: it is asked again.
        first = observer.fresh({"east"}, 2.0, mark, wait_s=1)
        assert [(o.reachable, o.at_s) for o in first] == [(True, 2.0)]
        # A second move decided at the same mark shares that ask.
        again = observer.fresh({"east"}, 3.0, mark, wait_s=1)
        assert [(o.reachable, o.at_s) for o in again] == [(True, 2.0)]
        assert asked == [1.0, 2.0]
    finally:
        observer.close()


def test_a_fresh_look_waits_at_most_its_wait_for_a_slow_source() -> None:
    release = threading.Event()

    def fast(cluster: str, now_s: float) -> Observation:
        return Observation(cluster, "consul", False, now_s)

    def dead_probe(cluster: str, now_s: float) -> Observation:
        release.wait(5)
        return Observation(cluster, "probe", False, now_s)

    observer = Observer([fast, dead_probe], wait_s=0.05)
    try:
        started = time.monotonic()
        seen = observer.fresh({"east"}, 1.0, observer.mark(), wait_s=0.2)
        assert time.monotonic() - started < 1
        assert [o.vantage for o in seen] == ["consul"]
    finally:
        release.set()
        observer.close()


def test_a_source_still_asking_keeps_only_an_earlier_unreachable() -> None:
    # A dead cluster's probe answers only after its timeout: its new ask is still waiting when
    # the fresh look ends, and its earlier "unreachable" stands. An earlier "reachable" does
    # not: a slow answer may only hold a move back.
    release = threading.Event()
    answers = {"east": False, "west": True}
    asks: list[str] = []

    def probe(cluster: str, now_s: float) -> Observation:
        asks.append(cluster)
        if len(asks) > 2:
            release.wait(5)
        return Observation(cluster, "probe", answers[cluster], now_s)

    observer = Observer([probe], wait_s=1)
    try:
        assert len(observer.observe(["east", "west"], 1.0)) == 2
        seen = observer.fresh({"east", "west"}, 2.0, observer.mark(), wait_s=0.1)
        assert [(o.cluster, o.reachable, o.at_s) for o in seen] == [("east", False, 1.0)]
    finally:
        release.set()
        observer.close()
