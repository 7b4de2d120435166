"""What to read of a sync topic to bring a kept offset index up to date (pure, no I/O).

A process that translates more than once keeps the :class:`~failover.offset_index.OffsetIndex`
of a sync topic instead of reading the topic from its start every time. Applying syncs in
sync-topic order to one index is what a full read does, so extending the kept index with the
syncs written since it was last read gives the index a full read would give, as long as the kept
part is still what the topic holds. :func:`plan_extension` decides, from what was read before and
the topic's watermarks now, whether that holds and which offsets to read:

* **Nothing kept**: the whole topic, from each partition's log start.
* **The topic was recreated** (another topic id, a partition gone, or a partition ending below
  the offset already read): the kept index describes a topic that no longer exists; rebuild.
* **Retention deleted syncs the index holds** (a partition's log start moved past where the kept
  read began): rebuild. A kept index that remembers syncs a fresh read no longer finds would
  translate positions a fresh read reports as ``before-syncs`` (older than every retained sync),
  so whether a planned failover is refused would depend on how long the process has run.
  :meth:`~failover.offset_index.OffsetIndex.trim_before` cannot align the two: it is keyed by
  source offset, and where a fresh read's history of each partition starts depends on which
  sync sits first in the retained log, which the index does not keep per sync. A log start moves
  only when the broker deletes a whole segment of the topic (days of syncs at the default
  segment size), so rebuilding then costs one full read per deleted segment.
* **Otherwise**: per partition, from the next offset not read to its end now; a partition that
  is new (the topic grew) from its log start.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

__all__ = ["Extension", "KeptRead", "plan_extension"]


@dataclass(frozen=True)
class KeptRead:
    """How far a kept index has read its sync topic."""

    topic_id: bytes | None
    #: per partition: the first offset not read yet
    next_offsets: Mapping[int, int]
    #: per partition: where the kept read of it began (its log start then)
    origins: Mapping[int, int]


@dataclass(frozen=True)
class Extension:
    """What to read now: per partition ``[begin, end)``; with ``rebuild`` set, the kept index is
    to be dropped first and ``ranges`` cover the whole topic."""

    ranges: dict[int, tuple[int, int]] = field(default_factory=dict)
    rebuild: str | None = None
    #: the ranges start at the topic's log start (nothing kept, or a rebuild)
    full: bool = False


def plan_extension(
    kept: KeptRead | None, bounds: Mapping[int, tuple[int, int]], topic_id: bytes | None
) -> Extension:
    """The read that brings ``kept`` up to ``bounds`` (per partition, ``(log start, end)``) of
    the topic whose id is now ``topic_id`` (None: unknown, not compared)."""
    whole = {p: (low, high) for p, (low, high) in sorted(bounds.items())}
    if kept is None:
        return Extension(whole, full=True)
    why = _why_rebuild(kept, bounds, topic_id)
    if why is not None:
        return Extension(whole, rebuild=why, full=True)
    ranges = {}
    for p, (low, high) in sorted(bounds.items()):
        begin = kept.next_offsets.get(p, low)
        if begin < high:
            ranges[p] = (begin, high)
    return Extension(ranges)


def _why_rebuild(
    kept: KeptRead, bounds: Mapping[int, tuple[int, int]], topic_id: bytes | None
) -> str | None:
    if topic_id is not None and kept.topic_id is not None and topic_id != kept.topic_id:
        return "the topic was recreated (its topic id changed)"
    for p, read_to in sorted(kept.next_offsets.items()):
        if p not in bounds:
            return f"partition {p} is gone: the topic was recreated"
        low, high = bounds[p]
        if high < read_to:
            return (
                f"partition {p} ends at {high}, below the {read_to} already read: the topic was "
                "recreated"
            )
        origin = kept.origins.get(p, 0)
        if low > origin and read_to > origin:
            return (
                f"retention deleted syncs of partition {p} the kept index holds (log start {low}, "
                f"kept from {origin}): a fresh read no longer finds them"
            )
    return None
