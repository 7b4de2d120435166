"""Records appended under an epoch older than the one their cluster had: the data path's evidence
that a client kept writing after a switch.

Every record a failover-following producer writes carries the application's epoch
(:mod:`failover.epoch_header`). When a planned failover activates the application elsewhere at
epoch ``E``, the executor notes where the old cluster's partitions of the application's topics
ended at that moment (after the lease wait, so every client that keeps its promise has stopped):
an :class:`EpochWatch` per topic, kept in the control document of each flow out of the old
cluster. From then on, a record at or past that end that its producer wrote on the cluster itself
(no provenance header: not a copy) with an epoch below ``E`` was sent by a client that had not
heard of the switch: a paused process, a late flush. The replication engine counts such records as
it reads them, names them in its log, and keeps the list in :class:`StaleRecords` for the failover
report. It never drops or alters them: what to do with them is the operator's call, as with the
records an unplanned failover leaves behind.

A record without the header (a producer that does not follow failovers) is not judged here; the
verify job's "two active" check covers those from the workload's history.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from failover.epoch_header import EPOCH_HEADER, decode_epoch
from failover.errors import FormatError
from failover.provenance import PROVENANCE_HEADER

__all__ = [
    "MAX_LISTED_OFFSETS",
    "EpochWatch",
    "StaleEntry",
    "StaleRecords",
    "record_epoch",
    "watch_after_switch",
    "watches_from_json",
    "watches_to_json",
]

#: stale offsets listed per partition and epoch; beyond this only the count grows
MAX_LISTED_OFFSETS = 1000


@dataclass(frozen=True)
class EpochWatch:
    """Since ``app`` was activated elsewhere at ``epoch``, records of the topic at or past
    ``from_offsets[partition]`` must carry an epoch of at least ``epoch``."""

    app: str
    epoch: int
    from_offsets: Mapping[int, int] = field(default_factory=dict)

    def boundary(self, partition: int) -> int | None:
        """The first offset judged in ``partition`` (None: the partition is not watched)."""
        return self.from_offsets.get(partition)


def watch_after_switch(
    current: Mapping[str, EpochWatch],
    app: str,
    epoch: int,
    ends: Mapping[tuple[str, int], int],
) -> dict[str, EpochWatch]:
    """``current`` with the topics of ``ends`` watched from those ends at ``epoch``. A topic
    watched at a higher epoch already keeps its watch (a later switch knows more)."""
    watches = dict(current)
    by_topic: dict[str, dict[int, int]] = {}
    for (topic, partition), end in ends.items():
        by_topic.setdefault(topic, {})[partition] = end
    for topic, offsets in by_topic.items():
        held = watches.get(topic)
        if held is not None and held.epoch >= epoch:
            continue
        watches[topic] = EpochWatch(app, epoch, dict(sorted(offsets.items())))
    return watches


def record_epoch(headers: Sequence[tuple[str, bytes | None]] | None) -> int | None:
    """The epoch a record's producer stamped on it, if the record was written on this cluster:
    None without an epoch header, with a value that is not an epoch, or for a copy (a
    provenance header: the copy's epoch is judged on the cluster it was written on)."""
    if not headers:
        return None
    epoch = None
    for name, value in headers:
        if name == PROVENANCE_HEADER:
            return None
        if name == EPOCH_HEADER:
            epoch = decode_epoch(value)
    return epoch


def watches_to_json(watches: Mapping[str, EpochWatch]) -> dict[str, object]:
    return {
        topic: {
            "app": w.app,
            "epoch": w.epoch,
            "from": {str(p): o for p, o in sorted(w.from_offsets.items())},
        }
        for topic, w in sorted(watches.items())
    }


def watches_from_json(raw: object) -> dict[str, EpochWatch]:
    """The watches of a control document; raises ValueError naming what is wrong."""
    if not isinstance(raw, dict):
        raise ValueError("epoch_watch must be an object of topics")
    watches = {}
    for topic, value in raw.items():
        if not isinstance(value, dict):
            raise ValueError(f"epoch_watch.{topic} must be an object")
        app, epoch, offsets = value.get("app"), value.get("epoch"), value.get("from")
        if not isinstance(app, str) or not app:
            raise ValueError(f"epoch_watch.{topic}.app must be an application name")
        if not isinstance(epoch, int) or not _is_count(epoch):
            raise ValueError(f"epoch_watch.{topic}.epoch must be an integer >= 0")
        if not isinstance(offsets, dict):
            raise ValueError(f"epoch_watch.{topic}.from must be an object of partitions")
        parsed = {}
        for partition, offset in offsets.items():
            if not str(partition).isdigit() or not _is_count(offset):
                raise ValueError(
                    f"epoch_watch.{topic}.from: {partition!r}: {offset!r} is not a partition "
                    "and an offset"
                )
            parsed[int(partition)] = offset
        watches[str(topic)] = EpochWatch(app, epoch, parsed)
    return watches


@dataclass(frozen=True)
class StaleEntry:
    """The stale records found in one partition against one watch."""

    app: str
    topic: str
    partition: int
    #: the epoch the records should have had at least (the watch's: the switch's activation)
    epoch: int
    #: their offsets, ascending (at most MAX_LISTED_OFFSETS)
    offsets: tuple[int, ...]
    #: stale records found beyond the listed ones
    more: int = 0

    @property
    def count(self) -> int:
        return len(self.offsets) + self.more


@dataclass(frozen=True)
class StaleRecords:
    """What the workers of one flow found, as kept in Consul. Merging is idempotent (offsets are
    a set), so a partition read twice (a worker restarted, partitions moved) counts once."""

    entries: tuple[StaleEntry, ...] = ()

    def merged(self, found: Iterable[StaleEntry]) -> StaleRecords:
        by_key: dict[tuple[str, str, int, int], StaleEntry] = {
            (e.app, e.topic, e.partition, e.epoch): e for e in self.entries
        }
        for new in found:
            key = (new.app, new.topic, new.partition, new.epoch)
            old = by_key.get(key)
            if old is None:
                by_key[key] = _capped(new, set(new.offsets), new.more)
                continue
            offsets = set(old.offsets) | set(new.offsets)
            by_key[key] = _capped(old, offsets, max(old.more, new.more))
        return StaleRecords(tuple(by_key[k] for k in sorted(by_key)))

    def of(self, app: str, epoch: int) -> list[StaleEntry]:
        return [e for e in self.entries if e.app == app and e.epoch == epoch]

    def encode(self) -> str:
        return json.dumps(
            {
                "v": 1,
                "entries": [
                    {
                        "app": e.app,
                        "topic": e.topic,
                        "partition": e.partition,
                        "epoch": e.epoch,
                        "offsets": list(e.offsets),
                        "more": e.more,
                    }
                    for e in self.entries
                ],
            },
            separators=(",", ":"),
        )

    @classmethod
    def decode(cls, text: str) -> StaleRecords:
        try:
            raw = json.loads(text)
            entries = tuple(
                StaleEntry(
                    str(e["app"]),
                    str(e["topic"]),
                    int(e["partition"]),
                    int(e["epoch"]),
                    tuple(sorted(int(o) for o in e["offsets"])),
                    int(e.get("more", 0)),
                )
                for e in raw["entries"]
            )
        except (ValueError, KeyError, TypeError) as err:
            raise FormatError(f"a stale-records document is unreadable: {err}") from err
        return cls(entries)


def _capped(entry: StaleEntry, offsets: set[int], more: int) -> StaleEntry:
    listed = sorted(offsets)
    extra = max(0, len(listed) - MAX_LISTED_OFFSETS)
    return StaleEntry(
        entry.app,
        entry.topic,
        entry.partition,
        entry.epoch,
        tuple(listed[:MAX_LISTED_OFFSETS]),
        max(more, extra),
    )


def _is_count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0
