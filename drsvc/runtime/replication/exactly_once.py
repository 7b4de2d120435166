"""Exactly-once replication of one flow: copies, offset syncs and progress in one transaction.

The source partitions of the flow map to a fixed number of slots (:mod:`failover.slots`). Each
slot a worker owns has its own transactional producer on the target, ``transactional.id`` =
``drsvc.<source>-<target>.<slot>``. A slot's transaction holds, together:

* the copies of the records read from the slot's partitions (read_committed, so aborted source
  transactions are never copied), with the same key, value, timestamp, partition and headers as
  the at-least-once worker, plus the provenance header;
* the offset syncs that map them (``drsvc.offset-syncs.<source>``);
* the progress: an offset commit, on the target, of the group ``drsvc-replicator.<source>-<target>``
  keyed by the remote topic and partition, whose metadata holds the next source offset
  (:class:`failover.slots.SlotProgress`).

So the copies, their syncs and the position to resume from become visible together or not at all.

Taking a slot (at start, when the membership group assigns it, after any failure) is always the
same three steps, in this order: initialise the slot's transactions (which fences whoever held the
slot before and aborts its open transaction), read the slot's committed progress, then seek the
source partitions there and produce. Any transactional error, timeout or failed delivery drops the
slot's producer and takes the slot again that way: librdkafka lacks the newer transaction protocol
fixes, so no error is trusted to leave a producer usable.

Ownership comes from a Kafka consumer group on the target (``drsvc-slots.<source>-<target>``)
subscribed to an internal topic with one partition per slot: the partitions assigned to a worker are
the slots it owns (cooperative-sticky, so only moved slots change hands). Source partitions are
assigned by hand; no consumer group on the source is involved.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from confluent_kafka import (
    OFFSET_INVALID,
    TIMESTAMP_NOT_AVAILABLE,
    Consumer,
    ConsumerGroupState,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)

from drsvc.adapters.kafka_admin import create_topic, describe_topics
from drsvc.errors import ConfigError, KafkaUnavailableError
from drsvc.runtime.replication.client_configs import consumer_config, producer_config
from drsvc.runtime.replication.control import ControlFollower
from drsvc.runtime.replication.heartbeat_lane import HeartbeatLane
from drsvc.runtime.replication.lane import WorkerStats
from drsvc.runtime.replication.metrics import PartitionCounters, PartitionReport
from drsvc.runtime.replication.settings import WorkerSettings, keepalive_policy
from drsvc.runtime.replication.topics import MirroredTopic, ensure_sync_topic, mirror_for
from failover import naming, offset_syncs, provenance
from failover.copy_progress import PartitionProgress
from failover.errors import PolicyError
from failover.keepalive import (
    LastCopy,
    PartitionSyncState,
    keepalive_due,
    keepalive_sync,
    last_copy_of,
)
from failover.slots import (
    DEFAULT_SLOTS,
    MAX_SLOTS,
    RetakeBackoff,
    SlotFailure,
    SlotNames,
    SlotProgress,
    classify_failure,
    slot_of,
)

log = logging.getLogger(__name__)

#: errors of a fenced producer: another producer initialised the transactional id, or the
#: coordinator aborted a transaction that outlived its timeout (it bumps the epoch just the same,
#: so the codes cannot tell the two apart: see :func:`failover.slots.classify_failure`)
_FENCED_CODES = frozenset(
    code
    for name in ("_FENCED", "PRODUCER_FENCED", "INVALID_PRODUCER_EPOCH")
    if (code := getattr(KafkaError, name, None)) is not None
)


class _TransactionFailed(Exception):
    """A slot's transaction cannot commit (a delivery failed or timed out)."""


@dataclass(frozen=True)
class _Committing:
    """What a partition's state becomes once the slot's transaction commits."""

    position: int
    next_target: int
    last_copy: LastCopy | None
    copy_synced_at: float | None


@dataclass
class SlotPartition:
    """One source partition of an owned slot."""

    source: TopicPartition
    remote_topic: str
    prefix: bytes
    source_topic_id: bytes
    target_topic_id: bytes
    progress: PartitionProgress
    slot: int
    #: next source offset committed together with the copies before it
    committed: int
    #: what metrics show; kept by the worker across slot moves so counters never go back
    counters: PartitionCounters
    #: next target offset after the committed copies (-1 while unknown)
    next_target: int = -1
    #: last target offset acknowledged in the open transaction (-1 none)
    last_target: int = -1
    #: take a latency sample from the next acknowledgement (one per transaction is enough)
    sample_latency: bool = True
    #: the newest committed copy (what a keepalive sync repeats), None while unknown
    last_copy: LastCopy | None = None
    #: when a sync holding ``last_copy`` was last committed (monotonic s; None: unknown)
    copy_synced_at: float | None = None
    #: when this worker last committed the partition's progress (monotonic s; None: never)
    progress_committed_at: float | None = None


@dataclass
class Slot:
    """A slot this worker owns: its producer and its partitions."""

    number: int
    producer: Producer
    partitions: dict[tuple[str, int], SlotPartition] = field(default_factory=dict)
    in_transaction: bool = False
    opened_at: float = 0.0
    records_in_transaction: int = 0
    failure: str | None = None
    #: the Kafka error behind ``failure``, when there is one (it may say "fenced")
    failure_error: KafkaError | None = None
    transactions: int = 0


