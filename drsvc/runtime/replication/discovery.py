"""Topic discovery off the copy loop.

Discovery asks both clusters (list the source's topics, describe them, create or grow remote
topics). While the source cluster is down every such request waits for its timeout, seconds
each, and a loop that waited with them served no delivery reports, sealed no runs and
committed nothing meanwhile: copies acknowledged in that time could lose their offset syncs when
the group then gave the partitions up. So the loop only starts a discovery, which runs on a
thread of its own, and takes its result at a later turn.

Discoveries never overlap (the catalog is not shared between threads) and each gets a
generation when it starts, so a result older than one already taken is dropped: a discovery the
loop had to run itself (:meth:`TopicDiscovery.discover_now`, when a rebalance hands over a
partition that discovery has not seen) is never replaced by an older one finishing later.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from drsvc.errors import KafkaUnavailableError
from drsvc.runtime.replication.topics import MirroredTopic

log = logging.getLogger(__name__)


class TopicCatalogRefresh(Protocol):
    """What discovery asks of the flow's topic catalog."""

    def refresh(self) -> dict[str, MirroredTopic]: ...


@dataclass(frozen=True)
class Discovered:
    """What one discovery found: the mirrored topics, or why it could not tell."""

    generation: int
    mirrored: dict[str, MirroredTopic] | None = None
    #: a cluster could not be asked (nothing changes; the next discovery tries again)
    unavailable: str | None = None
    #: anything else went wrong: raised on the loop, as if discovery had run there
    crash: BaseException | None = None


class TopicDiscovery:
    """Runs ``refresh`` (the catalog's discovery) on a thread of its own, or in the caller with
    ``background=False`` (fakes in unit tests, where nothing runs on a thread)."""

    def __init__(
        self,
        refresh: Callable[[], dict[str, MirroredTopic]],
        *,
        background: bool,
        name: str,
    ) -> None:
        self._refresh = refresh
        self._background = background
        self._name = name
        #: held while a discovery runs: they never overlap
        self._running_lock = threading.Lock()
        #: guards the fields below
        self._state = threading.Lock()
        self._started = 0
        self._taken = 0
        self._in_flight = False
        self._finished: Discovered | None = None

    @property
    def in_flight(self) -> bool:
        with self._state:
            return self._in_flight

    def start(self) -> None:
        """Begin a discovery unless one is under way."""
        with self._state:
            if self._in_flight:
                return
            self._in_flight = True
        if not self._background:
            self._run()
            return
        thread = threading.Thread(target=self._run, name=f"discovery-{self._name}", daemon=True)
        try:
            thread.start()
        except BaseException:
            with self._state:
                self._in_flight = False
            raise

    def take(self) -> Discovered | None:
        """The newest finished discovery not taken yet (None: nothing new)."""
        with self._state:
            found, self._finished = self._finished, None
            if found is None or found.generation <= self._taken:
                return None
            self._taken = found.generation
            return found

    def discover_now(self) -> Discovered:
        """Discover in the caller, after any discovery under way has finished; what it finds
        is taken at once (an older result finishing later is dropped)."""
        found = self._discover()
        with self._state:
            self._taken = max(self._taken, found.generation)
            if self._finished is not None and self._finished.generation <= found.generation:
                self._finished = None
        return found

    def _run(self) -> None:
        try:
            found = self._discover()
            with self._state:
                if self._finished is None or found.generation > self._finished.generation:
                    self._finished = found
        finally:
            with self._state:
                self._in_flight = False

    def _discover(self) -> Discovered:
        with self._running_lock:
            with self._state:
                self._started += 1
                generation = self._started
            try:
                return Discovered(generation, mirrored=self._refresh())
            except KafkaUnavailableError as err:
                return Discovered(generation, unavailable=str(err))
            except Exception as err:  # handed to the loop, which raises it
                return Discovered(generation, crash=err)


class FlowTopics:
    """The topics one flow copies now (``mirrored``), discovered again on the loop's schedule or
    at once. Shared by the engine, which starts discoveries and takes their results, and its
    delivery mode, which may need the topics rediscovered before it can place a partition."""

    def __init__(
        self,
        catalog: Callable[[], TopicCatalogRefresh],
        *,
        background: Callable[[], bool],
        name: str,
    ) -> None:
        #: the catalog and whether discoveries run off the loop, asked for at the first
        #: discovery (both come from the worker's Kafka boundary)
        self._catalog = catalog
        self._background = background
        self._name = name
        self._discovery: TopicDiscovery | None = None
        #: the flow's topics by source name, as the last discovery that worked found them
        self.mirrored: dict[str, MirroredTopic] = {}

    @property
    def discovery(self) -> TopicDiscovery:
        if self._discovery is None:
            self._discovery = TopicDiscovery(
                self._catalog().refresh, background=self._background(), name=self._name
            )
        return self._discovery

    def refresh_now(self) -> bool:
        """Discover the flow's topics again, now, in the caller (waiting for a discovery under
        way first); False when discovery failed (nothing changes)."""
        return self.use(self.discovery.discover_now())

    def start(self) -> None:
        """Begin a discovery off the loop (its result is taken by :meth:`take_finished`)."""
        self.discovery.start()

    def take_finished(self) -> bool:
        """Use what a discovery started earlier found, if it has finished and worked."""
        found = self.discovery.take()
        return found is not None and self.use(found)

    def use(self, found: Discovered) -> bool:
        if found.crash is not None:
            raise found.crash
        if found.mirrored is None:
            log.warning("topic discovery for %s failed: %s", self._name, found.unavailable)
            return False
        self.mirrored = found.mirrored
        return True
