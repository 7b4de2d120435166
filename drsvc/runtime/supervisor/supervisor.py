"""The supervisor loop: start roles, notice their exits, restart them, stop them all.

Effects only; every decision comes from :class:`RoleLifecycle`. The loop runs in the calling
(main) thread and starts no threads, which the parent-death hook requires (see
:mod:`~drsvc.runtime.supervisor.parent_death`). Signal handlers call
:meth:`Supervisor.request_stop`.
"""

from __future__ import annotations

import enum
import logging
import os
import signal
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from drsvc.ports import allocate_ports, port_is_free
from drsvc.runtime.supervisor.child import ChildProcess
from drsvc.runtime.supervisor.flow_metrics import (
    FlowNumbers,
    FlowRateTracker,
    ReplicationSample,
    scrape_replication,
)
from drsvc.runtime.supervisor.log_files import last_lines
from drsvc.runtime.supervisor.parent_death import die_with_parent_hook
from drsvc.runtime.supervisor.restart_policy import (
    ExitAction,
    RestartPolicy,
    RoleLifecycle,
    RoleState,
)
from drsvc.runtime.supervisor.role_environment import role_environment
from drsvc.runtime.supervisor.roles import REPLICATE, RoleSpec
from drsvc.runtime.supervisor.roles_file import ROLES_FILE, write_roles_file
from drsvc.runtime.supervisor.status import FlowStatus, RoleStatus, Snapshot, StatusView

log = logging.getLogger("drsvc.run")

LOOPBACK = "127.0.0.1"
EXIT_NOT_STARTABLE = 127
"""What a role that could not even be started counts as (the shell's 'command not found')."""


@dataclass(frozen=True)
class SupervisorSettings:
    """Timing of the supervisor loop and of a shutdown."""

    grace_s: float = 30.0
    """How long stopping roles may take (flush, commit) before they are killed."""
    tick_s: float = 0.2
    """How often exits are noticed and the view is updated."""
    scrape_every_s: float = 1.0
    """How often the replication workers' metrics are read (0: never)."""
    scrape_timeout_s: float = 0.5
    tail_lines: int = 15
    """Lines of a crashed role's output repeated in the crash report."""
    roles_file_every_s: float = 5.0
    """``roles.json`` is rewritten on every change, and at least this often (its
    ``updated_at`` shows the supervisor is alive)."""


class Outcome(enum.Enum):
    """How a supervisor run ended; the command turns it into an exit code."""

    CLEAN = "clean"
    """Stopped on request; every role exited in time and cleanly."""
    UNCLEAN = "unclean"
    """Stopped on request, but a role had to be killed or exited with an error."""
    ALL_FAILED = "all failed"
    """Every role gave up on bad input: nothing was left to supervise."""


class _Role:
    """A role's spec, its restart decisions, and its current process."""

    def __init__(
        self, spec: RoleSpec, lifecycle: RoleLifecycle, log_file: Path, env: Mapping[str, str]
    ) -> None:
        self.spec = spec
        self.lifecycle = lifecycle
        self.log_file = log_file
        self.env = env
        """The role's own environment: only the variables its spec names."""
        self.child: ChildProcess | None = None
        self.metrics_port: int | None = None


