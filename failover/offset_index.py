"""The offset-sync index: exact offset translation from a stream of offset syncs.

Vocabulary. A *copy* ``(s, t)`` says that source record ``s`` of a partition was written to the
target at offset ``t``. Syncs (:mod:`failover.offset_syncs`) list the copies of *runs*: the worker
read source positions ``[b, e)`` and copied every record a ``read_committed`` consumer gets there.
Neither log is contiguous (compaction, transaction markers, aborted transactions), and at-least-once
restarts copy source ranges twice, so one ``s`` may have several copies.

Invariants the index relies on (the replicator guarantees them; violations raise
:class:`SyncConflictError` and leave the index unchanged):

1. One writer per target partition, and the syncs of a partition arrive in the order they were
   produced (one key per partition, so one partition of the sync topic). Hence copies arrive in
   *target order*, ``t`` strictly increasing across syncs: target order is append order, and a
   re-copied range simply appears again later (a new *pass*). A sync whose copies all equal copies
   already indexed is a duplicate and is ignored.
2. Within a run the worker reads sequentially, so source offsets increase along a run. A run that
   starts exactly where the previous one ended continues a *chain*; any other start begins a new
   chain (``b`` below the previous end: a restart; above: a forward jump, which leaves a gap).
3. The *frontier* ``F`` is the end ``e`` of the last run: where the worker continues reading.
4. The *floor* is the start of the first run the index saw, raised by ``trim_before``.

Downstream (failover): a source consumer committed ``c`` (it consumed the records below ``c``).
Translate to ``p = 1 + max{t : (s, t) a copy with s < c}``: right after the newest copy of anything
already consumed. Every copy at ``t >= p`` then has ``s >= c`` (zero re-read), and the newest pass
that reached ``c`` continues from there (zero skip). A ``c`` in a gap between copied records
``s1 < s2`` maps to right after the copy of ``s1``; ``c == F`` (caught up, also past trailing
markers) maps right after the last copy. If no copy has ``s < c`` and ``c >= floor``, the answer is
the first indexed copy. The result is EXACT when ``floor <= c <= F`` and the runs from the one
holding that copy onward cover every position of ``[c, F)`` (if a forward jump left some out, it is
a REPLICATION_GAP); ``c > F`` is AHEAD_OF_SYNCS (same offset: nothing unread is skipped, records
copied later may be read twice); ``c < floor`` is BEFORE_SYNCS.

Upstream (failback): a target consumer committed ``t``. Translate to the running maximum
``u = 1 + max{s : (s, t') a copy with t' < t}`` so that no record it read in any pass is read again.
Known for ``t`` after the first indexed copy; EXACT up to one past the last copy (or up to a
caller-supplied ``target_end`` below which the caller knows every copy is indexed, e.g. after
trailing transaction markers), AHEAD_OF_SYNCS beyond. It is a REPLICATION_GAP when some position
of ``[floor, u)`` lies in none of the runs the consumer has read. ``t == 0`` (a group at the start
of the copy, as one reset to earliest is) is EXACT at ``u = 0``: the maximum over no copies, since
no offset of a partition lies before 0 and so the consumer has read nothing, whatever syncs the
index lacks; it starts at the source's start and reads every record it had not read. A ``t`` at
or before the first indexed copy but above 0 stays BEFORE_SYNCS: copies the index does not hold
(syncs trimmed, deleted by the sync topic's retention, or written before the index began) may lie
below it, and the consumer may have read them.

Generations. Syncs carry the source and target topic ids. Each id pair has its own history; the
newest pair is the partition's current generation. A query that names ids uses the matching
history or gets TOPIC_MISMATCH, so a recreated topic on either side never reuses old syncs.

Leader epochs. From the runs the index keeps, per generation, the first offset seen under each
source leader epoch (a truncation, an epoch starting below offsets seen under older epochs, drops
those). A downstream query may pass the leader epoch of the committed offset; when the offset lies
past the start of the next newer epoch, the log was truncated under it: LOG_TRUNCATED. As with
Kafka's own check this can miss a truncation the syncs did not show, but never reports a false one.

Layout and cost. Per generation, parallel ``array('q')`` columns: segments (source start, target
start, count) in target order, merged across contiguous runs; chains (begin, end, first segment,
running maximum of source ends before the chain); a monotone stack of chains by first source offset
(a chain is popped when a later one starts at or below it: it can never hold the newest copy below
any ``c`` again); the chain indices of forward jumps and of gaps. A contiguous stream costs nothing
per run; a run separated by a transaction marker costs one segment, 24 bytes. Appending is
amortised O(1) per segment; queries are O(log n) (bisect), plus a scan of the chains involved when a
forward jump lies in the range the query depends on (replication skipped data; rare). Batches of
downstream queries are vectorised with numpy. Trimming and snapshots are O(n) array copies. The
index is not thread-safe: one owner applies syncs and answers queries.
"""

from __future__ import annotations

import struct
import sys
import zlib
from array import array
from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Iterator
from typing import NamedTuple

from failover.errors import IndexSnapshotError, SyncConflictError
from failover.offset_syncs import TOPIC_ID_SIZE, OffsetSync, Segment, TopicPartition
from failover.translation import (
    BEFORE_SYNCS,
    LOG_TRUNCATED,
    TOPIC_MISMATCH,
    UNKNOWN_PARTITION,
    Reason,
    Translation,
    TranslationBatch,
)

