"""The DR controller: observe, decide (:func:`failover.dr_decision.decide`), act, under a lock.

Several replicas run; one leads, through the Consul lock ``drsvc/<ns>/controller/leader``. Only
the leader observes and acts. Every action goes through the failover executor, the same code as
the CLI: a failover it starts is unplanned (forced: the decision already saw the cluster gone
from every vantage point), recorded step by step, under the application's lock. The request id is
derived from the application's active document (``auto-<app>-e<epoch>``), so two leaders acting
on the same outage (one that lost its lock while the next took over) start one failover.

Moves. The loop only decides; each action (a move: a failover or a resume) runs on a worker
thread of a bounded pool, so one application's lease wait never delays another's failover nor the
next cycle. One move per application at a time; every move gets its own executor (its own Consul
client and Kafka clients: a Consul client's HTTP session is not shared across threads) and checks
the lead again just before it starts. Immediately before a failover, the move takes a fresh look
at the old and the new cluster (:meth:`Observer.fresh`: asks made after the decision) and re-reads
the application, and goes ahead only if :func:`failover.dr_decision.recheck` still agrees; a
failover stood down this way leaves no cooldown behind.

Resumes. A failover whose executor is alive (the application's lock is held through a live
session: started by the API, the CLI, or a move of this replica) is left to it. One whose lock
has no live session any more (its holder died; Consul released the key) is resumed: the executor
waits out the lock delay and carries the same record on.

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
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field

from drsvc.adapters.coordination import Coordinator, Lock
from drsvc.errors import DrsvcError, LockLostError, RefusedError
from drsvc.runtime.controller.metrics import ControllerMetrics, controller_metrics
from drsvc.runtime.controller.observe import Observer, Source
from drsvc.runtime.failover.executor import FailoverExecutor, LockTiming
from drsvc.runtime.liveness import loop_liveness
from drsvc.topology.models import Application, Topology
from failover import naming
from failover.dr_decision import (
    Action,
    AppView,
    ControllerState,
    Decision,
    decide,
    recheck,
    stood_down,
)
from failover.failover_plan import FailoverRecord, FailoverRequest
from failover.requester import RequestedBy, RequesterKind

__all__ = ["DrController"]

log = logging.getLogger(__name__)

_NUMBERS = re.compile(r"[0-9.]+s?")

#: The outcome of a move that a fresh look stood down (or that found its reason gone).
HELD = "held"
#: How many moves run at once by default (each mostly waits: on a lease, on Kafka, on Consul).
DEFAULT_CONCURRENT_MOVES = 8


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
    """One replica of the controller.

    ``executor`` serves the loop's reads; ``executor_factory`` makes the executor of one move
    (default: ``executor`` itself, for an executor that may be shared across threads, as the
    tests' fakes). ``max_concurrent_moves`` bounds the worker threads; ``recheck_wait_s`` how
    long the fresh look before a failover waits for answers (default: half an interval, as a
    cycle)."""

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
        executor_factory: Callable[[], FailoverExecutor] | None = None,
        max_concurrent_moves: int = DEFAULT_CONCURRENT_MOVES,
        recheck_wait_s: float | None = None,
    ) -> None:
        self.topology = topology
        self.executor = executor
        self._executor_factory = executor_factory or (lambda: executor)
        self.coordinator = coordinator
        self.sources = list(sources)
        # A cycle waits for answers at most half an interval: the decision is made on time even
        # while a dead cluster's probe is still waiting for its timeout.
        self._observer_wait_s = topology.controller.interval_s / 2
        self._observer = Observer(self.sources, wait_s=self._observer_wait_s)
        self.replica = replica
        self.settings = topology.controller.to_settings()
        self.interval_s = topology.controller.interval_s
        self._lock_timing = lock_timing
        self._clock = clock
        self._wall_ms = wall_ms
        # The fresh look waits as long as a cycle waits for its answers (half an interval): a
        # live cluster answers a metadata request well within it, and a dead one's probe, which
        # never answers sooner than its timeout, says nothing (the other vantage points speak).
        self._recheck_wait_s = self._observer_wait_s if recheck_wait_s is None else recheck_wait_s
        self._state = ControllerState()
        self._lock: Lock | None = None
        self.decisions = DecisionLog()
        self._metrics = metrics if metrics is not None else controller_metrics()
        self._leader_gauge = self._metrics.leader.labels(replica)
        self._leader_gauge.set(0)
        self._pool = ThreadPoolExecutor(
            max_workers=max(1, max_concurrent_moves), thread_name_prefix="move"
        )
        #: the newest move of each application (submitted by the loop, which alone touches it)
        self._moves: dict[str, Future[str]] = {}

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
                # /healthz: the loop turns (a cycle that hangs stops the ticks)
                loop_liveness().tick("controller", stale_after_s=max(120.0, 10 * self.interval_s))
                # One cycle per interval: a cycle that waited for a dead cluster's probe took
                # part of it already.
                stop.wait(max(0.05, self.interval_s - (self._clock() - started)))
        finally:
            if self._lock is not None:
                self._lock.release()
            self._leader_gauge.set(0)
            # Moves in flight run to their end (each under its application's lock; another
            # replica that leads now leaves them be); moves not started yet are dropped.
            running = [a for a, move in self._moves.items() if not move.done()]
            if running:
                log.warning("controller %s: waiting for the moves of %s to end", self.replica,
                            ", ".join(sorted(running)))  # fmt: skip
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._observer.close()

    def wait_for_moves(self, timeout_s: float) -> bool:
        """Wait until every move submitted so far has ended; False if some still run."""
        _, running = wait(list(self._moves.values()), timeout=timeout_s)
        return not running

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
        afresh). Moves in flight go on under their applications' locks."""
        self._lock = None
        self._state = ControllerState()
        self._leader_gauge.set(0)

    def cycle(self) -> list[Decision]:
        """Observe every cluster, decide for every application, hand each action to a move."""
        self._take_in_moves()
        clusters = sorted(self.topology.clusters)
        observations = self._observer.observe(clusters, self._clock())
        views = [
            self._view(app, self.executor, self.coordinator) for app in self.topology.applications
        ]
        # Decided at the time the answers are in, not when they were asked for.
        self._state, decisions = decide(
            self._state, observations, views, clusters, self.settings, self._clock()
        )
        # Asks made from here on are fresh for the moves decided now.
        decided_at = self._observer.mark()
        for decision in decisions:
            self.decisions.note(decision)
            self._metrics.decisions.labels(decision.app, decision.action.value).inc()
            self._dispatch(decision, decided_at)
        return decisions

    def _view(
        self, app: Application, executor: FailoverExecutor, coordinator: Coordinator
    ) -> AppView:
        active = executor.active(app)
        running = executor.running(app)
        holder_alive = False
        if running is not None:
            lock = coordinator.get(naming.app_lock_key(self.topology.namespace, app.name))
            # Consul releases the key when its holder's session ends: no session, no executor.
            holder_alive = lock is not None and lock.session is not None
        age = None
        latest = coordinator.get(naming.app_failover_key(self.topology.namespace, app.name))
        if latest is not None and latest.value:
            try:
                created = executor.record(latest.value).created_ms
                age = max(0.0, (self._wall_ms() - created) / 1000)
            except DrsvcError:
                age = None
        candidates = tuple(executor.failover_targets(app, active.cluster)) if active.cluster else ()
        return AppView(
            app.name,
            active.cluster,
            app.auto_failover,
            candidates,
            running=running,
            holder_alive=holder_alive,
            last_failover_age_s=age,
        )

    def _dispatch(self, decision: Decision, decided_at: int) -> None:
        if decision.action is Action.HOLD:
            return
        assert self._lock is not None
        self._lock.ensure_held()  # never act without the lead
        moving = self._moves.get(decision.app)
        if moving is not None and not moving.done():
            log.debug("controller: a move of %s is still running", decision.app)
            return
        self._moves[decision.app] = self._pool.submit(self._move, decision, self._lock, decided_at)

    def _take_in_moves(self) -> None:
        """Forget the moves that ended; one stood down leaves no cooldown behind."""
        for app, move in list(self._moves.items()):
            if move.done():
                del self._moves[app]
                if not move.cancelled() and move.result() == HELD:
                    self._state = stood_down(self._state, app)

    def _move(self, decision: Decision, lead: Lock, decided_at: int) -> str:
        """One action, on a worker thread; returns its outcome (as counted)."""
        try:
            executor = self._executor_factory()
            app = self.topology.application(decision.app)
            if decision.action is Action.FAILOVER and decision.to is not None:
                outcome = self._fail_over(decision, app, executor, lead, decided_at)
            elif decision.action is Action.RESUME and decision.failover_id is not None:
                outcome = self._resume(decision, app, executor, lead)
            else:
                return HELD
        except DrsvcError as err:
            outcome = "refused" if isinstance(err, RefusedError) else "error"
            log.error("controller: %s of %s did not run: %s", decision.action.value,
                      decision.app, err)  # fmt: skip
        except Exception:  # a bug must not pass silently on a worker thread
            log.exception("controller: %s of %s failed", decision.action.value, decision.app)
            outcome = "error"
        self._metrics.failovers.labels(decision.app, decision.action.value, outcome).inc()
        return outcome

    def _fail_over(
        self,
        decision: Decision,
        app: Application,
        executor: FailoverExecutor,
        lead: Lock,
        decided_at: int,
    ) -> str:
        assert decision.to is not None and decision.from_cluster is not None
        fresh = self._observer.fresh(
            {decision.from_cluster, decision.to}, self._clock(), decided_at, self._recheck_wait_s
        )
        view = self._view(app, executor, executor.coordinator)
        checked = recheck(decision, view, fresh, self.settings, self._clock())
        if checked.action is not Action.FAILOVER:
            log.warning("controller: failover of %s to %s stood down: %s", app.name,
                        decision.to, checked.reason)  # fmt: skip
            return HELD
        lead.ensure_held()  # never start without the lead
        epoch = executor.active(app).epoch
        # Forced: unplanned, as decided from every vantage point (the executor need not probe
        # the dead cluster again).
        request = FailoverRequest(
            app.name,
            decision.to,
            True,
            f"auto-{app.name}-e{epoch}",
            requested_by=RequestedBy.of(RequesterKind.CONTROLLER, self.replica),
        )
        return self._ended(executor.start(request))

    def _resume(
        self, decision: Decision, app: Application, executor: FailoverExecutor, lead: Lock
    ) -> str:
        view = self._view(app, executor, executor.coordinator)
        if view.running != decision.failover_id or view.holder_alive:
            log.info("controller: resume of %s stood down: %s", decision.failover_id,
                     "an executor carries it on" if view.running else "it ended")  # fmt: skip
            return HELD
        lead.ensure_held()
        # The holder's session is gone: its key is free once the lock delay has passed.
        wait_s = self._lock_timing.lock_delay_s + 2.0
        assert decision.failover_id is not None
        return self._ended(executor.resume(decision.failover_id, wait_s=wait_s))

    def _ended(self, record: FailoverRecord) -> str:
        log.warning(
            "controller: failover %s of %s to %s: %s (%s)",
            record.plan.failover_id,
            record.plan.app,
            record.plan.to_cluster,
            record.state.value,
            record.plan.kind.value,
        )
        return str(record.state.value)
