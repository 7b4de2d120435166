"""The DR controller: observe, decide (:func:`failover.dr_decision.decide`), act, under a lock.

Several replicas run; one leads, through the Consul lock ``drsvc/<ns>/controller/leader``. Only
the leader observes and acts. Every action goes through the failover executor, the same code as
the CLI: a failover it starts is unplanned (forced: the decision already saw the cluster gone
from every vantage point), recorded step by step, under the application's lock. The request id is
derived from the application's active document (``auto-<app>-e<epoch>``), so two leaders acting
on the same outage (one that lost its lock while the next took over) start one failover. A leader
that finds a failover unfinished resumes it: the executor waits for the dead holder's application
lock (at most its takeover time) and carries the same record on.

Takeover: a leader that dies is replaced once its session is invalidated, within
``2 x TTL + lock delay`` (Consul enforces a session TTL at up to twice its value), plus one cycle.

Metrics (:mod:`drsvc.runtime.controller.metrics`): every decision by application and action,
whether this replica leads, and every failover it started or resumed by outcome.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from drsvc.adapters.coordination import Coordinator, Lock
from drsvc.errors import DrsvcError, LockLostError
from drsvc.runtime.controller.metrics import ControllerMetrics, controller_metrics
from drsvc.runtime.controller.observe import Observer, Source
from drsvc.runtime.failover.executor import FailoverExecutor, LockTiming
from drsvc.topology.models import Application, Topology
from failover import naming
from failover.dr_decision import Action, AppView, ControllerState, Decision, decide
from failover.errors import FailoverRefused
from failover.failover_plan import FailoverRequest

__all__ = ["DrController"]

log = logging.getLogger(__name__)

_NUMBERS = re.compile(r"[0-9.]+s?")


@dataclass
class DecisionLog:
    """Logs each application's decision once, when it changes (numbers aside), and counts
    every decision by application and action."""

    last: dict[str, str] = field(default_factory=dict)
    counts: dict[tuple[str, str], int] = field(default_factory=dict)

    def note(self, decision: Decision) -> None:
        key = (decision.app, decision.action.value)
        self.counts[key] = self.counts.get(key, 0) + 1
        shape = f"{decision.action.value}: {_NUMBERS.sub('#', decision.reason)}"
        if self.last.get(decision.app) == shape:
            return
        self.last[decision.app] = shape
        level = logging.INFO if decision.action is Action.HOLD else logging.WARNING
        target = f" to {decision.to}" if decision.to else ""
        log.log(level, "controller: %s %s%s: %s", decision.action.value, decision.app, target,
                decision.reason)  # fmt: skip


class DrController:
    """One replica of the controller."""

    def __init__(
        self,
        topology: Topology,
        executor: FailoverExecutor,
        coordinator: Coordinator,
        sources: Sequence[Source],
        *,
        replica: str,
        lock_timing: LockTiming,
        clock: Callable[[], float] = time.monotonic,
        wall_ms: Callable[[], int] = lambda: int(time.time() * 1000),
        metrics: ControllerMetrics | None = None,
    ) -> None:
        self.topology = topology
        self.executor = executor
        self.coordinator = coordinator
        self.sources = list(sources)
        # A cycle waits for answers at most half an interval: the decision is made on time even
        # while a dead cluster's probe is still waiting for its timeout.
        self._observer = Observer(self.sources, wait_s=topology.controller.interval_s / 2)
        self.replica = replica
        self.settings = topology.controller.to_settings()
        self.interval_s = topology.controller.interval_s
        self._lock_timing = lock_timing
        self._clock = clock
        self._wall_ms = wall_ms
        self._state = ControllerState()
        self._lock: Lock | None = None
        self.decisions = DecisionLog()
        self._metrics = metrics if metrics is not None else controller_metrics()
        self._leader_gauge = self._metrics.leader.labels(replica)
        self._leader_gauge.set(0)

    @property
    def leading(self) -> bool:
        return self._lock is not None and self._lock.held()

    def run(self, stop: threading.Event) -> None:
        """Lead when the lock is free, and decide every interval while leading."""
        try:
            while not stop.is_set():
                started = self._clock()
                try:
                    if self._lead():
                        self.cycle()
                except LockLostError as err:
                    log.error("controller %s lost the lead: %s", self.replica, err)
                    self._follow()
                except DrsvcError as err:
                    log.warning("controller %s: %s; trying again", self.replica, err)
                # One cycle per interval: a cycle that waited for a dead cluster's probe took
                # part of it already.
                stop.wait(max(0.05, self.interval_s - (self._clock() - started)))
        finally:
            self._observer.close()
            if self._lock is not None:
                self._lock.release()
            self._leader_gauge.set(0)

    def _lead(self) -> bool:
        if self._lock is not None and self._lock.held():
            return True
        if self._lock is not None:
            log.error("controller %s lost the lead", self.replica)
            self._follow()
        lock = self.coordinator.try_lock(
            naming.controller_lock_key(self.topology.namespace),
            self.replica,
            ttl_s=self._lock_timing.ttl_s,
            lock_delay_s=self._lock_timing.lock_delay_s,
        )
        if lock is None:
            return False
        log.warning("controller %s leads", self.replica)
        self._lock = lock
        self._leader_gauge.set(1)
        return True

    def _follow(self) -> None:
        """The lead is lost: forget it, and what was observed under it (the next lead observes
        afresh)."""
        self._lock = None
        self._state = ControllerState()
        self._leader_gauge.set(0)

    def cycle(self) -> list[Decision]:
        """Observe every cluster, decide for every application, act."""
        clusters = sorted(self.topology.clusters)
        observations = self._observer.observe(clusters, self._clock())
        views = [self._view(app) for app in self.topology.applications]
        # Decided at the time the answers are in, not when they were asked for.
        self._state, decisions = decide(
            self._state, observations, views, clusters, self.settings, self._clock()
        )
        for decision in decisions:
            self.decisions.note(decision)
            self._metrics.decisions.labels(decision.app, decision.action.value).inc()
            self._act(decision)
        return decisions

    def _view(self, app: Application) -> AppView:
        active = self.executor.active(app)
        running = self.executor.running(app)
        age = None
        latest = self.coordinator.get(naming.app_failover_key(self.topology.namespace, app.name))
        if latest is not None and latest.value:
            try:
                created = self.executor.record(latest.value).created_ms
                age = max(0.0, (self._wall_ms() - created) / 1000)
            except DrsvcError:
                age = None
        candidates = (
            tuple(self.executor.failover_targets(app, active.cluster)) if active.cluster else ()
        )
        return AppView(
            app.name,
            active.cluster,
            app.auto_failover,
            candidates,
            running=running,
            last_failover_age_s=age,
        )

    def _act(self, decision: Decision) -> None:
        if decision.action is Action.HOLD:
            return
        assert self._lock is not None
        self._lock.ensure_held()  # never act without the lead
        try:
            if decision.action is Action.RESUME and decision.failover_id is not None:
                record = self.executor.resume(decision.failover_id)
            elif decision.action is Action.FAILOVER and decision.to is not None:
                epoch = self.executor.active(self.topology.application(decision.app)).epoch
                # Forced: unplanned, as decided from every vantage point (the executor need
                # not probe the dead cluster again).
                request_id = f"auto-{decision.app}-e{epoch}"
                request = FailoverRequest(decision.app, decision.to, True, request_id)
                record = self.executor.start(request)
            else:
                return
        except (FailoverRefused, DrsvcError) as err:
            outcome = "refused" if isinstance(err, FailoverRefused) else "error"
            self._count_failover(decision, outcome)
            if isinstance(err, LockLostError):
                raise
            log.error("controller: %s of %s did not run: %s", decision.action.value,
                      decision.app, err)  # fmt: skip
            return
        self._count_failover(decision, record.state.value)
        log.warning(
            "controller: failover %s of %s to %s: %s (%s)",
            record.plan.failover_id,
            record.plan.app,
            record.plan.to_cluster,
            record.state.value,
            record.plan.kind.value,
        )

    def _count_failover(self, decision: Decision, outcome: str) -> None:
        self._metrics.failovers.labels(decision.app, decision.action.value, outcome).inc()