__all__ = [
    "SNAPSHOT_MAGIC",
    "SNAPSHOT_VERSION",
    "IndexSnapshotError",
    "OffsetIndex",
    "SyncConflictError",
    "SyncPosition",
]

SNAPSHOT_MAGIC = b"DSXI"
SNAPSHOT_VERSION = 1

_EXACT = Reason.EXACT
_AHEAD = Reason.AHEAD_OF_SYNCS
_BEHIND = Reason.RECOPY_BEHIND
_GAP = Reason.REPLICATION_GAP
_VECTOR_MIN = 64  # below this many offsets, batch translation loops over single ones
# Builds a Translation without going through the named tuple's Python-level __new__ (hot path).
_make = tuple.__new__
_REASONS = tuple(Reason)
_BEFORE_CODE = _REASONS.index(Reason.BEFORE_SYNCS)
_AHEAD_CODE = _REASONS.index(Reason.AHEAD_OF_SYNCS)
_EXACT_CODE = _REASONS.index(Reason.EXACT)
_START = Translation(0, Reason.EXACT)  # upstream from the start of the copy: the source's start


class SyncPosition(NamedTuple):
    """Where a sync record sits in the sync topic."""

    partition: int
    offset: int


def _q() -> array[int]:
    return array("q")


class _History:
    """All the index knows about one partition under one (source id, target id) generation."""

    __slots__ = (
        "ch_begin",
        "ch_end",
        "ch_pmax",
        "ch_seg",
        "cs_chain",
        "cs_src",
        "dropped",
        "ep_epoch",
        "ep_start",
        "floor",
        "holes",
        "jumps",
        "max_end",
        "pmax",
        "seg_cnt",
        "seg_src",
        "seg_tgt",
        "source_topic_id",
        "target_topic_id",
        "tp",
    )

    def __init__(self, tp: TopicPartition, source_topic_id: bytes, target_topic_id: bytes) -> None:
        self.tp = tp
        self.source_topic_id = source_topic_id
        self.target_topic_id = target_topic_id
        self.seg_src = _q()  # segments in target order
        self.seg_tgt = _q()
        self.seg_cnt = _q()
        self.ch_begin = _q()  # chains of contiguous runs, in order
        self.ch_end = _q()
        self.ch_seg = _q()  # index of the chain's first segment
        self.ch_pmax = _q()  # max source end of all segments before the chain (-1: none)
        self.cs_src = _q()  # monotone stack: first source offset of the chain, increasing
        self.cs_chain = _q()  # ... and the chain's index
        self.jumps: list[int] = []  # chains starting above the end of the previous chain
        self.holes: list[int] = []  # chains starting above the end of every earlier chain
        self.ep_epoch: list[int] = []  # leader epochs seen, increasing
        self.ep_start: list[int] = []  # first source offset seen under each
        self.floor = 0
        self.max_end = -1
        self.pmax = -1  # max source end of every segment ever appended
        self.dropped = 0  # segments removed by trimming

    # -- applying syncs ---------------------------------------------------------------------

    def apply(self, sync: OffsetSync) -> bool:
        segments = sync.segments
        seg_src, seg_tgt, seg_cnt = self.seg_src, self.seg_tgt, self.seg_cnt
        n = len(seg_src)
        if segments and n and segments[0].target_offset < seg_tgt[-1] + seg_cnt[-1]:
            beyond = self._beyond_indexed(sync)
            if beyond is None:
                return False
            sync = beyond
            segments = sync.segments
        begin, end = sync.source_begin, sync.source_end
        ch_end = self.ch_end
        continues = bool(ch_end) and begin == ch_end[-1]
        if continues:
            ch_end[-1] = end
        else:
            index = len(ch_end)
            if not index:
                self.floor = begin
            else:
                if begin > ch_end[-1]:
                    self.jumps.append(index)
                if begin > self.max_end:
                    self.holes.append(index)
            self.ch_begin.append(begin)
            ch_end.append(end)
            self.ch_seg.append(n)
            self.ch_pmax.append(self.pmax)
        self.max_end = max(self.max_end, end)
        if not segments:
            return True
        pmax = self.pmax
        first = 0
        chain_start = self.ch_seg[-1]
        if continues and chain_start < n:
            source, target, count = segments[0]
            last_count = seg_cnt[-1]
            if source == seg_src[-1] + last_count and target == seg_tgt[-1] + last_count:
                seg_cnt[-1] = last_count + count
                first = 1
                pmax = max(pmax, source + count)
        for source, target, count in segments[first:] if first else segments:
            if n == chain_start:
                self._push_chain(source, len(ch_end) - 1)
            seg_src.append(source)
            seg_tgt.append(target)
            seg_cnt.append(count)
            n += 1
            pmax = max(pmax, source + count)
        self.pmax = pmax
        if sync.leader_epoch >= 0:
            self._note_epoch(sync.leader_epoch, segments[0].source_offset)
        return True

    def _push_chain(self, source: int, chain: int) -> None:
        cs_src, cs_chain = self.cs_src, self.cs_chain
        while cs_src and cs_src[-1] >= source:
            cs_src.pop()
            cs_chain.pop()
        cs_src.append(source)
        cs_chain.append(chain)

    def _beyond_indexed(self, sync: OffsetSync) -> OffsetSync | None:
        """The part of ``sync`` past the indexed copies, or None when it adds nothing.

        Its copies at target offsets already indexed must be exactly the indexed ones (a sync
        delivered twice, or syncs rebuilt after a crash for copies whose syncs had in fact been
        written); anything else there raises :class:`SyncConflictError`. The rest is returned as
        a run of its own that starts right after the last indexed copy it repeats, continuing the
        current chain when that copy is the last one indexed.
        """
        seg_src, seg_tgt, seg_cnt = self.seg_src, self.seg_tgt, self.seg_cnt
        known_end = seg_tgt[-1] + seg_cnt[-1]
        where = f"{self.tp.topic}-{self.tp.partition}"
        tail: list[Segment] = []
        last_repeated: tuple[int, int] | None = None  # (source, target) of the last repeat
        for first_source, first_target, length in sync.segments:
            source, target, count = first_source, first_target, length
            while count:
                if target >= known_end:
                    tail.append(Segment(source, target, count))
                    break
                if target < seg_tgt[0]:
                    if not self.dropped:
                        raise SyncConflictError(
                            f"offset sync for {where} copies to target offset {target}, before the "
                            f"first indexed copy (target {seg_tgt[0]}): syncs arrived out of order"
                        )
                    step = min(count, seg_tgt[0] - target)  # trimmed away: nothing to compare
                else:
                    k = bisect_right(seg_tgt, target) - 1
                    offset = target - seg_tgt[k]
                    if offset >= seg_cnt[k] or seg_src[k] + offset != source:
                        indexed = (
                            f"source {seg_src[k] + offset}"
                            if offset < seg_cnt[k]
                            else "no copy there"
                        )
                        raise SyncConflictError(
                            f"offset sync for {where} maps source {source} to target {target}, but "
                            f"the index holds {indexed}: syncs arrived out of order, two writers "
                            "share the target partition, or it was recreated without a new topic id"
                        )
                    step = min(count, seg_cnt[k] - offset)
                last_repeated = (source + step - 1, target + step - 1)
                source += step
                target += step
                count -= step
        if not tail:
            return None
        if last_repeated is None:
            begin = sync.source_begin
        else:
            begin = max(sync.source_begin, last_repeated[0] + 1)
            frontier = self.ch_end[-1]
            if last_repeated[1] == known_end - 1 and begin <= frontier <= tail[0].source_offset:
                begin = frontier  # it repeats the newest copies: the chain goes on
        return OffsetSync(
            sync.topic,
            sync.partition,
            sync.source_topic_id,
            sync.target_topic_id,
            sync.leader_epoch,
            begin,
            sync.source_end,
            tuple(tail),
        )

    def _note_epoch(self, epoch: int, start: int) -> None:
        epochs, starts = self.ep_epoch, self.ep_start
        if not epochs or epoch > epochs[-1]:
            while starts and starts[-1] >= start:  # those epochs were truncated away
                epochs.pop()
                starts.pop()
            epochs.append(epoch)
            starts.append(start)
            return
        i = bisect_left(epochs, epoch)
        low = starts[i - 1] if i else -1
        if epochs[i] == epoch:
            if low <= start < starts[i]:
                starts[i] = start  # an earlier record of a known epoch (a re-copy)
        elif low <= start <= starts[i]:
            epochs.insert(i, epoch)  # an older epoch the index had not seen
            starts.insert(i, start)

    # -- translation ------------------------------------------------------------------------

    def downstream(self, c: int, leader_epoch: int | None) -> Translation:
        if leader_epoch is not None and self.ep_epoch:
            i = bisect_right(self.ep_epoch, leader_epoch)
            if i < len(self.ep_start) and c > self.ep_start[i]:
                return LOG_TRUNCATED
        if c < self.floor:
            return BEFORE_SYNCS
        cs_src = self.cs_src
        i = bisect_left(cs_src, c) - 1
        if i >= 0:
            chain = self.cs_chain[i]
            seg_src = self.seg_src
            ch_seg = self.ch_seg
            if chain + 1 < len(ch_seg):
                k = bisect_left(seg_src, c, ch_seg[chain], ch_seg[chain + 1]) - 1
            else:
                k = bisect_left(seg_src, c, ch_seg[chain]) - 1
            taken = c - seg_src[k]
            count = self.seg_cnt[k]
            p = self.seg_tgt[k] + (count if taken > count else taken)
        elif self.dropped or not self.seg_src:
            return BEFORE_SYNCS
        else:
            p = self.seg_tgt[0]
            chain = 0
        frontier = self.ch_end[-1]
        jumps = self.jumps
        # Only a pass behind an earlier one, or a forward jump after the consumed copy, can leave
        # the newest copy of an unread record before p (see _recopy_behind).
        if c < self.max_end and (frontier < self.max_end or (jumps and jumps[-1] > chain)):
            behind = self._recopy_behind(c, p)
            if behind is not None:
                return behind
        if c > frontier:
            return Translation(p, _AHEAD, c - frontier)
        if jumps and jumps[-1] > chain:
            missing = self._uncovered(range(chain, len(self.ch_end)), c, frontier, None)
            if missing:
                return Translation(p, _GAP, missing)
        return _make(Translation, (p, _EXACT, 0))

    def _recopy_behind(self, c: int, p: int) -> Translation | None:
        """The answer for ``c`` while the newest pass is behind an earlier one, if it differs.

        A re-copy pass (after a worker restart or a lost sync) starts below where an earlier pass
        had got to. Until it catches up, records the earlier pass copied past its frontier are on
        the target only *before* the re-copy's copies. Right after the newest copy of a consumed
        record (``p``) a consumer would never read them, and if the source were lost now they
        would be skipped. So when some record at or after ``c`` has its newest copy before ``p``,
        the answer is the earliest newest copy of such a record, ``u``: nothing on the target is
        skipped, and the copies of consumed records at or after ``u`` are read again (counted as
        pending). None when no such record exists (the usual answer is then right).
        """
        u = self._first_newest_copy_from(c)
        if u is None or u >= p:
            return None
        return Translation(u, _BEHIND, self._copies_below(c, u))

    def _first_newest_copy_from(self, c: int) -> int | None:
        """The lowest target offset holding the newest copy of a record at or after ``c``."""
        ch_begin, ch_end, ch_seg = self.ch_begin, self.ch_end, self.ch_seg
        seg_src, seg_tgt, seg_cnt = self.seg_src, self.seg_tgt, self.seg_cnt
        n_seg = len(seg_src)
        best: int | None = None
        newer: list[tuple[int, int]] = []  # source ranges read by newer chains, merged, sorted
        for chain in range(len(ch_end) - 1, -1, -1):
            low, high = max(ch_begin[chain], c), ch_end[chain]
            first, last = ch_seg[chain], ch_seg[chain + 1] if chain + 1 < len(ch_seg) else n_seg
            for part_low, part_high in _subtract((low, high), newer):
                # The chain's first copy of a record in [part_low, part_high), if any.
                k = bisect_right(seg_src, part_low, first, last) - 1
                if k < first or seg_src[k] + seg_cnt[k] <= part_low:
                    k += 1
                if k >= last or seg_src[k] >= part_high:
                    continue
                target = seg_tgt[k] + max(0, part_low - seg_src[k])
                if best is None or target < best:
                    best = target
            newer = _merge([*newer, (ch_begin[chain], ch_end[chain])])
            if newer and newer[0][0] <= c and newer[0][1] >= self.max_end:
                break  # newer chains hold the newest copy of everything from c on
        return best

    def _copies_below(self, c: int, u: int) -> int:
        """How many copies at target offsets from ``u`` on are of records before ``c``."""
        seg_src, seg_tgt, seg_cnt = self.seg_src, self.seg_tgt, self.seg_cnt
        total = 0
        for k in range(max(0, bisect_right(seg_tgt, u) - 1), len(seg_src)):
            skip = max(0, u - seg_tgt[k])
            low, high = seg_src[k] + skip, seg_src[k] + seg_cnt[k]
            if low < high:
                total += max(0, min(high, c) - low)
        return total

    def downstream_batch(self, offsets: list[int]) -> TranslationBatch:
        """:meth:`downstream` for many offsets (no epoch check), vectorised with numpy."""
        behind = self.ch_end[-1] < self.max_end if self.ch_end else False
        if len(offsets) < _VECTOR_MIN or not self.seg_src or behind:
            return TranslationBatch.of([self.downstream(c, None) for c in offsets])
        import numpy as np  # noqa: PLC0415 - only batches need it; keep importing this module cheap

        # Zero-copy views of the columns. They are dropped before returning: an array that
        # exports its buffer cannot grow.
        seg_src = np.frombuffer(self.seg_src, dtype=np.int64)
        seg_tgt = np.frombuffer(self.seg_tgt, dtype=np.int64)
        seg_cnt = np.frombuffer(self.seg_cnt, dtype=np.int64)
        chain_lo = np.frombuffer(self.ch_seg, dtype=np.int64)
        chain_hi = np.append(chain_lo[1:], len(seg_src))
        c = np.array(offsets, dtype=np.int64)
        on_stack = np.searchsorted(np.frombuffer(self.cs_src, dtype=np.int64), c, "left") - 1
        found = on_stack >= 0
        chain = np.where(found, np.frombuffer(self.cs_chain, dtype=np.int64)[on_stack], 0)
        k = np.zeros(len(c), dtype=np.int64)
        order = np.argsort(chain, kind="stable")
        sorted_chains = chain[order]
        for value in np.unique(chain[found]).tolist():
            first = np.searchsorted(sorted_chains, value, "left")
            group = order[first : np.searchsorted(sorted_chains, value, "right")]
            lo, hi = int(chain_lo[value]), int(chain_hi[value])
            k[group] = lo - 1 + np.searchsorted(seg_src[lo:hi], c[group], "left")
        p = np.where(found, seg_tgt[k] + np.minimum(seg_cnt[k], c - seg_src[k]), seg_tgt[0])
        del seg_src, seg_tgt, seg_cnt, chain_lo
        frontier = self.ch_end[-1]
        unknown = c < self.floor
        if self.dropped:
            unknown |= ~found
        ahead = ~unknown & (c > frontier)
        p[unknown] = -1
        pending = np.where(ahead, c - frontier, 0)
        codes = np.where(unknown, _BEFORE_CODE, np.where(ahead, _AHEAD_CODE, _EXACT_CODE))
        reasons = list(map(_REASONS.__getitem__, codes.tolist()))
        result = TranslationBatch(array("q", p.tobytes()), reasons, array("q", pending.tobytes()))
        if self.jumps:  # a forward jump after the chain: check those offsets one by one
            for i in np.flatnonzero(~unknown & ~ahead & (chain < self.jumps[-1])).tolist():
                single = self.downstream(offsets[i], None)
                result.offsets[i] = -1 if single.offset is None else single.offset
                result.reasons[i] = single.reason
                result.pending[i] = single.pending
        return result

    def upstream(self, t: int, target_end: int | None) -> Translation:
        if t == 0:
            # Nothing of a partition lies before offset 0: a consumer there has read no copy, not
            # even one whose sync the index lacks (trimmed, or written before the index began).
            return _START
        seg_tgt = self.seg_tgt
        if not seg_tgt or t <= seg_tgt[0]:
            # Copies before the first indexed one may exist, and the consumer may have read them.
            return BEFORE_SYNCS
        k = bisect_left(seg_tgt, t) - 1
        count = self.seg_cnt[k]
        taken = t - seg_tgt[k]
        after = self.seg_src[k] + (count if taken > count else taken)
        chain = bisect_right(self.ch_seg, k) - 1
        before = self.ch_pmax[chain]
        u = before if before > after else after
        known_end = seg_tgt[-1] + self.seg_cnt[-1]
        if t > known_end and (target_end is None or t > target_end):
            return Translation(u, _AHEAD, t - known_end)
        holes = self.holes
        if holes and holes[0] <= chain:
            missing = self._uncovered(range(chain), self.floor, u, (self.ch_begin[chain], after))
            if missing:
                return Translation(u, _GAP, missing)
        return _make(Translation, (u, _EXACT, 0))

    def _uncovered(self, chains: range, low: int, high: int, extra: tuple[int, int] | None) -> int:
        """How many positions of ``[low, high)`` lie in none of ``chains`` (nor in ``extra``)."""
        spans = [(self.ch_begin[i], self.ch_end[i]) for i in chains]
        if extra is not None:
            spans.append(extra)
        spans.sort()
        missing = 0
        position = low
        for begin, end in spans:
            if begin >= high:
                break
            if begin > position:
                missing += begin - position
            position = max(position, end)
        return missing + max(0, high - position)

    # -- maintenance ------------------------------------------------------------------------

    def trim_before(self, source_offset: int) -> int:
        """Forget what only serves ``c < source_offset``; return the segments dropped."""
        if source_offset <= self.floor:
            return 0
        self.floor = source_offset
        i = bisect_left(self.cs_src, source_offset) - 1
        if i < 0:
            return 0
        chain = self.cs_chain[i]
        ch_seg = self.ch_seg
        hi = ch_seg[chain + 1] if chain + 1 < len(ch_seg) else len(self.seg_src)
        k = bisect_left(self.seg_src, source_offset, ch_seg[chain], hi) - 1
        if k > 0 and (self.ch_end[-1] < self.max_end or self.jumps):
            newest = self._first_newest_copy_from(source_offset)
            if newest is not None and newest < self.seg_tgt[k]:
                # An earlier pass still holds the newest copy of a record at or above the trim
                # point (a re-copy is behind it): keep every segment until that has changed.
                return 0
        if k > 0:
            self.seg_src = self.seg_src[k:]
            self.seg_tgt = self.seg_tgt[k:]
            self.seg_cnt = self.seg_cnt[k:]
            self.dropped += k
        keep = [x for x in range(len(self.ch_end)) if x >= chain or self.ch_end[x] > source_offset]
        renumber = {old: new for new, old in enumerate(keep)}
        self.ch_begin = array("q", [self.ch_begin[x] for x in keep])
        self.ch_end = array("q", [self.ch_end[x] for x in keep])
        self.ch_seg = array("q", [max(0, ch_seg[x] - k) for x in keep])
        self.ch_pmax = array("q", [self.ch_pmax[x] for x in keep])
        self.cs_src = self.cs_src[i:]
        self.cs_src[0] = self.seg_src[0]
        self.cs_chain = array("q", [renumber[x] for x in self.cs_chain[i:]])
        self.jumps = [renumber[x] for x in self.jumps if x in renumber]
        self.holes = [renumber[x] for x in self.holes if x in renumber]
        return k if k > 0 else 0

    @property
    def frontier(self) -> int:
        return self.ch_end[-1]

    def columns(self) -> tuple[array[int], ...]:
        return (
            self.seg_src,
            self.seg_tgt,
            self.seg_cnt,
            self.ch_begin,
            self.ch_end,
            self.ch_seg,
            self.ch_pmax,
            self.cs_src,
            self.cs_chain,
        )

    def memory_bytes(self) -> int:
        lists = (self.jumps, self.holes, self.ep_epoch, self.ep_start)
        return sum(sys.getsizeof(column) for column in self.columns()) + sum(
            sys.getsizeof(values) for values in lists
        )


