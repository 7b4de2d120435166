"""Logging a failing stream of attempts once per outage instead of once per attempt."""

from __future__ import annotations

import logging
from dataclasses import dataclass


@dataclass
class OutageLog:
    """Says once when attempts at ``what`` start failing and once when they succeed again.

    A heartbeat is attempted every second; during an outage of ten minutes that would be 600
    identical warnings. This keeps the first failure's reason, counts the rest, and reports the
    count and duration when the outage ends.
    """

    what: str
    logger: logging.Logger
    failing_since: float | None = None
    failures: int = 0

    @property
    def failing(self) -> bool:
        return self.failing_since is not None

    def failed(self, reason: str, now: float, *, with_traceback: bool = False) -> None:
        """An attempt failed at ``now`` (monotonic seconds) for ``reason``; ``with_traceback``
        adds the exception being handled to the first report (for failures nobody expected)."""
        self.failures += 1
        if self.failing_since is None:
            self.failing_since = now
            self.logger.warning(
                "%s failing: %s (said once per outage; retrying quietly)",
                self.what,
                reason,
                exc_info=with_traceback,
            )

    def succeeded(self, now: float) -> None:
        """An attempt succeeded at ``now``."""
        if self.failing_since is not None:
            self.logger.info(
                "%s working again after %d failed attempt(s) over %.1fs",
                self.what,
                self.failures,
                max(0.0, now - self.failing_since),
            )
        self.failing_since = None
        self.failures = 0
