"""When a role is (re)started, how long it backs off, and when the supervisor gives up on it.

Pure: no processes, no clock of its own. The supervisor passes ``now`` (monotonic seconds) into
every call, so tests drive a :class:`RoleLifecycle` with a fake clock.

Rules:

- A role runs until the supervisor stops it; any exit while it should be running is unexpected,
  even exit code 0, and leads to a restart.
- Restarts back off exponentially: ``initial_backoff_s`` after the first quick failure, doubling
  (``factor``) up to ``max_backoff_s``. A run that stayed up for ``stable_after_s`` resets the
  count, so a role that crashes once a day restarts after ``initial_backoff_s`` every time.
- ``crash_loop_after`` quick failures in a row make the exit a crash loop: reported loudly, and
  still retried at the capped backoff, because the cause (a cluster that is down, a full disk) may
  go away without anyone touching drsvc.
- Exit code 2 means bad input (a wrong option or topology, see ``drsvc.cli.main``). When it comes
  before the role was up for ``stable_after_s``, the role failed while reading its configuration,
  which the same configuration cannot fix: it is not restarted (state ``failed``) until
  ``drsvc run`` itself is restarted. Exit code 2 from a role that had been running stably is
  treated as a crash, because then it came from something that changed underneath (a secret that
  was rotated away), which may come back.
"""

from __future__ import annotations

import enum
import signal
from dataclasses import dataclass

from drsvc.errors import ConfigError

EXIT_BAD_INPUT = 2


@dataclass(frozen=True)
class RestartPolicy:
    """Backoff settings of the supervisor (defaults suit production; tests shrink them)."""

    initial_backoff_s: float = 1.0
    """Delay before the first restart after a quick failure."""
    max_backoff_s: float = 60.0
    """Upper bound of the delay between restarts."""
    factor: float = 2.0
    """Each further quick failure multiplies the delay by this."""
    stable_after_s: float = 30.0
    """A run at least this long counts as stable: the backoff starts over after it."""
    crash_loop_after: int = 3
    """This many quick failures in a row are reported as a crash loop."""

    def __post_init__(self) -> None:
        if self.initial_backoff_s <= 0 or self.max_backoff_s < self.initial_backoff_s:
            raise ConfigError(
                "restart backoff needs 0 < initial_backoff_s <= max_backoff_s "
                f"(got {self.initial_backoff_s} and {self.max_backoff_s})"
            )
        if self.factor < 1 or self.stable_after_s <= 0 or self.crash_loop_after < 1:
            raise ConfigError(
                "restart policy needs factor >= 1, stable_after_s > 0 and crash_loop_after >= 1"
            )

    def backoff_s(self, consecutive_failures: int) -> float:
        """The delay before the restart that follows ``consecutive_failures`` quick failures."""
        exponent = max(consecutive_failures - 1, 0)
        try:
            delay = self.initial_backoff_s * self.factor**exponent
        except OverflowError:  # a role that failed thousands of times: long past the cap
            return self.max_backoff_s
        return min(self.max_backoff_s, delay)


class RoleState(enum.Enum):
    """Where a role is in its life, as shown to the operator."""

    WAITING = "waiting"
    """Not running; starts at ``next_start_at`` (first start, or restart after a backoff)."""
    RUNNING = "running"
    FAILED = "failed"
    """Gave up: bad input, not restarted."""
    STOPPING = "stopping"
    """The supervisor asked it to stop and waits for it to exit."""
    STOPPED = "stopped"


class ExitAction(enum.Enum):
    RESTART = "restart"
    GIVE_UP = "give up"
    NONE = "none"
    """An expected exit (the supervisor is stopping the role)."""


@dataclass(frozen=True)
class ExitVerdict:
    """What to do about one exit of a role, and what to tell the operator."""

    action: ExitAction
    reason: str
    delay_s: float = 0.0
    consecutive_failures: int = 0
    crash_loop: bool = False


def describe_exit(returncode: int) -> str:
    """``exited with code 3``, ``killed by SIGKILL``: a returncode as ``Popen`` reports it."""
    if returncode < 0:
        try:
            return f"killed by {signal.Signals(-returncode).name}"
        except ValueError:
            return f"killed by signal {-returncode}"
    if returncode == 0:
        return "exited with code 0"
    if returncode == EXIT_BAD_INPUT:
        return "exited with code 2 (bad input)"
    return f"exited with code {returncode}"


class RoleLifecycle:
    """The restart decisions for one role."""

    def __init__(self, policy: RestartPolicy, now: float) -> None:
        self.policy = policy
        self.state = RoleState.WAITING
        self.next_start_at: float | None = now
        self.started_at: float | None = None
        self.starts = 0
        self.crashes = 0
        """Unexpected exits in total."""
        self.consecutive_failures = 0
        """Quick unexpected exits since the last stable run."""
        self.last_exit: str | None = None

    @property
    def restarts(self) -> int:
        """Starts after the first one."""
        return max(self.starts - 1, 0)

    def should_start(self, now: float) -> bool:
        return (
            self.state is RoleState.WAITING
            and self.next_start_at is not None
            and now >= self.next_start_at
        )

    def restart_in_s(self, now: float) -> float | None:
        """Seconds until the next start while waiting, else None."""
        if self.state is not RoleState.WAITING or self.next_start_at is None:
            return None
        return max(self.next_start_at - now, 0.0)

    def uptime_s(self, now: float) -> float | None:
        if self.state not in {RoleState.RUNNING, RoleState.STOPPING} or self.started_at is None:
            return None
        return max(now - self.started_at, 0.0)

    def started(self, now: float) -> None:
        self.state = RoleState.RUNNING
        self.started_at = now
        self.next_start_at = None
        self.starts += 1

    def stopping(self) -> None:
        """The supervisor shuts down: no more starts; a running role is being stopped."""
        self.next_start_at = None
        if self.state is RoleState.RUNNING:
            self.state = RoleState.STOPPING
        elif self.state is RoleState.WAITING:
            self.state = RoleState.STOPPED

    def exited(self, now: float, returncode: int) -> ExitVerdict:
        """The role's process ended with ``returncode`` (negative: killed by that signal)."""
        what = describe_exit(returncode)
        self.last_exit = what
        uptime = now - self.started_at if self.started_at is not None else 0.0
        if self.state is RoleState.STOPPING:
            self.state = RoleState.STOPPED
            return ExitVerdict(ExitAction.NONE, f"{what} after it was asked to stop")
        self.crashes += 1
        stable = uptime >= self.policy.stable_after_s
        if returncode == EXIT_BAD_INPUT and not stable:
            self.state = RoleState.FAILED
            self.next_start_at = None
            return ExitVerdict(
                ExitAction.GIVE_UP,
                f"{what} {uptime:.1f}s after it started: its configuration or options are "
                "wrong; not restarting it (fix the input, then restart drsvc run)",
            )
        if stable:
            self.consecutive_failures = 0
        self.consecutive_failures += 1
        delay = self.policy.backoff_s(self.consecutive_failures)
        self.state = RoleState.WAITING
        self.next_start_at = now + delay
        crash_loop = self.consecutive_failures >= self.policy.crash_loop_after
        reason = f"{what} after {uptime:.1f}s"
        if crash_loop:
            reason += f"; crash loop: {self.consecutive_failures} quick failures in a row"
        return ExitVerdict(
            ExitAction.RESTART,
            reason,
            delay_s=delay,
            consecutive_failures=self.consecutive_failures,
            crash_loop=crash_loop,
        )