def _subtract(span: tuple[int, int], taken: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The parts of ``[low, high)`` outside the sorted, disjoint ranges ``taken``."""
    low, high = span
    parts = []
    for begin, end in taken:
        if end <= low:
            continue
        if begin >= high:
            break
        if begin > low:
            parts.append((low, begin))
        low = max(low, end)
        if low >= high:
            return parts
    if low < high:
        parts.append((low, high))
    return parts


def _merge(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Sorted, disjoint ranges covering the same positions as ``spans``."""
    merged: list[tuple[int, int]] = []
    for begin, end in sorted(spans):
        if begin >= end:
            continue
        if merged and begin <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((begin, end))
    return merged


class _Generations:
    """The histories of one partition, by (source topic id, target topic id), oldest first."""

    __slots__ = ("by_ids", "current")

    def __init__(self, first: _History) -> None:
        self.by_ids = {(first.source_topic_id, first.target_topic_id): first}
        self.current = first

    def add(self, history: _History) -> None:
        self.by_ids[history.source_topic_id, history.target_topic_id] = history
        self.current = history

    def find(self, source_topic_id: bytes | None, target_topic_id: bytes | None) -> _History | None:
        if source_topic_id is not None and target_topic_id is not None:
            return self.by_ids.get((source_topic_id, target_topic_id))
        for (source_id, target_id), history in reversed(self.by_ids.items()):
            if source_topic_id in (None, source_id) and target_topic_id in (None, target_id):
                return history
        return None


class OffsetIndex:
    """Exact offset translation for many partitions, built from offset syncs (pure, no I/O).

    See the module docstring for the semantics. Feed decoded syncs to :meth:`apply` in the order
    they were read from the sync topic, with their position, and call :meth:`snapshot` now and then:
    :meth:`from_snapshot` plus :attr:`resume_offsets` restore it without replaying old syncs.
    """

    __slots__ = ("_parts", "_positions")

    def __init__(self) -> None:
        self._parts: dict[TopicPartition, _Generations] = {}
        self._positions: dict[int, int] = {}

    # -- building ---------------------------------------------------------------------------

    def apply(self, sync: OffsetSync, position: SyncPosition | None = None) -> bool:
        """Add ``sync``; False when it duplicated indexed copies and changed nothing.

        Raises :class:`SyncConflictError` (index unchanged, position not noted) when the sync
        contradicts what is indexed. ``position`` is where the sync was read in the sync topic.
        """
        tp = TopicPartition(sync.topic, sync.partition)
        generations = self._parts.get(tp)
        ids = (sync.source_topic_id, sync.target_topic_id)
        if generations is None:
            history = _History(tp, *ids)
            self._parts[tp] = _Generations(history)
        else:
            found = generations.by_ids.get(ids)
            if found is None:
                history = _History(tp, *ids)
                generations.add(history)
            else:
                history = found
        applied = history.apply(sync)
        if position is not None:
            self.note_position(position)
        return applied

    def apply_all(self, syncs: Iterable[tuple[OffsetSync, SyncPosition | None]]) -> int:
        """:meth:`apply` each ``(sync, position)``; return how many changed the index."""
        return sum(self.apply(sync, position) for sync, position in syncs)

    def note_position(self, position: SyncPosition) -> None:
        """Record that the sync topic has been read up to and including ``position``."""
        partition, offset = position
        if offset + 1 > self._positions.get(partition, 0):
            self._positions[partition] = offset + 1

    @property
    def resume_offsets(self) -> dict[int, int]:
        """Per partition of the sync topic, the offset of the first sync not yet applied."""
        return dict(self._positions)

    def trim_before(
        self, tp: TopicPartition, source_offset: int, *, source_topic_id: bytes | None = None
    ) -> int:
        """Forget history needed only for source offsets below ``source_offset``.

        Trims the current generation, or the newest one of ``source_topic_id``. Afterwards
        downstream queries below it are BEFORE_SYNCS; answers at or above it do not change.
        Returns the number of segments dropped.
        """
        generations = self._parts.get(tp)
        history = None if generations is None else generations.find(source_topic_id, None)
        return 0 if history is None else history.trim_before(source_offset)

    def forget(self, tp: TopicPartition, *, keep_current: bool = False) -> None:
        """Drop what is known about ``tp`` (topic deleted), or all but its current generation."""
        generations = self._parts.get(tp)
        if generations is None:
            return
        if keep_current:
            self._parts[tp] = _Generations(generations.current)
        else:
            del self._parts[tp]

    # -- translating ------------------------------------------------------------------------

    def translate_downstream(
        self,
        tp: TopicPartition,
        offset: int,
        *,
        source_topic_id: bytes | None = None,
        target_topic_id: bytes | None = None,
        leader_epoch: int | None = None,
    ) -> Translation:
        """The target offset for a source consumer that committed ``offset`` on ``tp``.

        Pass the topic ids as they are now to refuse syncs of an older incarnation of either topic,
        and the committed offset's leader epoch (when known) to detect a truncated source log.
        """
        generations = self._parts.get(tp)
        if generations is None:
            return UNKNOWN_PARTITION
        if source_topic_id is None and target_topic_id is None:
            return generations.current.downstream(offset, leader_epoch)
        history = generations.find(source_topic_id, target_topic_id)
        if history is None:
            return TOPIC_MISMATCH
        return history.downstream(offset, leader_epoch)

    def translate_downstream_batch(
        self,
        tp: TopicPartition,
        offsets: Iterable[int],
        *,
        source_topic_id: bytes | None = None,
        target_topic_id: bytes | None = None,
    ) -> TranslationBatch:
        """:meth:`translate_downstream` for many offsets of one partition, column-wise."""
        generations = self._parts.get(tp)
        if generations is None:
            return TranslationBatch.of([UNKNOWN_PARTITION for _ in offsets])
        history = generations.find(source_topic_id, target_topic_id)
        if history is None:
            return TranslationBatch.of([TOPIC_MISMATCH for _ in offsets])
        return history.downstream_batch(list(offsets))

    def translate_upstream(
        self,
        tp: TopicPartition,
        offset: int,
        *,
        source_topic_id: bytes | None = None,
        target_topic_id: bytes | None = None,
        target_end: int | None = None,
    ) -> Translation:
        """The source offset of ``tp`` for a target consumer that committed ``offset`` on its copy.

        ``target_end``: an offset of the target partition below which the caller knows every copy
        is indexed (for instance its last stable offset, read before the sync topic was consumed to
        its end); positions after the last copy and up to it are then exact, not AHEAD_OF_SYNCS.
        """
        generations = self._parts.get(tp)
        if generations is None:
            return UNKNOWN_PARTITION
        if source_topic_id is None and target_topic_id is None:
            return generations.current.upstream(offset, target_end)
        history = generations.find(source_topic_id, target_topic_id)
        if history is None:
            return TOPIC_MISMATCH
        return history.upstream(offset, target_end)

    # -- inspecting -------------------------------------------------------------------------

    def partitions(self) -> list[TopicPartition]:
        """Partitions with at least one sync."""
        return list(self._parts)

    def frontier(self, tp: TopicPartition) -> int | None:
        """Where the worker continues reading ``tp`` (current generation), if known."""
        generations = self._parts.get(tp)
        return None if generations is None else generations.current.frontier

    def replicated_end(self, tp: TopicPartition) -> int | None:
        """One past the highest source position any pass has read for ``tp`` (current generation).

        Equal to :meth:`frontier` except while a re-copy pass (after a worker restart) has not yet
        caught up with an earlier pass: the records up to here are on the target either way, so
        this, not the frontier, bounds what a failover now would lose.
        """
        generations = self._parts.get(tp)
        return None if generations is None else generations.current.max_end

    def segment_count(self) -> int:
        """Segments held, all partitions and generations."""
        return sum(len(h.seg_src) for h in self._histories())

    def memory_bytes(self) -> int:
        """Bytes held by the index columns (the arrays and small lists, not the dicts)."""
        return sum(h.memory_bytes() for h in self._histories())

    def _histories(self) -> Iterator[_History]:
        for generations in self._parts.values():
            yield from generations.by_ids.values()

    # -- snapshots --------------------------------------------------------------------------

    def snapshot(self) -> bytes:
        """The whole index, with :attr:`resume_offsets`, as versioned bytes (see the docs)."""
        return _encode_snapshot(self._positions, list(self._histories()))

    @classmethod
    def from_snapshot(cls, data: bytes) -> OffsetIndex:
        """Rebuild an index from :meth:`snapshot` bytes; :class:`IndexSnapshotError` if invalid."""
        positions, histories = _decode_snapshot(data)
        index = cls()
        index._positions = positions
        for history in histories:
            generations = index._parts.get(history.tp)
            if generations is None:
                index._parts[history.tp] = _Generations(history)
            else:
                generations.add(history)
        return index


# -- snapshot format ----------------------------------------------------------------------------

_SNAP_HEAD = struct.Struct("<4sB3xI")  # magic, version, padding, position count
_SNAP_POSITION = struct.Struct("<iq")
_SNAP_COUNT = struct.Struct("<I")
_SNAP_HISTORY = struct.Struct(f"<i{TOPIC_ID_SIZE}s{TOPIC_ID_SIZE}sqqqq7I")
_SNAP_CRC = struct.Struct("<I")
_BIG_ENDIAN = sys.byteorder == "big"


def _le_bytes(values: array[int] | list[int]) -> bytes:
    column = values if isinstance(values, array) else array("q", values)
    if _BIG_ENDIAN:
        column = array("q", column)
        column.byteswap()
    return column.tobytes()


def _encode_snapshot(positions: dict[int, int], histories: list[_History]) -> bytes:
    parts = [_SNAP_HEAD.pack(SNAPSHOT_MAGIC, SNAPSHOT_VERSION, len(positions))]
    parts += [_SNAP_POSITION.pack(p, o) for p, o in sorted(positions.items())]
    parts.append(_SNAP_COUNT.pack(len(histories)))
    for h in histories:
        topic = h.tp.topic.encode("utf-8")
        parts.append(struct.pack("<H", len(topic)) + topic)
        parts.append(
            _SNAP_HISTORY.pack(
                h.tp.partition,
                h.source_topic_id,
                h.target_topic_id,
                h.floor,
                h.max_end,
                h.pmax,
                h.dropped,
                len(h.seg_src),
                len(h.ch_end),
                len(h.cs_src),
                len(h.jumps),
                len(h.holes),
                len(h.ep_epoch),
                0,
            )
        )
        parts += [_le_bytes(column) for column in h.columns()]
        parts += [_le_bytes(values) for values in (h.jumps, h.holes, h.ep_epoch, h.ep_start)]
    body = b"".join(parts)
    return body + _SNAP_CRC.pack(zlib.crc32(body))


class _Reader:
    __slots__ = ("data", "pos")

    def __init__(self, data: bytes) -> None:
        self.data = memoryview(data)
        self.pos = 0

    def unpack(self, layout: struct.Struct) -> tuple[object, ...]:
        if self.pos + layout.size > len(self.data):
            raise IndexSnapshotError("index snapshot is truncated")
        values = layout.unpack_from(self.data, self.pos)
        self.pos += layout.size
        return values

    def take(self, size: int) -> bytes:
        if self.pos + size > len(self.data):
            raise IndexSnapshotError("index snapshot is truncated")
        chunk = bytes(self.data[self.pos : self.pos + size])
        self.pos += size
        return chunk

    def column(self, length: int) -> array[int]:
        column = array("q")
        column.frombytes(self.take(8 * length))
        if _BIG_ENDIAN:
            column.byteswap()
        return column


def _decode_snapshot(data: bytes) -> tuple[dict[int, int], list[_History]]:
    if len(data) < _SNAP_HEAD.size + _SNAP_CRC.size or data[:4] != SNAPSHOT_MAGIC:
        raise IndexSnapshotError("not an offset-index snapshot (bad magic or too short)")
    version = data[4]
    if version != SNAPSHOT_VERSION:
        raise IndexSnapshotError(
            f"unsupported offset-index snapshot version {version} (this build reads version "
            f"{SNAPSHOT_VERSION}); rebuild the index from the sync topic"
        )
    body = data[: -_SNAP_CRC.size]
    (crc,) = _SNAP_CRC.unpack_from(data, len(body))
    if zlib.crc32(body) != crc:
        raise IndexSnapshotError("offset-index snapshot is damaged (checksum mismatch)")
    reader = _Reader(body)
    _, _, position_count = reader.unpack(_SNAP_HEAD)
    positions: dict[int, int] = {}
    for _ in range(_as_int(position_count)):
        partition, offset = reader.unpack(_SNAP_POSITION)
        positions[_as_int(partition)] = _as_int(offset)
    (history_count,) = reader.unpack(_SNAP_COUNT)
    histories = [_read_history(reader) for _ in range(_as_int(history_count))]
    if reader.pos != len(body):
        raise IndexSnapshotError("offset-index snapshot has trailing bytes")
    return positions, histories


def _as_int(value: object) -> int:
    assert isinstance(value, int)
    return value


def _as_bytes(value: object) -> bytes:
    assert isinstance(value, bytes)
    return value


def _read_history(reader: _Reader) -> _History:
    (length,) = struct.unpack("<H", reader.take(2))
    try:
        topic = reader.take(length).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise IndexSnapshotError(f"offset-index snapshot has a bad topic name: {exc}") from exc
    fields = reader.unpack(_SNAP_HISTORY)
    partition, source_id, target_id = _as_int(fields[0]), _as_bytes(fields[1]), _as_bytes(fields[2])
    floor, max_end, pmax, dropped, n_seg, n_ch, n_cs, n_jumps, n_holes, n_epochs, _ = (
        _as_int(value) for value in fields[3:]
    )
    h = _History(TopicPartition(topic, partition), source_id, target_id)
    h.floor, h.max_end, h.pmax, h.dropped = floor, max_end, pmax, dropped
    h.seg_src, h.seg_tgt, h.seg_cnt = (reader.column(n_seg) for _ in range(3))
    h.ch_begin, h.ch_end, h.ch_seg, h.ch_pmax = (reader.column(n_ch) for _ in range(4))
    h.cs_src, h.cs_chain = (reader.column(n_cs) for _ in range(2))
    h.jumps = reader.column(n_jumps).tolist()
    h.holes = reader.column(n_holes).tolist()
    h.ep_epoch = reader.column(n_epochs).tolist()
    h.ep_start = reader.column(n_epochs).tolist()
    problem = _check_history(h)
    if problem is not None:
        raise IndexSnapshotError(
            f"offset-index snapshot is inconsistent for {topic}-{partition}: {problem}"
        )
    return h


def _check_history(h: _History) -> str | None:
    """Cheap structural checks (O(chains)); the checksum covers accidental damage."""
    n_seg, n_ch = len(h.seg_src), len(h.ch_end)
    if not n_ch:
        return "no runs"
    if list(h.ch_seg) != sorted(h.ch_seg) or h.ch_seg[0] < 0 or h.ch_seg[-1] > n_seg:
        return "chain segment indices out of order"
    if len(h.cs_src) > n_ch or any(not 0 <= x < n_ch for x in h.cs_chain):
        return "chain stack out of range"
    if any(not 0 <= x < n_ch for x in h.jumps + h.holes):
        return "jump or gap indices out of range"
    if len(h.ep_epoch) != len(h.ep_start):
        return "leader epochs and starts differ in length"
    return None
