"""Writing a flow's offset syncs, and moving progress only over what the target acknowledged.

Syncs of one source partition are written in order to the flow's sync topic. Acknowledgements can
come out of order when some writes fail, so progress moves only over the syncs acknowledged in
write order. After a lost write, progress waits for the re-copy from the position then persisted:
the lost write and every later one stop moving it, and syncs are rebuilt from the target's own log
(provenance headers, see :mod:`.repair`) only for copies past the last written sync.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import partial

from drsvc.kafka.clock import Clock
from drsvc.kafka.types import KafkaError, Message, Producer
from drsvc.runtime.replication.boundary import SyncLog
from drsvc.runtime.replication.lane import Lane
from drsvc.runtime.replication.metrics import WorkerStats
from drsvc.runtime.replication.settings import WorkerSettings
from failover import offset_syncs
from failover.copy_progress import FinishedRun, standalone_syncs
from failover.partition_state import (
    Event,
    ProgressPersisted,
    RebuiltSyncsAcknowledged,
    SyncsLost,
)

log = logging.getLogger(__name__)


@dataclass
class SyncTickets:
    """The sync writes of one lane, each by its ticket (write order)."""

    next_ticket: int = 0
    #: syncs written and not yet acknowledged, in write order: ticket -> (run end or -1, the
    #: run's source leader epoch, the sync; None once it is known not to be on the target)
    unacked: dict[int, tuple[int, int, offset_syncs.OffsetSync | None]] = field(
        default_factory=dict
    )
    acked: set[int] = field(default_factory=set)
    #: tickets of syncs that were not written
    lost: set[int] = field(default_factory=set)
    #: tickets of rebuilt syncs not yet acknowledged (the lost ones wait for them)
    rebuild: set[int] = field(default_factory=set)
    #: only syncs from this ticket on may set the lane's last copy: those written before a
    #: restart of the lane describe records before a gap (retention) or another topic
    copy_from: int = 0

    @property
    def unacknowledged(self) -> bool:
        """Are syncs of the lane unacknowledged, lost or being rebuilt?"""
        return bool(self.unacked or self.lost or self.rebuild)


class SyncWriter:
    """Writes offset syncs for the lanes of one worker through its producer."""

    def __init__(
        self,
        settings: WorkerSettings,
        producer: Producer,
        stats: WorkerStats,
        sync_log: SyncLog,
        clock: Clock,
        on_event: Callable[[Lane, Event], None],
    ) -> None:
        self.settings = settings
        self.producer = producer
        self.stats = stats
        self.sync_log = sync_log
        self.clock = clock
        #: what the lane's state machine hears of the writes (lost, persisted, replaced)
        self.on_event = on_event
        self._tickets: dict[Lane, SyncTickets] = {}

    def tickets(self, lane: Lane) -> SyncTickets:
        """The sync writes of ``lane`` (none yet: a new record)."""
        tickets = self._tickets.get(lane)
        if tickets is None:
            tickets = self._tickets[lane] = SyncTickets()
        return tickets

    def unacknowledged(self, lane: Lane) -> bool:
        tickets = self._tickets.get(lane)
        return tickets is not None and tickets.unacknowledged

    def restarted(self, lane: Lane) -> None:
        """``lane`` copies a new stretch or a new topic: acknowledgements still due for syncs
        written before no longer set its last copy."""
        tickets = self.tickets(lane)
        tickets.copy_from = tickets.next_ticket

    def forget(self, lanes: Iterable[Lane]) -> None:
        """``lanes`` are no longer copied: late acknowledgements of their syncs change nothing."""
        for lane in lanes:
            self._tickets.pop(lane, None)

    def write(self, lane: Lane, finished: FinishedRun) -> list[int]:
        """Write the syncs of a finished run; progress moves once they are acknowledged.
        Returns the tickets of the writes."""
        producer = self.producer
        record = self.tickets(lane)
        tickets: list[int] = []
        for index, sync in enumerate(finished.syncs):
            key, value = offset_syncs.encode_sync(sync)
            # Only the last sync of a run moves progress; earlier ones carry -1.
            end = finished.end if index == len(finished.syncs) - 1 else -1
            ticket = record.next_ticket
            record.next_ticket += 1
            record.unacked[ticket] = (end, sync.leader_epoch, sync)
            tickets.append(ticket)
            while True:
                try:
                    producer.produce(
                        self.settings.sync_topic,
                        value,
                        key,
                        partition=0,
                        on_delivery=partial(self._on_delivery, lane, ticket),
                    )
                    break
                except BufferError:
                    producer.poll(0.05)
        return tickets

    def _on_delivery(self, lane: Lane, ticket: int, err: KafkaError | None, _msg: Message) -> None:
        record = self._tickets.get(lane)
        if record is None:
            return  # the lane is no longer copied here
        if err is not None:
            # Those copies' mapping is not on the target. The ticket stays unacknowledged, so
            # progress cannot move past it, until the syncs of everything from the position
            # persisted now on are rebuilt from the target's provenance headers; then the
            # partition is copied again from there.
            log.error(
                "writing offset syncs for %s-%s failed: %s",
                lane.source.topic,
                lane.source.partition,
                err.str(),
            )
            reason = f"offset sync not written: {err.str()}"
            commit_position = lane.progress.commit_position
            record.lost.add(ticket)
            lane.progress.syncs_lost(reason)
            self.on_event(lane, SyncsLost(commit_position, reason))
            return
        self.stats.syncs_written += 1
        record.acked.add(ticket)
        if ticket in record.rebuild:
            record.rebuild.discard(ticket)
            if not record.rebuild:
                self._lost_syncs_replaced(record)
                self.on_event(lane, RebuiltSyncsAcknowledged())
        self.advance(lane)

    @staticmethod
    def _lost_syncs_replaced(record: SyncTickets) -> None:
        """The rebuilt syncs are on the target: the lost writes stop blocking the queue of
        writes (they move no progress any more; the re-copy's syncs do)."""
        for ticket in record.lost:
            # Not on the target: their copies are no last copy a keepalive could repeat.
            end, epoch, _sync = record.unacked[ticket]
            record.unacked[ticket] = (end, epoch, None)
        record.acked |= record.lost
        record.lost = set()

    def advance(self, lane: Lane) -> None:
        """Move progress over the syncs acknowledged in write order (acks can come out of order
        when some fail), and the last copy they map along with it (what keepalives repeat)."""
        record = self.tickets(lane)
        written: list[offset_syncs.OffsetSync] = []
        while record.unacked:
            first = next(iter(record.unacked))
            if first not in record.acked:
                break
            end, epoch, sync = record.unacked.pop(first)
            record.acked.discard(first)
            if sync is not None and first >= record.copy_from:
                written.append(sync)
            if end >= 0:
                lane.progress.persisted(end, epoch)
                self.on_event(lane, ProgressPersisted(end))
        if written:
            lane.syncs_acknowledged(written, round(self.clock.monotonic() * 1000))

    def repair(self, lane: Lane, repair_from: int, timeout_s: float) -> bool:
        """After lost writes: map what can still be mapped, and let progress wait for the re-copy.

        The copies of a lost sync sit on the target before copies whose syncs were written, so no
        sync can map them any more (syncs arrive in target order); they stay unmapped duplicates
        that the re-copy from the persisted position supersedes. Copies past every written sync
        get rebuilt syncs. The lost writes, and every write after the first of them, no longer
        move progress: it moves again only over the re-copy's own syncs, so a crash during the
        re-copy starts it over instead of passing records whose only copies are unmapped.

        ``repair_from`` is the position persisted when the first of the lost writes failed.
        Returns whether rebuilt syncs wait for their acknowledgement.
        """
        record = self.tickets(lane)
        first_lost = min(record.lost, default=record.next_ticket)
        for ticket, (_end, epoch, sync) in list(record.unacked.items()):
            if ticket >= first_lost:
                record.unacked[ticket] = (-1, epoch, sync)
        record.rebuild = set(self.rebuild(lane, repair_from, timeout_s=timeout_s))
        if not record.rebuild:
            self._lost_syncs_replaced(record)
        self.advance(lane)
        return bool(record.rebuild)

    def rebuild(
        self,
        lane: Lane,
        start: int,
        timeout_s: float = 60.0,
        synced_to: tuple[bytes, int] | None = None,
    ) -> list[int]:
        """Write syncs for copies on the target, made from source offsets ``start`` onwards,
        that a crash or a lost sync left unmapped (found by their provenance headers).

        Only copies past the last copy any written sync of the partition maps are rebuilt: the
        syncs written before a crash stay the record of what they map, and syncs are only ever
        appended in target order (what the index needs to take them without a conflict).
        ``synced_to``: the previous owner's clean-handover mark (:mod:`failover.handover`); when
        it is about this remote topic, only copies past its end are looked for.
        """
        after = None
        if synced_to is not None and synced_to[0] == lane.progress.target_topic_id:
            after = synced_to[1]
        copies = self.sync_log.unsynced_copies(
            lane.remote_topic, lane.source.partition, lane.source.topic, start, timeout_s, after
        )
        if not copies:
            return []
        progress = lane.progress
        mapped_end = self.sync_log.written_sync_end(
            progress.tp, (progress.source_topic_id, progress.target_topic_id), timeout_s
        )
        unmapped = [copy for copy in copies if copy[1] >= mapped_end]
        if not unmapped:
            log.info(
                "%s-%s: the %d copies on %s at or after offset %d all have their offset syncs",
                lane.source.topic,
                lane.source.partition,
                len(copies),
                self.settings.target_alias,
                start,
            )
            return []
        log.warning(
            "%s-%s: rebuilding offset syncs of %d copies on %s (target offsets %d-%d) from their "
            "provenance headers (%d earlier copies at or after offset %d lie before the last "
            "written sync)",
            lane.source.topic,
            lane.source.partition,
            len(unmapped),
            self.settings.target_alias,
            unmapped[0][1],
            unmapped[-1][1],
            len(copies) - len(unmapped),
            start,
        )
        copies = unmapped
        syncs = standalone_syncs(
            progress.tp, progress.source_topic_id, progress.target_topic_id, copies
        )
        return self.write(lane, FinishedRun(syncs, -1))

    def write_keepalive(self, lane: Lane, sync: offset_syncs.OffsetSync) -> int:
        """Write a keepalive sync of an idle ``lane`` (:meth:`Lane.keepalive`). It moves no
        progress (it describes nothing new); its acknowledgement restarts the lane's keepalive
        interval like any sync holding the last copy."""
        (ticket,) = self.write(lane, FinishedRun((sync,), -1))
        self.stats.keepalive_syncs_written += 1
        return ticket
