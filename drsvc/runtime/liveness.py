"""Whether a role's main loops are still turning: what its ``/healthz`` answers.

A process that serves ``/metrics`` from a thread of its own can answer a scrape long after its
main loop has hung (a deadlock, a call that never returns); a liveness probe of ``/metrics``
would keep such a role running forever. Each loop that matters ticks here once per turn
(:meth:`LoopLiveness.tick`); ``/healthz`` answers unhealthy once a loop that ticked before has
not ticked for its ``stale_after_s``, so the orchestrator restarts the role.

A loop counts only from its first tick: start-up (connecting, restoring state) is the readiness
probe's business, and a role whose loops have not been wired to tick yet answers healthy while
its process serves.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["DEFAULT_STALE_AFTER_S", "LoopLiveness", "Verdict", "loop_liveness"]

#: how long a loop may go without a tick before its role counts as hung: longer than any wait
#: a loop makes on purpose (a poll, a backoff, a blocking query of Consul)
DEFAULT_STALE_AFTER_S = 120.0


@dataclass(frozen=True)
class Verdict:
    healthy: bool
    detail: str
    """One line per loop: its name, seconds since its last tick and its limit."""


class LoopLiveness:
    """The last tick of each named loop of this process; thread-safe."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._last: dict[str, tuple[float, float]] = {}

    def tick(self, loop: str, stale_after_s: float = DEFAULT_STALE_AFTER_S) -> None:
        """``loop`` made a turn; it counts as hung after ``stale_after_s`` without another."""
        if stale_after_s <= 0:
            raise ValueError(f"stale_after_s must be positive (got {stale_after_s})")
        with self._lock:
            self._last[loop] = (self._clock(), stale_after_s)

    def forget(self, loop: str) -> None:
        """``loop`` ended on purpose (a clean stop): it no longer counts."""
        with self._lock:
            self._last.pop(loop, None)

    def verdict(self) -> Verdict:
        now = self._clock()
        with self._lock:
            last = dict(self._last)
        if not last:
            return Verdict(True, "no loop has ticked yet")
        lines: list[str] = []
        healthy = True
        for loop, (at, limit) in sorted(last.items()):
            age = now - at
            stale = age > limit
            healthy = healthy and not stale
            state = "STALE" if stale else "ok"
            lines.append(f"{loop} {state}: last tick {age:.1f}s ago (limit {limit:.0f}s)")
        return Verdict(healthy, "\n".join(lines))


_process_liveness: LoopLiveness | None = None
_process_lock = threading.Lock()


def loop_liveness() -> LoopLiveness:
    """This process's loops (made on first use, never at import)."""
    global _process_liveness  # noqa: PLW0603 - one per process, as the metrics registry
    with _process_lock:
        if _process_liveness is None:
            _process_liveness = LoopLiveness()
        return _process_liveness
