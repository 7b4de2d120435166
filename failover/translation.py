"""The result of translating a consumer offset from one cluster to the other.

A translation is either *known* (``offset`` is set) or *unknown* (``offset is None``); it never
guesses. A known translation is *exact* when a consumer starting there neither re-reads nor skips
anything; otherwise ``reason`` says why not and ``pending`` says how far off it may be::

    reason              offset   exact   meaning
    EXACT               set      yes     zero re-read, zero skip
    AHEAD_OF_SYNCS      set      no      the position is past what the syncs describe: replication
                                         (or the index) lags; ``pending`` offsets are not covered.
                                         The offset is the end of what is known, so nothing is
                                         skipped; records copied later may be read again.
    RECOPY_BEHIND       set      no      a re-copy pass (after a worker restart or a lost sync) has
                                         not caught up with what an earlier pass copied: the offset
                                         is where the consumer skips nothing on the target, and
                                         ``pending`` records it had consumed are read again
    REPLICATION_GAP     set      no      the replicator jumped over ``pending`` source offsets
                                         (e.g. retention deleted them before they were copied);
                                         whatever records were there are missing on the target
    UNKNOWN_PARTITION   None     no      no sync has been seen for the partition
    TOPIC_MISMATCH      None     no      the syncs are for another incarnation of the topic (id)
    BEFORE_SYNCS        None     no      older than the oldest retained sync, or trimmed
    LOG_TRUNCATED       None     no      the source log was truncated past the committed offset
                                         (leader epoch check)

Which of them waiting can fix. A planned failover deactivates the application and then waits for
replication to catch up with its groups, which stand still meanwhile. Only some reasons can turn
exact that way; :data:`PERMANENT_REASONS` lists those that cannot, so that a failover can be
refused before the application is deactivated rather than after minutes of waiting:

* BEFORE_SYNCS: syncs only ever extend forward (new copies, newer passes); a position they do not
  reach from below now, they never will.
* LOG_TRUNCATED: the records the position refers to are gone from the source log.
* REPLICATION_GAP: the worker jumped over offsets it could no longer read (retention deleted them
  first) and carries on past them; no later pass copies them.

The others can: AHEAD_OF_SYNCS and RECOPY_BEHIND turn exact once replication reaches the position;
UNKNOWN_PARTITION is a partition replication has not copied yet (a new partition, a worker that
has not reached it) and TOPIC_MISMATCH a recreated topic whose new incarnation replication has not
copied yet (a new topic id restarts the partition from its start). Both later become one of the
other reasons, which is judged again then.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterator
from enum import StrEnum
from typing import NamedTuple

__all__ = ["PERMANENT_REASONS", "Reason", "Translation", "TranslationBatch", "never_written"]


class Reason(StrEnum):
    """Why a translation is what it is (see the module docstring)."""

    EXACT = "exact"
    AHEAD_OF_SYNCS = "ahead-of-syncs"
    RECOPY_BEHIND = "recopy-behind"
    REPLICATION_GAP = "replication-gap"
    UNKNOWN_PARTITION = "unknown-partition"
    TOPIC_MISMATCH = "topic-mismatch"
    BEFORE_SYNCS = "before-syncs"
    LOG_TRUNCATED = "log-truncated"

    @property
    def waits_can_fix(self) -> bool:
        """False when waiting for replication, with the group standing still, can never make
        this translation exact (see :data:`PERMANENT_REASONS`); True for EXACT (nothing to fix)."""
        return self not in PERMANENT_REASONS


PERMANENT_REASONS: frozenset[Reason] = frozenset(
    {Reason.BEFORE_SYNCS, Reason.LOG_TRUNCATED, Reason.REPLICATION_GAP}
)
"""Reasons that no amount of waiting for replication turns exact (see the module docstring)."""


class Translation(NamedTuple):
    """A translated offset (``None`` when unknown), the reason, and how many offsets are off.

    A named tuple rather than a dataclass: translation is on the hot path of checkpointing and a
    tuple is several times cheaper to create; it is just as immutable.
    """

    offset: int | None
    reason: Reason
    pending: int = 0
    """For AHEAD_OF_SYNCS and REPLICATION_GAP: offsets (on the queried side) the syncs do not cover;
    an upper bound on the records affected, since some of those offsets may hold no record. For
    RECOPY_BEHIND: copies of already consumed records that a consumer starting there reads again."""

    @property
    def exact(self) -> bool:
        """Zero re-read and zero skip."""
        return self.reason is Reason.EXACT

    @property
    def known(self) -> bool:
        """An offset was determined (exact or not)."""
        return self.offset is not None

    @property
    def ahead_of_replication(self) -> bool:
        """The queried position is past what the syncs cover."""
        return self.reason is Reason.AHEAD_OF_SYNCS


UNKNOWN_PARTITION = Translation(None, Reason.UNKNOWN_PARTITION)
TOPIC_MISMATCH = Translation(None, Reason.TOPIC_MISMATCH)
BEFORE_SYNCS = Translation(None, Reason.BEFORE_SYNCS)


def never_written(committed: int, group_side_end: int | None, other_end: int | None) -> bool:
    """Whether a position needs no sync to translate: the group stands at 0 on a partition that
    never held a record (its end is 0), and so does the partition on the other side. A consumer
    there has read nothing and skips nothing by starting at 0 on the other side; no sync can
    exist for it, since nothing was ever copied. (Java consumers commit such positions for every
    partition they are assigned, empty remote copies included.)"""
    return committed == 0 and group_side_end == 0 and other_end == 0


LOG_TRUNCATED = Translation(None, Reason.LOG_TRUNCATED)


class TranslationBatch:
    """Translations of many offsets of one partition, stored column-wise.

    ``offsets[i]`` is ``-1`` where translation ``i`` is unknown. Indexing or iterating yields
    :class:`Translation` values; the columns avoid creating one object per offset when a caller
    only needs the numbers.
    """

    __slots__ = ("offsets", "pending", "reasons")

    def __init__(self, offsets: array[int], reasons: list[Reason], pending: array[int]) -> None:
        if not len(offsets) == len(reasons) == len(pending):
            raise ValueError("translation batch columns differ in length")
        self.offsets = offsets
        self.reasons = reasons
        self.pending = pending

    @classmethod
    def of(cls, translations: list[Translation]) -> TranslationBatch:
        """A batch holding ``translations``."""
        return cls(
            array("q", [-1 if t.offset is None else t.offset for t in translations]),
            [t.reason for t in translations],
            array("q", [t.pending for t in translations]),
        )

    def __len__(self) -> int:
        return len(self.reasons)

    def __getitem__(self, i: int) -> Translation:
        offset = self.offsets[i]
        return Translation(None if offset < 0 else offset, self.reasons[i], self.pending[i])

    def __iter__(self) -> Iterator[Translation]:
        for offset, reason, pending in zip(self.offsets, self.reasons, self.pending, strict=True):
            yield Translation(None if offset < 0 else offset, reason, pending)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, TranslationBatch):
            return (self.offsets, self.reasons, self.pending) == (
                other.offsets,
                other.reasons,
                other.pending,
            )
        if isinstance(other, list):
            return list(self) == other
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"TranslationBatch({list(self)!r})"

    @property
    def exact_count(self) -> int:
        """How many of the translations are exact."""
        return self.reasons.count(Reason.EXACT)