class ExactlyOnceWorker:
    """Copies one flow exactly once until :meth:`stop` is called (see the module docstring)."""

    def __init__(self, settings: WorkerSettings) -> None:
        self.settings = settings
        self.flow_id = settings.flow_id
        self.stats = WorkerStats()
        self.transactions_committed = 0
        self.transactions_failed = 0
        self.names = SlotNames(settings.source_alias, settings.target_alias)
        self._stop = threading.Event()
        self._identity_loop_check = (
            settings.policy.format_remote_topic(settings.source_alias, "x") == "x"
        )
        self._mirror = mirror_for(settings)
        self._mirrored: dict[str, MirroredTopic] = {}
        self.slot_count = 0
        self._slots: dict[int, Slot] = {}
        #: slots the membership group gave us (taken or waiting to be taken)
        self._owned: set[int] = set()
        #: owned slots not taken yet, and when to try (monotonic)
        self._retry_at: dict[int, float] = {}
        self._retake = RetakeBackoff(
            taken_over_s=settings.fenced_retry_s,
            timeout_first_s=settings.timed_out_retry_s,
            timeout_max_s=settings.timed_out_retry_max_s,
            failed_max_s=settings.max_retry_backoff_s,
        )
        self.transactions_timed_out = 0
        self._keepalive = keepalive_policy(settings)
        if settings.progress_refresh_s <= 0:
            raise ConfigError(
                f"flow {settings.flow_id}: the progress refresh interval must be positive "
                f"(got {settings.progress_refresh_s}s)"
            )
        self._parts: dict[tuple[str, int], SlotPartition] = {}
        self._counters: dict[tuple[str, int], PartitionCounters] = {}
        self._source: Consumer | None = None
        self._membership: Consumer | None = None
        self._progress: Consumer | None = None
        self._group_metadata: Any = None
        self._idle_check_at = 0.0
        self._flow_control = ControlFollower(
            settings.flow_id,
            settings.consul_http_addr,
            settings.control_key,
            settings.throttle_bytes_per_s,
        )
        self._paused: set[tuple[str, int]] = set()

    # ------------------------------------------------------------------ lifecycle

    def stop(self) -> None:
        self._stop.set()

    @property
    def owned_slots(self) -> list[int]:
        """Slots whose transactions this worker runs now."""
        return sorted(self._slots)

    def run(self, on_cycle: Callable[[ExactlyOnceWorker], None] | None = None) -> None:
        """Copy until stopped; on the way out commit what is open and leave the group."""
        self.slot_count = self._ensure_internal_topics()
        s = self.settings
        self._source = Consumer(self._source_config())
        self._progress = Consumer(self._progress_config())
        self._group_metadata = self._progress.consumer_group_metadata()
        self._membership = Consumer(self._membership_config())
        self._membership.subscribe(
            [self.names.slots_topic],
            on_assign=self._on_assign,
            on_revoke=self._on_revoke,
            on_lost=self._on_lost,
        )
        log.info(
            "flow %s: exactly-once with %d slots; waiting for slots from group %s on %s",
            self.flow_id,
            self.slot_count,
            self.names.membership_group,
            s.target_alias,
        )
        # Heartbeats take their own lane: a data backlog or a throttle never delays them.
        heartbeats = HeartbeatLane(self.settings)
        heartbeats.start()
        try:
            self._loop(on_cycle)
        finally:
            try:
                self._shutdown()
            finally:
                heartbeats.stop()

    def _loop(self, on_cycle: Callable[[ExactlyOnceWorker], None] | None) -> None:
        source, membership = self._source, self._membership
        assert source is not None and membership is not None
        s = self.settings
        next_refresh = 0.0
        while not self._stop.is_set():
            membership.poll(0)
            now = time.monotonic()
            if now >= next_refresh:
                self._refresh_topics()
                self._apply_control()
                next_refresh = now + s.refresh_interval_s
            self._take_waiting_slots(now)
            if not self._parts:
                membership.poll(s.poll_timeout_s)
                continue
            messages = source.consume(self._flow_control.batch_size(s.batch_size), s.poll_timeout_s)
            if messages:
                sent, copied = self._copy(messages)
                self._hold_back(self._flow_control.sent(sent, copied, time.monotonic()))
            self._commit_due(time.monotonic())
            if on_cycle is not None:
                on_cycle(self)

    def _shutdown(self) -> None:
        try:
            for slot in list(self._slots.values()):
                self._release(slot, commit=True)
        finally:
            for consumer in (self._membership, self._source, self._progress):
                if consumer is not None:
                    consumer.close()

    # ------------------------------------------------------------------ copying

    def _copy(self, messages: list[Message]) -> tuple[int, int]:  # noqa: PLR0915 (one loop)
        """Produce the copies of ``messages`` in their slots' transactions; return the bytes of
        key and value sent and the number of copies."""
        parts = self._parts
        header_key = provenance.PROVENANCE_HEADER
        target = self.settings.target_alias
        loop_check = self._identity_loop_check
        stats = self.stats
        now = time.monotonic()
        size = 0
        copied = 0
        for msg in messages:
            err = msg.error()
            if err is not None:
                self._consume_error(msg, err)
                continue
            part = parts.get((msg.topic(), msg.partition()))  # type: ignore[arg-type]
            if part is None:
                continue  # fetched before its slot moved away
            slot = self._slots.get(part.slot)
            if slot is None or slot.failure is not None:
                continue
            offset: int = msg.offset()  # type: ignore[assignment]
            headers: Any = msg.headers()
            if loop_check and provenance.visited(headers, target):
                stats.skipped_loops += 1
                continue
            headers = [] if headers is None else headers
            headers.append((header_key, part.prefix + offset.to_bytes(8, "big", signed=True)))
            ts_type, ts = msg.timestamp()
            value = msg.value()
            key = msg.key()
            epoch = msg.leader_epoch()
            if not slot.in_transaction and not self._begin(slot, now):
                continue
            producer = slot.producer
            while True:
                try:
                    producer.produce(
                        part.remote_topic,
                        value,
                        key,
                        partition=part.source.partition,
                        timestamp=0 if ts_type == TIMESTAMP_NOT_AVAILABLE else ts,
                        headers=headers,
                        on_delivery=partial(self._on_delivery, slot, part, offset),
                    )
                    break
                except BufferError:
                    try:
                        producer.poll(0.05)
                    except (KafkaException, SystemError) as exc:
                        slot.failure = f"serving delivery reports: {exc}"
                        break
                except KafkaException as exc:
                    where = f"{part.source.topic}-{part.source.partition}@{offset}"
                    slot.failure = f"record {where} refused: {exc.args[0].str()}"
                    slot.failure_error = exc.args[0]
                    break
            if slot.failure is not None:
                continue
            part.progress.produced(offset, -1 if epoch is None else epoch)
            slot.records_in_transaction += 1
            nbytes = len(value or b"") + len(key or b"")
            part.counters.add_batch(1, nbytes, ts)
            size += nbytes
            copied += 1
        stats.records_read += len(messages)
        stats.records_copied += copied
        stats.bytes_copied += size
        return size, copied

    def _hold_back(self, seconds: float) -> None:
        """Throttle: wait, committing due transactions and staying in the group meanwhile."""
        membership = self._membership
        assert membership is not None
        deadline = time.monotonic() + seconds
        while (left := deadline - time.monotonic()) > 0 and not self._stop.is_set():
            membership.poll(min(left, 0.1))
            self._commit_due(time.monotonic())

    # ------------------------------------------------------------------ flow control

    def _apply_control(self) -> None:
        """Follow the operator's pause/resume/throttle document (see :mod:`.control`)."""
        if self._flow_control.refresh():
            self._follow_pauses()

    def _follow_pauses(self) -> None:
        """Pause or resume source partitions as the control document says. A paused partition
        keeps its committed progress; reading resumes where it stopped."""
        source = self._source
        assert source is not None
        control = self._flow_control.control
        wanted = {key for key in self._parts if control.topic_paused(key[0])}
        to_pause = [self._parts[key].source for key in wanted - self._paused]
        to_resume = [
            TopicPartition(topic, partition)
            for topic, partition in self._paused - wanted
            if (topic, partition) in self._parts
        ]
        if to_pause:
            source.pause(to_pause)
            log.info("paused %d partition(s) of %s", len(to_pause), self.flow_id)
        if to_resume:
            source.resume(to_resume)
            log.info("resuming %d partition(s) of %s", len(to_resume), self.flow_id)
        self._paused = wanted

    def _begin(self, slot: Slot, now: float) -> bool:
        try:
            slot.producer.begin_transaction()
        except KafkaException as exc:
            self._drop_slot(slot, f"begin transaction: {exc.args[0].str()}", exc.args[0])
            return False
        slot.in_transaction = True
        slot.opened_at = now
        return True

    def _on_delivery(
        self,
        slot: Slot,
        part: SlotPartition,
        source_offset: int,
        err: KafkaError | None,
        msg: Message,
    ) -> None:
        if err is not None:
            self.stats.delivery_failures += 1
            if slot.failure is None:
                slot.failure = (
                    f"delivery of {part.source.topic}-{part.source.partition}@{source_offset} "
                    f"failed: {err.str()}"
                )
                slot.failure_error = err
            return
        target_offset: int = msg.offset()  # type: ignore[assignment]
        try:
            part.progress.delivered(source_offset, target_offset)
        except ValueError as exc:
            # A report the progress cannot place (a producer being torn down): never let it
            # escape into librdkafka's callback; the slot is taken again from its progress.
            if slot.failure is None:
                slot.failure = str(exc)
            return
        part.last_target = max(part.last_target, target_offset)
        if part.sample_latency:
            part.sample_latency = False
            ts_type, ts = msg.timestamp()
            if ts_type != TIMESTAMP_NOT_AVAILABLE and ts > 0:
                part.counters.latency.add(time.time() * 1000 - ts, time.monotonic())

    def _consume_error(self, msg: Message, err: KafkaError) -> None:
        if err.code() == KafkaError._PARTITION_EOF:
            return
        key = (msg.topic() or "", msg.partition() or 0)
        part = self._parts.get(key)
        if err.code() == KafkaError._AUTO_OFFSET_RESET and part is not None:
            # The next record to copy was deleted by retention: take the slot again, which
            # reports the loss and continues from the log start.
            slot = self._slots.get(slot_of(key[0], key[1], self.slot_count))
            if slot is not None:
                self._drop_slot(slot, f"{key[0]}-{key[1]}: position deleted by retention", None)
            return
        log.warning("consuming %s: %s", self.flow_id, err.str())

    # ------------------------------------------------------------------ transactions

    def _commit_due(self, now: float) -> None:
        s = self.settings
        due = [
            slot
            for slot in self._slots.values()
            if slot.failure is not None
            or (
                slot.in_transaction
                and (
                    now - slot.opened_at >= s.transaction_interval_s
                    or slot.records_in_transaction >= s.transaction_max_records
                )
            )
        ]
        idle_due = [
            slot
            for slot in self._slots.values()
            if not slot.in_transaction and slot.failure is None and slot not in due
        ]
        for slot in due:
            self._commit(slot)
        # Positions can move without records (aborted source transactions, markers): commit
        # them now and then, so progress and syncs say "caught up" exactly.
        if now - self._idle_check_at < 1.0:
            return
        self._idle_check_at = now
        self._note_source_ends()
        if idle_due:
            for slot in idle_due:
                positions = self._positions(slot)
                if any(positions[k] > p.committed for k, p in slot.partitions.items()) or any(
                    self._refresh_due(p, now) or self._keepalive_due(p, p.committed, now)
                    for p in slot.partitions.values()
                ):
                    self._commit(slot, positions)

    def _refresh_due(self, part: SlotPartition, now: float) -> bool:
        """The partition's progress must be committed again, or the target's offsets retention
        would expire it: the progress group never has members, so each offset lives
        offsets.retention.minutes after its own last commit, however idle the partition."""
        at = part.progress_committed_at
        return at is None or now - at >= self.settings.progress_refresh_s

    def _keepalive_due(self, part: SlotPartition, read_up_to: int, now: float) -> bool:
        return keepalive_due(self._sync_state(part, read_up_to), self._keepalive, round(now * 1000))

    def _sync_state(self, part: SlotPartition, read_up_to: int) -> PartitionSyncState:
        synced = part.copy_synced_at
        return PartitionSyncState(
            tp=part.progress.tp,
            source_topic_id=part.source_topic_id,
            target_topic_id=part.target_topic_id,
            last_copy=part.last_copy,
            read_up_to=read_up_to,
            copy_synced_at_ms=None if synced is None else round(synced * 1000),
        )

    def _note_source_ends(self) -> None:
        """Keep each partition's source end for metrics (cached watermarks: no request), so a
        metrics scrape on another thread never calls the consumer."""
        source = self._source
        assert source is not None
        for part in list(self._parts.values()):
            try:
                marks = source.get_watermark_offsets(part.source, cached=True)
            except KafkaException:
                continue
            if marks is not None and marks[1] >= 0:
                part.counters.source_end_offset = marks[1]

    def partition_reports(self) -> list[PartitionReport]:
        """One report per partition of the slots owned now (see :mod:`.metrics`). Runs on a
        scrape's thread: reads plain values only."""
        now = time.monotonic()
        now_ms = time.time() * 1000
        reports = []
        for part in list(self._parts.values()):
            counters = part.counters
            last = counters.last_timestamp_ms
            reports.append(
                PartitionReport(
                    flow=self.flow_id,
                    topic=part.source.topic,
                    partition=part.source.partition,
                    remote_topic=part.remote_topic,
                    records_copied=counters.records_copied,
                    bytes_copied=counters.bytes_copied,
                    replicated_offset=part.committed,
                    source_end_offset=counters.source_end_offset,
                    latency_ms=counters.latency.value(now),
                    record_age_ms=None if last is None else max(0.0, now_ms - last),
                )
            )
        return reports

    def _positions(self, slot: Slot) -> dict[tuple[str, int], int]:
        """Next source offset per partition of ``slot``: everything before it was read."""
        source = self._source
        assert source is not None
        wanted = [p.source for p in slot.partitions.values()]
        positions = {key: part.committed for key, part in slot.partitions.items()}
        if not wanted:
            return positions
        for tp in source.position(wanted):
            if tp.offset >= 0 and tp.offset != OFFSET_INVALID:
                positions[(tp.topic, tp.partition)] = tp.offset
        return positions

    def _commit(  # noqa: PLR0915 (one transaction, its failure paths side by side)
        self, slot: Slot, positions: dict[tuple[str, int], int] | None = None
    ) -> bool:
        """Commit the slot's open transaction with its syncs and progress; on any failure drop
        the slot (it is taken again from its last committed progress)."""
        producer = slot.producer
        s = self.settings
        timeout_s = s.transaction_timeout_ms / 1000
        now = time.monotonic()
        try:
            if slot.failure is not None:
                raise _TransactionFailed(slot.failure)
            if not slot.in_transaction:
                producer.begin_transaction()
                slot.in_transaction = True
                slot.opened_at = now
            remaining = producer.flush(timeout_s)
            if remaining:
                raise _TransactionFailed(f"{remaining} record(s) not acknowledged in {timeout_s}s")
            if slot.failure is not None:
                raise _TransactionFailed(slot.failure)
            if positions is None:
                positions = self._positions(slot)
            offsets = []
            ends: dict[tuple[str, int], _Committing] = {}
            for key, part in slot.partitions.items():
                position = positions[key]
                moved = position > part.committed or part.last_target >= 0
                if not moved:
                    position = part.committed
                keepalive = self._keepalive_due(part, position, now)
                if not (moved or keepalive or self._refresh_due(part, now)):
                    continue
                last_copy, synced_at = part.last_copy, part.copy_synced_at
                if moved:
                    part.progress.seal(position)
                    for finished in part.progress.take_finished():
                        for sync in finished.syncs:
                            self._produce_sync(producer, sync)
                            if sync.segments:
                                last_copy, synced_at = last_copy_of((sync,), last_copy), now
                    keepalive = keepalive and synced_at != now
                if keepalive:
                    # Idle past the keepalive interval: repeat the last copy, or the sync
                    # topic's retention deletes every sync that maps the partition.
                    self._produce_sync(producer, keepalive_sync(self._sync_state(part, position)))
                    self.stats.keepalive_syncs_written += 1
                    synced_at = now
                next_target = part.last_target + 1 if part.last_target >= 0 else part.next_target
                progress = SlotProgress(position, part.source_topic_id, last_copy)
                offsets.append(
                    TopicPartition(
                        part.remote_topic,
                        part.source.partition,
                        max(next_target, 0),
                        metadata=progress.encode(),
                    )
                )
                ends[key] = _Committing(position, next_target, last_copy, synced_at)
            if offsets:
                producer.send_offsets_to_transaction(offsets, self._group_metadata, timeout_s)
            producer.commit_transaction(timeout_s)
        except KafkaException as exc:
            self._drop_slot(slot, f"transaction: {exc.args[0].str()}", exc.args[0])
            return False
        except SystemError as exc:
            # A producer in a fatal state (fenced) raises from flush() while it serves delivery
            # reports; the Kafka error is the cause. Under a coordinator-side timeout the client
            # has also been seen to raise it with no cause at all: the producer is unusable
            # either way, and the slot is taken again from its committed progress (the failed
            # transaction is never visible), never left to crash the worker.
            cause = exc.__cause__
            if isinstance(cause, KafkaException):
                self._drop_slot(slot, f"transaction: {cause.args[0].str()}", cause.args[0])
            else:
                self._drop_slot(slot, f"transaction: {exc}", slot.failure_error)
            return False
        except _TransactionFailed as exc:
            self._drop_slot(slot, str(exc), slot.failure_error)
            return False
        for key, done in ends.items():
            part = slot.partitions[key]
            part.committed = done.position
            part.next_target = done.next_target
            part.last_target = -1
            part.sample_latency = True
            part.progress.persisted(done.position)
            part.last_copy = done.last_copy
            part.copy_synced_at = done.copy_synced_at
            part.progress_committed_at = now
        slot.in_transaction = False
        slot.records_in_transaction = 0
        slot.transactions += 1
        self.transactions_committed += 1
        self._retake.succeeded(slot.number)
        return True

    def _produce_sync(self, producer: Producer, sync: offset_syncs.OffsetSync) -> None:
        sync_key, sync_value = offset_syncs.encode_sync(sync)
        producer.produce(self.settings.sync_topic, sync_value, sync_key, partition=0)
        self.stats.syncs_written += 1

    # ------------------------------------------------------------------ slots

    def _on_assign(self, _consumer: Consumer, partitions: list[TopicPartition]) -> None:
        slots = sorted(tp.partition for tp in partitions)
        log.info("flow %s: assigned slot(s) %s", self.flow_id, slots)
        now = time.monotonic()
        for number in slots:
            self._owned.add(number)
            self._retry_at.setdefault(number, now)

    def _on_revoke(self, _consumer: Consumer, partitions: list[TopicPartition]) -> None:
        slots = sorted(tp.partition for tp in partitions)
        log.info("flow %s: giving up slot(s) %s", self.flow_id, slots)
        for number in slots:
            self._owned.discard(number)
            self._retry_at.pop(number, None)
            slot = self._slots.get(number)
            if slot is not None:
                self._release(slot, commit=True)

    def _on_lost(self, _consumer: Consumer, partitions: list[TopicPartition]) -> None:
        # Someone else may hold these slots already: never commit for them again.
        slots = sorted(tp.partition for tp in partitions)
        log.warning("flow %s: lost slot(s) %s to other workers", self.flow_id, slots)
        for number in slots:
            self._owned.discard(number)
            self._retry_at.pop(number, None)
            slot = self._slots.get(number)
            if slot is not None:
                self._release(slot, commit=False)

    def _take_waiting_slots(self, now: float) -> None:
        for number, at in sorted(self._retry_at.items()):
            if at <= now and number in self._owned and number not in self._slots:
                if self._take(number):
                    self._retry_at.pop(number, None)
                else:
                    self._schedule_retry(number, SlotFailure.FAILED)
            if self._stop.is_set():
                return

    def _schedule_retry(self, number: int, kind: SlotFailure) -> float:
        """Note a failure of slot ``number``; return the seconds until it is taken again."""
        if number not in self._owned:
            return 0.0
        now = time.monotonic()
        at = self._retake.failed(number, kind, now)
        self._retry_at[number] = at
        return at - now

    def _still_assigned(self, number: int) -> bool | None:
        """Does the membership group's coordinator (not our own view, which a paused worker
        has not updated yet) assign slot ``number`` to this worker? None when it cannot say
        (unreachable, or a rebalance in progress)."""
        membership = self._membership
        if membership is None:
            return None
        group = self.names.membership_group
        try:
            member_id = membership.memberid()
            future = self._mirror.target_admin.describe_consumer_groups(
                [group], request_timeout=5.0
            )[group]
            description = future.result(timeout=10.0)
        except Exception as exc:
            # Whatever stops us from asking (timeout, coordinator moving): we cannot say.
            log.warning("flow %s: cannot ask who owns slot %d: %s", self.flow_id, number, exc)
            return None
        if not member_id or description.state != ConsumerGroupState.STABLE:
            return None
        for member in description.members:
            if member.member_id == member_id:
                assignment = member.assignment.topic_partitions if member.assignment else []
                return any(
                    tp.topic == self.names.slots_topic and tp.partition == number
                    for tp in assignment
                )
        return False

    def _take(self, number: int) -> bool:
        """Fence the slot's previous owner, read its committed progress, seek, produce."""
        s = self.settings
        producer = Producer(self._producer_config(number))
        try:
            producer.init_transactions(s.transaction_timeout_ms / 1000 + 10)
        except KafkaException as exc:
            log.warning(
                "flow %s: slot %d: initialising transactions failed: %s (will retry)",
                self.flow_id,
                number,
                exc.args[0].str(),
            )
            _discard(producer)
            return False
        slot = Slot(number=number, producer=producer)
        wanted = self._slot_partitions(number)
        try:
            parts = self._read_progress(wanted)
        except KafkaUnavailableError as err:
            log.warning("flow %s: slot %d: %s (will retry)", self.flow_id, number, err)
            _discard(producer)
            return False
        slot.partitions = {(p.source.topic, p.source.partition): p for p in parts}
        self._slots[number] = slot
        self._assign(slot.partitions.values())
        # A transactional id unused for transactional.id.expiration.ms is forgotten by the
        # coordinator, and the progress of idle partitions would expire: the refresh covers both.
        log.info(
            "flow %s: took slot %d (%d partition(s))", self.flow_id, number, len(slot.partitions)
        )
        return True

    def _slot_partitions(self, number: int) -> list[tuple[MirroredTopic, int]]:
        return [
            (mirrored, partition)
            for mirrored in self._mirrored.values()
            for partition in range(mirrored.source.partitions)
            if slot_of(mirrored.source.name, partition, self.slot_count) == number
        ]

    def _read_progress(self, wanted: list[tuple[MirroredTopic, int]]) -> list[SlotPartition]:
        """Where each partition continues: its committed slot progress, else the flow's start."""
        progress_reader, source = self._progress, self._source
        assert progress_reader is not None and source is not None
        if not wanted:
            return []
        try:
            committed = progress_reader.committed(
                [TopicPartition(m.remote_name, p) for m, p in wanted], timeout=30
            )
        except KafkaException as exc:
            raise KafkaUnavailableError(
                f"reading the progress of flow {self.flow_id} on {self.settings.target_alias}: "
                f"{exc.args[0].str()}"
            ) from exc
        by_key = {(tp.topic, tp.partition): tp for tp in committed}
        parts = []
        for mirrored, partition in wanted:
            tp = by_key.get((mirrored.remote_name, partition))
            start, next_target, last_copy = self._start_of(mirrored, partition, tp)
            name = mirrored.source.name
            parts.append(
                SlotPartition(
                    source=TopicPartition(name, partition, start),
                    remote_topic=mirrored.remote_name,
                    prefix=provenance.header_prefix(self.settings.source_alias, name, partition),
                    source_topic_id=mirrored.source.topic_id,
                    target_topic_id=mirrored.remote.topic_id,
                    progress=PartitionProgress(
                        offset_syncs.TopicPartition(name, partition),
                        source_topic_id=mirrored.source.topic_id,
                        target_topic_id=mirrored.remote.topic_id,
                        start=start,
                    ),
                    slot=slot_of(name, partition, self.slot_count),
                    counters=self._counters.setdefault((name, partition), PartitionCounters()),
                    committed=start,
                    next_target=next_target,
                    last_copy=last_copy,
                )
            )
        return parts

    def _start_of(
        self, mirrored: MirroredTopic, partition: int, committed: TopicPartition | None
    ) -> tuple[int, int, LastCopy | None]:
        """(next source offset, next target offset, last copy) for a partition being taken."""
        source = self._source
        assert source is not None
        name = mirrored.source.name
        low, high = source.get_watermark_offsets(
            TopicPartition(name, partition), timeout=30, cached=False
        )
        progress: SlotProgress | None = None
        if committed is not None and committed.offset >= 0 and committed.metadata:
            try:
                progress = SlotProgress.decode(committed.metadata)
            except PolicyError as err:
                raise ConfigError(f"flow {self.flow_id}, {name}-{partition}: {err}") from err
            if progress.source_topic_id != mirrored.source.topic_id:
                log.error(
                    "%s-%s was deleted and recreated on %s: copying the new topic from its start",
                    name,
                    partition,
                    self.settings.source_alias,
                )
                progress = None
        if progress is not None:
            start = progress.next_source_offset
            if start < low:
                self.stats.records_lost_to_retention += low - start
                log.error(
                    "%d record(s) of %s-%s were deleted by retention on %s before they were "
                    "copied (progress %d, log starts at %d); they are missing on %s",
                    low - start,
                    name,
                    partition,
                    self.settings.source_alias,
                    start,
                    low,
                    self.settings.target_alias,
                )
            next_target = committed.offset if committed is not None else -1
            # A keepalive [s_last, F) claims that nothing between was there to copy: not so
            # when retention deleted records first, so the next real copy starts anew.
            last_copy = progress.last_copy if start >= low else None
            return max(start, low), next_target, last_copy
        kind = self.settings.start_kind
        if kind == "latest":
            return high, -1, None
        if kind == "timestamp" and self.settings.start_timestamp_ms is not None:
            found = source.offsets_for_times(
                [TopicPartition(name, partition, self.settings.start_timestamp_ms)], timeout=30
            )
            return (found[0].offset if found and found[0].offset >= 0 else high), -1, None
        return low, -1, None

    def _assign(self, parts: Any) -> None:
        source = self._source
        assert source is not None
        parts = list(parts)
        for part in parts:
            self._parts[(part.source.topic, part.source.partition)] = part
        if parts:
            source.incremental_assign(
                [TopicPartition(p.source.topic, p.source.partition, p.committed) for p in parts]
            )
            self._paused -= {(p.source.topic, p.source.partition) for p in parts}
            self._follow_pauses()

    def _unassign(self, slot: Slot) -> None:
        source = self._source
        assert source is not None
        for key in slot.partitions:
            self._parts.pop(key, None)
        if slot.partitions:
            try:
                source.incremental_unassign([p.source for p in slot.partitions.values()])
            except KafkaException as exc:
                log.warning("unassigning slot %d: %s", slot.number, exc.args[0].str())

    def _release(self, slot: Slot, commit: bool) -> None:
        """Give a slot up: commit (when it is still ours) or abandon its open transaction."""
        needs_commit = commit and (slot.in_transaction or slot.failure is not None)
        if needs_commit and not self._commit(slot):
            return  # _commit dropped the slot already
        self._slots.pop(slot.number, None)
        self._unassign(slot)
        _discard(slot.producer)  # purges what an abandoned transaction still holds

    def _drop_slot(self, slot: Slot, reason: str, err: KafkaError | None) -> None:
        """A transaction failed: throw the producer away; the slot is taken again from its last
        committed progress (nothing of the failed transaction is visible to read_committed)."""
        kind = self._failure_kind(slot, err)
        self.transactions_failed += 1
        self.stats.rewinds += 1
        self._slots.pop(slot.number, None)
        self._unassign(slot)
        try:
            slot.producer.purge()
            if slot.in_transaction and err is not None and not err.fatal():
                slot.producer.abort_transaction(5)
        except (KafkaException, SystemError):
            pass  # the next owner's initialisation aborts it anyway
        _discard(slot.producer)
        delay = self._schedule_retry(slot.number, kind)
        if kind is SlotFailure.TAKEN_OVER:
            log.warning(
                "flow %s: slot %d was taken over by another worker (fenced: %s); not copying it",
                self.flow_id,
                slot.number,
                reason,
            )
        elif kind is SlotFailure.TRANSACTION_TIMED_OUT:
            self.transactions_timed_out += 1
            log.warning(
                "flow %s: slot %d: the transaction timed out on the coordinator of %s (open "
                "%.1fs, transaction.timeout.ms=%d; the target is slow): it was aborted, the slot "
                "is still ours; taking it again in %.1fs from its last committed progress (%s)",
                self.flow_id,
                slot.number,
                self.settings.target_alias,
                time.monotonic() - slot.opened_at,
                self.settings.transaction_timeout_ms,
                delay,
                reason,
            )
        else:
            log.warning(
                "flow %s: slot %d: %s; aborting and continuing from its last committed progress",
                self.flow_id,
                slot.number,
                reason,
            )

    def _failure_kind(self, slot: Slot, err: KafkaError | None) -> SlotFailure:
        """Takeover, coordinator timeout or another failure (see :func:`classify_failure`)."""
        fenced = err is not None and err.code() in _FENCED_CODES
        timeout_s = self.settings.transaction_timeout_ms / 1000
        age = time.monotonic() - slot.opened_at if slot.in_transaction else None
        still_assigned: bool | None = None
        # Only ask the group when the answer can matter (and never for a slot given up).
        if fenced and age is not None and age >= timeout_s and slot.number in self._owned:
            still_assigned = self._still_assigned(slot.number)
        return classify_failure(
            fenced=fenced,
            transaction_age_s=age,
            transaction_timeout_s=timeout_s,
            still_assigned=still_assigned,
        )

    # ------------------------------------------------------------------ topics

    def _refresh_topics(self) -> None:
        try:
            mirrored = self._mirror.refresh()
        except KafkaUnavailableError as err:
            log.warning("topic discovery for %s failed: %s", self.flow_id, err)
            return
        self._mirrored = mirrored
        for slot in list(self._slots.values()):
            wanted = {(m.source.name, p): (m, p) for m, p in self._slot_partitions(slot.number)}
            changed = [
                key
                for key, part in slot.partitions.items()
                if key not in wanted
                or (part.source_topic_id, part.target_topic_id)
                != (wanted[key][0].source.topic_id, wanted[key][0].remote.topic_id)
            ]
            if changed:
                # A topic went away or was recreated: commit what was copied, take it anew.
                if self._commit(slot):
                    self._release(slot, commit=False)
                    self._retry_at[slot.number] = time.monotonic()
                continue
            new = [value for key, value in wanted.items() if key not in slot.partitions]
            if new:
                try:
                    parts = self._read_progress(new)
                except KafkaUnavailableError as err:
                    log.warning("flow %s: new partitions: %s (will retry)", self.flow_id, err)
                    continue
                for part in parts:
                    slot.partitions[(part.source.topic, part.source.partition)] = part
                self._assign(parts)
                log.info(
                    "flow %s: slot %d copies %d new partition(s)",
                    self.flow_id,
                    slot.number,
                    len(parts),
                )

    # ------------------------------------------------------------------ setup

    def _ensure_internal_topics(self) -> int:
        """Create the sync and slots topics; return the flow's number of slots."""
        admin = self._mirror.target_admin
        s = self.settings
        ensure_sync_topic(self._mirror, s)
        wanted = s.slots or DEFAULT_SLOTS
        if not 1 <= wanted <= MAX_SLOTS:
            raise ConfigError(f"slots must be between 1 and {MAX_SLOTS} (got {wanted})")
        create_topic(admin, self.names.slots_topic, partitions=wanted, config={})
        existing = describe_topics(admin, [self.names.slots_topic])[self.names.slots_topic]
        if s.slots is not None and existing.partitions != s.slots:
            raise ConfigError(
                f"flow {self.flow_id} already has {existing.partitions} slots (topic "
                f"{self.names.slots_topic} on {s.target_alias}); asked for {s.slots}. The number "
                "of slots cannot change while the flow has progress"
            )
        return existing.partitions

    def _source_config(self) -> dict[str, Any]:
        config = consumer_config(self.settings)
        # Partitions are assigned by slot, not by a group: this id is never used to commit.
        config["group.id"] = naming.progress_reader_group(
            self.settings.source_alias, self.settings.target_alias
        )
        config["client.id"] = naming.flow_client_id(self.flow_id, "eos")
        return config

    def _progress_config(self) -> dict[str, Any]:
        config: dict[str, Any] = dict(self.settings.target_client)
        config.update(
            {
                "group.id": self.names.progress_group,
                "enable.auto.commit": False,
                # Only stable (committed) progress is read: see KIP-447.
                "isolation.level": "read_committed",
                "client.id": naming.flow_client_id(self.flow_id, "progress"),
                "log_level": 4,
            }
        )
        return config

    def _membership_config(self) -> dict[str, Any]:
        config: dict[str, Any] = dict(self.settings.target_client)
        config.update(
            {
                "group.id": self.names.membership_group,
                "enable.auto.commit": False,
                "partition.assignment.strategy": "cooperative-sticky",
                "session.timeout.ms": self.settings.membership_session_timeout_ms,
                "heartbeat.interval.ms": max(
                    500, self.settings.membership_session_timeout_ms // 10
                ),
                "client.id": naming.flow_client_id(self.flow_id, "slots"),
                "log_level": 4,
            }
        )
        return config

    def _producer_config(self, number: int) -> dict[str, Any]:
        config = producer_config(self.settings)
        config.update(
            {
                "transactional.id": self.names.transactional_id(number),
                "transaction.timeout.ms": self.settings.transaction_timeout_ms,
                "client.id": naming.flow_client_id(self.flow_id, f"slot-{number}"),
            }
        )
        # A transaction must finish within its timeout: no record may wait longer than that.
        config["message.timeout.ms"] = min(
            self.settings.message_timeout_ms, self.settings.transaction_timeout_ms
        )
        return config


def _discard(producer: Producer) -> None:
    """Let go of a producer without waiting for what it still holds (purged or fenced)."""
    try:
        producer.purge()
        producer.poll(0)
    except (KafkaException, RuntimeError, SystemError):
        pass  # a fenced producer raises its fatal error here: it is being dropped anyway
