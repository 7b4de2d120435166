"""The one topic reader: a topic, or ranges of it, read to an end through one consumer.

drsvc reads its own topics whole or in stretches: the offset syncs behind a translation, the
checkpoints a stream starts from, the tail of a remote partition after a crash, the records a
failover replays, MM2's offsets. :class:`TopicReader` is how every one of those reads is done,
so that they all end, fail and report the same way:

* **It gives up only when the read stops moving.** A sync topic keeps a week of syncs, millions
  of records that take minutes to read; a fixed deadline fails every read of a long history,
  and with it failovers and worker starts. Movement is a record delivered, a partition
  finished, or, when a poll brings nothing, a partition's consumer position advancing: a stretch
  of transaction markers or aborted records is never delivered, but reading past it is
  progress all the same. After :attr:`ReadLimits.stall_s` without movement the read raises
  :class:`~drsvc.errors.KafkaUnavailableError` naming the topic, the cluster, and where each
  unfinished partition stopped against its end. A caller with a time budget of its own (a
  failover bound by its recovery time) gives an absolute :attr:`ReadLimits.deadline` too.
* **It says how far it is** at INFO every :attr:`ReadLimits.progress_log_s`, so that a read of
  minutes is visibly alive.
* **A partition is done** at the end it was asked for, or earlier where the log ends for this
  consumer: at the end-of-partition event (the rest is markers or aborted records, which are
  never delivered), which for a ``read_committed`` consumer comes at the last stable offset (an
  open transaction holds the read there: what lies beyond is not committed yet).
* **It hands out batches** (a list of records per poll), so that a caller keeps its own loop
  over the records of a batch and the reader adds no work per record beyond the range check.

The consumer is assigned partitions and never joins its group nor commits: a read leaves no
trace on the cluster. It is not thread-safe. The isolation level is the caller's explicit
choice when the reader is built (:meth:`drsvc.kafka.clients.KafkaClients.reader`): drsvc reads
its own topics ``read_committed``, but the scan for copies after a crash and MM2's topics must
see what is not committed.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Generator
from contextlib import closing
from types import TracebackType
from typing import Any

from confluent_kafka import KafkaException

from drsvc.errors import ConfigError
from drsvc.kafka.clock import Clock
from drsvc.kafka.errors import (
    GONE,
    LEADERLESS,
    describe,
    kafka_error,
    retriable,
    to_drsvc,
    translated,
)
from drsvc.kafka.read_progress import (
    Batch,
    RangeRead,
    Ranges,
    ReadLimits,
    ReadState,
    StallWatch,
)
from drsvc.kafka.types import Consumer, KafkaError, Message, TopicPartition

__all__ = ["ReadLimits", "ReadState", "TopicReader", "reader_settings"]

log = logging.getLogger(__name__)


def reader_settings(group: str, *, committed: bool) -> dict[str, Any]:
    """A topic reader's consumer settings: assigned partitions only, nothing committed.

    ``group`` names the consumer to the cluster (librdkafka needs one, and operators see who
    reads) but is never joined. ``committed`` chooses ``read_committed`` or
    ``read_uncommitted``: there is no default, because either is wrong for some caller.
    """
    return {
        "group.id": group,
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "isolation.level": "read_committed" if committed else "read_uncommitted",
        # The end of a log can be a transaction marker or aborted records, never delivered:
        # the end-of-partition event is how the reader learns the partition is done.
        "enable.partition.eof": True,
        # A start that retention has overtaken reads from the log's start.
        "auto.offset.reset": "earliest",
    }


class TopicReader:
    """Reads one topic through one assigned-only consumer, which it owns (see the module's
    docstring). ``what`` names the topic's role in messages (``"offset-sync topic"``),
    ``cluster`` the alias it is read on. Use it as a context manager, or call :meth:`close`.

    One read at a time: a :meth:`forward` (or :meth:`to_end`, :meth:`backwards`) generator
    left unfinished stops reading when the next read starts or when it is closed.
    """

    def __init__(
        self,
        consumer: Consumer,
        topic: str,
        *,
        cluster: str,
        what: str,
        clock: Clock,
        limits: ReadLimits | None = None,
    ) -> None:
        self.topic = topic
        self.cluster = cluster
        self.limits = limits if limits is not None else ReadLimits()
        self._consumer = consumer
        self._clock = clock
        self._what = f"reading {what} {topic}"
        self._where = f"{what} {topic} on {cluster}"
        self._state = ReadState()
        self._closed = False
        #: the read under way: a read started later supersedes an unfinished one
        self._read: object | None = None

    @property
    def state(self) -> ReadState:
        """The current (or last) read's state."""
        return self._state

    # ---- bounds

    def bounds(self) -> dict[int, tuple[int, int]] | None:
        """``(low, high)`` watermarks of every partition, in partition order; None when the
        topic does not exist (:attr:`ReadState.exists` is then False).

        ``high`` is what a ``read_committed`` consumer can read up to (the last stable offset)
        for such a reader, the high watermark otherwise. A partition without a leader (a topic
        created a moment ago) is waited for, under the stall rule: each partition answered is
        movement.
        """
        self._check_open()
        self._state = ReadState()
        problem = "listing its partitions"
        watch = StallWatch(self._clock, self.limits, self._where, lambda: problem)
        partitions = self._partitions(watch)
        if partitions is None:
            self._state.exists = False
            return None
        found: dict[int, tuple[int, int]] = {}
        for partition in partitions:
            problem = f"finding where partition {partition} ends"
            marks = self._watermarks(partition, watch)
            if marks is None:  # deleted since it was listed
                self._state.exists = False
                return None
            found[partition] = marks
            watch.moved()
        return found

    def _partitions(self, watch: StallWatch) -> list[int] | None:
        while True:
            try:
                metadata = self._consumer.list_topics(self.topic, timeout=watch.remaining())
            except KafkaException as exc:
                self._wait_out(exc, watch)
                continue
            topic = metadata.topics.get(self.topic)
            error = None if topic is None else topic.error
            if topic is None or (error is not None and error.code() in GONE):
                return None
            if error is None:
                return sorted(topic.partitions)
            self._wait_out(error, watch)

    def _watermarks(self, partition: int, watch: StallWatch) -> tuple[int, int] | None:
        tp = TopicPartition(self.topic, partition)
        while True:
            try:
                low, high = self._consumer.get_watermark_offsets(
                    tp, timeout=watch.remaining(), cached=False
                )
            except KafkaException as exc:
                error = kafka_error(exc)
                if error is not None and error.code() in GONE:
                    return None
                self._wait_out(exc, watch)
                continue
            return int(low), int(high)

    def _wait_out(self, problem: KafkaException | KafkaError, watch: StallWatch) -> None:
        """Wait before asking again when the answer was a passing one (no leader yet, no
        answer in time); raise the mapped error for any other."""
        error = kafka_error(problem)
        if not (retriable(problem) or (error is not None and error.code() in LEADERLESS)):
            raise to_drsvc(problem, self._what, self.cluster)
        watch.note(describe(problem))
        watch.pause()

    # ---- reads

    def forward(self, ranges: Ranges) -> Generator[Batch, None, None]:
        """Batches of the records of ``ranges`` (per partition, ``[begin, end)``), in offset
        order per partition, until every partition is done (see the module's docstring).

        Records are read as committed or not as the reader was built. Raises
        :class:`~drsvc.errors.KafkaUnavailableError` when the read stops moving or its
        deadline passes, and the mapped error of a failure the consumer reports.
        """
        self._check_open()
        read = RangeRead(ranges, self._what, self.cluster, self._where)
        self._state = read.state
        if not read.spans:
            return
        this_read = self._read = object()
        consumer = self._consumer
        with translated(self._what, self.cluster):
            consumer.assign(
                [TopicPartition(self.topic, p, begin) for p, (begin, _end) in read.spans.items()]
            )
        watch = StallWatch(self._clock, self.limits, self._where, read.progress)
        batch_size = self.limits.batch
        try:
            while read.spans and self._read is this_read:
                wait_s = min(self.limits.poll_s, watch.remaining())
                with translated(self._what, self.cluster):
                    messages = consumer.consume(batch_size, wait_s)
                batch = read.take(messages)
                if batch:
                    yield batch
                    # The caller's work on the batch is not the cluster standing still.
                    watch.moved()
                elif read.moved or read.passed_over(self._positions(read)):
                    watch.moved()
        finally:
            if self._read is this_read and not self._closed:
                self._read = None
                try:
                    consumer.unassign()
                except KafkaException as exc:  # the next assign replaces it anyway
                    log.debug("%s: unassigning: %s", self._what, describe(exc))

    def to_end(self) -> Generator[Batch, None, None]:
        """Batches of every record of the topic, from each partition's log start to the
        :meth:`bounds` found when the read starts; nothing when the topic does not exist
        (:attr:`ReadState.exists` is then False). Records written later are not read."""
        bounds = self.bounds()
        if bounds is None:
            return
        yield from self.forward(bounds)

    def each_record_to_end(
        self, add: Callable[[int, int, bytes | None, bytes | None], None]
    ) -> dict[int, int] | None:
        """Call ``add(partition, offset, key, value)`` for every record :meth:`to_end` reads,
        in offset order per partition; return where each partition's read stopped (its end
        when the read began, or the stable end before it), or None when the topic does not
        exist. For the readers that fold a whole topic into a state (offset syncs,
        checkpoints)."""
        for batch in self.to_end():
            for message in batch:
                partition, offset = message.partition(), message.offset()
                if partition is not None and offset is not None:  # always, for a record
                    add(partition, offset, message.key(), message.value())
        if not self._state.exists:
            return None
        return dict(self._state.reached)

    def backwards(
        self,
        partition: int,
        *,
        first_window: int = 10_000,
        growth: int = 4,
        max_scan: int | None = None,
        floor: int | None = None,
    ) -> Generator[Batch, None, None]:
        """A partition's tail, newest first, in windows that grow: one list per window (empty
        when it held only markers or aborted records), in offset order within it.

        The first window is the last ``first_window`` offsets before the partition's end (as
        :meth:`bounds` gives it); each one before it is ``growth`` times longer. Reading stops
        at the log's start, at ``floor`` (the lowest offset wanted), or once ``max_scan``
        offsets are covered, whichever comes first, and when the caller stops asking. Nothing
        comes when the partition does not exist (:attr:`ReadState.exists` is then False).
        """
        if first_window < 1 or growth < 1:
            raise ConfigError(
                f"a backward scan needs a first window and a growth of at least 1 (got "
                f"{first_window} and {growth})"
            )
        marks = self._partition_bounds(partition)
        if marks is None:
            return
        low, high = marks
        bottom = low if floor is None else max(low, floor)
        if max_scan is not None:
            bottom = max(bottom, high - max_scan)
        end, window = high, first_window
        while end > bottom:
            begin = max(bottom, end - window)
            records: Batch = []
            with closing(self.forward({partition: (begin, end)})) as batches:
                for batch in batches:
                    records.extend(batch)
            yield records
            end, window = begin, window * growth

    def record_at(self, partition: int, offset: int) -> Message | None:
        """The record at ``offset`` of ``partition``; None only when that offset holds no
        record for this reader: outside the log, a transaction marker, compacted away, or (for
        a ``read_committed`` reader) aborted or not committed yet. A read that cannot finish
        raises, as every read does: a slow cluster is never taken for a missing record."""
        marks = self._partition_bounds(partition)
        if marks is None or not marks[0] <= offset < marks[1]:
            return None
        with closing(self.forward({partition: (offset, offset + 1)})) as batches:
            for batch in batches:
                for message in batch:
                    if message.offset() == offset:
                        return message
        return None

    def _partition_bounds(self, partition: int) -> tuple[int, int] | None:
        """``(low, high)`` of one partition, waiting for a leader; None when it does not
        exist (the state says so)."""
        self._check_open()
        self._state = ReadState()
        problem = f"finding where partition {partition} ends"
        watch = StallWatch(self._clock, self.limits, self._where, lambda: problem)
        marks = self._watermarks(partition, watch)
        if marks is None:
            self._state.exists = False
        return marks

    def _positions(self, read: RangeRead) -> list[TopicPartition]:
        """The consumer's positions of the partitions still open; none when it cannot say
        (then no movement is seen, and the stall rule waits)."""
        try:
            return self._consumer.position(
                [TopicPartition(self.topic, p) for p in sorted(read.spans)]
            )
        except KafkaException as exc:
            log.debug("%s: positions: %s", self._what, describe(exc))
            return []

    # ---- life

    def close(self) -> None:
        """Close the consumer (a second call does nothing)."""
        if self._closed:
            return
        self._closed = True
        self._read = None  # an unfinished read ends at its next step
        with translated(f"closing the reader of {self.topic}", self.cluster):
            self._consumer.close()

    def __enter__(self) -> TopicReader:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError(f"the reader of {self._where} is closed")
