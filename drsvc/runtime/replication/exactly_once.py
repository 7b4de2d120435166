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

When a slot is taken, committed, dropped, given up or taken again is decided by the pure machine
:mod:`failover.slot_state`, one state per slot number; this module feeds it the events (the
group's assignments, commit checks, failed deliveries, the answers of the I/O it asked for) and
does the I/O its actions name. What a slot's lanes need of the engine (added, dropped, halted,
flow control followed) goes through the seam's effects (:mod:`.seam`).

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
from typing import Any

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
from drsvc.runtime.replication.seam import (
    AddLanes,
    DropLanes,
    FollowControl,
    HaltLanes,
    ModeContext,
)
from drsvc.runtime.replication.settings import keepalive_policy
from drsvc.runtime.replication.topics import MirroredTopic
from failover import offset_syncs, slot_state
from failover.errors import PolicyError
from failover.keepalive import LastCopy, keepalive_sync, last_copy_of
from failover.partition_state import Action, CommittedProgress, Reading
from failover.slot_state import (
    Active,
    AskOwner,
    Assigned,
    BeginFailed,
    BeginTransaction,
    Commit,
    CommitCheck,
    CommitFailed,
    Committed,
    Committing,
    Copied,
    DeliveryFailed,
    IdleCommitDue,
    Lost,
    OwnerAnswered,
    PositionDeleted,
    Positions,
    ProducerWanted,
    Refused,
    Release,
    ReportFailure,
    ResumeLanes,
    RetakeCheck,
    Revoked,
    ScheduleRetake,
    ShuttingDown,
    SlotAction,
    SlotError,
    SlotPolicy,
    SlotState,
    TakeAgain,
    TakeFailed,
    Taken,
    TakeSlot,
    TransactionBegun,
    TransactionFailure,
    Waiting,
    copies,
    producer_ready,
)
from failover.slots import (
    DEFAULT_SLOTS,
    MAX_SLOTS,
    RetakeDelays,
    SlotFailure,
    SlotNames,
    SlotProgress,
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

#: how often idle slots are looked at for positions moved without records, keepalives and
#: progress refreshes
IDLE_CHECK_S = 1.0

#: the state of a slot this worker never owned
_NOT_OWNED = SlotState()


class _TransactionFailed(Exception):
    """A slot's transaction cannot commit (a delivery failed or timed out)."""


@dataclass(frozen=True)
class _Committing:
    """What a lane's state becomes once the slot's transaction commits."""

    position: int
    next_target: int
    last_copy: LastCopy | None
    copy_synced_at_ms: int | None


@dataclass(eq=False)
class Slot:
    """One taking of a slot: its producer and its lanes. A slot taken again is a new ``Slot``,
    so reports of an earlier producer or lanes never reach the state of the current one."""

    number: int
    producer: Producer
    lanes: dict[tuple[str, int], SlotLane] = field(default_factory=dict)
    transactions: int = 0


@dataclass(eq=False)
class SlotLane:
    """What exactly once keeps of a lane it copies: its slot and its copies' target offsets."""

    lane: Lane
    slot: Slot
    #: next target offset after the committed copies (-1 while unknown)
    next_target: int = -1
    #: last target offset acknowledged in the open transaction (-1 none)
    last_target: int = -1
    #: when this worker last committed the partition's progress (monotonic s; None: never)
    progress_committed_at: float | None = None


def _slot_error(err: KafkaError | None) -> SlotError | None:
    """What the slot's lifecycle needs to know of a Kafka error."""
    if err is None:
        return None
    return SlotError(fenced=err.code() in _FENCED_CODES, fatal=bool(err.fatal()))


def _error_in(raised: BaseException) -> KafkaError | None:
    """The Kafka error behind an exception a client raised, if it carries one (a fenced
    producer raises ``SystemError`` with the ``KafkaException`` as its cause)."""
    if isinstance(raised, KafkaException) and raised.args:
        found = raised.args[0]
        return found if isinstance(found, KafkaError) else None
    cause = raised.__cause__
    return _error_in(cause) if isinstance(cause, KafkaException) else None


class ExactlyOnce:
    """The exactly-once delivery mode of a flow's engine (see the module docstring)."""

    mode = "exactly-once"

    def __init__(self, context: ModeContext) -> None:
        settings = context.settings
        self.ctx = context
        self.settings = settings
        self.stats = context.stats
        self.flow_id = settings.flow_id
        self._effects = context.effects
        self.names = SlotNames(settings.source_alias, settings.target_alias)
        self.slot_count = 0
        #: each slot's lifecycle (:mod:`failover.slot_state`) by number, kept across
        #: revocations (absent: never owned)
        self._states: dict[int, SlotState] = {}
        #: the slots taken now, by number
        self._slots: dict[int, Slot] = {}
        #: what this mode keeps of each lane it copies now
        self._lanes: dict[Lane, SlotLane] = {}
        self._policy = SlotPolicy(
            transaction_interval_s=settings.transaction_interval_s,
            transaction_max_records=settings.transaction_max_records,
            transaction_timeout_s=settings.transaction_timeout_ms / 1000,
            retake=RetakeDelays(
                taken_over_s=settings.fenced_retry_s,
                timeout_first_s=settings.timed_out_retry_s,
                timeout_max_s=settings.timed_out_retry_max_s,
                failed_max_s=settings.max_retry_backoff_s,
            ),
        )
        self._keepalive = keepalive_policy(settings)
        if settings.progress_refresh_s <= 0:
            raise ConfigError(
                f"flow {settings.flow_id}: the progress refresh interval must be positive "
                f"(got {settings.progress_refresh_s}s)"
            )
        self._catalog: TopicCatalog | None = None
        self._consumer: Consumer | None = None
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
        self._catalog = catalog
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

    def start(self, consumer: Consumer) -> None:
        kafka = self.ctx.kafka
        target = self.settings.target_alias
        self._consumer = consumer
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
    def consumer(self) -> Consumer:
        """The engine's source consumer; this mode assigns it the partitions of its slots."""
        assert self._consumer is not None
        return self._consumer

    @property
    def membership(self) -> Consumer:
        assert self._membership is not None
        return self._membership

    def shutdown(self) -> None:
        try:
            for number in sorted(self._slots):
                self._step(number, ShuttingDown())
        finally:
            for consumer in (self._membership, self._progress):
                if consumer is not None:
                    consumer.close()

    # ------------------------------------------------------------------ the slots' lifecycle

    def _step(self, number: int, event: slot_state.Event) -> None:
        """Feed ``event`` to slot ``number``'s machine and do what it asks, in order (an action
        with I/O answers with an event of its own, at once)."""
        state = self._states.get(number, _NOT_OWNED)
        new, actions = slot_state.step(state, event, self.ctx.clock.monotonic(), self._policy)
        self._states[number] = new
        for action in actions:
            self._act(number, action)

    def _step_slot(self, slot: Slot, event: slot_state.Event) -> None:
        """``event`` of one taking of a slot: dropped when the slot was let go since (a late
        report of its producer or lanes)."""
        if self._slots.get(slot.number) is slot:
            self._step(slot.number, event)

    def _act(self, number: int, action: SlotAction) -> None:
        match action:
            case TakeSlot():
                self._take(number)
            case ResumeLanes():
                slot = self._slots[number]
                self._assign(slot, list(slot.lanes.values()))
                log.info(
                    "flow %s: took slot %d (%d partition(s))",
                    self.flow_id,
                    number,
                    len(slot.lanes),
                )
            case BeginTransaction():
                self._begin(self._slots[number])
            case Commit(positions, _records):
                self._commit(self._slots[number], positions)
            case slot_state.HaltLanes():
                halted = self._slots.get(number)
                if halted is not None and halted.lanes:
                    lanes = tuple(slot_lane.lane for slot_lane in halted.lanes.values())
                    self._effects.append(HaltLanes(lanes))
            case AskOwner():
                self._step(number, OwnerAnswered(self._still_assigned(number)))
            case Release(abort_transaction):
                self._release(number, abort_transaction)
            case ScheduleRetake():
                pass  # the state holds the time: the retake check finds it
            case ReportFailure():
                self._report(number, action)
            case Refused(event, stage):
                log.error(
                    "flow %s: slot %d: %s is not expected in state %s (ignored)",
                    self.flow_id,
                    number,
                    event,
                    stage,
                )

    def _report(self, number: int, failure: ReportFailure) -> None:
        self.stats.transactions_failed += 1
        self.stats.rewinds += 1
        if failure.kind is SlotFailure.TAKEN_OVER:
            log.warning(
                "flow %s: slot %d was taken over by another worker (fenced: %s); not copying it",
                self.flow_id,
                number,
                failure.reason,
            )
        elif failure.kind is SlotFailure.TRANSACTION_TIMED_OUT:
            self.stats.transactions_timed_out += 1
            log.warning(
                "flow %s: slot %d: the transaction timed out on the coordinator of %s (open "
                "%.1fs, transaction.timeout.ms=%d; the target is slow): it was aborted, the slot "
                "is still ours; taking it again in %.1fs from its last committed progress (%s)",
                self.flow_id,
                number,
                self.settings.target_alias,
                failure.transaction_open_s or 0.0,
                self.settings.transaction_timeout_ms,
                failure.retake_in_s,
                failure.reason,
            )
        else:
            log.warning(
                "flow %s: slot %d: %s; aborting and continuing from its last committed progress",
                self.flow_id,
                number,
                failure.reason,
            )

    # ------------------------------------------------------------------ the loop's hooks

    def reading(self) -> bool:
        return bool(self.ctx.lanes)

    def before_batch(self, now: float) -> None:
        self.membership.poll(0)
        self._take_waiting_slots(now)

    def idle(self, timeout_s: float) -> None:
        self.membership.poll(timeout_s)

    def serve(self, timeout_s: float) -> None:
        self.membership.poll(timeout_s)
        self._commit_due(self.ctx.clock.monotonic())

    def after_batch(self, now: float) -> None:
        self._commit_due(now)

    def replicated_offset(self, lane: Lane) -> int:
        return lane.committed

    def execute(self, lane: Lane, action: Action) -> None:
        # Failures drop the whole slot instead of rewinding one partition: the lane's state
        # machine asks this mode for nothing (no rewind, sync repair or restart).
        log.error("flow %s: exactly-once has nothing to do for %r", self.flow_id, action)

    def skip_below(self, floors: list[tuple[Lane, int]]) -> None:
        # A slot starts its partitions at their floors when it is taken (start positions):
        # commit what it copied, give it up and take it again at once.
        slots: dict[int, Slot] = {}
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
            if (slot_lane := self._lanes.get(lane)) is not None:
                slots[slot_lane.slot.number] = slot_lane.slot
        for _number, slot in sorted(slots.items()):
            self._step_slot(slot, TakeAgain())

    # ------------------------------------------------------------------ the hot path's hooks

    def open(self, lane: Lane, now: float) -> Producer | None:
        slot_lane = self._lanes.get(lane)
        if slot_lane is None:
            return None
        slot = slot_lane.slot
        number = slot.number
        if self._slots.get(number) is not slot:
            return None
        if not producer_ready(self._states[number]):
            self._step(number, ProducerWanted())
            if self._slots.get(number) is not slot or not producer_ready(self._states[number]):
                return None
        return slot.producer

    def copied(self, lane: Lane, records: int) -> None:
        slot_lane = self._lanes.get(lane)
        if slot_lane is not None:
            self._step_slot(slot_lane.slot, Copied(records))

    def queue_full(self, lane: Lane, producer: Producer) -> bool:
        slot_lane = self._lanes.get(lane)
        try:
            producer.poll(0.05)
        except (KafkaException, SystemError) as exc:
            if slot_lane is not None:
                error = _slot_error(_error_in(exc))
                self._step_slot(
                    slot_lane.slot, DeliveryFailed(f"serving delivery reports: {exc}", error)
                )
        if slot_lane is None:
            return False
        number = slot_lane.slot.number
        return self._slots.get(number) is slot_lane.slot and copies(self._states[number])

    def refused(self, lane: Lane, offset: int, epoch: int, err: KafkaError) -> None:
        slot_lane = self._lanes.get(lane)
        if slot_lane is not None:
            where = f"{lane.source.topic}-{lane.source.partition}@{offset}"
            reason = f"record {where} refused: {err.str()}"
            self._step_slot(slot_lane.slot, DeliveryFailed(reason, _slot_error(err)))

    def on_delivery(
        self, lane: Lane, source_offset: int, err: KafkaError | None, msg: Message
    ) -> None:
        slot_lane = self._lanes.get(lane)
        if slot_lane is None:
            return
        if err is not None:
            self.stats.delivery_failures += 1
            reason = (
                f"delivery of {lane.source.topic}-{lane.source.partition}@{source_offset} "
                f"failed: {err.str()}"
            )
            self._step_slot(slot_lane.slot, DeliveryFailed(reason, _slot_error(err)))
            return
        target_offset: int = msg.offset()  # type: ignore[assignment]
        try:
            lane.progress.delivered(source_offset, target_offset)
        except ValueError as exc:
            # A report the progress cannot place (a producer being torn down): never let it
            # escape into librdkafka's callback; the slot is taken again from its progress.
            self._step_slot(slot_lane.slot, DeliveryFailed(str(exc)))
            return
        slot_lane.last_target = max(slot_lane.last_target, target_offset)

    def position_deleted(self, lane: Lane) -> None:
        # The next record to copy was deleted by retention: take the slot again, which
        # reports the loss and continues from the log start.
        slot_lane = self._lanes.get(lane)
        if slot_lane is not None:
            where = f"{lane.source.topic}-{lane.source.partition}"
            self._step_slot(
                slot_lane.slot, PositionDeleted(f"{where}: position deleted by retention")
            )

    def reassign(self, lane: Lane, position: int) -> None:
        consumer = self.consumer
        consumer.incremental_unassign([lane.source])
        consumer.incremental_assign(
            [TopicPartition(lane.source.topic, lane.source.partition, position)]
        )
        if not isinstance(lane.state.hold, Reading):
            consumer.pause([lane.source])

    def _on_client_error(self, taken: list[Slot], err: KafkaError) -> None:
        """A slot producer's error callback: a fatal error (fenced, or the coordinator aborted
        the transaction) fails the slot's transaction; the rest is connection trouble."""
        if not err.fatal():
            log.warning("flow %s: %s", self.flow_id, err.str())
            return
        for slot in taken:
            reason = f"fatal producer error: {err.str()}"
            self._step_slot(slot, DeliveryFailed(reason, _slot_error(err)))

    # ------------------------------------------------------------------ transactions

    def _commit_due(self, now: float) -> None:
        # Idle slots are picked before the due ones commit: a slot that commits now is no
        # idle candidate in the same pass.
        idle_check = now - self._idle_check_at >= IDLE_CHECK_S
        idle = (
            [slot for _, slot in sorted(self._slots.items()) if self._idle(slot)]
            if idle_check
            else []
        )
        for number in sorted(self._slots):
            self._step(number, CommitCheck())
        # Positions can move without records (aborted source transactions, markers): commit
        # them now and then, so progress and syncs say "caught up" exactly.
        if not idle_check:
            return
        self._idle_check_at = now
        for slot in idle:
            if not self._idle(slot):
                continue
            positions = self._positions(slot)
            moved = any(positions[key] > sl.lane.committed for key, sl in slot.lanes.items())
            if moved or any(
                self._refresh_due(sl, now) or self._keepalive_due(sl.lane, sl.lane.committed, now)
                for sl in slot.lanes.values()
            ):
                self._step(
                    slot.number,
                    IdleCommitDue(tuple((t, p, offset) for (t, p), offset in positions.items())),
                )

    def _idle(self, slot: Slot) -> bool:
        """Is ``slot`` taken now, copying, with no transaction open?"""
        if self._slots.get(slot.number) is not slot:
            return False
        stage = self._states[slot.number].stage
        return isinstance(stage, Active) and stage.transaction is None

    def _refresh_due(self, slot_lane: SlotLane, now: float) -> bool:
        """The partition's progress must be committed again, or the target's offsets retention
        would expire it: the progress group never has members, so each offset lives
        offsets.retention.minutes after its own last commit, however idle the partition."""
        at = slot_lane.progress_committed_at
        return at is None or now - at >= self.settings.progress_refresh_s

    def _keepalive_due(self, lane: Lane, read_up_to: int, now: float) -> bool:
        return lane.keepalive(self._keepalive, round(now * 1000), read_up_to) is not None

    def _positions(self, slot: Slot) -> dict[tuple[str, int], int]:
        """Next source offset per lane of ``slot``: everything before it was read and copied
        (or had nothing to copy). A lane that does not copy now (paused, held) counts up to
        what it copied: records fetched meanwhile were skipped, not copied."""
        positions = {
            key: max(sl.lane.committed, sl.lane.progress.next_offset)
            for key, sl in slot.lanes.items()
        }
        wanted = [sl.lane.source for sl in slot.lanes.values() if sl.lane.copying]
        if not wanted:
            return positions
        for tp in self.consumer.position(wanted):
            if tp.offset >= 0 and tp.offset != OFFSET_INVALID:
                positions[(tp.topic, tp.partition)] = tp.offset
        return positions

    def _failure_while_committing(self, number: int) -> TransactionFailure | None:
        """A failure reported while the commit of slot ``number`` runs (its flush serves
        delivery reports): the commit must not go through."""
        stage = self._states[number].stage
        return stage.failure if isinstance(stage, Committing) else None

    def _begin(self, slot: Slot) -> None:
        try:
            slot.producer.begin_transaction()
        except KafkaException as exc:
            err = exc.args[0]
            self._step(
                slot.number, BeginFailed(f"begin transaction: {err.str()}", _slot_error(err))
            )
            return
        self._step(slot.number, TransactionBegun())

    def _commit(  # noqa: PLR0915 (one transaction, its failure paths side by side)
        self, slot: Slot, positions: Positions | None
    ) -> None:
        """Commit the slot's transaction with its syncs and progress (beginning one first when
        none is open); answer the machine with :class:`Committed` or :class:`CommitFailed`."""
        number = slot.number
        producer = slot.producer
        s = self.settings
        timeout_s = s.transaction_timeout_ms / 1000
        now = self.ctx.clock.monotonic()
        now_ms = round(now * 1000)
        try:
            stage = self._states[number].stage
            if isinstance(stage, Committing) and stage.transaction is None:
                producer.begin_transaction()
                self._step(number, TransactionBegun())
            remaining = producer.flush(timeout_s)
            if remaining:
                raise _TransactionFailed(f"{remaining} record(s) not acknowledged in {timeout_s}s")
            failure = self._failure_while_committing(number)
            if failure is not None:
                raise _TransactionFailed(failure.reason)
            at = (
                self._positions(slot)
                if positions is None
                else {(topic, partition): offset for topic, partition, offset in positions}
            )
            offsets, ends = self._transaction_end(slot, at, now, now_ms)
            if offsets:
                producer.send_offsets_to_transaction(offsets, self._group_metadata, timeout_s)
            producer.commit_transaction(timeout_s)
        except KafkaException as exc:
            err = exc.args[0]
            self._step(number, CommitFailed(f"transaction: {err.str()}", _slot_error(err)))
            return
        except SystemError as exc:
            # A producer in a fatal state (fenced) raises from flush() while it serves delivery
            # reports; the Kafka error is the cause. Under a coordinator-side timeout the client
            # has also been seen to raise it with no cause at all: the producer is unusable
            # either way, and the slot is taken again from its committed progress (the failed
            # transaction is never visible), never left to crash the worker. With no cause, the
            # failure recorded for the transaction (if any) stands for it.
            cause = _error_in(exc)
            reason = f"transaction: {cause.str() if cause is not None else exc}"
            self._step(number, CommitFailed(reason, _slot_error(cause)))
            return
        except _TransactionFailed as exc:
            self._step(number, CommitFailed(str(exc), None))
            return
        except:  # noqa: E722 (whatever a fenced producer raises, see below)
            # A fenced producer's flush() has also been seen to raise a bare KafkaError, which
            # is no exception class at all (so only a bare except catches it): the transaction
            # failed all the same.
            raised = sys.exc_info()[1]
            if isinstance(raised, (KeyboardInterrupt, SystemExit)):
                raise
            err_raised = raised if isinstance(raised, KafkaError) else None
            self._step(number, CommitFailed(f"transaction: {raised}", _slot_error(err_raised)))
            return
        for key, done in ends.items():
            slot_lane = slot.lanes[key]
            lane = slot_lane.lane
            lane.committed = done.position
            slot_lane.next_target = done.next_target
            slot_lane.last_target = -1
            lane.progress.persisted(done.position)
            lane.last_copy = done.last_copy
            lane.copy_synced_at_ms = done.copy_synced_at_ms
            slot_lane.progress_committed_at = now
        slot.transactions += 1
        self.stats.transactions_committed += 1
        self._step(number, Committed())

    def _transaction_end(
        self, slot: Slot, positions: dict[tuple[str, int], int], now: float, now_ms: int
    ) -> tuple[list[TopicPartition], dict[tuple[str, int], _Committing]]:
        """Write the syncs of the slot's finished runs (and keepalives due) into the open
        transaction; return the progress offsets to commit with it and what each lane becomes
        once it commits."""
        producer = slot.producer
        offsets = []
        ends: dict[tuple[str, int], _Committing] = {}
        for key, slot_lane in slot.lanes.items():
            lane = slot_lane.lane
            position = positions[key]
            moved = position > lane.committed or slot_lane.last_target >= 0
            if not moved:
                position = lane.committed
            keepalive = self._keepalive_due(lane, position, now)
            if not (moved or keepalive or self._refresh_due(slot_lane, now)):
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
                # Idle past the keepalive interval: repeat the last copy, or the sync topic's
                # retention deletes every sync that maps the partition.
                state = lane.sync_state(position)
                if state is not None:
                    self._produce_sync(producer, keepalive_sync(state))
                    self.stats.keepalive_syncs_written += 1
                    synced_at_ms = now_ms
            next_target = (
                slot_lane.last_target + 1 if slot_lane.last_target >= 0 else slot_lane.next_target
            )
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
        return offsets, ends

    def _produce_sync(self, producer: Producer, sync: offset_syncs.OffsetSync) -> None:
        sync_key, sync_value = offset_syncs.encode_sync(sync)
        producer.produce(self.settings.sync_topic, sync_value, sync_key, partition=0)
        self.stats.syncs_written += 1

    # ------------------------------------------------------------------ slots

    def _on_assign(self, _consumer: Consumer, partitions: list[TopicPartition]) -> None:
        slots = sorted(tp.partition for tp in partitions)
        log.info("flow %s: assigned slot(s) %s", self.flow_id, slots)
        for number in slots:
            self._step(number, Assigned())

    def _on_revoke(self, _consumer: Consumer, partitions: list[TopicPartition]) -> None:
        slots = sorted(tp.partition for tp in partitions)
        log.info("flow %s: giving up slot(s) %s", self.flow_id, slots)
        for number in slots:
            self._step(number, Revoked())

    def _on_lost(self, _consumer: Consumer, partitions: list[TopicPartition]) -> None:
        # Someone else may hold these slots already: never commit for them again.
        slots = sorted(tp.partition for tp in partitions)
        log.warning("flow %s: lost slot(s) %s to other workers", self.flow_id, slots)
        for number in slots:
            self._step(number, Lost())

    def _take_waiting_slots(self, now: float) -> None:
        for number, state in sorted(self._states.items()):
            stage = state.stage
            if isinstance(stage, Waiting) and stage.at <= now:
                self._step(number, RetakeCheck())
            if self.ctx.stop.is_set():
                return

    def _still_assigned(self, number: int) -> bool | None:
        """Does the membership group's coordinator (not our own view, which a paused worker
        has not updated yet) assign slot ``number`` to this worker? None when it cannot say
        (unreachable, or a rebalance in progress)."""
        try:
            assert self._catalog is not None
            member_id = self.membership.memberid()
            return self._catalog.slot_assigned(
                self.names.membership_group, member_id or "", self.names.slots_topic, number
            )
        except Exception as exc:
            # Whatever stops us from asking (timeout, coordinator moving): we cannot say.
            log.warning("flow %s: cannot ask who owns slot %d: %s", self.flow_id, number, exc)
            return None

    def _take(self, number: int) -> None:
        """Fence the slot's previous owner, read its committed progress into new lanes; answer
        :class:`Taken` or :class:`TakeFailed` (the lanes start on :class:`ResumeLanes`)."""
        s = self.settings
        taken: list[Slot] = []  # the slot, once it exists: what the producer's errors fail
        producer = self.ctx.kafka.producer(
            s.target_alias,
            {
                **slot_producer_config(self.settings, number),
                "error_cb": partial(self._on_client_error, taken),
            },
        )
        try:
            producer.init_transactions(s.transaction_timeout_ms / 1000 + 10)
        except KafkaException as exc:
            reason = f"initialising transactions failed: {exc.args[0].str()}"
            log.warning("flow %s: slot %d: %s (will retry)", self.flow_id, number, reason)
            _discard(producer)
            self._step(number, TakeFailed(reason))
            return
        slot = Slot(number=number, producer=producer)
        taken.append(slot)
        try:
            lanes = self._read_progress(slot, self._slot_partitions(number))
        except KafkaUnavailableError as err:
            log.warning("flow %s: slot %d: %s (will retry)", self.flow_id, number, err)
            _discard(producer)
            self._step(number, TakeFailed(str(err)))
            return
        slot.lanes = {slot_lane.lane.key: slot_lane for slot_lane in lanes}
        # A transactional id unused for transactional.id.expiration.ms is forgotten by the
        # coordinator, and the progress of idle partitions would expire: the refresh covers both.
        self._slots[number] = slot
        self._step(number, Taken())

    def _slot_partitions(self, number: int) -> list[tuple[MirroredTopic, int]]:
        return [
            (mirrored, partition)
            for mirrored in self.ctx.topics.mirrored.values()
            for partition in range(mirrored.source.partitions)
            if slot_of(mirrored.source.name, partition, self.slot_count) == number
        ]

    def _read_progress(self, slot: Slot, wanted: list[tuple[MirroredTopic, int]]) -> list[SlotLane]:
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
        starts = self.ctx.starts.of(
            self.consumer,
            [
                (
                    m.source.name,
                    p,
                    CommittedProgress(found[0].next_source_offset)
                    if (found := progress.get((m.source.name, p))) is not None
                    else None,
                )
                for m, p in wanted
            ],
        )
        lanes = []
        for mirrored, partition in wanted:
            key = (mirrored.source.name, partition)
            start = starts[key]
            lane = self.ctx.new_lane(mirrored, partition, start.offset)
            slot_lane = SlotLane(lane, slot)
            if key in progress:
                slot_progress, next_target = progress[key]
                slot_lane.next_target = next_target
                # A keepalive [s_last, F) claims that nothing between was there to copy: not
                # so when retention deleted records first, so the next real copy starts anew.
                lane.last_copy = slot_progress.last_copy if start.resumed else None
            lanes.append(slot_lane)
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

    def _assign(self, slot: Slot, slot_lanes: list[SlotLane]) -> None:
        """Copy ``slot_lanes`` from their start positions: add them to the engine, assign their
        partitions, resume them and follow the flow's control."""
        for slot_lane in slot_lanes:
            slot.lanes[slot_lane.lane.key] = slot_lane
            self._lanes[slot_lane.lane] = slot_lane
        if not slot_lanes:
            return
        lanes = tuple(slot_lane.lane for slot_lane in slot_lanes)
        consumer = self.consumer
        consumer.incremental_assign(
            [
                TopicPartition(lane.source.topic, lane.source.partition, lane.committed)
                for lane in lanes
            ]
        )
        # A partition paused under the slot's previous lanes stays paused in the consumer
        # across unassign and assign: start from unpaused, then follow the control.
        consumer.resume([lane.source for lane in lanes])
        self._effects.extend((AddLanes(lanes), FollowControl(lanes)))

    def _release(self, number: int, abort_transaction: bool) -> None:
        """Let the slot's producer and lanes go; abort its open transaction first when asked
        (best effort: the next owner's initialisation aborts it anyway)."""
        slot = self._slots.pop(number, None)
        if slot is None:
            return
        lanes = tuple(slot_lane.lane for slot_lane in slot.lanes.values())
        for lane in lanes:
            self._lanes.pop(lane, None)
        if lanes:
            self._effects.append(DropLanes(lanes))
            try:
                self.consumer.incremental_unassign([lane.source for lane in lanes])
            except KafkaException as exc:
                log.warning("unassigning slot %d: %s", number, exc.args[0].str())
        if abort_transaction:
            try:
                slot.producer.purge()
                slot.producer.abort_transaction(5)
            except (KafkaException, SystemError):
                pass  # the next owner's initialisation aborts it anyway
        _discard(slot.producer)  # purges what an abandoned transaction still holds

    # ------------------------------------------------------------------ topics

    def topics_changed(self, mirrored: dict[str, MirroredTopic]) -> None:
        for number, slot in sorted(self._slots.items()):
            if self._slots.get(number) is not slot:
                continue  # let go while an earlier slot was taken again
            wanted = {(m.source.name, p): (m, p) for m, p in self._slot_partitions(number)}
            changed = [
                key
                for key, slot_lane in slot.lanes.items()
                if key not in wanted
                or (
                    slot_lane.lane.progress.source_topic_id,
                    slot_lane.lane.progress.target_topic_id,
                )
                != (wanted[key][0].source.topic_id, wanted[key][0].remote.topic_id)
            ]
            if changed:
                # A topic went away or was recreated: commit what was copied, take it anew.
                self._step(number, TakeAgain())
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
                    number,
                    len(lanes),
                )


def _discard(producer: Producer) -> None:
    """Let go of a producer without waiting for what it still holds (purged or fenced)."""
    try:
        producer.purge()
        producer.poll(0)
    except (KafkaException, RuntimeError, SystemError):
        pass  # a fenced producer raises its fatal error here: it is being dropped anyway
