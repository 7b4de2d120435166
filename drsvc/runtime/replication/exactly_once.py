"""Exactly-once delivery: copies, offset syncs and progress in one transaction per slot.

The source partitions of the flow map to a fixed number of slots (:mod:`failover.slots`). Each
slot a worker owns has its own transactional producer on the target, ``transactional.id`` =
``drsvc.<source>-<target>.<slot>``. A slot's transaction holds, together:

* the copies of the records the engine read from the slot's partitions (read_committed, so
  aborted source transactions are never copied), made by the engine's hot path as in the
  at-least-once mode;
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
import sys
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any

from drsvc.errors import ConfigError, KafkaUnavailableError
from drsvc.kafka.hot import KafkaException
from drsvc.kafka.types import (
    OFFSET_INVALID,
    Consumer,
    KafkaError,
    Message,
    Producer,
    TopicPartition,
)
from drsvc.runtime.replication.boundary import TopicCatalog
from drsvc.runtime.replication.client_configs import (
    progress_reader_config,
    slot_membership_config,
    slot_producer_config,
    slot_source_config,
)
from drsvc.runtime.replication.lane import Lane
from drsvc.runtime.replication.settings import keepalive_policy
from drsvc.runtime.replication.topics import MirroredTopic
from failover import offset_syncs
from failover.errors import PolicyError
from failover.keepalive import LastCopy, keepalive_sync, last_copy_of
from failover.partition_state import Action, CommittedProgress, Reading
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

if TYPE_CHECKING:
    from drsvc.runtime.replication.engine import ReplicationEngine

log = logging.getLogger(__name__)

#: errors of a fenced producer: another producer initialised the transactional id, or the
#: coordinator aborted a transaction that outlived its timeout (it bumps the epoch just the same,
#: so the codes cannot tell the two apart: see :func:`failover.slots.classify_failure`)
_FENCED_CODES = frozenset(
    code
    for name in ("_FENCED", "PRODUCER_FENCED", "INVALID_PRODUCER_EPOCH")
    if (code := getattr(KafkaError, name, None)) is not None
)

#: how often idle slots are looked at for positions moved without records, keepalives and
#: progress refreshes
IDLE_CHECK_S = 1.0


class _TransactionFailed(Exception):
    """A slot's transaction cannot commit (a delivery failed or timed out)."""


@dataclass(frozen=True)
class _Committing:
    """What a lane's state becomes once the slot's transaction commits."""

    position: int
    next_target: int
    last_copy: LastCopy | None
    copy_synced_at_ms: int | None


@dataclass
class Slot:
    """A slot this worker owns: its producer and its lanes."""

    number: int
    producer: Producer
    lanes: dict[tuple[str, int], Lane] = field(default_factory=dict)
    in_transaction: bool = False
    opened_at: float = 0.0
    records_in_transaction: int = 0
    failure: str | None = None
    #: the Kafka error behind ``failure``, when there is one (it may say "fenced")
    failure_error: KafkaError | None = None
    transactions: int = 0

    def fail(self, reason: str, err: KafkaError | None = None) -> None:
        """The open transaction cannot commit: copy nothing more into it (the slot is dropped
        and taken again at the next commit check)."""
        if self.failure is None:
            self.failure = reason
            self.failure_error = err
        for lane in self.lanes.values():
            lane.copying = False


