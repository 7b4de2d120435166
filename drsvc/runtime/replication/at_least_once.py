"""At-least-once delivery: idempotent producers, a source consumer group, syncs before commits.

* The engine's source consumer (``read_committed``) is subscribed to the topics discovery finds,
  in the flow's consumer group on the source: workers of the same flow share the partitions.
* One idempotent producer with ``acks=all`` writes every copy; delivery reports feed
  :class:`failover.copy_progress.PartitionProgress` per source partition: finished runs become
  offset syncs on ``drsvc.offset-syncs.<source>``, and the source group's offset is committed
  only up to the end of runs whose syncs the target acknowledged.
* A second idempotent producer writes only the syncs, with a short linger of its own: the
  copies may linger long to fill batches (``linger_ms``), and a translated position should not
  wait for that twice. A sync is written only after its copies were acknowledged, so nothing
  orders one producer's writes after the other's.
* Any failed delivery (including message timeouts during a long target outage) stops that
  partition, lets in-flight records settle, and rewinds it to the first record that did not make
  it, with a growing pause between attempts (the lane's state machine decides; this module
  executes the rewind). A lost sync write rebuilds syncs from the target first. Nothing is
  skipped.
* An idle partition's last copy is written again as a keepalive sync before the sync topic's
  retention can delete every sync that maps it (:mod:`failover.keepalive`), so its consumers'
  positions stay translatable however long it stays idle.
"""

from __future__ import annotations

import logging
from typing import Any

from drsvc.errors import FatalClientError, KafkaUnavailableError
from drsvc.kafka.hot import KafkaException
from drsvc.kafka.types import Consumer, KafkaError, Message, Producer, TopicPartition
from drsvc.runtime.heartbeats.outage import OutageLog
from drsvc.runtime.replication.boundary import TopicCatalog
from drsvc.runtime.replication.client_configs import (
    consumer_config,
    producer_config,
    sync_producer_config,
)
from drsvc.runtime.replication.lane import Lane
from drsvc.runtime.replication.seam import (
    AddLanes,
    Apply,
    DropLanes,
    FollowControl,
    ModeContext,
    Seek,
)
from drsvc.runtime.replication.settings import keepalive_policy
from drsvc.runtime.replication.sync_writer import SyncWriter
from drsvc.runtime.replication.topics import MirroredTopic
from failover.copy_progress import PartitionProgress
from failover.handover import decode_synced_to, encode_synced_to
from failover.partition_state import (
    Action,
    CommittedProgress,
    DeliveryFailed,
    Event,
    Reading,
    RebuildSyncs,
    RepairDone,
    RepairFailed,
    ReportLostRecords,
    ReportRecreatedTopic,
    ReportSkipped,
    RestartProgress,
    RestartSeekDone,
    RetentionOvertook,
    Rewind,
    SkipRequested,
    TopicRecreated,
)

log = logging.getLogger(__name__)

#: how far back the sync topic is read for an idle partition's last copy after a restart; the
#: read blocks copying, so it is bounded (beyond it the last copy waits for the next copy)
LAST_COPY_SCAN = 200_000


