"""Nemeses on the control plane: planned moves, and faults timed to a move's steps.

A move is a nemesis too (``planned-failover`` / ``planned-failback``): it starts when the
schedule says, and its heal waits until it completed (it fails the scenario otherwise). The
faults watch the application's keys in Consul and strike at a step of the next failover:

- ``slow-consul-writes``: from the moment the executor takes the application's lock until
  its "none" is committed, every request of the executor reaches Consul ``ms`` later (a
  latency toxic on its proxy), so "none" commits long after the executor decided on it;
- ``cut-client-consul``: the application's clients lose Consul (their proxy disabled) until
  the heal;
- ``pause-producer``: SIGSTOP of a producer process of the application, SIGCONT once another
  cluster was activated;
- ``kill-api``: SIGKILL of the ``api`` role while the failover it runs waits out the lease; the
  heal waits until the failover completed, resumed by the controller or, if it has not within
  ``resume_after_s``, by ``drsvc failover --resume``;
- ``step-clock``: the stepped executor's wall clock jumps ``s`` seconds forward once the lease
  wait began (:mod:`chaos.stepped_executor`).
"""

from __future__ import annotations

import signal
import subprocess
import threading
import time
from collections.abc import Callable

from chaos.control_plane import (
    CLIENTS_PROXY,
    EXECUTOR_PROXY,
    ControlPlane,
    Executor,
    Move,
    describe,
)
from chaos.nemesis.base import Nemesis, Timeline, now_ms
from chaos.nemesis.context import ChaosContext, signal_group
from chaos.switch_times import ClockStep
from drsvc.errors import LocalEnvError

#: how long a move may take from start to end
MOVE_TIMEOUT_S = 180.0
#: how long a watcher waits for the failover it strikes at
WATCH_TIMEOUT_S = 120.0


class _Watcher:
    """A thread that runs ``body`` once; its error is kept for the heal to report."""

    def __init__(self, name: str, body: Callable[[threading.Event], str]) -> None:
        self.stop = threading.Event()
        self.outcome = ""
        self.error: Exception | None = None
        self._body = body
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            self.outcome = self._body(self.stop)
        except Exception as err:
            self.error = err

    def join(self, timeout_s: float, cancel: bool = False) -> str:
        if cancel:
            self.stop.set()
        self._thread.join(timeout_s)
        if self._thread.is_alive():
            raise LocalEnvError(f"{self._thread.name} still waits after {timeout_s:.0f} s")
        if self.error is not None:
            raise self.error
        return self.outcome


class PlannedMove(Nemesis):
    """A failover (or failback) of the application to ``to``, run by ``executor``."""

    def __init__(
        self, timeline: Timeline, plane: ControlPlane, to: str, executor: Executor, back: bool
    ) -> None:
        super().__init__(timeline, f"{plane.app}->{to}")
        self.kind = "planned-failback" if back else "planned-failover"
        self.plane = plane
        self.to, self.executor, self.back = to, executor, back
        self._move: Move | None = None

    def inject(self) -> str:
        self._move = self.plane.move(self.back, self.to, self.executor)
        return f"{self.kind} of {self.plane.app} to {self.to} by {self.executor}"

    def heal(self) -> str:
        assert self._move is not None
        return f"by {self.executor}: {self._move.finish(MOVE_TIMEOUT_S)}"


class SlowConsulWrites(Nemesis):
    """The executor's requests delayed ``ms`` while the next failover writes "none"."""

    kind = "slow-consul-writes"

    def __init__(self, timeline: Timeline, plane: ControlPlane, ms: int) -> None:
        super().__init__(timeline, f"consul<-{EXECUTOR_PROXY}")
        self.plane = plane
        self.ms = ms
        self._watcher: _Watcher | None = None

    def inject(self) -> str:
        before = self.plane.latest_failover()
        self._watcher = _Watcher("slow-consul-writes", lambda stop: self._strike(before, stop))
        return f"armed: the executor's Consul requests {self.ms} ms late from the next failover"

    def _strike(self, before: str | None, stop: threading.Event) -> str:
        # Armed when the executor takes the lock: it records the failover and deactivates
        # right after, too soon to wait for the record.
        failover_id = self.plane.wait_new_lock_holder(before, WATCH_TIMEOUT_S, stop)
        self.plane.proxies.delay(EXECUTOR_PROXY, self.ms)
        slowed = time.monotonic()
        try:
            deadline = slowed + WATCH_TIMEOUT_S
            while not stop.is_set() and time.monotonic() < deadline:
                cluster, epoch = self.plane.active_cluster()
                if cluster is None:
                    return (
                        f"failover {failover_id}: the executor's Consul requests {self.ms} ms "
                        f"late until none (epoch {epoch}) committed, "
                        f"{time.monotonic() - slowed:.1f} s after it took the lock"
                    )
                stop.wait(0.02)
            raise LocalEnvError(f"failover {failover_id} never wrote none")
        finally:
            self.plane.proxies.undelay(EXECUTOR_PROXY)

    def heal(self) -> str:
        assert self._watcher is not None
        try:
            return self._watcher.join(WATCH_TIMEOUT_S)
        finally:
            self.plane.proxies.undelay(EXECUTOR_PROXY)


class CutClientConsul(Nemesis):
    """The application's clients cut off from Consul until healed."""

    kind = "cut-client-consul"

    def __init__(self, timeline: Timeline, plane: ControlPlane) -> None:
        super().__init__(timeline, f"consul<-{CLIENTS_PROXY}")
        self.plane = plane

    def inject(self) -> str:
        self.plane.proxies.cut(CLIENTS_PROXY)
        return "the application's clients cut off from Consul"

    def heal(self) -> None:
        self.plane.proxies.heal(CLIENTS_PROXY)


