"""What a replication worker does with records it finds written under a stale epoch (see
:mod:`failover.stale_epochs`): count them, say so in its log, and add them to the flow's list in
Consul, which the failover report reads. The records themselves are copied like any other: the
worker reports, it does not judge what the application meant.

Finding happens on the hot path (rarely: only for records past a watch's boundary with an older
epoch); publishing happens at the worker's control refresh, merged into the flow's document by
compare-and-set, so several workers of one flow never overwrite each other's findings.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from drsvc.adapters.consul_coordination import ConsulCoordinator
from drsvc.errors import ConfigError, CoordinatorUnavailableError
from drsvc.runtime.replication.lane import Lane
from failover.errors import FormatError
from failover.stale_epochs import StaleEntry, StaleRecords

log = logging.getLogger(__name__)

__all__ = ["Publish", "StaleRecordsLog", "consul_publisher"]

#: merges entries into the flow's document; raises CoordinatorUnavailableError or ConfigError
Publish = Callable[[list[StaleEntry]], None]

#: a partition's warning is repeated at most this often while stale records keep coming
_WARN_EVERY_S = 60.0
_CAS_ATTEMPTS = 5


class StaleRecordsLog:
    """The stale records one worker found and has not published yet."""

    def __init__(self, flow_id: str, publish: Publish | None) -> None:
        self._flow_id = flow_id
        self._publish = publish
        self._pending: dict[tuple[str, str, int, int], set[int]] = {}
        self._warned_at: dict[tuple[str, int], float] = {}

    def found(self, lane: Lane, offset: int, epoch: int) -> None:
        """``lane``'s record at ``offset`` carries ``epoch``, below its watch's epoch."""
        topic, partition = lane.source.topic, lane.source.partition
        key = (lane.watch_app, topic, partition, lane.watch_epoch)
        self._pending.setdefault(key, set()).add(offset)
        now = time.monotonic()
        last = self._warned_at.get((topic, partition))
        if last is None or now - last >= _WARN_EVERY_S:
            self._warned_at[(topic, partition)] = now
            log.warning(
                "%s: %s-%d offset %d was written under epoch %d of application %s after a "
                "failover activated it elsewhere at epoch %d (a client that had not heard of "
                "the switch); copied, counted, and listed in the failover's report",
                self._flow_id,
                topic,
                partition,
                offset,
                epoch,
                lane.watch_app,
                lane.watch_epoch,
            )

    def publish(self) -> None:
        """Merge what was found into the flow's document; kept for the next try on failure."""
        if not self._pending:
            return
        if self._publish is None:  # no Consul: the log and the metric are all there is
            self._pending.clear()
            return
        entries = [
            StaleEntry(app, topic, partition, epoch, tuple(sorted(offsets)))
            for (app, topic, partition, epoch), offsets in sorted(self._pending.items())
        ]
        try:
            self._publish(entries)
        except (CoordinatorUnavailableError, ConfigError, FormatError) as err:
            log.warning(
                "%s: listing %d stale record(s) in Consul failed: %s (trying again later)",
                self._flow_id,
                sum(e.count for e in entries),
                err,
            )
            return
        self._pending.clear()


def consul_publisher(http_addr: str | None, key: str | None) -> Publish | None:
    """Merges into ``key`` at the Consul agent ``http_addr`` (None without either)."""
    if http_addr is None or key is None:
        return None
    store = ConsulCoordinator(http_addr)

    def publish(entries: list[StaleEntry]) -> None:
        for _ in range(_CAS_ATTEMPTS):
            entry = store.get(key)
            current = StaleRecords() if entry is None else StaleRecords.decode(entry.value)
            merged = current.merged(entries)
            if merged == current:
                return
            if store.put(key, merged.encode(), index=0 if entry is None else entry.index):
                return
        raise CoordinatorUnavailableError(
            f"{key} kept changing under {_CAS_ATTEMPTS} compare-and-set attempts"
        )

    return publish