class AtLeastOnce:
    """The at-least-once delivery mode of a flow's engine (see the module docstring)."""

    mode = "at-least-once"

    def __init__(self, context: ModeContext) -> None:
        self.ctx = context
        self.settings = context.settings
        self.stats = context.stats
        self._effects = context.effects
        self._consumer: Consumer | None = None
        #: lanes started at their committed progress whose last copy is not known yet: once
        #: idle, it may be learned from the sync topic's tail
        self._learn_last_copy: set[Lane] = set()
        self._subscribed: list[str] = []
        self._producer: Producer | None = None
        #: writes the offset syncs only (see the module docstring)
        self._sync_producer: Producer | None = None
        self._syncs: SyncWriter | None = None
        #: a fatal producer error (librdkafka cannot use the producer again): the worker stops
        self._fatal: str | None = None
        self._keepalive = keepalive_policy(context.settings)
        self._next_seal = 0.0
        self._next_commit = 0.0
        self._commit_outage = OutageLog(f"committing progress of {self.settings.flow_id}", log)

    # ------------------------------------------------------------------ setup

    def prepare(self, catalog: TopicCatalog) -> None:
        catalog.ensure_sync_topic()

    def source_config(self) -> dict[str, Any]:
        # librdkafka answers asynchronous commits through on_commit, served by consume/poll.
        return {**consumer_config(self.settings), "on_commit": self._on_commit}

    def start(self, consumer: Consumer) -> None:
        ctx = self.ctx
        self._consumer = consumer
        target = self.settings.target_alias
        self._producer = ctx.kafka.producer(
            target, {**producer_config(self.settings), "error_cb": self.on_client_error}
        )
        self._sync_producer = ctx.kafka.producer(
            target, {**sync_producer_config(self.settings), "error_cb": self.on_client_error}
        )
        self._syncs = SyncWriter(
            self.settings,
            self._sync_producer,
            self.stats,
            ctx.kafka.sync_log(),
            ctx.clock,
            self._apply,
        )
        now = ctx.clock.monotonic()
        self._next_seal = now + self.settings.seal_interval_s
        self._next_commit = now + self.settings.commit_interval_s

    @property
    def consumer(self) -> Consumer:
        """The engine's source consumer, subscribed in the flow's group by this mode."""
        assert self._consumer is not None
        return self._consumer

    def _apply(self, lane: Lane, event: Event) -> None:
        """Have the engine step ``lane``'s state machine with ``event``."""
        self._effects.append(Apply(lane, event))

    @property
    def producer(self) -> Producer:
        assert self._producer is not None
        return self._producer

    @property
    def sync_producer(self) -> Producer:
        assert self._sync_producer is not None
        return self._sync_producer

    @property
    def syncs(self) -> SyncWriter:
        assert self._syncs is not None
        return self._syncs

    # ------------------------------------------------------------------ fatal errors

    def raise_if_fatal(self) -> None:
        """Stop copying after a fatal producer error: every record would fail and rewind
        forever. The supervisor (or the operator) then starts a worker with a new producer; what
        was acknowledged is committed on the way out, the rest is copied again by the next one."""
        if self._fatal is not None:
            raise FatalClientError(
                f"the producer of flow {self.settings.flow_id} hit a fatal error: {self._fatal}"
            )

    def on_client_error(self, err: KafkaError) -> None:
        """Both producers' error callback (connection trouble, or a fatal error)."""
        if err.fatal():
            self._fatal = err.str()
            log.error("flow %s: fatal producer error: %s", self.settings.flow_id, err.str())
        else:
            log.warning("flow %s: %s", self.settings.flow_id, err.str())

    # ------------------------------------------------------------------ the loop's hooks

    def reading(self) -> bool:
        # Subscribed but given nothing yet: consuming is what joins the group.
        return bool(self._subscribed)

    def before_batch(self, now: float) -> None:
        self.raise_if_fatal()

    def idle(self, timeout_s: float) -> None:
        self._serve(timeout_s)

    def serve(self, timeout_s: float) -> None:
        self._serve(timeout_s)

    def _serve(self, timeout_s: float) -> None:
        """Serve both producers' delivery reports, waiting up to ``timeout_s`` on the copies'."""
        self.sync_producer.poll(0)
        self.producer.poll(timeout_s)
        self.sync_producer.poll(0)

    def after_batch(self, now: float) -> None:
        self._serve(0)
        s = self.settings
        if now >= self._next_seal:
            self._seal_runs()
            self._next_seal = now + s.seal_interval_s
        if now >= self._next_commit:
            self._commit(asynchronous=True)
            self._write_keepalives(now)
            self._next_commit = now + s.commit_interval_s

    def replicated_offset(self, lane: Lane) -> int:
        return lane.progress.commit_position

    # ------------------------------------------------------------------ the hot path's hooks

    def open(self, lane: Lane, now: float) -> Producer | None:
        return self._producer

    def copied(self, lane: Lane, records: int) -> None:
        pass

    def queue_full(self, lane: Lane, producer: Producer) -> bool:
        self._serve(0.05)
        return lane.progress.accepting

    def refused(self, lane: Lane, offset: int, epoch: int, err: KafkaError) -> None:
        lane.progress.produced(offset, epoch)
        self._failed(lane, offset, err.str())

    def on_delivery(
        self, lane: Lane, source_offset: int, err: KafkaError | None, msg: Message
    ) -> None:
        # Each report carries its source offset: after a failure librdkafka may report queued
        # records (timed out) before those already sent, so report order is not produce order.
        if err is None:
            lane.progress.delivered(source_offset, msg.offset())  # type: ignore[arg-type]
            return
        self.stats.delivery_failures += 1
        if err.fatal() and self._fatal is None:
            self._fatal = err.str()
        self._failed(lane, source_offset, err.str())

    def _failed(self, lane: Lane, offset: int, reason: str) -> None:
        lane.progress.failed(offset, reason)
        self._apply(lane, DeliveryFailed(offset, reason))

    # ------------------------------------------------------------------ runs, syncs, commits

    def _seal_runs(self) -> None:
        current = self.ctx.lanes
        lanes = [lane for lane in current.values() if lane.copying and lane.progress.accepting]
        if lanes:
            for position in self.consumer.position([lane.source for lane in lanes]):
                lane = current.get((position.topic, position.partition))
                if lane is not None and position.offset >= 0:
                    lane.progress.seal(position.offset)
        self._write_syncs()

    def _write_syncs(self) -> None:
        for lane in list(self.ctx.lanes.values()):
            for finished in lane.progress.take_finished():
                self.syncs.write(lane, finished)

    def _write_keepalives(self, now: float) -> None:
        """Write the keepalive sync of every partition idle for the keepalive interval (cheap
        when none is due: a few comparisons per partition)."""
        now_ms = round(now * 1000)
        looked_up = False
        learn = self._learn_last_copy
        for lane in list(self.ctx.lanes.values()):
            if lane.last_copy is None and lane in learn and not looked_up:
                # One bounded read of the sync topic per round, so a restart with many idle
                # partitions does not hold copying back for long.
                looked_up = self._learn_last_copy_of(lane, now)
            if lane.last_copy is None:
                continue  # never copied: nothing to repeat
            sync = lane.keepalive(
                self._keepalive, now_ms, unacknowledged=self.syncs.unacknowledged(lane)
            )
            if sync is not None:
                self.syncs.write_keepalive(lane, sync)

    def _learn_last_copy_of(self, lane: Lane, now: float) -> bool:
        """After a restart at committed progress: read an idle partition's last copy from the
        sync topic's tail. Returns whether the sync topic was read."""
        idle = lane.progress.next_offset == lane.progress.start
        if not idle or now - lane.assigned_at < self.settings.refresh_interval_s:
            return False  # a partition with records learns its last copy from its own syncs
        if lane.sync_state(unacknowledged=self.syncs.unacknowledged(lane)) is None:
            return False
        self._learn_last_copy.discard(lane)
        progress = lane.progress
        try:
            copy = self.ctx.kafka.sync_log().written_last_copy(
                progress.tp,
                (progress.source_topic_id, progress.target_topic_id),
                LAST_COPY_SCAN,
                10.0,
            )
        except (KafkaUnavailableError, KafkaException) as err:
            log.warning(
                "%s-%s: cannot read its last copy from %s (%s); its keepalive syncs wait for "
                "its next copy",
                lane.source.topic,
                lane.source.partition,
                self.settings.sync_topic,
                err,
            )
            return True
        if copy is not None and lane.last_copy is None:
            lane.last_copy = copy
        return True

    def _commit(
        self, asynchronous: bool, lanes: list[Lane] | None = None, handover: bool = False
    ) -> None:
        """Commit the progress of ``lanes`` (default: all). ``handover``: the lanes are being
        given up, settled; those whose every copy is mapped carry the clean-handover mark."""
        current = self.ctx.lanes
        offsets = []
        for lane in lanes if lanes is not None else list(current.values()):
            position = lane.progress.commit_position
            mark = _handover_mark(lane, self.syncs.unacknowledged(lane)) if handover else None
            if position > lane.committed or mark is not None:
                epoch = lane.progress.commit_epoch
                offsets.append(
                    TopicPartition(
                        lane.source.topic,
                        lane.source.partition,
                        position,
                        metadata=mark or "",
                        leader_epoch=epoch,  # -1: unknown
                    )
                )
                lane.committed = position
        if not offsets:
            return
        try:
            if asynchronous:
                self.consumer.commit(offsets=offsets, asynchronous=True)
            else:
                self.consumer.commit(offsets=offsets, asynchronous=False)
        except KafkaException as err:
            # A failed commit only means more re-copying after a restart; keep going.
            log.warning("committing progress of %s: %s", self.settings.flow_id, err)
            for offset in offsets:
                failed = current.get((offset.topic, offset.partition))
                if failed is not None:
                    failed.committed = -1

    def _on_commit(self, err: KafkaError | None, partitions: list[TopicPartition]) -> None:
        """The answer to a commit. A failed one (the source's group coordinator moving, its
        broker paused) is committed again at the next commit tick: nothing else would retry it
        once its partition goes quiet, and the committed progress (the lag ``drsvc status``
        reads, where a restart resumes) would stay behind for good."""
        now = self.ctx.clock.monotonic()
        failed = [
            tp
            for tp in partitions
            if (err is not None and err.code() != KafkaError._NO_OFFSET) or tp.error is not None
        ]
        if not failed:
            if partitions:
                self._commit_outage.succeeded(now)
            return
        reason = err if err is not None else failed[0].error
        self._commit_outage.failed(f"{reason} ({len(failed)} partition(s) committed again)", now)
        for tp in failed:
            lane = self.ctx.lanes.get((tp.topic, tp.partition))
            # Only if nothing newer was committed since: that commit's own answer decides.
            if lane is not None and lane.committed == tp.offset:
                lane.committed = -1

    # ------------------------------------------------------------------ the lane's actions

    def execute(self, lane: Lane, action: Action) -> None:
        match action:
            case Rewind(_position, backoff_s, _failures, reason):
                position = lane.progress.rewind()
                self.stats.rewinds += 1
                log.error(
                    "copying %s-%s to %s failed at offset %d (%s); copying again from there "
                    "in %.1fs",
                    lane.source.topic,
                    lane.source.partition,
                    self.settings.target_alias,
                    position,
                    reason,
                    backoff_s,
                )
                self._write_syncs()
            case RebuildSyncs(from_offset):
                try:
                    pending = self.syncs.repair(lane, from_offset, timeout_s=10.0)
                except (KafkaUnavailableError, KafkaException) as err:
                    log.warning("cannot rebuild offset syncs yet (%s); retrying", err)
                    self._apply(lane, RepairFailed(str(err)))
                    return
                self._apply(lane, RepairDone(pending))
            case RestartProgress(at, new_topic_ids):
                self._restart(lane, at, new_topic_ids)
            case ReportLostRecords(count, log_start):
                log.error(
                    "%d record(s) of %s-%s were deleted by retention on %s before they were "
                    "copied (next to copy %d, log now starts at %d); they are missing on %s",
                    count,
                    lane.source.topic,
                    lane.source.partition,
                    self.settings.source_alias,
                    lane.progress.next_offset,
                    log_start,
                    self.settings.target_alias,
                )
                self.stats.records_lost_to_retention += count
            case ReportRecreatedTopic(log_start):
                log.error(
                    "%s-%s: the source or remote topic was deleted and recreated; copying the "
                    "new topic from its start (offset %d) with fresh offset syncs",
                    lane.source.topic,
                    lane.source.partition,
                    log_start,
                )
            case ReportSkipped(count, floor):
                log.warning(
                    "skipping %d offset(s) of %s-%s below %d on request (the flow's control "
                    "document, skip_below): they are not copied to %s",
                    count,
                    lane.source.topic,
                    lane.source.partition,
                    floor,
                    self.settings.target_alias,
                )
            case _:
                # The lane's state machine asks only for the actions above of this mode.
                log.error(
                    "%s: at-least-once has nothing to do for %r", self.settings.flow_id, action
                )

    def skip_below(self, floors: list[tuple[Lane, int]]) -> None:
        for lane, floor in floors:
            self._apply(lane, SkipRequested(floor, lane.progress.next_offset))

    def _restart(self, lane: Lane, at: int, new_topic_ids: tuple[bytes, bytes] | None) -> None:
        """Finish the runs up to the last record read, then start a fresh run at ``at`` (after
        retention overtook the copy, or for a recreated topic, with its new ids), so no sync
        ever describes deleted positions as empty or maps a new topic through old ids. Asked
        for every cycle until the seek works."""
        progress = lane.progress
        ids = new_topic_ids or (progress.source_topic_id, progress.target_topic_id)
        restarted = (
            progress.start == at
            and progress.next_offset == at
            and (progress.source_topic_id, progress.target_topic_id) == ids
            and progress.in_flight == 0
        )
        if not restarted:  # not yet: an earlier cycle's seek may have failed after restarting
            progress.seal(progress.next_offset)
            self._write_syncs()
            lane.restarted()
            self.syncs.restarted(lane)
            self._learn_last_copy.discard(lane)
            lane.progress = PartitionProgress(
                progress.tp, source_topic_id=ids[0], target_topic_id=ids[1], start=at
            )
            if new_topic_ids is None:
                lane.progress.commit_position = max(at, progress.commit_position)
            else:
                lane.committed = -1  # another topic now: its progress starts over
        self._effects.append(Seek(lane, at, then=RestartSeekDone()))

    def position_deleted(self, lane: Lane) -> None:
        """The next record to copy was deleted by retention on the source (the engine looked
        for a recreated topic first): the lane's state says how many records were lost and
        restarts at the log start once nothing of the partition is in flight."""
        low, _high = self.consumer.get_watermark_offsets(lane.source, timeout=10, cached=False)
        self._apply(lane, RetentionOvertook(low, lane.progress.next_offset))

    def _follow_recreated_topics(self) -> None:
        """Restart lanes whose source or remote topic got a new id (deleted and recreated)."""
        mirrored_topics = self.ctx.topics.mirrored
        for lane in list(self.ctx.lanes.values()):
            mirrored = mirrored_topics.get(lane.source.topic)
            restart = lane.state.restart
            if mirrored is None or (restart is not None and restart.new_topic_ids is not None):
                continue
            ids = (mirrored.source.topic_id, mirrored.remote.topic_id)
            if ids == (lane.progress.source_topic_id, lane.progress.target_topic_id):
                continue
            low, _high = self.consumer.get_watermark_offsets(lane.source, timeout=10, cached=False)
            self._apply(lane, TopicRecreated(ids[0], ids[1], low))

    def reassign(self, lane: Lane, position: int) -> None:
        """Assign every lane again, ``lane`` at ``position`` and the others where they are."""
        current = self.ctx.lanes
        consumer = self.consumer
        others = [other.source for other in current.values() if other is not lane]
        positions = consumer.position(others) if others else []
        assignment = [
            TopicPartition(tp.topic, tp.partition, tp.offset) for tp in positions if tp.offset >= 0
        ]
        assignment += [
            TopicPartition(
                tp.topic, tp.partition, current[(tp.topic, tp.partition)].progress.next_offset
            )
            for tp in positions
            if tp.offset < 0
        ]
        assignment.append(TopicPartition(lane.source.topic, lane.source.partition, position))
        consumer.assign(assignment)
        held = [
            other.source for other in current.values() if not isinstance(other.state.hold, Reading)
        ]
        if held:
            consumer.pause(held)

    # ------------------------------------------------------------------ topics and assignment

    def topics_changed(self, mirrored: dict[str, MirroredTopic]) -> None:
        self._follow_recreated_topics()
        wanted = sorted(mirrored)
        if wanted == self._subscribed:
            return
        consumer = self.consumer
        log.info(
            "flow %s copies %d topic(s): %s", self.settings.flow_id, len(wanted), ", ".join(wanted)
        )
        if wanted:
            consumer.subscribe(
                wanted, on_assign=self._on_assign, on_revoke=self._on_revoke, on_lost=self._on_lost
            )
        else:
            consumer.unsubscribe()
        self._subscribed = wanted

    def _on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        topics = self.ctx.topics
        if any(
            (m := topics.mirrored.get(tp.topic)) is not None and tp.partition >= m.remote.partitions
            for tp in partitions
        ):
            # The consumer saw new source partitions before discovery grew the remote topic.
            topics.refresh_now()
        mirrored_topics = topics.mirrored
        committed = consumer.committed(partitions, timeout=30)
        starts = self.ctx.starts.of(
            consumer,
            [
                (
                    tp.topic,
                    tp.partition,
                    CommittedProgress(tp.offset, tp.leader_epoch) if tp.offset >= 0 else None,
                )
                for tp in committed
                if tp.topic in mirrored_topics
            ],
        )
        committed_at = {(tp.topic, tp.partition): tp.offset for tp in committed if tp.offset >= 0}
        handed_over = {(tp.topic, tp.partition): decode_synced_to(tp.metadata) for tp in committed}
        assigned = []
        lanes: list[Lane] = []
        for tp in partitions:
            mirrored = mirrored_topics.get(tp.topic)
            if mirrored is None:
                continue
            start = starts[(tp.topic, tp.partition)]
            lane = self.ctx.new_lane(mirrored, tp.partition, start.offset)
            if start.resumed:
                self._learn_last_copy.add(lane)
            lanes.append(lane)
            # Copies a lost owner made past its last sync come from source offsets at or after
            # its committed progress, also when a skip_below floor now starts the lane further
            # on (a recovery keeps the records that never crossed out): map them from there, or
            # a group that read them could not be translated back (ahead of the syncs).
            progress_at = committed_at.get((tp.topic, tp.partition), start.offset)
            # After a clean handover only what lies past the previous owner's copies is read.
            self.syncs.rebuild(
                lane,
                min(start.offset, progress_at),
                synced_to=handed_over.get((tp.topic, tp.partition)),
            )
            # With the committed leader epoch the consumer first checks that the source log
            # was not truncated below the position (KIP-320) before it fetches from there.
            assigned.append(
                TopicPartition(
                    tp.topic, tp.partition, start.offset, leader_epoch=start.leader_epoch
                )
            )
        consumer.assign(assigned)
        # A partition paused before a rebalance stays paused in the consumer when it comes
        # back: start from unpaused, then follow the control.
        consumer.resume(assigned)
        self._effects.extend((AddLanes(tuple(lanes)), FollowControl(tuple(lanes))))
        log.info("flow %s took %d partition(s)", self.settings.flow_id, len(assigned))

    def _on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        lanes = self._lanes_of(partitions)
        self._settle(lanes)
        self._commit(asynchronous=False, lanes=lanes, handover=True)
        self._drop(lanes)
        consumer.unassign()

    def _on_lost(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        # Someone else owns these now: do not commit for them, and send none of their copies
        # still queued, which would land between the new owner's copies without a sync. The
        # purge takes every partition's queued records (librdkafka purges per producer): those
        # of partitions still owned fail with a purge error and are copied again (a rewind).
        # Queued syncs go too: landing after the new owner's, they would break the order of the
        # partition's syncs; a purged sync of a partition still owned is a lost sync write,
        # repaired as any other.
        lanes = self._lanes_of(partitions)
        log.warning("flow %s lost %d partition(s)", self.settings.flow_id, len(lanes))
        if lanes:
            for producer in (self._producer, self._sync_producer):
                if producer is not None:
                    producer.purge(in_queue=True, in_flight=False, blocking=True)
                    producer.poll(0)
        self._drop(lanes)
        consumer.unassign()

    def _drop(self, lanes: list[Lane]) -> None:
        self._effects.append(DropLanes(tuple(lanes)))
        self.syncs.forget(lanes)
        self._learn_last_copy.difference_update(lanes)

    def _lanes_of(self, partitions: list[TopicPartition]) -> list[Lane]:
        lanes = self.ctx.lanes
        return [lane for tp in partitions if (lane := lanes.get((tp.topic, tp.partition)))]

    def _settle(self, lanes: list[Lane]) -> None:
        """Let in-flight records land, seal and write the syncs of ``lanes``, wait for them."""
        producer = self.producer
        producer.flush(self.settings.settle_timeout_s)
        active = [lane for lane in lanes if lane.copying and lane.progress.accepting]
        if active:
            for position in self.consumer.position([lane.source for lane in active]):
                lane = self.ctx.lanes.get((position.topic, position.partition))
                if lane is not None and position.offset >= 0:
                    lane.progress.seal(position.offset)
        for lane in lanes:
            if lane.progress.ready_to_rewind:
                lane.progress.rewind()
        self._write_syncs()
        self.sync_producer.flush(self.settings.settle_timeout_s)

    def shutdown(self) -> None:
        if self._producer is None:
            return
        lanes = list(self.ctx.lanes.values())
        if self._fatal is not None:
            # The producer can write nothing more (no syncs either): commit only what the
            # target already acknowledged, and leave the rest to the next worker.
            self._commit(asynchronous=False, lanes=lanes)
            return
        try:
            self._settle(lanes)
            self._commit(asynchronous=False, lanes=lanes, handover=True)
        finally:
            self._producer.flush(self.settings.settle_timeout_s)
            self.sync_producer.flush(self.settings.settle_timeout_s)


def _handover_mark(lane: Lane, unacknowledged: bool) -> str | None:
    """The clean-handover mark of a settled lane (:mod:`failover.handover`): None unless
    nothing is in flight, nothing failed, every sync written is acknowledged (not
    ``unacknowledged``) and the progress covers every record read, so that every copy of the
    partition is mapped up to its last."""
    progress = lane.progress
    last = lane.last_copy
    if last is None or progress.in_flight or progress.commit_position < progress.next_offset:
        return None
    if lane.sync_state(unacknowledged=unacknowledged) is None:  # failed, repairing, restarting
        return None
    return encode_synced_to(progress.target_topic_id, last.target_offset + 1)
