"""The long-polls of ``/v1/events``: any number of waiters, one reader of Consul.

A waiter holds no thread: it waits in the event loop for the next refresh. While at least one
waits, one background task reads the failover records (on a pool of one thread) every
``refresh_s`` and wakes every waiter, so Consul sees one list per interval whatever the number
of waiters; with none waiting, nothing reads. Waiters are bounded: past ``max_waiters`` a poll is
answered at once with what the log holds, and the caller is told when to come back.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from drsvc.api.events import Event, EventLog
from drsvc.api.limits import Pool, ThreadPools

__all__ = ["FEED_BUSY_RETRY_AFTER_S", "EventFeed", "FeedAnswer"]

log = logging.getLogger(__name__)

#: when a poll over the bound should come back
FEED_BUSY_RETRY_AFTER_S = 2


def _wall_ms() -> int:
    return int(time.time() * 1000)


@dataclass(frozen=True)
class FeedAnswer:
    events: list[Event]
    #: set when the poll was answered at once because too many were waiting
    retry_after_s: int | None = None


class EventFeed:
    def __init__(
        self,
        log_: EventLog,
        refresh: Callable[[], None],
        pools: ThreadPools,
        *,
        max_waiters: int,
        refresh_s: float,
        now_ms: Callable[[], int] = _wall_ms,
    ) -> None:
        self._log = log_
        self._refresh = refresh
        self._pools = pools
        self._max_waiters = max_waiters
        self._refresh_s = refresh_s
        self._now_ms = now_ms
        self._waiters = 0
        self._refresher: asyncio.Task[None] | None = None
        self._refreshed: asyncio.Event | None = None
        self._failure: Exception | None = None

    @property
    def waiters(self) -> int:
        return self._waiters

    async def read(self, cursor: str, wait_s: float) -> FeedAnswer:
        """The events after ``cursor``, waiting up to ``wait_s`` for the first one."""
        if wait_s <= 0:
            await self._pools.run(Pool.READS, self._refresh)
            return FeedAnswer(self._log.after(cursor, self._now_ms()))
        if self._waiters >= self._max_waiters:
            return FeedAnswer(self._log.after(cursor, self._now_ms()), FEED_BUSY_RETRY_AFTER_S)
        self._waiters += 1
        try:
            return FeedAnswer(await self._wait(cursor, wait_s))
        finally:
            self._waiters -= 1
            if self._waiters == 0 and self._refresher is not None:
                self._refresher.cancel()
                self._refresher = None

    async def _wait(self, cursor: str, wait_s: float) -> list[Event]:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait_s
        reading = self._refresher is not None
        refreshed = self._start_refresher()
        if not reading:
            # nobody kept the log current: the first check waits for a read made after this
            # poll arrived
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(refreshed.wait(), wait_s)
        while True:
            refreshed = self._current_refresh()
            if self._failure is not None:
                raise self._failure
            found = self._log.after(cursor, self._now_ms())
            remaining = deadline - loop.time()
            if found or remaining <= 0:
                return found
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(refreshed.wait(), remaining)

    def _current_refresh(self) -> asyncio.Event:
        assert self._refreshed is not None  # set while anyone waits
        return self._refreshed

    def _start_refresher(self) -> asyncio.Event:
        """The event the next refresh sets, starting the reader if none runs."""
        if self._refresher is None:
            self._failure = None
            self._refreshed = asyncio.Event()
            self._refresher = asyncio.get_running_loop().create_task(self._refresh_while_waited())
        return self._current_refresh()

    async def _refresh_while_waited(self) -> None:
        while True:
            try:
                await self._pools.run(Pool.EVENTS, self._refresh)
                self._failure = None
            except Exception as err:  # every waiter answers with it (an error, not silence)
                log.warning("reading the failover records for /v1/events failed: %s", err)
                self._failure = err
            done, self._refreshed = self._current_refresh(), asyncio.Event()
            done.set()
            await asyncio.sleep(self._refresh_s)
