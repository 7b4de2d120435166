"""At-least-once copy progress of one source partition: what is safe to commit, what to re-copy.

A replicator worker hands records of a source partition to its producer in source-offset order and
learns their fate from delivery reports, which librdkafka returns in the same order per partition.
:class:`PartitionProgress` turns that stream into three things, without any I/O:

* **offset syncs** for every finished *run* (a stretch ``[begin, end)`` of source positions whose
  copies have all been delivered), built with :class:`failover.offset_syncs.SyncBuilder`;
* the **commit position**: the end of the newest run whose syncs the target acknowledged. Source
  progress never moves past a record that is not on the target, nor past one whose mapping is not;
* the **rewind position** after a failed delivery: the first source offset whose copy failed. The
  worker stops copying the partition, waits until nothing is in flight, calls :meth:`rewind` and
  seeks its consumer there. Copies delivered *after* the failure (possible for per-record errors)
  are kept as runs of their own, so the syncs still map every copy on the target; the re-copy makes
  a second pass over them, which the translation index resolves (newest copy wins).

Invariants:

* runs are contiguous and in source order: each run begins where the previous one ended;
* a run is finished only when it is sealed (its end is known) and none of its records is in flight;
* :attr:`commit_position` never decreases and never exceeds the end of a run whose syncs are acked;
* after :meth:`rewind` the partition copies again from the returned offset, in a fresh run.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from failover.offset_syncs import OffsetSync, SyncBuilder, TopicPartition


@dataclass
class _Run:
    begin: int
    epoch: int
    builder: SyncBuilder
    end: int | None = None
    pending: int = 0
    produced: int = 0


@dataclass(frozen=True)
class FinishedRun:
    """A run whose copies are all delivered: emit ``syncs``, then report ``end`` as persisted."""

    syncs: tuple[OffsetSync, ...]
    end: int


@dataclass
class PartitionProgress:
    """Copy progress of one source partition (see the module docstring)."""

    tp: TopicPartition
    source_topic_id: bytes
    target_topic_id: bytes
    start: int
    commit_position: int = field(init=False)
    #: source leader epoch of the record just before :attr:`commit_position` (-1: unknown), so
    #: that committed progress lets a restarted consumer detect a truncated source log
    commit_epoch: int = field(default=-1, init=False)
    in_flight: int = field(default=0, init=False)
    #: one past the last source offset handed to the producer (where reading continues)
    next_offset: int = field(init=False)
    failed_at: int | None = field(default=None, init=False)
    failure: str | None = field(default=None, init=False)
    _runs: deque[_Run] = field(default_factory=deque, init=False)
    _orphans: list[tuple[int, int, int]] = field(default_factory=list, init=False)
    _finished: list[FinishedRun] = field(default_factory=list, init=False)

    def __post_init__(self) -> None:
        self.commit_position = self.start
        self.next_offset = self.start
        self._runs.append(self._new_run(self.start, -1))

    def _new_run(self, begin: int, epoch: int) -> _Run:
        builder = SyncBuilder(
            self.tp,
            source_topic_id=self.source_topic_id,
            target_topic_id=self.target_topic_id,
            source_begin=begin,
            leader_epoch=epoch,
        )
        return _Run(begin=begin, epoch=epoch, builder=builder)

    # ------------------------------------------------------------------ producing side

    @property
    def accepting(self) -> bool:
        """False while a failure waits for its rewind: records read now must not be copied."""
        return self.failed_at is None

    def produced(self, source_offset: int, leader_epoch: int = -1) -> None:
        """A record at ``source_offset`` was handed to the producer."""
        run = self._runs[-1]
        if run.produced and leader_epoch != run.epoch:
            # One run, one leader epoch: the syncs must say which log generation they describe.
            self._seal(source_offset)
            run = self._runs[-1]
        if not run.produced and run.epoch != leader_epoch:
            run.epoch = leader_epoch
            run.builder = self._new_run(run.begin, leader_epoch).builder
        run.produced += 1
        run.pending += 1
        self.in_flight += 1
        self.next_offset = source_offset + 1

    def seal(self, position: int) -> None:
        """Close the open run at ``position``: the consumer has read everything before it."""
        if self.failed_at is None and position > self._runs[-1].begin:
            self._seal(position)

    def _seal(self, position: int) -> None:
        run = self._runs[-1]
        run.end = position
        self._runs.append(self._new_run(position, run.epoch))
        self._collect()

    # ------------------------------------------------------------------ delivery reports

    def delivered(self, source_offset: int, target_offset: int) -> None:
        """The copy of ``source_offset`` landed at ``target_offset`` on the target."""
        self.in_flight -= 1
        # A failed record is never delivered, so a copy at the failed position itself can only
        # come after syncs_lost(): like later ones, it is kept as a run of its own.
        if self.failed_at is not None and source_offset >= self.failed_at:
            run = self._release(source_offset)
            self._orphans.append((source_offset, target_offset, run.epoch))
            return
        run = self._release(source_offset)
        run.builder.add(source_offset, target_offset)
        self._collect()

    def failed(self, source_offset: int, reason: str) -> None:
        """The copy of ``source_offset`` was not delivered."""
        self.in_flight -= 1
        self._release(source_offset)
        if self.failed_at is None or source_offset < self.failed_at:
            self.failed_at = source_offset
            self.failure = reason

    def syncs_lost(self, reason: str) -> None:
        """Syncs of finished runs did not reach the target: copy again from the commit position.

        Copies delivered from now on are kept as runs of their own (see :meth:`rewind`), so every
        copy on the target is still mapped by some sync.
        """
        if self.failed_at is None or self.commit_position < self.failed_at:
            self.failed_at = self.commit_position
            self.failure = reason

    def _release(self, source_offset: int) -> _Run:
        for run in self._runs:
            if run.pending and (run.end is None or source_offset < run.end):
                run.pending -= 1
                return run
        raise ValueError(
            f"delivery report for {self.tp.topic}-{self.tp.partition}@{source_offset} "
            "without a record in flight"
        )

    def _collect(self) -> None:
        while len(self._runs) > 1 and self._runs[0].pending == 0:
            run = self._runs.popleft()
            assert run.end is not None
            self._finished.append(FinishedRun(run.builder.build(run.end), run.end))

    # ------------------------------------------------------------------ worker actions

    def take_finished(self) -> list[FinishedRun]:
        """Runs whose syncs should be written now, oldest first."""
        finished, self._finished = self._finished, []
        return finished

    def persisted(self, end: int, leader_epoch: int = -1) -> None:
        """The syncs of the run ending at ``end`` (read under ``leader_epoch``) are on the target:
        progress may move there."""
        if end > self.commit_position:
            self.commit_position = end
            self.commit_epoch = leader_epoch

    @property
    def ready_to_rewind(self) -> bool:
        return self.failed_at is not None and self.in_flight == 0

    def rewind(self) -> int:
        """After a failure, once nothing is in flight: finish what was delivered and return the
        source offset to copy from again."""
        if self.failed_at is None or self.in_flight:
            raise ValueError("rewind needs a failure and no record in flight")
        position = self.failed_at
        kept: list[tuple[int, int, int]] = []
        for run in self._runs:
            if run.begin < position:
                end = position if run.end is None or run.end > position else run.end
                self._finished.append(FinishedRun(run.builder.build(end), end))
            elif run.builder.record_count:
                # Delivered before syncs_lost() moved the position back below this run: keep
                # exactly those copies mapped, claiming nothing about the positions between.
                end = run.end if run.end is not None else run.builder.next_source
                copies = [c for sync in run.builder.build(end) for c in sync.copies()]
                kept += [(s, t, run.epoch) for s, t in copies]
        self._orphans[:0] = kept
        # A re-copy pass follows; these runs only record where the extra copies landed, one
        # leader epoch per sync like every other run.
        start = 0
        while start < len(self._orphans):
            epoch = self._orphans[start][2]
            stop = start
            while stop < len(self._orphans) and self._orphans[stop][2] == epoch:
                stop += 1
            copies = [(s, t) for s, t, _ in self._orphans[start:stop]]
            orphans = standalone_syncs(
                self.tp, self.source_topic_id, self.target_topic_id, copies, leader_epoch=epoch
            )
            self._finished.append(FinishedRun(orphans, position))
            start = stop
        self._orphans = []
        self._runs = deque([self._new_run(position, -1)])
        self.next_offset = position
        self.failed_at = None
        self.failure = None
        return position


def standalone_syncs(
    tp: TopicPartition,
    source_topic_id: bytes,
    target_topic_id: bytes,
    copies: list[tuple[int, int]],
    leader_epoch: int = -1,
) -> tuple[OffsetSync, ...]:
    """Syncs that map ``copies`` (``(source, target)`` pairs in target order) and claim nothing
    else: one run per block of consecutive source offsets.

    Used for copies outside the normal run bookkeeping: those delivered after a failure, and
    those found on the target after a crash whose syncs were never written.
    """
    syncs: list[OffsetSync] = []
    for block in _contiguous_blocks(copies):
        builder = SyncBuilder(
            tp,
            source_topic_id=source_topic_id,
            target_topic_id=target_topic_id,
            source_begin=block[0][0],
            leader_epoch=leader_epoch,
        )
        builder.add_all(block)
        syncs.extend(builder.build(block[-1][0] + 1))
    return tuple(syncs)


def _contiguous_blocks(copies: list[tuple[int, int]]) -> list[list[tuple[int, int]]]:
    """Split copies (in delivery order) into blocks of consecutive source offsets.

    Blocks split at every source jump: between two orphan copies there may be a record whose copy
    failed, and a sync must never describe a position holding a record as empty.
    """
    blocks: list[list[tuple[int, int]]] = []
    for source, target in copies:
        if blocks and source == blocks[-1][-1][0] + 1 and target > blocks[-1][-1][1]:
            blocks[-1].append((source, target))
        else:
            blocks.append([(source, target)])
    return blocks
