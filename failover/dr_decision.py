"""The automated DR trigger's decision: which applications to fail over, now, and why.

:func:`decide` is pure: the controller gathers observations (each cluster as seen from each
vantage point: the controller's own probe, Consul's health checks from the sites' agents, the
heartbeat observers), calls it every cycle with the state it returned last time, and carries out
what it says. Rules, each to keep an automated failover from doing harm:

* **Only a cluster gone from everywhere.** A cluster counts as down only when fresh observations
  from at least ``min_vantages`` *independent* vantage points exist and every one of them says
  unreachable. One vantage that still reaches it (a partition between the controller and one
  site, a slow site) keeps it up; too few fresh observations (the controller cut off itself)
  decide nothing. Observations made from one place in the network count once: the controller's
  own probe of a cluster and the cluster's own heartbeats read by the controller both only say
  whether the controller reaches it (:attr:`Observation.viewpoint`).
* **For long enough.** No vantage point may have reached it for ``unreachable_after_s``: a
  broker's rolling restart or a GC pause shorter than that never triggers anything (hysteresis:
  any observation of it up restarts the count). The count runs from the last cycle in which some
  vantage point reached it, not from the moment every vantage point had noticed: the time the
  checks take to notice (timeouts, check intervals) is part of the threshold, not added to it.
* **Only opted-in applications**, whose active cluster is the one down; never a failback (the
  controller never moves an application whose active cluster is up), never to a cluster that is
  not up itself (seen up from every vantage for ``healthy_after_s``), and not again within
  ``cooldown_s`` of its last automated failover.
* **A failover already running is left to its executor; an orphaned one is resumed**, never
  started twice: while the executor that runs it still holds the application's lock (its session
  is alive: the API, the CLI or another controller thread), the controller holds; once the lock
  has no live session (its holder died), it resumes the same record.
* **Re-checked just before the move** (:func:`recheck`): a failover decided on this cycle's
  observations is carried out only if a fresh look at the old and the new cluster, taken
  immediately before the move, still finds the old one down and the new one up, and the
  application still where it was. Moves of different applications run concurrently, so a
  cluster that came back while earlier moves ran is not failed away from on old evidence.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum

__all__ = [
    "Action",
    "AppView",
    "ClusterHealth",
    "ControllerSettings",
    "ControllerState",
    "Decision",
    "Observation",
    "cluster_health",
    "decide",
    "recheck",
    "stood_down",
]


@dataclass(frozen=True)
class ControllerSettings:
    """The controller's thresholds (a topology's ``controller`` section)."""

    #: how long a cluster must be unreachable from every vantage point before a failover
    unreachable_after_s: float = 60.0
    #: how long a target must have been reachable from every vantage point
    healthy_after_s: float = 10.0
    #: no second automated failover of one application within this long
    cooldown_s: float = 600.0
    #: observations older than this are ignored
    max_observation_age_s: float = 30.0
    #: how many fresh vantage points must agree before anything is decided about a cluster
    min_vantages: int = 2


@dataclass(frozen=True)
class Observation:
    """Whether ``vantage`` reached ``cluster`` at ``at_s`` (the controller's monotonic clock)."""

    cluster: str
    vantage: str
    reachable: bool
    at_s: float
    detail: str = ""
    #: where in the network the observation was made from; observations that share one count as
    #: one vantage point ("": the vantage is a viewpoint of its own)
    viewpoint: str = ""

    @property
    def seen_from(self) -> str:
        return self.viewpoint or self.vantage


@dataclass(frozen=True)
class AppView:
    """An application as the controller sees it this cycle."""

    name: str
    #: its active cluster (None while a switch is under way)
    active: str | None
    auto_failover: bool
    #: clusters it may fail over to, in order of preference
    candidates: tuple[str, ...]
    #: a failover of it that has not finished (its id)
    running: str | None = None
    #: whether the application's lock is held through a live session (the executor running
    #: ``running`` is alive: it must not be resumed from here)
    holder_alive: bool = False
    #: how long ago its latest failover (by anyone) started; None: never. Keeps the cooldown
    #: across a change of leader, whose own memory starts empty.
    last_failover_age_s: float | None = None


@dataclass(frozen=True)
class ControllerState:
    """What :func:`decide` remembers between cycles."""

    #: cluster -> since when no vantage point has reached it (while it is seen down from every
    #: vantage point)
    down_since: Mapping[str, float] = field(default_factory=dict)
    #: cluster -> when a vantage point last reached it (the time of that observation)
    last_reached: Mapping[str, float] = field(default_factory=dict)
    #: cluster -> since when it has been seen up from every vantage point, without a break
    up_since: Mapping[str, float] = field(default_factory=dict)
    #: application -> when the controller last started a failover of it
    last_failover_s: Mapping[str, float] = field(default_factory=dict)


class ClusterHealth(StrEnum):
    UP = "up"
    DOWN = "down"
    #: seen both ways, or from too few vantage points: nothing is decided on it
    UNCERTAIN = "uncertain"


class Action(StrEnum):
    FAILOVER = "failover"
    RESUME = "resume"
    HOLD = "hold"


@dataclass(frozen=True)
class Decision:
    """What to do about one application, and why (logged once, counted in metrics)."""

    app: str
    action: Action
    reason: str
    to: str | None = None
    failover_id: str | None = None
    #: the cluster a failover moves the application away from
    from_cluster: str | None = None


def cluster_health(
    cluster: str, observations: Iterable[Observation], settings: ControllerSettings, now_s: float
) -> tuple[ClusterHealth, str]:
    """How ``cluster`` looks from the fresh observations (the newest one per vantage point)."""
    newest: dict[str, Observation] = {}
    for o in observations:
        if o.cluster != cluster or now_s - o.at_s > settings.max_observation_age_s:
            continue
        if o.vantage not in newest or o.at_s > newest[o.vantage].at_s:
            newest[o.vantage] = o
    viewpoints: dict[str, list[str]] = {}
    for vantage, o in sorted(newest.items()):
        viewpoints.setdefault(o.seen_from, []).append(vantage)
    if len(viewpoints) < settings.min_vantages:
        seen = ", ".join(_describe(v, vantages) for v, vantages in viewpoints.items()) or "none"
        return ClusterHealth.UNCERTAIN, (
            f"{cluster}: {len(viewpoints)} fresh vantage point(s) ({seen}), "
            f"{settings.min_vantages} needed"
        )
    reaching = sorted(v for v, o in newest.items() if o.reachable)
    if len(reaching) == len(newest):
        return ClusterHealth.UP, f"{cluster}: reachable from {', '.join(reaching)}"
    if not reaching:
        return ClusterHealth.DOWN, f"{cluster}: unreachable from {', '.join(sorted(newest))}"
    return ClusterHealth.UNCERTAIN, f"{cluster}: still reachable from {', '.join(reaching)}"


def _describe(viewpoint: str, vantages: Sequence[str]) -> str:
    """One viewpoint's vantages, as a reason names them."""
    if vantages == [viewpoint]:
        return viewpoint
    return f"{viewpoint}: {' and '.join(vantages)}"


def decide(
    state: ControllerState,
    observations: Sequence[Observation],
    apps: Sequence[AppView],
    clusters: Iterable[str],
    settings: ControllerSettings,
    now_s: float,
) -> tuple[ControllerState, list[Decision]]:
    """This cycle's decision per application, and the state for the next cycle."""
    health: dict[str, tuple[ClusterHealth, str]] = {
        c: cluster_health(c, observations, settings, now_s) for c in sorted(set(clusters))
    }
    last_reached = dict(state.last_reached)
    for o in observations:
        if o.reachable and o.at_s > last_reached.get(o.cluster, float("-inf")):
            last_reached[o.cluster] = o.at_s
    # Down since the last time anyone reached it; a cluster never reached under this controller
    # (it took the lead during the outage) counts from now, which can only make it wait longer.
    down_since = {
        c: state.down_since.get(c, min(now_s, last_reached.get(c, now_s)))
        for c, (h, _) in health.items()
        if h is ClusterHealth.DOWN
    }
    up_since = {
        c: state.up_since.get(c, now_s) for c, (h, _) in health.items() if h is ClusterHealth.UP
    }
    next_state = replace(state, down_since=down_since, up_since=up_since, last_reached=last_reached)
    decisions = []
    for app in apps:
        decision = _decide_app(app, health, next_state, settings, now_s)
        if decision.action is Action.FAILOVER:
            next_state = replace(
                next_state, last_failover_s={**next_state.last_failover_s, app.name: now_s}
            )
        decisions.append(decision)
    return next_state, decisions


def _decide_app(
    app: AppView,
    health: Mapping[str, tuple[ClusterHealth, str]],
    state: ControllerState,
    settings: ControllerSettings,
    now_s: float,
) -> Decision:
    if app.running is not None:
        if app.holder_alive:
            # Its executor (the API, the CLI, a move of this controller) is alive and carries
            # it on; a resume would only wait for that executor's lock.
            return Decision(
                app.name, Action.HOLD,
                f"failover {app.running} is running (its executor holds the application's lock)",
            )  # fmt: skip
        return Decision(
            app.name, Action.RESUME,
            f"failover {app.running} has not finished and its executor is gone",
            failover_id=app.running,
        )  # fmt: skip
    if app.active is None:
        return Decision(app.name, Action.HOLD, "a switch is under way (active: none)")
    status, why = health.get(app.active, (ClusterHealth.UNCERTAIN, f"{app.active}: unknown"))
    if status is not ClusterHealth.DOWN:
        return Decision(app.name, Action.HOLD, f"its cluster is not down ({why})")
    down_for = now_s - state.down_since.get(app.active, now_s)
    if down_for < settings.unreachable_after_s:
        return Decision(
            app.name, Action.HOLD,
            f"{why} for {down_for:.1f}s of the {settings.unreachable_after_s:.0f}s required",
        )  # fmt: skip
    if not app.auto_failover:
        return Decision(app.name, Action.HOLD, f"{why}, but auto_failover is off")
    ages = [now_s - t for t in (state.last_failover_s.get(app.name),) if t is not None]
    if app.last_failover_age_s is not None:
        ages.append(app.last_failover_age_s)
    if ages and min(ages) < settings.cooldown_s:
        return Decision(
            app.name, Action.HOLD,
            f"{why}, but it was failed over {min(ages):.0f}s ago (cooldown "
            f"{settings.cooldown_s:.0f}s)",
        )  # fmt: skip
    refused = []
    for target in app.candidates:
        target_status, target_why = health.get(target, (ClusterHealth.UNCERTAIN, target))
        healthy_for = now_s - state.up_since.get(target, now_s)
        if target_status is ClusterHealth.UP and healthy_for >= settings.healthy_after_s:
            return Decision(
                app.name, Action.FAILOVER,
                f"{why} for {down_for:.1f}s (threshold {settings.unreachable_after_s:.0f}s); "
                f"{target} is healthy",
                to=target,
                from_cluster=app.active,
            )  # fmt: skip
        refused.append(
            target_why
            if target_status is not ClusterHealth.UP
            else f"{target}: up for only {healthy_for:.1f}s"
        )
    return Decision(
        app.name, Action.HOLD,
        f"{why}, but no healthy cluster to fail over to ({'; '.join(refused) or 'none'})",
    )  # fmt: skip


def recheck(
    decision: Decision,
    app: AppView,
    fresh: Iterable[Observation],
    settings: ControllerSettings,
    now_s: float,
) -> Decision:
    """``decision`` (a failover) as it stands on a fresh look taken just before the move: the
    same decision when the application is still active on the cluster it leaves, no failover of
    it is running, the fresh observations find that cluster down and the target up; otherwise a
    hold that says why. The duration rules (``unreachable_after_s``, ``healthy_after_s``) were
    met when it was decided: any fresh vantage point that reaches the old cluster again, or too
    few of them, is enough to stand down."""
    if decision.action is not Action.FAILOVER or decision.to is None:
        return decision
    if app.running is not None:
        return Decision(app.name, Action.HOLD, f"failover {app.running} started meanwhile")
    if app.active != decision.from_cluster:
        return Decision(
            app.name, Action.HOLD,
            f"it is active on {app.active or 'none'} now, not {decision.from_cluster}",
        )  # fmt: skip
    observations = list(fresh)
    old, old_why = cluster_health(app.active or "", observations, settings, now_s)
    if old is not ClusterHealth.DOWN:
        return Decision(app.name, Action.HOLD, f"a fresh look before the move: {old_why}")
    new, new_why = cluster_health(decision.to, observations, settings, now_s)
    if new is not ClusterHealth.UP:
        return Decision(app.name, Action.HOLD, f"a fresh look before the move: {new_why}")
    return replace(
        decision, reason=f"{decision.reason}; a fresh look agrees ({old_why}; {new_why})"
    )


def stood_down(state: ControllerState, app: str) -> ControllerState:
    """``state`` without the failover of ``app`` it remembers: the move was decided but not
    made (the fresh look before it stood it down), so it starts no cooldown."""
    if app not in state.last_failover_s:
        return state
    remembered = {name: at for name, at in state.last_failover_s.items() if name != app}
    return replace(state, last_failover_s=remembered)