class Supervisor:
    """Runs ``roles`` as a supervised process tree until :meth:`request_stop`.

    ``env`` (default: this process's environment) is where the roles' variables come from;
    each role gets only those its spec names (:attr:`RoleSpec.variables`). Raises
    :class:`~drsvc.errors.ConfigError` when a role needs a variable that is not set.
    """

    def __init__(
        self,
        roles: Sequence[RoleSpec],
        run_dir: Path,
        topology_file: Path,
        *,
        view: StatusView | None = None,
        policy: RestartPolicy | None = None,
        settings: SupervisorSettings | None = None,
        env: Mapping[str, str] | None = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.run_dir = run_dir
        self.roles_file = run_dir / ROLES_FILE
        self._topology_file = topology_file
        self._view = view
        self._policy = policy or RestartPolicy()
        self._settings = settings or SupervisorSettings()
        environ = os.environ if env is None else env
        self._clock = clock
        self._sleep = sleep
        now = clock()
        # Each role's environment is chosen here, once, so that a variable a role needs but
        # that is not set stops drsvc run before any role starts (ConfigError naming it).
        self._roles = [
            _Role(
                s,
                RoleLifecycle(self._policy, now),
                run_dir / f"{s.name}.log",
                role_environment(environ, s.variables, s.name),
            )
            for s in roles
        ]
        self._flows = list(dict.fromkeys(s.flow for s in roles if s.kind == REPLICATE and s.flow))
        self._rates = FlowRateTracker()
        self._numbers: dict[str, FlowNumbers] = {}
        self._next_scrape = now
        self._next_roles_write = now
        self._stop_requested = False
        self._stop_reason = ""
        self._kill_now = False
        self._preexec = die_with_parent_hook()

    @property
    def log_files(self) -> dict[str, Path]:
        """Each role's log file, by role name."""
        return {role.spec.name: role.log_file for role in self._roles}

    def attach_view(self, view: StatusView) -> None:
        self._view = view

    def request_stop(self, reason: str = "stop requested") -> None:
        """Stop every role (SIGTERM, then SIGKILL after the grace period); a second request
        kills the stragglers at once. Only sets flags, so a signal handler may call it; the
        loop logs ``reason``."""
        if self._stop_requested:
            self._kill_now = True
        else:
            self._stop_reason = reason
        self._stop_requested = True

    def run(self) -> Outcome:
        """Supervise until stopped; returns how the stop went."""
        self.run_dir.mkdir(parents=True, exist_ok=True)
        log.info(
            "supervising %d roles (%s); logs in %s",
            len(self._roles),
            ", ".join(role.spec.name for role in self._roles),
            self.run_dir,
        )
        self._write_roles("running")
        gave_up = False
        try:
            gave_up = self._supervise()
        except BaseException:
            # A bug here must not leave the roles to the parent-death SIGKILL: stop them properly.
            self._stop_reason = "the supervisor failed"
            log.exception("supervisor loop failed; stopping every role")
            raise
        finally:
            clean = self._shutdown()
        if gave_up:
            return Outcome.ALL_FAILED
        return Outcome.CLEAN if clean else Outcome.UNCLEAN

    def _supervise(self) -> bool:
        """The loop; returns True when it ended because every role gave up on bad input."""
        while not self._stop_requested:
            now = self._clock()
            changed = self._reap(now)
            changed = self._start_due(now) or changed
            if changed or now >= self._next_roles_write:
                self._write_roles("running")
            if all(role.lifecycle.state is RoleState.FAILED for role in self._roles):
                log.error("every role failed on bad input: nothing left to supervise")
                self._stop_reason = "every role failed"
                return True
            self._scrape_if_due(now)
            self._show(now)
            self._sleep(self._settings.tick_s)
        return False

    # --- starting and reaping -------------------------------------------------------------

    def _start_due(self, now: float) -> bool:
        started = False
        for role in self._roles:
            if role.lifecycle.should_start(now):
                self._start(role, now)
                started = True
        return started

    def _start(self, role: _Role, now: float) -> None:
        if role.spec.metrics:
            role.metrics_port = self._pick_port(role)
        argv = role.spec.argv(role.metrics_port)
        env = {**role.env, "DRSVC_ROLE": role.spec.name, "PYTHONUNBUFFERED": "1"}
        first = role.lifecycle.starts == 0
        role.lifecycle.started(now)
        try:
            role.child = ChildProcess.spawn(argv, env, role.log_file, preexec_fn=self._preexec)
        except OSError as err:
            log.error("cannot start %s (%s): %s", role.spec.name, argv[0], err)
            self._handle_exit(role, now, EXIT_NOT_STARTABLE, tail=[])
            return
        port = f", metrics on port {role.metrics_port}" if role.metrics_port else ""
        if first:
            log.info("started %s (pid %d%s)", role.spec.name, role.child.pid, port)
        else:
            log.info(
                "restarted %s (pid %d%s; restart %d)",
                role.spec.name,
                role.child.pid,
                port,
                role.lifecycle.restarts,
            )

    def _pick_port(self, role: _Role) -> int:
        """Keep a role's port across restarts (scrapers keep working) unless it got taken."""
        taken = {r.metrics_port for r in self._roles if r is not role and r.metrics_port}
        previous = role.metrics_port
        if previous is not None and previous not in taken and port_is_free(LOOPBACK, previous):
            return previous
        while True:
            port = allocate_ports(LOOPBACK, 1)[0]
            if port not in taken:
                return port

    def _reap(self, now: float) -> bool:
        """Notice exited roles and decide about each; True when anything changed."""
        changed = False
        for role in self._roles:
            child = role.child
            if child is None:
                continue
            returncode = child.poll()
            if returncode is None:
                continue
            child.kill_leftovers()
            role.child = None
            tail = last_lines(child.log_file, child.log_offset, self._settings.tail_lines)
            self._handle_exit(role, now, returncode, tail)
            changed = True
        return changed

    def _handle_exit(self, role: _Role, now: float, returncode: int, tail: list[str]) -> None:
        verdict = role.lifecycle.exited(now, returncode)
        name = role.spec.name
        shown = "".join(f"\n    | {line}" for line in tail)
        if tail:
            shown = f"\n  last lines of {role.log_file}:{shown}"
        if verdict.action is ExitAction.NONE:
            level = logging.INFO if returncode in (0, -signal.SIGTERM) else logging.WARNING
            log.log(level, "%s stopped: %s", name, verdict.reason)
        elif verdict.action is ExitAction.GIVE_UP:
            log.error("%s failed: %s%s", name, verdict.reason, shown)
        elif verdict.crash_loop:
            log.error(
                "%s keeps crashing: %s; next try in %.1fs%s",
                name,
                verdict.reason,
                verdict.delay_s,
                shown,
            )
        else:
            log.warning(
                "%s %s; restarting in %.1fs%s", name, verdict.reason, verdict.delay_s, shown
            )

    # --- stopping ---------------------------------------------------------------------------

    def _shutdown(self) -> bool:
        """SIGTERM every role, wait up to the grace period, SIGKILL the rest. True when every
        role stopped in time with a clean exit."""
        running = [role for role in self._roles if role.child is not None]
        log.info(
            "%s: stopping %d running roles (grace period %.0fs)",
            self._stop_reason,
            len(running),
            self._settings.grace_s,
        )
        for role in self._roles:
            role.lifecycle.stopping()
            if role.child is not None:
                role.child.signal_group(signal.SIGTERM)
        self._write_roles("stopping")
        clean = True
        exited: dict[str, int] = {}
        deadline = self._clock() + self._settings.grace_s
        while self._running() and self._clock() < deadline:
            if self._kill_now:
                log.warning("second stop request: not waiting any longer")
                break
            exited.update(self._reap_stopping())
            self._show(self._clock(), stopping=True)
            self._sleep(min(self._settings.tick_s, 0.1))
        exited.update(self._reap_stopping())
        stragglers = [role for role in self._roles if role.child is not None]
        for role in stragglers:
            assert role.child is not None
            log.warning("%s (pid %d) is still running: killing it", role.spec.name, role.child.pid)
            role.child.signal_group(signal.SIGKILL)
            clean = False
        kill_deadline = self._clock() + 10.0
        while self._running() and self._clock() < kill_deadline:
            exited.update(self._reap_stopping())
            self._sleep(0.05)
        for role in self._roles:
            if role.child is not None:  # stuck in the kernel; nothing more a signal can do
                log.error("%s (pid %d) survived SIGKILL", role.spec.name, role.child.pid)
                clean = False
        unclean = {name: code for name, code in exited.items() if code not in (0, -signal.SIGTERM)}
        if unclean:
            clean = False
        self._write_roles("stopped")
        self._show(self._clock(), stopping=True)
        log.info("all roles stopped%s", "" if clean else " (not all of them cleanly)")
        return clean

    def _running(self) -> bool:
        return any(role.child is not None for role in self._roles)

    def _reap_stopping(self) -> dict[str, int]:
        codes: dict[str, int] = {}
        now = self._clock()
        for role in self._roles:
            child = role.child
            if child is None:
                continue
            returncode = child.poll()
            if returncode is None:
                continue
            child.kill_leftovers()
            role.child = None
            codes[role.spec.name] = returncode
            self._handle_exit(role, now, returncode, tail=[])
        return codes

    # --- what the operator sees ---------------------------------------------------------------

    def _scrape_if_due(self, now: float) -> None:
        every = self._settings.scrape_every_s
        if every <= 0 or now < self._next_scrape or not self._flows:
            return
        self._next_scrape = now + every
        scrapes: dict[str, dict[str, ReplicationSample]] = {}
        for role in self._roles:
            if role.spec.kind != REPLICATE or role.child is None or role.metrics_port is None:
                continue
            samples = scrape_replication(role.metrics_port, self._settings.scrape_timeout_s)
            if samples is not None:
                scrapes[f"{role.spec.name}:{role.child.pid}"] = samples
        self._numbers = self._rates.observe(self._clock(), scrapes)

    def snapshot(self, now: float | None = None, stopping: bool = False) -> Snapshot:
        at = self._clock() if now is None else now
        roles = tuple(self._role_status(role, at) for role in self._roles)
        flows = tuple(
            FlowStatus(
                flow=flow,
                workers_running=sum(
                    1
                    for role in self._roles
                    if role.spec.flow == flow and role.spec.kind == REPLICATE and role.child
                ),
                workers=sum(
                    1
                    for role in self._roles
                    if role.spec.flow == flow and role.spec.kind == REPLICATE
                ),
                numbers=self._numbers.get(flow, FlowNumbers()),
            )
            for flow in self._flows
        )
        return Snapshot(roles=roles, flows=flows, stopping=stopping)

    def _role_status(self, role: _Role, now: float) -> RoleStatus:
        lifecycle = role.lifecycle
        return RoleStatus(
            name=role.spec.name,
            kind=role.spec.kind,
            flow=role.spec.flow,
            state=lifecycle.state,
            pid=role.child.pid if role.child is not None else None,
            metrics_port=role.metrics_port,
            restarts=lifecycle.restarts,
            crashes=lifecycle.crashes,
            consecutive_failures=lifecycle.consecutive_failures,
            restart_in_s=lifecycle.restart_in_s(now),
            uptime_s=lifecycle.uptime_s(now),
            last_exit=lifecycle.last_exit,
            log_file=str(role.log_file),
            started_at=role.child.started_wall if role.child is not None else None,
        )

    def _show(self, now: float, stopping: bool = False) -> None:
        if self._view is None:
            return
        try:
            self._view.update(self.snapshot(now, stopping))
        except Exception:
            # What the operator sees must never take the roles down: go on without it.
            log.exception("the status view failed; supervising on without it")
            self._view = None

    def _write_roles(self, state: str) -> None:
        now = self._clock()
        self._next_roles_write = now + self._settings.roles_file_every_s
        try:
            write_roles_file(
                self.roles_file,
                [self._role_status(role, now) for role in self._roles],
                state=state,
                topology_file=self._topology_file,
            )
        except OSError as err:  # a full disk must not take the roles down with it
            log.error("cannot write %s: %s", self.roles_file, err)
