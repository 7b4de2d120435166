"""The replication worker of one flow: read the source, write the target, record where it landed.

One worker process runs one flow (``east->west``) in at-least-once mode:

* It subscribes its source consumer (``read_committed``) to the topics :class:`TopicMirror`
  discovers, re-checking every few seconds, so new topics and partitions are picked up while
  running. Workers of the same flow share the partitions through the consumer group.
* Every record is produced to the remote topic on the target with the same key, value, timestamp
  (CreateTime) and partition, its original headers in order, and a provenance header appended.
  The producer is idempotent with ``acks=all``; the hot loop consumes and produces in batches and
  never polls or flushes per record.
* Delivery reports feed :class:`failover.copy_progress.PartitionProgress` per source partition:
  finished runs become offset syncs on ``drsvc.offset-syncs.<source>``, and the source group's
  offset is committed only up to the end of runs whose syncs the target acknowledged.
* Any failed delivery (including message timeouts during a long target outage) stops that
  partition, lets in-flight records settle, and rewinds the consumer to the first record that did
  not make it, with a growing pause between attempts. Nothing is skipped.
* An idle partition's last copy is written again as a keepalive sync before the sync topic's
  retention can delete every sync that maps it (:mod:`failover.keepalive`), so its consumers'
  positions stay translatable however long it stays idle.
"""

from __future__ import annotations

import gc
import logging
import math
import threading
import time
from collections.abc import Callable
from functools import partial
from typing import Any

from confluent_kafka import (
    OFFSET_INVALID,
    TIMESTAMP_NOT_AVAILABLE,
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)

from drsvc.errors import FatalClientError, KafkaUnavailableError
from drsvc.runtime.replication.anomalies import BackfillAgeCheck, watch_for_stalls
from drsvc.runtime.replication.client_configs import consumer_config, producer_config
from drsvc.runtime.replication.control import ControlFollower
from drsvc.runtime.replication.heartbeat_lane import HeartbeatLane
from drsvc.runtime.replication.lane import Lane, WorkerStats
from drsvc.runtime.replication.metrics import PartitionCounters, PartitionReport
from drsvc.runtime.replication.repair import written_last_copy
from drsvc.runtime.replication.settings import WorkerSettings, keepalive_policy
from drsvc.runtime.replication.sync_writer import SyncWriter
from drsvc.runtime.replication.topics import MirroredTopic, ensure_sync_topic, mirror_for
from failover import offset_syncs, provenance
from failover.copy_progress import PartitionProgress

log = logging.getLogger(__name__)

#: how far back the sync topic is read for an idle partition's last copy after a restart; the
#: read blocks copying, so it is bounded (beyond it the last copy waits for the next copy)
LAST_COPY_SCAN = 200_000