class PauseProducer(Nemesis):
    """SIGSTOP of a producer process; SIGCONT ``after_s`` after another cluster was activated
    (at the latest after ``WATCH_TIMEOUT_S``)."""

    kind = "pause-producer"

    def __init__(
        self,
        timeline: Timeline,
        plane: ControlPlane,
        process: subprocess.Popen[bytes],
        after_s: float = 1.0,
    ) -> None:
        super().__init__(timeline, f"producer pid {process.pid}")
        self.plane = plane
        self.process = process
        self.after_s = after_s
        self._paused_at = 0.0
        self._cluster: str | None = None

    def inject(self) -> str:
        self._cluster, epoch = self.plane.active_cluster()
        signal_group(self.process.pid, signal.SIGSTOP)
        self._paused_at = time.monotonic()
        return f"SIGSTOP producer pid {self.process.pid} (active {self._cluster}, epoch {epoch})"

    def heal(self) -> str:
        try:
            deadline = time.monotonic() + WATCH_TIMEOUT_S
            moved: tuple[str | None, int] | None = None
            while time.monotonic() < deadline:
                cluster, epoch = self.plane.active_cluster()
                if cluster is not None and cluster != self._cluster:
                    moved = (cluster, epoch)
                    break
                time.sleep(0.1)
            time.sleep(self.after_s if moved is not None else 0.0)
        finally:
            signal_group(self.process.pid, signal.SIGCONT)
        paused = time.monotonic() - self._paused_at
        if moved is None:
            raise LocalEnvError(f"no other cluster was activated in {paused:.0f} s of pause")
        return (
            f"SIGSTOP producer pid {self.process.pid} for {paused:.1f} s; SIGCONT "
            f"{self.after_s:g} s after {moved[0]} was activated (epoch {moved[1]})"
        )


class KillApi(Nemesis):
    """SIGKILL of the ``api`` role while the next failover waits out the lease."""

    kind = "kill-api"

    def __init__(
        self,
        timeline: Timeline,
        plane: ControlPlane,
        context: ChaosContext,
        resume_after_s: float = 60.0,
    ) -> None:
        super().__init__(timeline, "api")
        self.plane = plane
        self.context = context
        self.resume_after_s = resume_after_s
        self._watcher: _Watcher | None = None
        self._killed: tuple[str, int] | None = None

    def inject(self) -> str:
        before = self.plane.latest_failover()
        self._watcher = _Watcher("kill-api", lambda stop: self._strike(before, stop))
        return "armed: kill -9 of the api role once its next failover waits out the lease"

    def _strike(self, before: str | None, stop: threading.Event) -> str:
        failover_id = self.plane.wait_new_failover(before, WATCH_TIMEOUT_S, stop)
        self.plane.wait_step_done(failover_id, "deactivate", WATCH_TIMEOUT_S, stop)
        pid = self.context.role_pid("api")
        if pid is None:
            raise LocalEnvError("the api role is not running: nothing to kill")
        signal_group(pid, signal.SIGKILL)
        self._killed = (failover_id, pid)
        return f"kill -9 api (pid {pid}) during wait-lease of {failover_id}"

    def heal(self) -> str:
        assert self._watcher is not None
        struck = self._watcher.join(WATCH_TIMEOUT_S)
        assert self._killed is not None
        failover_id, pid = self._killed
        self.context.wait_role_running("api", pid, 60)
        try:
            record = self.plane.wait_finished(failover_id, self.resume_after_s)
            how = "resumed by the controller"
        except LocalEnvError as waited:
            code, _, err = self.plane.service.command("failover", "--resume", failover_id)
            if code != 0:
                raise LocalEnvError(
                    f"drsvc failover --resume {failover_id}: {err.strip()}"
                ) from waited
            record = self.plane.wait_finished(failover_id, 30)
            how = f"not resumed within {self.resume_after_s:.0f} s; resumed by drsvc failover"
        return f"{struck}; {how}: {describe(record)}"


class StepClock(Nemesis):
    """The stepped executor's wall clock ``seconds`` ahead once the next failover's lease wait
    began; back to the machine's at heal (for later moves)."""

    kind = "step-clock"

    def __init__(self, timeline: Timeline, plane: ControlPlane, seconds: float) -> None:
        super().__init__(timeline, "executor clock")
        self.plane = plane
        self.seconds = seconds
        self._watcher: _Watcher | None = None

    def inject(self) -> str:
        before = self.plane.latest_failover()
        self._watcher = _Watcher("step-clock", lambda stop: self._strike(before, stop))
        return f"armed: the executor's wall clock {self.seconds:+g} s once the lease wait began"

    def _strike(self, before: str | None, stop: threading.Event) -> str:
        failover_id = self.plane.wait_new_failover(before, WATCH_TIMEOUT_S, stop)
        self.plane.wait_step_done(failover_id, "deactivate", WATCH_TIMEOUT_S, stop)
        stop.wait(0.5)  # well inside the wait
        offset_ms = int(self.seconds * 1000)
        at = now_ms()
        self.plane.clock_file.write_text(str(offset_ms))
        self.plane.clock_steps.append(ClockStep(failover_id, at, offset_ms))
        return f"failover {failover_id}: the executor's wall clock stepped {self.seconds:+g} s"

    def heal(self) -> str:
        assert self._watcher is not None
        try:
            return self._watcher.join(WATCH_TIMEOUT_S)
        finally:
            self.plane.clock_file.write_text("0")
