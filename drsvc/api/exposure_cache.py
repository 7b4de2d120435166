"""Exposure answers (per group, what a failover now would lose or re-read), computed once per
application at a time and served again for a while.

Computing one asks both clusters of every group for offsets and translates them: seconds, and
load on the brokers. Every page of a dashboard left open, or a script in a loop, would repeat it.
So an application's exposure is kept for ``ttl_s``, as long as its active cluster and epoch are
the ones it was computed for, and a request that finds it missing waits for the one computation
already running instead of starting its own.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any

__all__ = ["CachedExposure", "ExposureAnswer", "ExposureCache"]


@dataclass(frozen=True)
class CachedExposure:
    #: what the exposure was computed for (the active cluster and epoch)
    key: Hashable
    document: dict[str, Any]
    #: when it was computed (wall clock, ms)
    as_of_ms: int
    #: when it was computed (monotonic clock, s)
    computed_at: float


@dataclass(frozen=True)
class ExposureAnswer:
    entry: CachedExposure
    #: computed for this request (not served from the cache)
    computed_now: bool
    age_s: float


class ExposureCache:
    def __init__(
        self,
        ttl_s: float,
        *,
        monotonic: Callable[[], float] = time.monotonic,
        wall_ms: Callable[[], int] = lambda: int(time.time() * 1000),
    ) -> None:
        self._ttl_s = ttl_s
        self._monotonic = monotonic
        self._wall_ms = wall_ms
        self._entries: dict[str, CachedExposure] = {}
        self._locks: dict[str, threading.Lock] = {}
        self._guard = threading.Lock()

    def get(
        self,
        app: str,
        key: Hashable,
        compute: Callable[[], tuple[Hashable, dict[str, Any]]],
    ) -> ExposureAnswer:
        """The exposure of ``app`` for ``key``: the kept one while it is younger than the
        time to live, else ``compute()`` (which answers the key it found and the document),
        one computation per application at a time."""
        with self._guard:
            lock = self._locks.setdefault(app, threading.Lock())
        with lock:
            entry = self._entries.get(app)
            if entry is not None and entry.key == key:
                age = self._monotonic() - entry.computed_at
                if age < self._ttl_s:
                    return ExposureAnswer(entry, False, age)
            found_key, document = compute()
            entry = CachedExposure(found_key, document, self._wall_ms(), self._monotonic())
            self._entries[app] = entry
            return ExposureAnswer(entry, True, 0.0)