class ExactlyOnce:
    """The exactly-once mode of a :class:`ReplicationEngine` (see the module docstring)."""

    mode = "exactly-once"

    def __init__(self, engine: ReplicationEngine) -> None:
        settings = engine.settings
        self.engine = engine
        self.settings = settings
        self.stats = engine.stats
        self.flow_id = settings.flow_id
        self.names = SlotNames(settings.source_alias, settings.target_alias)
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
        self._keepalive = keepalive_policy(settings)
        if settings.progress_refresh_s <= 0:
            raise ConfigError(
                f"flow {settings.flow_id}: the progress refresh interval must be positive "
                f"(got {settings.progress_refresh_s}s)"
            )
        self._membership: Consumer | None = None
        self._progress: Consumer | None = None
        self._group_metadata: Any = None
        self._idle_check_at = 0.0

    @property
    def owned_slots(self) -> list[int]:
        """Slots whose transactions this worker runs now."""
        return sorted(self._slots)

    # ------------------------------------------------------------------ setup

    def prepare(self, catalog: TopicCatalog) -> None:
        """Create the sync and slots topics; learn the flow's number of slots."""
        s = self.settings
        catalog.ensure_sync_topic()
        wanted = s.slots or DEFAULT_SLOTS
        if not 1 <= wanted <= MAX_SLOTS:
            raise ConfigError(f"slots must be between 1 and {MAX_SLOTS} (got {wanted})")
        existing = catalog.ensure_topic(self.names.slots_topic, wanted)
        if s.slots is not None and existing != s.slots:
            raise ConfigError(
                f"flow {self.flow_id} already has {existing} slots (topic "
                f"{self.names.slots_topic} on {s.target_alias}); asked for {s.slots}. The number "
                "of slots cannot change while the flow has progress"
            )
        self.slot_count = existing

    def source_config(self) -> dict[str, Any]:
        return slot_source_config(self.settings)

    def start(self) -> None:
        kafka = self.engine.kafka
        target = self.settings.target_alias
        self._progress = kafka.consumer(target, progress_reader_config(self.settings))
        self._group_metadata = self._progress.consumer_group_metadata()
        self._membership = kafka.consumer(target, slot_membership_config(self.settings))
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
            self.settings.target_alias,
        )

    @property
    def membership(self) -> Consumer:
        assert self._membership is not None
        return self._membership

    def shutdown(self) -> None:
        try:
            for slot in list(self._slots.values()):
                self._release(slot, commit=True)
        finally:
            for consumer in (self._membership, self._progress):
                if consumer is not None:
                    consumer.close()

    # ------------------------------------------------------------------ the loop's hooks

    def reading(self) -> bool:
        return bool(self.engine.lanes)

    def before_batch(self, now: float) -> None:
        self.membership.poll(0)
        self._take_waiting_slots(now)

    def idle(self, timeout_s: float) -> None:
        self.membership.poll(timeout_s)

    def serve(self, timeout_s: float) -> None:
        self.membership.poll(timeout_s)
        self._commit_due(self.engine.clock.monotonic())

    def after_batch(self, now: float) -> None:
        self._commit_due(now)

    def replicated_offset(self, lane: Lane) -> int:
        return lane.committed

    def execute(self, lane: Lane, action: Action) -> None:
        # Failures drop the whole slot instead of rewinding one partition: nothing of the
        # at-least-once machinery (rewind, sync repair, restart) is ever asked for.
        raise AssertionError(f"exactly-once cannot execute {action!r}")

    def skip_below(self, floors: list[tuple[Lane, int]]) -> None:
        # A slot starts its partitions at their floors when it is taken (start positions):
        # commit what it copied, give it up and take it again at once.
        slots = {lane.slot.number: lane.slot for lane, _ in floors if lane.slot is not None}
        for lane, floor in floors:
            log.warning(
                "flow %s: skipping %s-%s below %d on request (the flow's control document, "
                "skip_below): those offsets are not copied to %s",
                self.flow_id,
                lane.source.topic,
                lane.source.partition,
                floor,
                self.settings.target_alias,
            )
        for number, slot in sorted(slots.items()):
            if self._slots.get(number) is not slot:
                continue
            if self._commit(slot):
                self._release(slot, commit=False)
                self._retry_at[number] = self.engine.clock.monotonic()

    # ------------------------------------------------------------------ the hot path's hooks

    def open(self, lane: Lane, now: float) -> Producer | None:
        slot = lane.slot
        if slot is None or slot.failure is not None:
            return None
        if not slot.in_transaction:
            try:
                slot.producer.begin_transaction()
            except KafkaException as exc:
                self._drop_slot(slot, f"begin transaction: {exc.args[0].str()}", exc.args[0])
                return None
            slot.in_transaction = True
            slot.opened_at = now
        return slot.producer

    def copied(self, lane: Lane, records: int) -> None:
        if lane.slot is not None:
            lane.slot.records_in_transaction += records

    def queue_full(self, lane: Lane, producer: Producer) -> bool:
        slot = lane.slot
        assert slot is not None
        try:
            producer.poll(0.05)
        except (KafkaException, SystemError) as exc:
            slot.fail(f"serving delivery reports: {exc}")
        return slot.failure is None

    def refused(self, lane: Lane, offset: int, epoch: int, err: KafkaError) -> None:
        if lane.slot is not None:
            where = f"{lane.source.topic}-{lane.source.partition}@{offset}"
            lane.slot.fail(f"record {where} refused: {err.str()}", err)

    def on_delivery(
        self, lane: Lane, source_offset: int, err: KafkaError | None, msg: Message
    ) -> None:
        slot = lane.slot
        if slot is None:
            return
        if err is not None:
            self.stats.delivery_failures += 1
            slot.fail(
                f"delivery of {lane.source.topic}-{lane.source.partition}@{source_offset} "
                f"failed: {err.str()}",
                err,
            )
            return
        target_offset: int = msg.offset()  # type: ignore[assignment]
        try:
            lane.progress.delivered(source_offset, target_offset)
        except ValueError as exc:
            # A report the progress cannot place (a producer being torn down): never let it
            # escape into librdkafka's callback; the slot is taken again from its progress.
            slot.fail(str(exc))
            return
        lane.last_target = max(lane.last_target, target_offset)

    def position_deleted(self, lane: Lane) -> None:
        # The next record to copy was deleted by retention: take the slot again, which
        # reports the loss and continues from the log start.
        slot = lane.slot
        if slot is not None and self._slots.get(slot.number) is slot:
            where = f"{lane.source.topic}-{lane.source.partition}"
            self._drop_slot(slot, f"{where}: position deleted by retention", None)

    def reassign(self, lane: Lane, position: int) -> None:
        consumer = self.engine.consumer
        consumer.incremental_unassign([lane.source])
        consumer.incremental_assign(
            [TopicPartition(lane.source.topic, lane.source.partition, position)]
        )
        if not isinstance(lane.state.hold, Reading):
            consumer.pause([lane.source])

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
        idle = [
            slot
            for slot in self._slots.values()
            if not slot.in_transaction and slot.failure is None and slot not in due
        ]
        for slot in due:
            self._commit(slot)
        # Positions can move without records (aborted source transactions, markers): commit
        # them now and then, so progress and syncs say "caught up" exactly.
        if now - self._idle_check_at < IDLE_CHECK_S:
            return
        self._idle_check_at = now
        for slot in idle:
            if self._slots.get(slot.number) is not slot:
                continue
            positions = self._positions(slot)
            if any(positions[key] > lane.committed for key, lane in slot.lanes.items()) or any(
                self._refresh_due(lane, now) or self._keepalive_due(lane, lane.committed, now)
                for lane in slot.lanes.values()
            ):
                self._commit(slot, positions)

    def _refresh_due(self, lane: Lane, now: float) -> bool:
        """The partition's progress must be committed again, or the target's offsets retention
        would expire it: the progress group never has members, so each offset lives
        offsets.retention.minutes after its own last commit, however idle the partition."""
        at = lane.progress_committed_at
        return at is None or now - at >= self.settings.progress_refresh_s

    def _keepalive_due(self, lane: Lane, read_up_to: int, now: float) -> bool:
        return lane.keepalive(self._keepalive, round(now * 1000), read_up_to) is not None

    def _positions(self, slot: Slot) -> dict[tuple[str, int], int]:
        """Next source offset per lane of ``slot``: everything before it was read and copied
        (or had nothing to copy). A lane that does not copy now (paused, held) counts up to
        what it copied: records fetched meanwhile were skipped, not copied."""
        positions = {
            key: max(lane.committed, lane.progress.next_offset) for key, lane in slot.lanes.items()
        }
        wanted = [lane.source for lane in slot.lanes.values() if lane.copying]
        if not wanted:
            return positions
        for tp in self.engine.consumer.position(wanted):
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
        now = self.engine.clock.monotonic()
        now_ms = round(now * 1000)
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
            for key, lane in slot.lanes.items():
                position = positions[key]
                moved = position > lane.committed or lane.last_target >= 0
                if not moved:
                    position = lane.committed
                keepalive = self._keepalive_due(lane, position, now)
                if not (moved or keepalive or self._refresh_due(lane, now)):
                    continue
                last_copy, synced_at_ms = lane.last_copy, lane.copy_synced_at_ms
                if moved:
                    lane.progress.seal(position)
                    for finished in lane.progress.take_finished():
                        for sync in finished.syncs:
                            self._produce_sync(producer, sync)
                            if sync.segments:
                                last_copy, synced_at_ms = last_copy_of((sync,), last_copy), now_ms
                    keepalive = keepalive and synced_at_ms != now_ms
                if keepalive:
                    # Idle past the keepalive interval: repeat the last copy, or the sync
                    # topic's retention deletes every sync that maps the partition.
                    state = lane.sync_state(position)
                    if state is not None:
                        self._produce_sync(producer, keepalive_sync(state))
                        self.stats.keepalive_syncs_written += 1
                        synced_at_ms = now_ms
                next_target = lane.last_target + 1 if lane.last_target >= 0 else lane.next_target
                progress = SlotProgress(position, lane.progress.source_topic_id, last_copy)
                offsets.append(
                    TopicPartition(
                        lane.remote_topic,
                        lane.source.partition,
                        max(next_target, 0),
                        metadata=progress.encode(),
                    )
                )
                ends[key] = _Committing(position, next_target, last_copy, synced_at_ms)
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
        except:  # noqa: E722 (whatever a fenced producer raises, see below)
            # A fenced producer's flush() has also been seen to raise a bare KafkaError, which
            # is no exception class at all (so only a bare except catches it): the transaction
            # failed all the same.
            raised = sys.exc_info()[1]
            if isinstance(raised, (KeyboardInterrupt, SystemExit)):
                raise
            err = raised if isinstance(raised, KafkaError) else slot.failure_error
            self._drop_slot(slot, f"transaction: {raised}", err)
            return False
        for key, done in ends.items():
            lane = slot.lanes[key]
            lane.committed = done.position
            lane.next_target = done.next_target
            lane.last_target = -1
            lane.progress.persisted(done.position)
            lane.last_copy = done.last_copy
            lane.copy_synced_at_ms = done.copy_synced_at_ms
            lane.progress_committed_at = now
        slot.in_transaction = False
        slot.records_in_transaction = 0
        slot.transactions += 1
        self.stats.transactions_committed += 1
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
        now = self.engine.clock.monotonic()
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
            if self.engine.stopping:
                return

    def _schedule_retry(self, number: int, kind: SlotFailure) -> float:
        """Note a failure of slot ``number``; return the seconds until it is taken again."""
        if number not in self._owned:
            return 0.0
        now = self.engine.clock.monotonic()
        at = self._retake.failed(number, kind, now)
        self._retry_at[number] = at
        return at - now

    def _still_assigned(self, number: int) -> bool | None:
        """Does the membership group's coordinator (not our own view, which a paused worker
        has not updated yet) assign slot ``number`` to this worker? None when it cannot say
        (unreachable, or a rebalance in progress)."""
        try:
            member_id = self.membership.memberid()
            return self.engine.catalog.slot_assigned(
                self.names.membership_group, member_id or "", self.names.slots_topic, number
            )
        except Exception as exc:
            # Whatever stops us from asking (timeout, coordinator moving): we cannot say.
            log.warning("flow %s: cannot ask who owns slot %d: %s", self.flow_id, number, exc)
            return None

    def _take(self, number: int) -> bool:
        """Fence the slot's previous owner, read its committed progress, seek, produce."""
        s = self.settings
        taken: list[Slot] = []  # the slot, once it exists: what the producer's errors fail
        producer = self.engine.kafka.producer(
            s.target_alias,
            {
                **slot_producer_config(self.settings, number),
                "error_cb": partial(self._on_client_error, taken),
            },
        )
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
        taken.append(slot)
        try:
            lanes = self._read_progress(slot, self._slot_partitions(number))
        except KafkaUnavailableError as err:
            log.warning("flow %s: slot %d: %s (will retry)", self.flow_id, number, err)
            _discard(producer)
            return False
        self._slots[number] = slot
        self._assign(slot, lanes)
        # A transactional id unused for transactional.id.expiration.ms is forgotten by the
        # coordinator, and the progress of idle partitions would expire: the refresh covers both.
        log.info("flow %s: took slot %d (%d partition(s))", self.flow_id, number, len(lanes))
        return True

    def _on_client_error(self, taken: list[Slot], err: KafkaError) -> None:
        """A slot producer's error callback: a fatal error (fenced, or the coordinator aborted
        the transaction) fails the slot's transaction; the rest is connection trouble."""
        if not err.fatal():
            log.warning("flow %s: %s", self.flow_id, err.str())
            return
        for slot in taken:
            slot.fail(f"fatal producer error: {err.str()}", err)

    def _slot_partitions(self, number: int) -> list[tuple[MirroredTopic, int]]:
        return [
            (mirrored, partition)
            for mirrored in self.engine.mirrored.values()
            for partition in range(mirrored.source.partitions)
            if slot_of(mirrored.source.name, partition, self.slot_count) == number
        ]

    def _read_progress(self, slot: Slot, wanted: list[tuple[MirroredTopic, int]]) -> list[Lane]:
        """Lanes for ``wanted``, each starting at its committed slot progress, else where the
        flow starts."""
        if not wanted:
            return []
        assert self._progress is not None
        try:
            committed = self._progress.committed(
                [TopicPartition(m.remote_name, p) for m, p in wanted], timeout=30
            )
        except KafkaException as exc:
            raise KafkaUnavailableError(
                f"reading the progress of flow {self.flow_id} on {self.settings.target_alias}: "
                f"{exc.args[0].str()}"
            ) from exc
        by_key = {(tp.topic, tp.partition): tp for tp in committed}
        progress: dict[tuple[str, int], tuple[SlotProgress, int]] = {}
        for mirrored, partition in wanted:
            found = self._progress_of(
                mirrored, partition, by_key.get((mirrored.remote_name, partition))
            )
            if found is not None:
                progress[(mirrored.source.name, partition)] = found
        starts = self.engine.start_positions(
            [
                (
                    m.source.name,
                    p,
                    CommittedProgress(found[0].next_source_offset)
                    if (found := progress.get((m.source.name, p))) is not None
                    else None,
                )
                for m, p in wanted
            ]
        )
        lanes = []
        for mirrored, partition in wanted:
            key = (mirrored.source.name, partition)
            start = starts[key]
            lane = self.engine.new_lane(mirrored, partition, start.offset)
            lane.slot = slot
            if key in progress:
                slot_progress, next_target = progress[key]
                lane.next_target = next_target
                # A keepalive [s_last, F) claims that nothing between was there to copy: not
                # so when retention deleted records first, so the next real copy starts anew.
                lane.last_copy = slot_progress.last_copy if start.resumed else None
            lanes.append(lane)
        return lanes

    def _progress_of(
        self, mirrored: MirroredTopic, partition: int, committed: TopicPartition | None
    ) -> tuple[SlotProgress, int] | None:
        """A partition's committed slot progress and next target offset; None when it has none
        (or has progress of an earlier topic of the same name)."""
        if committed is None or committed.offset < 0 or not committed.metadata:
            return None
        name = mirrored.source.name
        try:
            progress = SlotProgress.decode(committed.metadata)
        except PolicyError as err:
            raise ConfigError(f"flow {self.flow_id}, {name}-{partition}: {err}") from err
        if progress.source_topic_id != mirrored.source.topic_id:
            log.error(
                "%s-%s was deleted and recreated on %s: its progress belongs to the old topic; "
                "copying the new one from where the flow starts (%s)",
                name,
                partition,
                self.settings.source_alias,
                self.settings.start_kind,
            )
            return None
        return progress, committed.offset

    def _assign(self, slot: Slot, lanes: list[Lane]) -> None:
        engine = self.engine
        for lane in lanes:
            slot.lanes[lane.key] = lane
            engine.add_lane(lane)
        if lanes:
            engine.consumer.incremental_assign(
                [
                    TopicPartition(lane.source.topic, lane.source.partition, lane.committed)
                    for lane in lanes
                ]
            )
            # A partition paused under the slot's previous lanes stays paused in the consumer
            # across unassign and assign: start from unpaused, then follow the control.
            engine.consumer.resume([lane.source for lane in lanes])
            engine.follow_control(lanes)

    def _unassign(self, slot: Slot) -> None:
        lanes = list(slot.lanes.values())
        self.engine.drop_lanes(lanes)
        if lanes:
            try:
                self.engine.consumer.incremental_unassign([lane.source for lane in lanes])
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
        slot.fail(reason, err)
        kind = self._failure_kind(slot, err)
        self.stats.transactions_failed += 1
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
            self.stats.transactions_timed_out += 1
            log.warning(
                "flow %s: slot %d: the transaction timed out on the coordinator of %s (open "
                "%.1fs, transaction.timeout.ms=%d; the target is slow): it was aborted, the slot "
                "is still ours; taking it again in %.1fs from its last committed progress (%s)",
                self.flow_id,
                slot.number,
                self.settings.target_alias,
                self.engine.clock.monotonic() - slot.opened_at,
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
        now = self.engine.clock.monotonic()
        age = now - slot.opened_at if slot.in_transaction else None
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

    def topics_changed(self, mirrored: dict[str, MirroredTopic]) -> None:
        for slot in list(self._slots.values()):
            wanted = {(m.source.name, p): (m, p) for m, p in self._slot_partitions(slot.number)}
            changed = [
                key
                for key, lane in slot.lanes.items()
                if key not in wanted
                or (lane.progress.source_topic_id, lane.progress.target_topic_id)
                != (wanted[key][0].source.topic_id, wanted[key][0].remote.topic_id)
            ]
            if changed:
                # A topic went away or was recreated: commit what was copied, take it anew.
                if self._commit(slot):
                    self._release(slot, commit=False)
                    self._retry_at[slot.number] = self.engine.clock.monotonic()
                continue
            new = [value for key, value in wanted.items() if key not in slot.lanes]
            if new:
                try:
                    lanes = self._read_progress(slot, new)
                except KafkaUnavailableError as err:
                    log.warning("flow %s: new partitions: %s (will retry)", self.flow_id, err)
                    continue
                self._assign(slot, lanes)
                log.info(
                    "flow %s: slot %d copies %d new partition(s)",
                    self.flow_id,
                    slot.number,
                    len(lanes),
                )


def _discard(producer: Producer) -> None:
    """Let go of a producer without waiting for what it still holds (purged or fenced)."""
    try:
        producer.purge()
        producer.poll(0)
    except (KafkaException, RuntimeError, SystemError):
        pass  # a fenced producer raises its fatal error here: it is being dropped anyway
