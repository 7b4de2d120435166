"""How a topic read tells moving from stalled: its limits, what it has seen, and its clock.

:class:`~drsvc.kafka.reader.TopicReader` drives a consumer; this module keeps the account of
one read, apart from the consumer calls, so that the rule it applies is in one small place:

* :class:`ReadLimits` says how long a read may stand still, how often it reports, and an
  optional deadline of its caller's.
* :class:`RangeRead` sorts what each poll brings: records inside the ranges go out in a batch,
  records past a partition's end and end-of-partition events finish the partition, and a
  position that moved past what was delivered (markers, aborted records) counts as movement.
* :class:`StallWatch` measures the time since the read last moved, raises when it has stood
  still for :attr:`ReadLimits.stall_s` or its deadline passed, and logs progress lines.
* :class:`ReadState` is what the read has seen, which the errors, the progress lines and the
  callers use.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from drsvc.errors import ConfigError, KafkaUnavailableError
from drsvc.kafka.clock import Clock
from drsvc.kafka.errors import describe, to_drsvc
from drsvc.kafka.types import KafkaError, Message, TopicPartition

__all__ = ["Batch", "RangeRead", "Ranges", "ReadLimits", "ReadState", "StallWatch"]

log = logging.getLogger(__name__)

#: a batch of records, in offset order per partition
Batch = list[Message]
#: per partition: the offsets ``[begin, end)`` to read
Ranges = Mapping[int, tuple[int, int]]


@dataclass(frozen=True)
class ReadLimits:
    """How a read waits, and when it gives up."""

    #: give up after this many seconds without movement (see :mod:`drsvc.kafka.reader`)
    stall_s: float = 60.0
    #: a read still running after this many seconds says how far it is, and again after as many
    progress_log_s: float = 10.0
    #: records asked for per poll: the largest batch handed out
    batch: int = 10_000
    #: how long one poll waits for records
    poll_s: float = 0.5
    #: an absolute time on the port's clock (``Clock.monotonic``) by which the read must be
    #: done, however well it moves; None for none. The caller owns it, for reads that are part
    #: of something with a time budget of its own.
    deadline: float | None = None

    def __post_init__(self) -> None:
        for name in ("stall_s", "progress_log_s", "poll_s"):
            if not getattr(self, name) > 0:
                raise ConfigError(
                    f"read limits: {name} must be above 0 (got {getattr(self, name)})"
                )
        if self.batch < 1:
            raise ConfigError(f"read limits: batch must be at least 1 (got {self.batch})")


@dataclass
class ReadState:
    """What the current read has seen: for progress lines, errors, and the callers' results.

    Each read of a :class:`~drsvc.kafka.reader.TopicReader` (a forward read, and each window
    of a backward one; finding a topic's bounds) starts a new one.
    """

    #: False when the topic (or the partition read) does not exist
    exists: bool = True
    #: per partition: the offset the read goes to (exclusive)
    targets: dict[int, int] = field(default_factory=dict)
    #: per partition: how far the read got, one past the last offset read or passed over; where
    #: a finished partition stopped, which is below its target when its log ended earlier
    reached: dict[int, int] = field(default_factory=dict)
    #: partitions done
    finished: set[int] = field(default_factory=set)
    #: records handed out
    records: int = 0

    def where(self) -> str:
        """Where each unfinished partition is against its target, for a progress line or an
        error: ``partition 0 at 3 of 10, partition 2 at 0 of 7``."""
        behind = [
            f"partition {p} at {self.reached[p]} of {end}"
            for p, end in sorted(self.targets.items())
            if p not in self.finished
        ]
        return ", ".join(behind) if behind else "every partition read"


class RangeRead:
    """The account of one forward read of ``ranges`` (per partition, ``[begin, end)``): the
    partitions still open, and what each poll brought. ``what`` (``"reading <role> <topic>"``)
    and ``cluster`` name the read in a mapped error, ``where`` in a warning."""

    def __init__(self, ranges: Ranges, what: str, cluster: str, where: str) -> None:
        self.state = ReadState(
            targets={p: end for p, (_begin, end) in ranges.items()},
            reached={p: begin for p, (begin, _end) in ranges.items()},
            finished={p for p, (begin, end) in ranges.items() if begin >= end},
        )
        #: the partitions still open, in partition order: ``[begin, end)``
        self.spans = {p: ranges[p] for p in sorted(ranges) if ranges[p][0] < ranges[p][1]}
        self._what = what
        self._cluster = cluster
        self._where = where
        self._warned: set[tuple[int | None, int]] = set()
        #: the last poll taken was movement (see :meth:`take`)
        self.moved = False

    def progress(self) -> str:
        """Where the read is, for a progress line or an error."""
        return f"{self.state.where()}; {self.state.records} records read"

    def take(self, messages: list[Message]) -> Batch:
        """The records of a poll that lie in the open ranges; finishes the partitions they, or
        end-of-partition events, take to their end. :attr:`moved` says whether the poll was
        movement: a record delivered (in the ranges or not) or a partition finished."""
        spans = self.spans
        reached = self.state.reached
        open_before = len(spans)
        before_ranges = False
        batch: Batch = []
        for message in messages:
            error = message.error()
            if error is not None:
                self._event(message, error)
                continue
            partition = message.partition()
            offset = message.offset()
            if partition is None or offset is None:
                continue
            span = spans.get(partition)
            if span is None:  # a partition already done, fetched past its end
                continue
            begin, end = span
            if offset >= end:
                self.finish(partition, end)
                continue
            if offset < begin:  # a start past the log's end, reset to its start
                before_ranges = True
                continue
            batch.append(message)
            reached[partition] = offset + 1
            if offset + 1 >= end:
                self.finish(partition, end)
        self.state.records += len(batch)
        self.moved = bool(batch) or before_ranges or len(spans) < open_before
        return batch

    def passed_over(self, positions: list[TopicPartition]) -> bool:
        """After a poll with no record: did a partition's position move (past markers or
        aborted records, which are never delivered)? Finishes the partitions it took to their
        end."""
        moved = False
        for tp in positions:
            span = self.spans.get(tp.partition)
            position = tp.offset
            if span is None or position < 0 or position <= self.state.reached[tp.partition]:
                continue
            moved = True
            self.state.reached[tp.partition] = min(position, span[1])
            if position >= span[1]:
                self.finish(tp.partition, span[1])
        return moved

    def finish(self, partition: int, end: int | None = None) -> None:
        """``partition`` is done (at ``end``, when given: where it got otherwise)."""
        self.spans.pop(partition, None)
        self.state.finished.add(partition)
        if end is not None:
            self.state.reached[partition] = end

    def _event(self, message: Message, error: KafkaError) -> None:
        partition = message.partition()
        code = error.code()
        if code == KafkaError._PARTITION_EOF:
            span = None if partition is None else self.spans.get(partition)
            if partition is not None and span is not None:
                offset = message.offset()
                if offset is not None:
                    reached = self.state.reached
                    reached[partition] = max(reached[partition], min(offset, span[1]))
                self.finish(partition)
            return
        if error.fatal():
            raise to_drsvc(error, self._what, self._cluster)
        # Anything else (a topic deleted under the read, say) may pass; if it does not, the
        # read stops moving and the stall rule ends it, naming the partitions' positions.
        if (partition, code) not in self._warned:
            self._warned.add((partition, code))
            log.warning("%s, partition %s: %s", self._where, partition, describe(error))


class StallWatch:
    """The clock side of one read: when it last moved, when it next says how far it is, and
    when it gives up. ``where`` names the topic and cluster, ``detail`` says where the read
    is, for both."""

    def __init__(
        self, clock: Clock, limits: ReadLimits, where: str, detail: Callable[[], str]
    ) -> None:
        self._clock = clock
        self._limits = limits
        self._where = where
        self._detail = detail
        self._last_answer = ""
        now = clock.monotonic()
        self._started = now
        self._moved_at = now
        self._next_log = now + limits.progress_log_s

    def moved(self) -> None:
        """The read moved just now: the stall period starts again."""
        self._moved_at = self._clock.monotonic()
        self._last_answer = ""

    def note(self, answer: str) -> None:
        """The last passing problem the cluster answered, for the error if it lasts."""
        self._last_answer = answer

    def remaining(self) -> float:
        """Seconds left before the read gives up unless it moves (always above 0); raises
        :class:`~drsvc.errors.KafkaUnavailableError` when none are, and logs progress when a
        line is due."""
        limits = self._limits
        now = self._clock.monotonic()
        if limits.deadline is not None and now >= limits.deadline:
            raise KafkaUnavailableError(
                f"reading {self._where} did not finish within its caller's time budget: "
                f"{now - self._started:.1f}s after it began ({self._explain()})"
            )
        idle = now - self._moved_at
        if idle >= limits.stall_s:
            raise KafkaUnavailableError(
                f"reading {self._where} made no progress for {limits.stall_s:g}s "
                f"({self._explain()})"
            )
        if now >= self._next_log:
            log.info("reading %s: %s", self._where, self._detail())
            self._next_log = now + limits.progress_log_s
        left = limits.stall_s - idle
        if limits.deadline is not None:
            left = min(left, limits.deadline - now)
        return left

    def pause(self) -> None:
        """Wait a poll's time (less if the read gives up sooner) before asking again."""
        self._clock.sleep(min(self._limits.poll_s, self.remaining()))

    def _explain(self) -> str:
        detail = self._detail()
        return f"{detail}: {self._last_answer}" if self._last_answer else detail
