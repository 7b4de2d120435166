"""The automated DR trigger's decision, table-driven over cycles of observations."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from failover.dr_decision import (
    Action,
    AppView,
    ClusterHealth,
    ControllerSettings,
    ControllerState,
    Decision,
    Observation,
    cluster_health,
    decide,
    recheck,
    stood_down,
)

SETTINGS = ControllerSettings(
    unreachable_after_s=10, healthy_after_s=2, cooldown_s=100, max_observation_age_s=5
)
CLUSTERS = ("east", "west")
ORDERS = AppView("orders", "east", auto_failover=True, candidates=("west",))
LEDGER = AppView("ledger", "east", auto_failover=False, candidates=("west",))


def seen(now: float, east: Sequence[bool | None], west: Sequence[bool | None] = (True, True)):
    """Observations from two vantage points (None: that vantage saw nothing fresh)."""
    out = []
    for cluster, views in (("east", east), ("west", west)):
        for vantage, reachable in zip(("controller", "consul"), views, strict=True):
            if reachable is not None:
                out.append(Observation(cluster, vantage, reachable, now))
    return out


def run(
    cycles: Sequence[tuple[float, list[Observation]]],
    apps: Sequence[AppView] = (ORDERS,),
    state: ControllerState | None = None,
) -> list[list[Decision]]:
    state = state or ControllerState()
    history = []
    for now, observations in cycles:
        state, decisions = decide(state, observations, apps, CLUSTERS, SETTINGS, now)
        history.append(decisions)
    return history


def actions(history: list[list[Decision]], app: str = "orders") -> list[str]:
    return [next(d.action for d in cycle if d.app == app).value for cycle in history]


def test_a_cluster_down_from_every_vantage_for_the_threshold_is_failed_over() -> None:
    history = run([(t, seen(t, (False, False))) for t in range(0, 11)])
    # Counted from the first cycle it was seen down: 10 s later, at the 10 s threshold.
    assert actions(history) == ["hold"] * 10 + ["failover"]
    decision = history[-1][0]
    assert (decision.to, decision.action) == ("west", Action.FAILOVER)
    assert "unreachable from consul, controller" in decision.reason


def test_the_time_the_vantage_points_take_to_notice_is_part_of_the_threshold() -> None:
    # East is last reached at t=3; the controller's probe notices at once, Consul's checks only
    # at t=6. The count runs from t=3, the last time anyone reached it: 10 s later, at t=13.
    cycles = [(t, seen(t, (True, True))) for t in range(0, 4)]
    cycles += [(t, seen(t, (False, None))) for t in range(4, 6)]
    cycles += [(t, seen(t, (False, False))) for t in range(6, 14)]
    history = run(cycles)
    assert actions(history) == ["hold"] * 13 + ["failover"]
    assert "for 10.0s" in history[-1][0].reason


def test_a_controller_that_never_reached_the_cluster_counts_from_its_first_look() -> None:
    # A replica that took the lead during the outage has no memory of east being up: it waits
    # the whole threshold from its own first observation.
    history = run([(t, seen(t, (False, False))) for t in range(100, 111)])
    assert actions(history) == ["hold"] * 10 + ["failover"]


def test_flapping_restarts_the_count_so_a_rolling_restart_does_nothing() -> None:
    cycles = [(t, seen(t, (t % 8 == 7, False))) for t in range(0, 40)]
    assert set(actions(run(cycles))) == {"hold"}


def test_one_vantage_still_reaching_it_keeps_it_up() -> None:
    # A partition between the controller and east (or a slow site): Consul's agents reach it.
    history = run([(t, seen(t, (False, True))) for t in range(0, 60)])
    assert set(actions(history)) == {"hold"}
    assert "still reachable from consul" in history[-1][0].reason


def test_too_few_fresh_vantage_points_decide_nothing() -> None:
    # The controller's own site lost: only its own probe answers, the rest is stale or missing.
    history = run([(t, seen(t, (False, None), (True, None))) for t in range(0, 60)])
    assert set(actions(history)) == {"hold"}
    assert "1 fresh vantage point(s) (controller), 2 needed" in history[-1][0].reason


def test_stale_observations_are_ignored() -> None:
    observations = [Observation("east", v, False, 0.0) for v in ("controller", "consul")]
    assert cluster_health("east", observations, SETTINGS, 10.0)[0] is ClusterHealth.UNCERTAIN
    assert cluster_health("east", observations, SETTINGS, 4.0)[0] is ClusterHealth.DOWN


def test_partial_outage_one_broker_of_three_is_not_down() -> None:
    # The probes reach the cluster through the brokers that are left: reachable, nothing happens.
    history = run([(t, seen(t, (True, True))) for t in range(0, 30)])
    assert set(actions(history)) == {"hold"}


def test_an_application_without_auto_failover_stays_put() -> None:
    history = run([(t, seen(t, (False, False))) for t in range(0, 30)], apps=(ORDERS, LEDGER))
    assert "failover" in actions(history, "orders")
    assert set(actions(history, "ledger")) == {"hold"}
    assert "auto_failover is off" in history[-1][1].reason


def test_never_to_a_cluster_that_is_not_healthy_long_enough() -> None:
    both_down = [(t, seen(t, (False, False), (False, False))) for t in range(0, 20)]
    history = run(both_down)
    assert set(actions(history)) == {"hold"}
    assert "no healthy cluster to fail over to" in history[-1][0].reason
    # West comes back: only after healthy_after_s of being up does it become a target.
    back = [(t, seen(t, (False, False), (True, True))) for t in range(20, 24)]
    assert actions(run(both_down + back)) == ["hold"] * 22 + ["failover", "hold"]


def test_never_a_failback_and_never_while_a_switch_is_under_way() -> None:
    on_west = AppView("orders", "west", auto_failover=True, candidates=("east",))
    switching = AppView("orders", None, auto_failover=True, candidates=("west",))
    cycles = [(t, seen(t, (True, True), (True, True))) for t in range(0, 30)]
    assert set(actions(run(cycles, apps=(on_west,)))) == {"hold"}
    down = [(t, seen(t, (False, False))) for t in range(0, 30)]
    history = run(down, apps=(switching,))
    assert set(actions(history)) == {"hold"}
    assert "switch is under way" in history[-1][0].reason


def test_an_orphaned_failover_is_resumed_not_started_again() -> None:
    running = AppView("orders", None, auto_failover=True, candidates=("west",), running="f-1")
    history = run([(0.0, seen(0.0, (False, False)))], apps=(running,))
    assert history[0][0] == Decision(
        "orders",
        Action.RESUME,
        "failover f-1 has not finished and its executor is gone",
        failover_id="f-1",
    )


def test_a_failover_whose_executor_holds_the_lock_is_left_to_it() -> None:
    # Started by the API or the CLI, or by another move: its executor is alive.
    alive = AppView("orders", None, auto_failover=True, candidates=("west",), running="f-1",
                    holder_alive=True)  # fmt: skip
    history = run([(t, seen(t, (False, False))) for t in range(0, 30)], apps=(alive,))
    assert set(actions(history)) == {"hold"}
    assert "f-1 is running (its executor holds the application's lock)" in history[-1][0].reason


@pytest.mark.parametrize("age", [0.0, 99.0])
def test_the_cooldown_holds_a_second_failover_also_across_leaders(age: float) -> None:
    recent = AppView("orders", "east", auto_failover=True, candidates=("west",),
                     last_failover_age_s=age)  # fmt: skip
    history = run([(t, seen(t, (False, False))) for t in range(0, 30)], apps=(recent,))
    assert set(actions(history)) == {"hold"}
    assert "cooldown" in history[-1][0].reason


def test_one_failover_per_cooldown_from_the_same_leader() -> None:
    history = run([(t, seen(t, (False, False))) for t in range(0, 40)])
    assert actions(history).count("failover") == 1


# -- vantage points that are one --------------------------------------------------------------


def test_observations_from_one_viewpoint_count_once() -> None:
    # The controller's probe of east and east's own heartbeats read by the controller: both only
    # say whether the controller reaches east.
    own = [
        Observation("east", "probe@c1", False, 1.0, viewpoint="controller"),
        Observation("east", "heartbeats@east", False, 1.0, viewpoint="controller"),
    ]
    health, why = cluster_health("east", own, SETTINGS, 1.0)
    assert health is ClusterHealth.UNCERTAIN
    assert why == (
        "east: 1 fresh vantage point(s) (controller: heartbeats@east and probe@c1), 2 needed"
    )
    elsewhere = [*own, Observation("east", "heartbeats@west", False, 1.0)]
    assert cluster_health("east", elsewhere, SETTINGS, 1.0)[0] is ClusterHealth.DOWN
    # Within a viewpoint, one vantage still reaching it is enough to keep it up.
    split = [*elsewhere[1:], Observation("east", "probe@c1", True, 1.0, viewpoint="controller")]
    assert cluster_health("east", split, SETTINGS, 1.0)[0] is ClusterHealth.UNCERTAIN


# -- the fresh look before a move ---------------------------------------------------------------

MOVE = Decision("orders", Action.FAILOVER, "east down", to="west", from_cluster="east")


def fresh(east: Sequence[bool | None], west: Sequence[bool | None] = (True, True)):
    return seen(50.0, east, west)


@pytest.mark.parametrize(
    ("app", "observations", "why"),
    [
        (ORDERS, fresh((True, False)), "a fresh look before the move: east: still reachable"),
        (ORDERS, fresh((False, None)), "east: 1 fresh vantage point(s) (controller), 2 needed"),
        (ORDERS, fresh((False, False), (False, False)), "west: unreachable from"),
        (ORDERS, fresh((False, False), (True, None)), "west: 1 fresh vantage point(s)"),
        (AppView("orders", "west", True, ("east",)), fresh((False, False)),
         "it is active on west now, not east"),
        (AppView("orders", None, True, ()), fresh((False, False)), "on none now"),
        (AppView("orders", "east", True, ("west",), running="f-2"), fresh((False, False)),
         "failover f-2 started meanwhile"),
    ],
)  # fmt: skip
def test_a_move_stands_down_when_the_fresh_look_disagrees(
    app: AppView, observations: list[Observation], why: str
) -> None:
    checked = recheck(MOVE, app, observations, SETTINGS, 50.0)
    assert checked.action is Action.HOLD
    assert why in checked.reason


def test_a_move_goes_ahead_when_the_fresh_look_agrees() -> None:
    checked = recheck(MOVE, ORDERS, fresh((False, False)), SETTINGS, 50.0)
    assert (checked.action, checked.to) == (Action.FAILOVER, "west")
    assert "a fresh look agrees (east: unreachable from" in checked.reason


def test_old_observations_are_no_fresh_look() -> None:
    stale = seen(40.0, (False, False))  # older than max_observation_age_s at 50
    assert recheck(MOVE, ORDERS, stale, SETTINGS, 50.0).action is Action.HOLD


def test_a_move_stood_down_leaves_no_cooldown() -> None:
    down = [(t, seen(t, (False, False))) for t in range(0, 11)]
    state = ControllerState()
    for now, observations in down:
        state, decisions = decide(state, observations, (ORDERS,), CLUSTERS, SETTINGS, now)
    assert decisions[0].action is Action.FAILOVER and decisions[0].from_cluster == "east"
    state = stood_down(state, "orders")
    state, decisions = decide(state, seen(11.0, (False, False)), (ORDERS,), CLUSTERS, SETTINGS,
                              11.0)  # fmt: skip
    assert decisions[0].action is Action.FAILOVER