class FlowWorker:
    """Copies one flow until :meth:`stop` is called (see the module docstring)."""

    def __init__(self, settings: WorkerSettings) -> None:
        self.settings = settings
        self.flow_id = settings.flow_id
        self.stats = WorkerStats()
        #: per source partition, kept across re-assignments so metrics never count backwards
        self._counters: dict[tuple[str, int], PartitionCounters] = {}
        self._stop = threading.Event()
        self._lanes: dict[tuple[str, int], Lane] = {}
        self._subscribed: list[str] = []
        self._mirrored: dict[str, MirroredTopic] = {}
        self._identity_loop_check = (
            settings.policy.format_remote_topic(settings.source_alias, "x") == "x"
        )
        self._consumer: Consumer | None = None
        self._flow_control = ControlFollower(
            settings.flow_id,
            settings.consul_http_addr,
            settings.control_key,
            settings.throttle_bytes_per_s,
        )
        self._backfill_check = BackfillAgeCheck(settings.target_alias)
        self._producer: Producer | None = None
        self._mirror = mirror_for(settings)
        #: a fatal producer error (librdkafka cannot use the producer again): the worker stops
        self._fatal: str | None = None
        self._keepalive = keepalive_policy(settings)

    # ------------------------------------------------------------------ lifecycle

    def stop(self) -> None:
        self._stop.set()

    def run(self, on_cycle: Callable[[FlowWorker], None] | None = None) -> None:
        """Copy until stopped; on the way out, settle deliveries, write syncs, commit."""
        ensure_sync_topic(self._mirror, self.settings)
        self._producer = Producer({**producer_config(self.settings), "error_cb": self._on_error})
        self._syncs = SyncWriter(self.settings, self._producer, self.stats)
        self._consumer = Consumer(consumer_config(self.settings))
        # What exists now lives as long as the worker: keep it out of the garbage collector's
        # sight (its scans took a sixth of the worker's CPU per record when profiled).
        gc.collect()
        gc.freeze()
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

    def _loop(self, on_cycle: Callable[[FlowWorker], None] | None) -> None:
        consumer, producer = self._consumer, self._producer
        assert consumer is not None and producer is not None
        s = self.settings
        next_refresh = 0.0
        next_seal = time.monotonic() + s.seal_interval_s
        next_commit = time.monotonic() + s.commit_interval_s
        while not self._stop.is_set():
            self.raise_if_fatal()
            now = time.monotonic()
            if now >= next_refresh:
                self._apply_control()
                self._refresh_topics()
                if self._lanes:
                    watch_for_stalls(
                        consumer, list(self._lanes.values()), now, self.settings, self.stats
                    )
                next_refresh = now + s.refresh_interval_s
            if not self._subscribed:
                producer.poll(0.1)
                continue
            messages = self._next_batch()
            if messages:
                self._backfill_check.check(messages[0], self._mirrored)
                sent = self._copy(messages)
                wait_s = self._flow_control.sent(sent, len(messages), time.monotonic())
                self._hold_back(wait_s)
            producer.poll(0)
            now = time.monotonic()
            self._rewind_failed(now)
            if now >= next_seal:
                self._seal_runs()
                next_seal = now + s.seal_interval_s
            if now >= next_commit:
                self._commit(asynchronous=True)
                self._remember_end_offsets()
                self._write_keepalives(now)
                next_commit = now + s.commit_interval_s
            if on_cycle is not None:
                on_cycle(self)

    # ------------------------------------------------------------------ the hot path

    def _copy(self, messages: list[Message]) -> int:  # noqa: PLR0915 (one loop, no calls per record)
        """Produce the copies of ``messages``; return the bytes of key and value sent."""
        producer = self._producer
        assert producer is not None
        lanes: dict[Any, Lane] = self._lanes
        produce = producer.produce
        header_key = provenance.PROVENANCE_HEADER
        target = self.settings.target_alias
        loop_check = self._identity_loop_check
        stats = self.stats
        on_delivery = self._on_delivery
        on_sampled_delivery = self._on_sampled_delivery
        lane: Lane | None = None
        lane_topic: str | None = None
        lane_partition: int | None = -1
        copied = 0
        size = 0
        # Metrics cost nothing per record: a partition's counters are credited when the batch
        # moves on to another partition (and at the end), and the first copy of each stretch
        # carries the delivery callback that samples the latency.
        credited = 0
        credited_size = 0
        last_ts = 0
        sample = False
        for msg in messages:
            if msg.error() is not None:
                self._consume_error(msg)
                continue
            topic = msg.topic()
            partition = msg.partition()
            if partition != lane_partition or topic != lane_topic:
                if lane is not None and copied > credited:
                    lane.counters.add_batch(copied - credited, size - credited_size, last_ts)
                credited, credited_size = copied, size
                lane_topic, lane_partition = topic, partition
                lane = lanes.get((topic, partition))
                sample = True
            if (
                lane is None
                or lane.resume_at is not None
                or lane.reset_to is not None  # waits to restart: copy nothing under old ids
                or not lane.progress.accepting
            ):
                continue
            offset: int = msg.offset()  # type: ignore[assignment]
            headers: Any = msg.headers()
            if loop_check and provenance.visited(headers, target):
                stats.skipped_loops += 1
                continue
            headers = [] if headers is None else headers
            headers.append((header_key, lane.prefix + offset.to_bytes(8, "big", signed=True)))
            ts_type, ts = msg.timestamp()
            value = msg.value()
            record_key = msg.key()
            epoch = msg.leader_epoch()
            if sample:
                report = partial(on_sampled_delivery, lane, offset, ts)
                sample = False
            else:
                report = partial(on_delivery, lane, offset)
            sent = False
            while True:
                try:
                    produce(
                        lane.remote_topic,
                        value,
                        record_key,
                        partition=lane.source.partition,
                        timestamp=0 if ts_type == TIMESTAMP_NOT_AVAILABLE else ts,
                        headers=headers,
                        on_delivery=report,
                    )
                    sent = True
                    break
                except BufferError:
                    # The producer queue is full: serve delivery reports, then try again,
                    # unless one of them was a failure of this partition (it rewinds first).
                    producer.poll(0.05)
                    if not lane.progress.accepting:
                        break
                except KafkaException as err:
                    # Refused before sending (a partition the producer does not know yet, a
                    # record over the size limit): the same path as a failed delivery.
                    lane.progress.produced(offset, -1 if epoch is None else epoch)
                    lane.progress.failed(offset, err.args[0].str())
                    stats.delivery_failures += 1
                    break
            if not sent:
                continue
            lane.progress.produced(offset, -1 if epoch is None else epoch)
            copied += 1
            size += len(value or b"") + len(record_key or b"")
            last_ts = ts
        if lane is not None and copied > credited:
            lane.counters.add_batch(copied - credited, size - credited_size, last_ts)
        stats.records_read += len(messages)
        stats.bytes_copied += size
        stats.records_copied += copied
        return size

    def _next_batch(self) -> list[Message]:
        """Up to a batch of records without waiting when some are there; otherwise wait for the
        first one (consume(n, timeout) would wait the whole timeout for n records)."""
        consumer = self._consumer
        assert consumer is not None
        size = self._flow_control.batch_size(self.settings.batch_size)
        messages = consumer.consume(size, 0)
        if messages:
            return messages
        messages = consumer.consume(1, self.settings.poll_timeout_s)
        if messages and size > 1:
            messages += consumer.consume(size - 1, 0)
        return messages

    def _hold_back(self, seconds: float) -> None:
        """Throttle: wait, serving delivery reports meanwhile."""
        producer = self._producer
        assert producer is not None
        deadline = time.monotonic() + seconds
        while (left := deadline - time.monotonic()) > 0 and not self._stop.is_set():
            producer.poll(min(left, 0.1))

    def raise_if_fatal(self) -> None:
        """Stop copying after a fatal producer error: every record would fail and rewind
        forever. The supervisor (or the operator) then starts a worker with a new producer; what
        was acknowledged is committed on the way out, the rest is copied again by the next one."""
        if self._fatal is not None:
            raise FatalClientError(
                f"the producer of flow {self.flow_id} hit a fatal error: {self._fatal}"
            )

    def _on_error(self, err: KafkaError) -> None:
        if err.fatal():
            self._fatal = err.str()
            log.error("flow %s: fatal producer error: %s", self.flow_id, err.str())
        else:
            log.warning("flow %s: %s", self.flow_id, err.str())

    def _on_delivery(
        self, lane: Lane, source_offset: int, err: KafkaError | None, msg: Message
    ) -> None:
        # Each report carries its source offset: after a failure librdkafka may report queued
        # records (timed out) before those already sent, so report order is not produce order.
        if err is None:
            lane.progress.delivered(source_offset, msg.offset())  # type: ignore[arg-type]
        else:
            self.stats.delivery_failures += 1
            if err.fatal() and self._fatal is None:
                self._fatal = err.str()
            lane.progress.failed(source_offset, err.str())

    def _on_sampled_delivery(
        self,
        lane: Lane,
        source_offset: int,
        timestamp_ms: int,
        err: KafkaError | None,
        msg: Message,
    ) -> None:
        self._on_delivery(lane, source_offset, err, msg)
        if err is None and timestamp_ms > 0:
            lane.counters.latency.add(time.time() * 1000 - timestamp_ms, time.monotonic())

    def _consume_error(self, msg: Message) -> None:
        err = msg.error()
        assert err is not None
        if err.code() == KafkaError._PARTITION_EOF:
            return
        if err.code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
            log.warning("source topic %s disappeared while being copied", msg.topic())
            return
        if err.code() == KafkaError._LOG_TRUNCATION:
            # The committed progress carries the leader epoch of the last record copied; the
            # consumer found the source log truncated below it (an unclean leader election).
            # The copies of the lost records stay on the target; the new records at those
            # offsets are copied as they come, and their syncs start a new leader epoch.
            self.stats.log_truncations += 1
            log.error(
                "%s-%s on %s was truncated below the copied position (unclean leader election): "
                "%s; records copied before the truncation stay on %s",
                msg.topic(),
                msg.partition(),
                self.settings.source_alias,
                err.str(),
                self.settings.target_alias,
            )
            return
        if err.code() == KafkaError._AUTO_OFFSET_RESET:
            lane = self._lanes.get((msg.topic(), msg.partition()))  # type: ignore[arg-type]
            if lane is not None and lane.reset_to is None:
                self._retention_overtook(lane)
            return
        log.warning("consuming %s: %s", self.settings.flow_id, err.str())

    # ------------------------------------------------------------------ runs, syncs, commits

    def _seal_runs(self) -> None:
        consumer = self._consumer
        assert consumer is not None
        lanes = [
            lane
            for lane in self._lanes.values()
            if lane.progress.accepting and lane.resume_at is None and lane.reset_to is None
        ]
        if lanes:
            for position in consumer.position([lane.source for lane in lanes]):
                lane = self._lanes.get((position.topic, position.partition))
                if lane is not None and position.offset >= 0:
                    lane.progress.seal(position.offset)
        self._write_syncs()

    def _write_syncs(self) -> None:
        producer = self._producer
        assert producer is not None
        for lane in list(self._lanes.values()):
            for finished in lane.progress.take_finished():
                self._syncs.write(lane, finished)

    def _write_keepalives(self, now: float) -> None:
        """Write the keepalive sync of every partition idle for the keepalive interval (cheap
        when none is due: a few comparisons per partition)."""
        now_ms = round(now * 1000)
        looked_up = False
        for lane in list(self._lanes.values()):
            if lane.last_copy is None and lane.learn_last_copy and not looked_up:
                # One bounded read of the sync topic per round, so a restart with many idle
                # partitions does not hold copying back for long.
                looked_up = self._learn_last_copy(lane, now)
            sync = lane.keepalive(self._keepalive, now_ms)
            if sync is not None:
                self._syncs.write_keepalive(lane, sync)

    def _learn_last_copy(self, lane: Lane, now: float) -> bool:
        """After a restart at committed progress: read an idle partition's last copy from the
        sync topic's tail. Returns whether the sync topic was read."""
        idle = lane.progress.next_offset == lane.progress.start
        if not idle or now - lane.assigned_at < self.settings.refresh_interval_s:
            return False  # a partition with records learns its last copy from its own syncs
        if lane.sync_state() is None:
            return False
        lane.learn_last_copy = False
        progress = lane.progress
        try:
            copy = written_last_copy(
                self.settings.target_client,
                self.settings.sync_topic,
                progress.tp,
                (progress.source_topic_id, progress.target_topic_id),
                max_scan=LAST_COPY_SCAN,
                timeout_s=10.0,
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

    def _commit(self, asynchronous: bool, lanes: list[Lane] | None = None) -> None:
        consumer = self._consumer
        assert consumer is not None
        offsets = []
        for lane in lanes if lanes is not None else list(self._lanes.values()):
            position = lane.progress.commit_position
            if position > lane.committed:
                epoch = lane.progress.commit_epoch
                offsets.append(
                    TopicPartition(
                        lane.source.topic,
                        lane.source.partition,
                        position,
                        leader_epoch=epoch,  # -1: unknown
                    )
                )
                lane.committed = position
        if not offsets:
            return
        try:
            if asynchronous:
                consumer.commit(offsets=offsets, asynchronous=True)
            else:
                consumer.commit(offsets=offsets, asynchronous=False)
        except KafkaException as err:
            # A failed commit only means more re-copying after a restart; keep going.
            log.warning("committing progress of %s: %s", self.settings.flow_id, err)
            for offset in offsets:
                failed = self._lanes.get((offset.topic, offset.partition))
                if failed is not None:
                    failed.committed = -1

    # ------------------------------------------------------------------ failures

    def _rewind_failed(self, now: float) -> None:
        consumer = self._consumer
        assert consumer is not None
        for lane in list(self._lanes.values()):
            if lane.reset_to is not None and lane.progress.in_flight == 0:
                self._restart_lane(lane)
            # Seek again on resume: records fetched while paused were skipped, not copied.
            due = lane.resume_at is not None and now >= lane.resume_at and not lane.operator_paused
            if due and self._seek(lane, lane.resume_from):
                lane.resume_at = None
                consumer.resume([lane.source])
            if not lane.progress.ready_to_rewind:
                continue
            if lane.needs_repair:
                if now < lane.repair_at:
                    continue
                try:
                    self._syncs.repair(lane, timeout_s=10.0)
                except (KafkaUnavailableError, KafkaException) as err:
                    log.warning("cannot rebuild offset syncs yet (%s); retrying", err)
                    lane.repair_at = now + 5.0
                    continue
                lane.needs_repair = False
            reason = lane.progress.failure
            position = lane.progress.rewind()
            lane.failures_in_a_row += 1
            self.stats.rewinds += 1
            pause = min(self.settings.max_retry_backoff_s, 0.5 * 2 ** (lane.failures_in_a_row - 1))
            log.error(
                "copying %s-%s to %s failed at offset %d (%s); copying again from there in %.1fs",
                lane.source.topic,
                lane.source.partition,
                self.settings.target_alias,
                position,
                reason,
                pause,
            )
            consumer.pause([lane.source])
            lane.resume_from = position
            lane.resume_at = now + pause
            self._write_syncs()

    def _reassign(self, lane: Lane, position: int) -> bool:
        """Assign every lane again, ``lane`` at ``position`` and the others where they are."""
        consumer = self._consumer
        assert consumer is not None
        others = [other.source for other in self._lanes.values() if other is not lane]
        try:
            positions = consumer.position(others) if others else []
            assignment = [
                TopicPartition(tp.topic, tp.partition, tp.offset)
                for tp in positions
                if tp.offset >= 0
            ]
            assignment += [
                TopicPartition(
                    tp.topic,
                    tp.partition,
                    self._lanes[(tp.topic, tp.partition)].progress.next_offset,
                )
                for tp in positions
                if tp.offset < 0
            ]
            assignment.append(TopicPartition(lane.source.topic, lane.source.partition, position))
            consumer.assign(assignment)
            paused = [other.source for other in self._lanes.values() if other.resume_at is not None]
            if paused:
                consumer.pause(paused)
        except KafkaException as err:
            log.warning(
                "re-assigning %s-%s at %d: %s (will retry)",
                lane.source.topic,
                lane.source.partition,
                position,
                err,
            )
            return False
        return True

    def _retention_overtook(self, lane: Lane) -> None:
        """The next record to copy was deleted by retention on the source: say how many records
        were lost, and continue from the log start once nothing of the partition is in flight."""
        consumer = self._consumer
        assert consumer is not None
        # A position beyond the log can also mean the topic was recreated: look first.
        self._refresh_topics()
        if lane.new_topic_ids is not None:
            return
        low, _high = consumer.get_watermark_offsets(lane.source, timeout=10, cached=False)
        lost = max(0, low - lane.progress.next_offset)
        log.error(
            "%d record(s) of %s-%s were deleted by retention on %s before they were copied "
            "(next to copy %d, log now starts at %d); they are missing on %s",
            lost,
            lane.source.topic,
            lane.source.partition,
            self.settings.source_alias,
            lane.progress.next_offset,
            low,
            self.settings.target_alias,
        )
        self.stats.records_lost_to_retention += lost
        lane.reset_to = low

    def _restart_lane(self, lane: Lane) -> None:
        """Finish the runs up to the last record read, then start a fresh run at ``reset_to``
        (after retention overtook the copy, or for a recreated topic, with its new ids), so no
        sync ever describes deleted positions as empty or maps a new topic through old ids."""
        assert lane.reset_to is not None
        progress = lane.progress
        progress.seal(progress.next_offset)
        self._write_syncs()
        lane.restarted()
        source_id, target_id = lane.new_topic_ids or (
            progress.source_topic_id,
            progress.target_topic_id,
        )
        lane.progress = PartitionProgress(
            progress.tp, source_topic_id=source_id, target_topic_id=target_id, start=lane.reset_to
        )
        if lane.new_topic_ids is None:
            lane.progress.commit_position = max(lane.reset_to, progress.commit_position)
        else:
            lane.committed = -1  # another topic now: its progress starts over
        # A backoff or an operator pause still pending resumes here, not where the old run was
        # (that position could lie past the first records of a recreated topic).
        lane.resume_from = lane.reset_to
        if self._seek(lane, lane.reset_to):
            lane.reset_to = None
            lane.new_topic_ids = None

    def _follow_recreated_topics(self) -> None:
        """Restart lanes whose source or remote topic got a new id (deleted and recreated)."""
        consumer = self._consumer
        assert consumer is not None
        for lane in list(self._lanes.values()):
            mirrored = self._mirrored.get(lane.source.topic)
            if mirrored is None or lane.new_topic_ids is not None:
                continue
            ids = (mirrored.source.topic_id, mirrored.remote.topic_id)
            if ids == (lane.progress.source_topic_id, lane.progress.target_topic_id):
                continue
            low, _high = consumer.get_watermark_offsets(lane.source, timeout=10, cached=False)
            log.error(
                "%s-%s: the source or remote topic was deleted and recreated; copying the new "
                "topic from its start (offset %d) with fresh offset syncs",
                lane.source.topic,
                lane.source.partition,
                low,
            )
            lane.new_topic_ids = ids
            lane.reset_to = low

    def _seek(self, lane: Lane, position: int) -> bool:
        consumer = self._consumer
        assert consumer is not None
        try:
            consumer.seek(TopicPartition(lane.source.topic, lane.source.partition, position))
        except KafkaException as err:
            if err.args[0].code() == KafkaError._STATE:
                # A partition whose fetcher stopped in error (offset out of range, a recreated
                # topic) cannot seek: assign it again at the position instead.
                return self._reassign(lane, position)
            log.warning(
                "seeking %s-%s to %d: %s (will retry)",
                lane.source.topic,
                lane.source.partition,
                position,
                err,
            )
            return False
        return True

    # ------------------------------------------------------------------ topics and assignment

    def _apply_control(self) -> None:
        """Follow the operator's pause/resume/throttle document (see :mod:`.control`)."""
        if self._flow_control.refresh():
            for lane in list(self._lanes.values()):
                self._follow_control(lane)

    def _follow_control(self, lane: Lane) -> None:
        consumer = self._consumer
        assert consumer is not None
        paused = self._flow_control.control.topic_paused(lane.source.topic)
        if paused and not lane.operator_paused:
            lane.operator_paused = True
            consumer.pause([lane.source])
            if lane.resume_at is None:
                lane.resume_from = lane.progress.next_offset
            lane.resume_at = math.inf
            log.info("paused %s-%s", lane.source.topic, lane.source.partition)
        elif not paused and lane.operator_paused:
            lane.operator_paused = False
            lane.resume_at = time.monotonic()
            log.info("resuming %s-%s", lane.source.topic, lane.source.partition)

    def _refresh_topics(self) -> None:
        try:
            self._mirrored = self._mirror.refresh()
        except KafkaUnavailableError as err:
            log.warning("topic discovery for %s failed: %s", self.settings.flow_id, err)
            return
        self._follow_recreated_topics()
        wanted = sorted(self._mirrored)
        if wanted != self._subscribed:
            consumer = self._consumer
            assert consumer is not None
            log.info(
                "flow %s copies %d topic(s): %s",
                self.settings.flow_id,
                len(wanted),
                ", ".join(wanted),
            )
            if wanted:
                consumer.subscribe(
                    wanted,
                    on_assign=self._on_assign,
                    on_revoke=self._on_revoke,
                    on_lost=self._on_lost,
                )
            else:
                consumer.unsubscribe()
            self._subscribed = wanted

    def _on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        if any(
            (m := self._mirrored.get(tp.topic)) is not None and tp.partition >= m.remote.partitions
            for tp in partitions
        ):
            # The consumer saw new source partitions before discovery grew the remote topic.
            try:
                self._mirrored = self._mirror.refresh()
            except KafkaUnavailableError as err:
                log.warning("growing remote topics for new partitions: %s", err)
        starts, epochs, resumed = self._start_positions(consumer, partitions)
        assigned = []
        for tp in partitions:
            mirrored = self._mirrored.get(tp.topic)
            if mirrored is None:
                continue
            start = starts[(tp.topic, tp.partition)]
            source = TopicPartition(tp.topic, tp.partition)
            progress = PartitionProgress(
                offset_syncs.TopicPartition(tp.topic, tp.partition),
                source_topic_id=mirrored.source.topic_id,
                target_topic_id=mirrored.remote.topic_id,
                start=start,
            )
            lane = Lane(
                source=source,
                remote_topic=mirrored.remote_name,
                progress=progress,
                prefix=provenance.header_prefix(self.settings.source_alias, tp.topic, tp.partition),
                committed=start,
                counters=self._counters.setdefault((tp.topic, tp.partition), PartitionCounters()),
                learn_last_copy=(tp.topic, tp.partition) in resumed,
                assigned_at=time.monotonic(),
            )
            self._lanes[(tp.topic, tp.partition)] = lane
            self._syncs.rebuild(lane, start)
            # With the committed leader epoch the consumer first checks that the source log
            # was not truncated below the position (KIP-320) before it fetches from there.
            epoch = epochs.get((tp.topic, tp.partition), -1)
            assigned.append(TopicPartition(tp.topic, tp.partition, start, leader_epoch=epoch))
        consumer.assign(assigned)
        for tp in assigned:
            self._follow_control(self._lanes[(tp.topic, tp.partition)])
        log.info("flow %s took %d partition(s)", self.settings.flow_id, len(assigned))

    def _start_positions(
        self, consumer: Consumer, partitions: list[TopicPartition]
    ) -> tuple[dict[tuple[str, int], int], dict[tuple[str, int], int], set[tuple[str, int]]]:
        """Where to start each partition, the leader epoch committed with those starts that
        are the committed progress itself, and the partitions whose start is that progress."""
        committed = consumer.committed(partitions, timeout=30)
        starts: dict[tuple[str, int], int] = {}
        epochs: dict[tuple[str, int], int] = {}
        # A keepalive [s_last, F) claims nothing was to copy between: true from committed
        # progress only, not where retention deleted records first or the start was chosen.
        resumed: set[tuple[str, int]] = set()
        timestamp = self.settings.start_timestamp_ms
        wanted_times = []
        for tp in committed:
            low, high = consumer.get_watermark_offsets(
                TopicPartition(tp.topic, tp.partition), timeout=30, cached=False
            )
            key = (tp.topic, tp.partition)
            if tp.offset != OFFSET_INVALID and tp.offset >= 0:
                if tp.offset < low:
                    self.stats.records_lost_to_retention += low - tp.offset
                    log.error(
                        "%d record(s) of %s-%s were deleted by retention on %s before they were "
                        "copied (progress %d, log starts at %d)",
                        low - tp.offset,
                        tp.topic,
                        tp.partition,
                        self.settings.source_alias,
                        tp.offset,
                        low,
                    )
                starts[key] = max(tp.offset, low)
                if tp.offset >= low:
                    resumed.add(key)
                epoch = tp.leader_epoch
                if tp.offset >= low and epoch is not None and epoch >= 0:
                    epochs[key] = epoch
            elif self.settings.start_kind == "latest":
                starts[key] = high
            elif self.settings.start_kind == "timestamp" and timestamp is not None:
                wanted_times.append(TopicPartition(tp.topic, tp.partition, timestamp))
                starts[key] = high
            else:
                starts[key] = low
        if wanted_times:
            for found in consumer.offsets_for_times(wanted_times, timeout=30):
                if found.offset >= 0:
                    starts[(found.topic, found.partition)] = found.offset
        return starts, epochs, resumed

    def _on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        lanes = [lane for tp in partitions if (lane := self._lanes.get((tp.topic, tp.partition)))]
        self._settle(lanes)
        self._commit(asynchronous=False, lanes=lanes)
        self._drop(lanes)
        consumer.unassign()

    def _on_lost(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        # Someone else owns these now: do not commit for them, and send none of their copies
        # still queued, which would land between the new owner's copies without a sync. The
        # purge takes every partition's queued records (librdkafka purges per producer): those
        # of partitions still owned fail with a purge error and are copied again (a rewind).
        lanes = [lane for tp in partitions if (lane := self._lanes.get((tp.topic, tp.partition)))]
        log.warning("flow %s lost %d partition(s)", self.settings.flow_id, len(lanes))
        producer = self._producer
        if producer is not None and lanes:
            producer.purge(in_queue=True, in_flight=False, blocking=True)
            producer.poll(0)
        self._drop(lanes)
        consumer.unassign()

    def _settle(self, lanes: list[Lane]) -> None:
        """Let in-flight records land, seal and write the syncs of ``lanes``, wait for them."""
        producer, consumer = self._producer, self._consumer
        assert producer is not None and consumer is not None
        producer.flush(self.settings.settle_timeout_s)
        active = [lane for lane in lanes if lane.progress.accepting and lane.resume_at is None]
        if active:
            for position in consumer.position([lane.source for lane in active]):
                lane = self._lanes.get((position.topic, position.partition))
                if lane is not None and position.offset >= 0:
                    lane.progress.seal(position.offset)
        for lane in lanes:
            if lane.progress.ready_to_rewind:
                lane.progress.rewind()
        self._write_syncs()
        producer.flush(self.settings.settle_timeout_s)

    def _drop(self, lanes: list[Lane]) -> None:
        for lane in lanes:
            self._lanes.pop((lane.source.topic, lane.source.partition), None)

    # ------------------------------------------------------------------ metrics

    def _remember_end_offsets(self) -> None:
        """Keep each partition's log end as the consumer knows it from fetch responses (no
        request is sent), so that metric scrapes on another thread never call the consumer."""
        consumer = self._consumer
        assert consumer is not None
        for lane in list(self._lanes.values()):
            try:
                marks = consumer.get_watermark_offsets(lane.source, cached=True)
            except KafkaException:
                continue
            if marks is not None and marks[1] >= 0:
                lane.counters.source_end_offset = marks[1]

    def partition_reports(self) -> list[PartitionReport]:
        """One report per partition copied now. Runs on a metrics scrape's thread: it reads
        plain values the worker's thread keeps and never calls a Kafka client."""
        now = time.monotonic()
        now_ms = time.time() * 1000
        reports = []
        # list() copies the lanes in one step under the GIL while the worker may change them.
        for lane in list(self._lanes.values()):
            counters = lane.counters
            last = counters.last_timestamp_ms
            reports.append(
                PartitionReport(
                    flow=self.flow_id,
                    topic=lane.source.topic,
                    partition=lane.source.partition,
                    remote_topic=lane.remote_topic,
                    records_copied=counters.records_copied,
                    bytes_copied=counters.bytes_copied,
                    replicated_offset=lane.progress.commit_position,
                    source_end_offset=counters.source_end_offset,
                    latency_ms=counters.latency.value(now),
                    record_age_ms=None if last is None else max(0.0, now_ms - last),
                )
            )
        return reports

    # ------------------------------------------------------------------ setup and teardown

    def _shutdown(self) -> None:
        consumer, producer = self._consumer, self._producer
        try:
            if consumer is not None and producer is not None:
                lanes = list(self._lanes.values())
                self._settle(lanes)
                self._commit(asynchronous=False, lanes=lanes)
        finally:
            if consumer is not None:
                self._lanes.clear()
                consumer.close()
            if producer is not None:
                producer.flush(self.settings.settle_timeout_s)
