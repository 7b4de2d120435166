"""How much of the process one kind of request may take: body size, long-polls, threads.

The handlers' blocking work (Kafka and Consul reads, failovers' dry runs) runs on threads. Left
to the server's one shared pool, a burst of slow reads or long-polls takes every thread, and the
health probes and the operators' changes queue behind them. So each kind of work gets its own
bounded pool: the reads, the changes, the readiness probe's Consul check, and the one
background reader that feeds every long-poll.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import TypeVar

import anyio.to_thread
from anyio import CapacityLimiter

from drsvc.errors import ConfigError

__all__ = ["ApiLimits", "Pool", "ThreadPools"]

T = TypeVar("T")


@dataclass(frozen=True)
class ApiLimits:
    """The API's bounds; every one has a default that suits one API process."""

    #: the largest request body accepted (the largest real one, a failover request, is < 1 KiB)
    max_body_bytes: int = 64 * 1024
    #: long-polls of /v1/events waiting at once; past it a poll is answered at once
    max_long_polls: int = 32
    #: threads for the reads' blocking work (Kafka and Consul)
    read_threads: int = 16
    #: threads for changes (dry runs, starting failovers, migrations' steps), apart from the
    #: reads: a flood of slow reads must not hold the operator who fails an application over
    change_threads: int = 4
    #: threads for /readyz's Consul check, apart from everything else
    readiness_threads: int = 2
    #: how long a computed exposure (GET /v1/apps?exposure=true) is served again
    exposure_ttl_s: float = 10.0
    #: how often the long-polls' one background reader reads the failover records
    long_poll_refresh_s: float = 0.5

    def __post_init__(self) -> None:
        for name in (
            "max_body_bytes",
            "max_long_polls",
            "read_threads",
            "change_threads",
            "readiness_threads",
        ):
            if getattr(self, name) < 1:
                raise ConfigError(
                    f"API limit {name} must be at least 1 (got {getattr(self, name)})"
                )
        if self.exposure_ttl_s < 0:
            raise ConfigError(
                f"API limit exposure_ttl_s must not be negative ({self.exposure_ttl_s})"
            )
        if self.long_poll_refresh_s <= 0:
            raise ConfigError("API limit long_poll_refresh_s must be positive")


class Pool(Enum):
    READS = "reads"
    CHANGES = "changes"
    READINESS = "readiness"
    #: the long-polls' one reader of the failover records
    EVENTS = "events"


class ThreadPools:
    """A bounded thread pool per :class:`Pool`, made in the event loop that uses it (a
    capacity limiter belongs to one loop; a test client may run each request in a new one)."""

    def __init__(self, limits: ApiLimits) -> None:
        self._sizes = {
            Pool.READS: limits.read_threads,
            Pool.CHANGES: limits.change_threads,
            Pool.READINESS: limits.readiness_threads,
            Pool.EVENTS: 1,
        }
        self._loop: asyncio.AbstractEventLoop | None = None
        self._limiters: dict[Pool, CapacityLimiter] = {}

    def limiter(self, pool: Pool) -> CapacityLimiter:
        loop = asyncio.get_running_loop()
        if loop is not self._loop:
            self._loop = loop
            self._limiters = {p: CapacityLimiter(size) for p, size in self._sizes.items()}
        return self._limiters[pool]

    async def run(self, pool: Pool, work: Callable[[], T]) -> T:
        """``work()`` on a thread of ``pool``, waiting for a free one."""
        return await anyio.to_thread.run_sync(work, limiter=self.limiter(pool))
