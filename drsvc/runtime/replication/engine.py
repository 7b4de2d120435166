"""The replication engine of one flow: one loop, two delivery modes.

One engine runs one flow (``east->west``) in one process. The loop is the same whatever the
delivery mode:

* **Discovery**: every ``refresh_interval_s`` the flow's topics are discovered again (new topics
  and partitions are picked up while running; remote topics are created and grown) on a thread
  of its own (:mod:`.discovery`: a source that is down never holds the loop up), the
  operator's control document is followed (pause, resume, throttle), and stalled partitions are
  reported (an open source transaction holding read_committed readers back).
* **Batching and the hot path**: up to ``batch_size`` records are read from the source
  (``read_committed``) and produced to the remote topics on the target with the same key, value,
  timestamp (CreateTime) and partition, their original headers in order and a provenance header
  appended. No poll, flush or call into the delivery mode per record: metrics are credited per
  stretch of one partition, and the first copy of a stretch samples the replication latency.
* **Hold-back**: a throttled flow waits after each batch, serving delivery reports meanwhile.
* **Per-partition state**: every lane's state is a pure :mod:`failover.partition_state` machine.
  The engine feeds it events (a failure, a pause, a timer, nothing in flight any more) and
  executes the actions it returns: pause the consumer, seek and resume, report a stall; the
  delivery mode executes its own (rewind, rebuild syncs, restart).
* **Start positions** come from :func:`failover.partition_state.start_position`, with the
  committed progress the delivery mode reads (the source group at least once, the slot
  progress exactly once).

What differs between the modes sits behind :class:`.seam.Delivery`, called one way only (the
mode says what it wants of the engine with effects the engine executes, :mod:`.seam`): at least once
(:mod:`.at_least_once`: idempotent producers, a source consumer group, offset syncs
acknowledged before progress is committed, rewinds) and exactly once (:mod:`.exactly_once`:
slots, transactional producers, copies, syncs and progress in one transaction).

Every client, the clock and the heartbeat copier come from a :class:`.boundary.KafkaBoundary`
and a :class:`drsvc.kafka.clock.Clock`, so the whole loop runs in unit tests on fakes. The
clients are confluent-kafka's own, unwrapped, and asked for at start and on rare events only:
the copy loop calls them directly.
"""

from __future__ import annotations

import gc
import logging
import threading
from collections import deque
from collections.abc import Callable, Iterable
from functools import partial
from typing import Any

from drsvc.kafka.clock import Clock, SystemClock
from drsvc.kafka.hot import KafkaException
from drsvc.kafka.types import (
    TIMESTAMP_NOT_AVAILABLE,
    Consumer,
    KafkaError,
    Message,
    Producer,
    TopicPartition,
)
from drsvc.runtime.replication.anomalies import BackfillAgeCheck
from drsvc.runtime.replication.at_least_once import AtLeastOnce
from drsvc.runtime.replication.boundary import ConfluentKafka, KafkaBoundary, TopicCatalog
from drsvc.runtime.replication.client_configs import judge_reader_config
from drsvc.runtime.replication.control import ControlFollower, ControlReader, consul_reader
from drsvc.runtime.replication.discovery import FlowTopics
from drsvc.runtime.replication.exactly_once import ExactlyOnce
from drsvc.runtime.replication.lane import NOT_WATCHED, Lane, LaneFactory
from drsvc.runtime.replication.metrics import PartitionReport, WorkerStats
from drsvc.runtime.replication.seam import (
    AddLanes,
    Apply,
    Delivery,
    DropLanes,
    Effect,
    Effects,
    FollowControl,
    HaltLanes,
    ModeContext,
    Seek,
)
from drsvc.runtime.replication.settings import WorkerSettings
from drsvc.runtime.replication.stale_records import Publish, StaleRecordsLog, consul_publisher
from drsvc.runtime.replication.start_positions import StartPositions
from drsvc.runtime.replication.topics import MirroredTopic
from failover import provenance
from failover.partition_state import (
    Action,
    Event,
    FlowStart,
    NothingInFlight,
    OperatorPause,
    OperatorPaused,
    OperatorResume,
    PartitionPolicy,
    PauseConsumer,
    PositionSeen,
    Reading,
    ReportStall,
    Resumed,
    SeekAndResume,
    TimerFired,
    copies,
    step,
)
from failover.stale_epochs import EpochWatch, record_epoch

log = logging.getLogger(__name__)

#: how often each partition's log end is cached for metrics (no request: fetch responses)
END_OFFSETS_INTERVAL_S = 1.0
#: records read before a watch was known that are read again to be judged, per partition (the
#: stretch right after the switch, where a client that missed it writes), and for how long
JUDGE_MAX_RECORDS = 50_000
JUDGE_BUDGET_S = 5.0
#: the garbage collector's thresholds while copying. Every copy allocates a handful of objects
#: (the consumed message, its headers, the delivery callback) that reference counting frees; at
#: CPython's 700 the youngest generation was scanned every hundred records or so, for 10-12 % of
#: a worker's CPU per record. Only reference cycles wait longer for collection this way, and a
#: worker makes few (bench/README.md: 16 % more records/s of 100 B, the same peak memory).
COPYING_GC_THRESHOLDS = (100_000, 20, 100)
#: the shortest time between two discoveries run because the consumer went back: a consumer
#: that keeps returning old records must not turn every batch into a discovery
WENT_BACK_DISCOVERY_INTERVAL_S = 1.0


class ReplicationEngine:
    """Copies one flow until :meth:`stop` is called (see the module docstring)."""

    def __init__(
        self,
        settings: WorkerSettings,
        *,
        kafka: KafkaBoundary | None = None,
        clock: Clock | None = None,
        control: ControlReader | None = None,
        stale_records: Publish | None = None,
    ) -> None:
        self.settings = settings
        self.flow_id = settings.flow_id
        self.stats = WorkerStats()
        self.clock: Clock = clock if clock is not None else SystemClock()
        self.kafka: KafkaBoundary = (
            kafka if kafka is not None else ConfluentKafka(settings, self.clock)
        )
        self.policy = PartitionPolicy(
            max_backoff_s=settings.max_retry_backoff_s, stall_warning_s=settings.stall_warning_s
        )
        self.flow_start = FlowStart(settings.start_kind, settings.start_timestamp_ms)  # type: ignore[arg-type]
        #: the lanes copied now, by (source topic, partition)
        self.lanes: dict[tuple[str, int], Lane] = {}
        self.new_lane = LaneFactory(settings.source_alias, self.clock)
        self.topics = FlowTopics(
            lambda: self.catalog,
            background=lambda: self.kafka.background_discovery,
            name=self.flow_id,
        )
        self._stop = threading.Event()
        self._identity_loop_check = (
            settings.policy.format_remote_topic(settings.source_alias, "x") == "x"
        )
        self.flow_control = ControlFollower(
            settings.flow_id,
            control if control is not None else consul_reader(settings),
            settings.throttle_bytes_per_s,
            standby=settings.standby,
        )
        self._backfill_check = BackfillAgeCheck(settings.target_alias, self.clock)
        self.stale_records = StaleRecordsLog(
            settings.flow_id,
            stale_records
            if stale_records is not None
            else consul_publisher(settings.consul_http_addr, settings.stale_records_key),
        )
        #: records older than their lane's progress came back in the last batch (see _copy)
        self._went_back = False
        self._went_back_checked_at = 0.0
        self._catalog: TopicCatalog | None = None
        self._consumer: Consumer | None = None
        #: what the delivery mode wants done, executed by :meth:`_drain` (see :mod:`.seam`)
        self._effects: Effects = deque()
        self.delivery = self._delivery_for(settings)

    def _delivery_for(self, settings: WorkerSettings) -> Delivery:
        context = ModeContext(
            settings=settings,
            kafka=self.kafka,
            clock=self.clock,
            stats=self.stats,
            lanes=self.lanes,
            topics=self.topics,
            starts=StartPositions(settings, self.flow_start, self.flow_control, self.stats),
            new_lane=self.new_lane,
            stop=self._stop,
            effects=self._effects,
        )
        if settings.delivery == "exactly-once":
            return ExactlyOnce(context)
        return AtLeastOnce(context)

    # ------------------------------------------------------------------ lifecycle

    def stop(self) -> None:
        self._stop.set()

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    @property
    def consumer(self) -> Consumer:
        """The source consumer (exists while :meth:`run` runs)."""
        assert self._consumer is not None
        return self._consumer

    @property
    def catalog(self) -> TopicCatalog:
        if self._catalog is None:
            self._catalog = self.kafka.topics()
        return self._catalog

    @property
    def mirrored(self) -> dict[str, MirroredTopic]:
        """The flow's topics as the last discovery that worked found them."""
        return self.topics.mirrored

    def run(self, on_cycle: Callable[[ReplicationEngine], None] | None = None) -> None:
        """Copy until stopped; on the way out, settle deliveries, write syncs, commit."""
        self.delivery.prepare(self.catalog)
        self._consumer = self.kafka.consumer(
            self.settings.source_alias, self.delivery.source_config()
        )
        self.delivery.start(self._consumer)
        self._drain()
        # What exists now lives as long as the worker: keep it out of the garbage collector's
        # sight (its scans took a sixth of the worker's CPU per record when profiled).
        gc.collect()
        gc.freeze()
        thresholds = gc.get_threshold()
        gc.set_threshold(*COPYING_GC_THRESHOLDS)
        # Heartbeats take their own copier: a data backlog or a throttle never delays them.
        heartbeats = self.kafka.heartbeat_copier()
        heartbeats.start()
        try:
            self._loop(on_cycle)
        finally:
            try:
                self.delivery.shutdown()
            finally:
                try:
                    # What the mode asked for on its way out concerns lanes that are gone now.
                    self._effects.clear()
                    self.lanes.clear()
                    self.consumer.close()
                finally:
                    heartbeats.stop()
                    gc.set_threshold(*thresholds)

    def _loop(self, on_cycle: Callable[[ReplicationEngine], None] | None) -> None:
        s = self.settings
        clock = self.clock
        delivery = self.delivery
        next_refresh = 0.0
        next_ends = clock.monotonic() + END_OFFSETS_INTERVAL_S
        first = True
        while not self._stop.is_set():
            now = clock.monotonic()
            if now >= next_refresh:
                self._apply_control()
                if first:
                    # The first discovery runs here: nothing is copied or in flight yet.
                    first = False
                    self._discover_now()
                else:
                    self.topics.start()
                self._take_discovered()
                self._watch_for_stalls(now)
                self._drain()
                next_refresh = now + s.refresh_interval_s
            else:
                self._take_discovered()
            delivery.before_batch(now)
            self._drain()
            if not delivery.reading():
                delivery.idle(s.poll_timeout_s)
                self._drain()
                if on_cycle is not None:
                    on_cycle(self)  # a loop with nothing to read still turns (liveness)
                continue
            messages = self._next_batch()
            # Rebalance callbacks run inside consume: their lanes change before the copy.
            self._drain()
            if messages:
                self._backfill_check.check(messages[0], self.mirrored)
                sent = self._copy(messages)
                if self._went_back:
                    self._consumer_went_back()
                wait_s = self.flow_control.sent(sent, len(messages), clock.monotonic())
                self._hold_back(wait_s)
            now = clock.monotonic()
            self._step_timers()
            self._drain()
            delivery.after_batch(now)
            self._drain()
            if now >= next_ends:
                self._remember_end_offsets()
                next_ends = now + END_OFFSETS_INTERVAL_S
            if on_cycle is not None:
                on_cycle(self)

    # ------------------------------------------------------------------ the hot path

    def _copy(self, messages: list[Message]) -> int:  # noqa: PLR0915 (one loop, no calls per record)
        """Produce the copies of ``messages``; return the bytes of key and value sent."""
        lanes: dict[Any, Lane] = self.lanes
        delivery = self.delivery
        effects = self._effects
        open_lane = delivery.open
        on_delivery = delivery.on_delivery
        on_sampled_delivery = self._on_sampled_delivery
        header_key = provenance.PROVENANCE_HEADER
        target = self.settings.target_alias
        loop_check = self._identity_loop_check
        stats = self.stats
        now = self.clock.monotonic()
        lane: Lane | None = None
        producer: Producer | None = None
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
                    delivery.copied(lane, copied - credited)
                credited, credited_size = copied, size
                lane_topic, lane_partition = topic, partition
                lane = lanes.get((topic, partition))
                producer = open_lane(lane, now) if lane is not None and lane.copying else None
                if effects:  # opening failed (a slot dropped): its lanes go first
                    self._drain()
                sample = True
            if lane is None or producer is None or not lane.copying or not lane.progress.accepting:
                continue
            offset: int = msg.offset()  # type: ignore[assignment]
            if offset < lane.progress.next_offset:
                # The consumer went back without being asked (the source topic deleted and
                # recreated, its offsets starting over, before discovery saw it): copying
                # would mix two logs in one run. Discovery decides right after this batch.
                self._went_back = True
                continue
            headers: Any = msg.headers()
            if loop_check and provenance.visited(headers, target):
                stats.skipped_loops += 1
                continue
            if offset >= lane.watch_from and headers:
                self._judge(lane, offset, headers)
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
                    # Positional (topic, value, key, partition, callback, on_delivery,
                    # timestamp, headers): keyword arguments cost the C call a third more per
                    # record, measured at 1.5 against 1.0 us (bench/README.md).
                    producer.produce(
                        lane.remote_topic,
                        value,
                        record_key,
                        lane.source.partition,
                        report,
                        None,
                        0 if ts_type == TIMESTAMP_NOT_AVAILABLE else ts,
                        headers,
                    )
                    sent = True
                    break
                except BufferError:
                    # The producer queue is full: serve delivery reports, then try again,
                    # unless one of them stopped this partition.
                    again = delivery.queue_full(lane, producer)
                    if effects:
                        self._drain()
                    if not again or not lane.copying:
                        break
                except KafkaException as err:
                    # Refused before sending (a partition the producer does not know yet, a
                    # record over the size limit): the same path as a failed delivery.
                    delivery.refused(lane, offset, -1 if epoch is None else epoch, err.args[0])
                    stats.delivery_failures += 1
                    self._drain()
                    break
            if not sent:
                continue
            lane.progress.produced(offset, -1 if epoch is None else epoch)
            copied += 1
            size += len(value or b"") + len(record_key or b"")
            last_ts = ts
        if lane is not None and copied > credited:
            lane.counters.add_batch(copied - credited, size - credited_size, last_ts)
            delivery.copied(lane, copied - credited)
        if effects:
            self._drain()
        stats.records_read += len(messages)
        stats.bytes_copied += size
        stats.records_copied += copied
        return size

    def _on_sampled_delivery(
        self,
        lane: Lane,
        source_offset: int,
        timestamp_ms: int,
        err: KafkaError | None,
        msg: Message,
    ) -> None:
        self.delivery.on_delivery(lane, source_offset, err, msg)
        if err is None and timestamp_ms > 0:
            clock = self.clock
            lane.counters.latency.add(clock.time() * 1000 - timestamp_ms, clock.monotonic())

    def _next_batch(self) -> list[Message]:
        """Up to a batch of records without waiting when some are there; otherwise wait for the
        first one (consume(n, timeout) would wait the whole timeout for n records)."""
        consumer = self.consumer
        size = self.flow_control.batch_size(self.settings.batch_size)
        messages = consumer.consume(size, 0)
        if messages:
            return messages
        messages = consumer.consume(1, self.settings.poll_timeout_s)
        if messages and size > 1:
            messages += consumer.consume(size - 1, 0)
        return messages

    def _hold_back(self, seconds: float) -> None:
        """Throttle: wait, serving delivery reports (and due commits) meanwhile."""
        clock = self.clock
        deadline = clock.monotonic() + seconds
        while (left := deadline - clock.monotonic()) > 0 and not self._stop.is_set():
            self.delivery.serve(min(left, 0.1))
            self._drain()

    def _consume_error(self, msg: Message) -> None:
        err = msg.error()
        assert err is not None
        code = err.code()
        if code == KafkaError._PARTITION_EOF:
            return
        if code == KafkaError.UNKNOWN_TOPIC_OR_PART:
            log.warning("source topic %s disappeared while being copied", msg.topic())
            return
        if code == KafkaError._LOG_TRUNCATION:
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
        if code == KafkaError._AUTO_OFFSET_RESET:
            lane = self.lanes.get((msg.topic(), msg.partition()))  # type: ignore[arg-type]
            if lane is not None:
                self._position_deleted(lane)
            return
        log.warning("consuming %s: %s", self.flow_id, err.str())

    # ------------------------------------------------------------------ lane states

    def _position_deleted(self, lane: Lane) -> None:
        """The next record of ``lane`` is gone from the source log. A position beyond the log
        can also mean the topic was recreated: discover first (a recreated topic restarts its
        lanes), then let the mode count the loss and restart what is left."""
        if lane.state.restart is not None:
            return  # a restart is on its way already
        self._discover_now()
        if self.lanes.get(lane.key) is lane and lane.state.restart is None:
            self.delivery.position_deleted(lane)
            self._drain()

    def apply(self, lane: Lane, event: Event) -> None:
        """Step ``lane``'s state machine with ``event`` and execute its actions."""
        state, actions = step(lane.state, event, self.clock.monotonic(), self.policy)
        lane.state = state
        lane.copying = copies(state) and not lane.halted
        for action in actions:
            self._execute(lane, action)

    # ------------------------------------------------------------------ the mode's effects

    def _drain(self) -> None:
        """Execute what the delivery mode asked for, oldest first (executing one may ask for
        more: they join the end of the line)."""
        effects = self._effects
        while effects:
            self._do(effects.popleft())

    def _do(self, effect: Effect) -> None:
        match effect:
            case AddLanes(lanes):
                for lane in lanes:
                    self.lanes[lane.key] = lane
            case DropLanes(lanes):
                for lane in self._current(lanes):
                    del self.lanes[lane.key]
            case Apply(lane, event):
                if self.lanes.get(lane.key) is lane:
                    self.apply(lane, event)
            case Seek(lane, position, then):
                if self.lanes.get(lane.key) is lane and self.seek(lane, position) and then:
                    self.apply(lane, then)
            case FollowControl(lanes):
                self.follow_control(list(lanes))
            case HaltLanes(lanes):
                for lane in lanes:
                    lane.halted = True
                    lane.copying = False

    def _current(self, lanes: Iterable[Lane]) -> list[Lane]:
        """Those of ``lanes`` the engine copies now (not replaced by newer lanes)."""
        return [lane for lane in lanes if self.lanes.get(lane.key) is lane]

    def _execute(self, lane: Lane, action: Action) -> None:
        match action:
            case PauseConsumer():
                self.consumer.pause([lane.source])
            case SeekAndResume(offset):
                # Records fetched while held were skipped, not copied: seek back first.
                if self.seek(lane, offset):
                    self.consumer.resume([lane.source])
                    self.apply(lane, Resumed())
            case ReportStall(position, log_end, stalled_s):
                log.warning(
                    "%s-%s on %s has not advanced past offset %d for %.0fs although the log "
                    "ends at %d: an open transaction (hung producer?) holds read_committed "
                    "readers back",
                    lane.source.topic,
                    lane.source.partition,
                    self.settings.source_alias,
                    position,
                    stalled_s,
                    log_end,
                )
                self.stats.stalled_partitions += 1
            case _:
                self.delivery.execute(lane, action)

    def _step_timers(self) -> None:
        """Once per cycle: nothing in flight any more (a rewind, repair or restart may go on),
        then deadlines (a backoff over, an operator resume)."""
        apply = self.apply
        for lane in list(self.lanes.values()):
            if lane.progress.in_flight == 0 and (
                lane.state.failure is not None or lane.state.restart is not None
            ):
                apply(lane, NothingInFlight())
            if not isinstance(lane.state.hold, Reading):
                apply(lane, TimerFired())

    def seek(self, lane: Lane, position: int) -> bool:
        try:
            self.consumer.seek(TopicPartition(lane.source.topic, lane.source.partition, position))
        except KafkaException as err:
            if err.args[0].code() != KafkaError._STATE:
                log.warning(
                    "seeking %s-%s to %d: %s (will retry)",
                    lane.source.topic,
                    lane.source.partition,
                    position,
                    err,
                )
                return False
        else:
            return True
        # A partition whose fetcher stopped in error (offset out of range, a recreated topic)
        # cannot seek: assign it again at the position instead.
        try:
            self.delivery.reassign(lane, position)
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

    def _watch_for_stalls(self, now: float) -> None:
        """Warn when a partition's position stops moving while its log has more records: with
        read_committed that is an open (hung) transaction holding every consumer back."""
        watched = {
            lane.key: lane for lane in self.lanes.values() if isinstance(lane.state.hold, Reading)
        }
        if not watched:
            return
        consumer = self.consumer
        for position in consumer.position([lane.source for lane in watched.values()]):
            lane = watched[(position.topic, position.partition)]
            marks = consumer.get_watermark_offsets(lane.source, cached=True)
            log_end = marks[1] if marks is not None else -1
            self.apply(lane, PositionSeen(position.offset, log_end))

    # ------------------------------------------------------------------ control and topics

    def _apply_control(self) -> None:
        """Follow the operator's pause/resume/throttle document (see :mod:`.control`), and
        list the stale records found since the last time."""
        if self.flow_control.refresh():
            self.follow_control(list(self.lanes.values()))
        self.stale_records.publish()

    def follow_control(self, lanes: list[Lane]) -> None:
        """Pause or resume ``lanes`` as the control document says. A paused partition keeps its
        committed progress; reading resumes where its copying stopped."""
        control = self.flow_control.control
        below = [
            (lane, floor)
            for lane in lanes
            if (floor := control.floor(lane.source.topic, lane.source.partition)) is not None
            and floor > _position(lane)
        ]
        if below:
            # Before resuming: a lane resumed now seeks the floor, not its old position (or,
            # exactly once, its slot is taken again and its lanes replaced).
            self.delivery.skip_below(below)
            self._drain()
        paused = resumed = 0
        unjudged: list[tuple[Lane, int, int]] = []
        for lane in lanes:
            if self.lanes.get(lane.key) is not lane:
                continue
            if _watch(lane, control.epoch_watch.get(lane.source.topic)):
                read_to = lane.progress.next_offset
                if read_to > lane.watch_from:
                    unjudged.append((lane, lane.watch_from, read_to))
            wanted = self.flow_control.topic_paused(lane.source.topic)
            operator_paused = isinstance(lane.state.hold, OperatorPaused)
            if wanted and not operator_paused:
                self.apply(lane, OperatorPause(lane.progress.next_offset))
                paused += 1
            elif not wanted and operator_paused:
                self.apply(lane, OperatorResume())
                resumed += 1
        if unjudged:
            self._judge_read_records(unjudged)
        if paused:
            log.info("paused %d partition(s) of %s", paused, self.flow_id)
        if resumed:
            log.info("resuming %d partition(s) of %s", resumed, self.flow_id)

    def _judge(self, lane: Lane, offset: int, headers: Any) -> None:
        """Count and list ``lane``'s record at ``offset`` if it carries an epoch below its
        watch's (called only for records at or past the watch's boundary)."""
        stamped = record_epoch(headers)
        if stamped is not None and stamped < lane.watch_epoch:
            self.stats.stale_epoch_records += 1
            self.stale_records.found(lane, offset, stamped)

    def _judge_read_records(self, ranges: list[tuple[Lane, int, int]]) -> None:
        """Judge by their epoch the records lanes read before this worker learned of their
        watch: a failover writes the watch when it activates, and the worker reads the control
        document only at its next refresh, while a client that missed the switch writes right
        after it. A reader of its own reads each range again (never copying, never joining the
        flow's group), at most ``JUDGE_MAX_RECORDS`` per partition from the boundary and for
        ``JUDGE_BUDGET_S`` in all; what it leaves is logged."""
        reader = self.kafka.consumer(self.settings.source_alias, judge_reader_config(self.settings))
        ends = {
            lane.key: (lane, min(end, start + JUDGE_MAX_RECORDS)) for lane, start, end in ranges
        }
        deadline = self.clock.monotonic() + JUDGE_BUDGET_S
        try:
            reader.assign(
                [
                    TopicPartition(lane.source.topic, lane.source.partition, s)
                    for lane, s, _ in ranges
                ]
            )
            while ends and self.clock.monotonic() < deadline:
                for msg in reader.consume(1000, 0.2):
                    wanted = ends.get((msg.topic(), msg.partition()))  # type: ignore[arg-type]
                    if msg.error() is not None or wanted is None:
                        continue
                    lane, end = wanted
                    offset: int = msg.offset()  # type: ignore[assignment]
                    if offset < end:
                        self._judge(lane, offset, msg.headers())
                positions = reader.position([TopicPartition(t, p) for t, p in ends])
                for tp in positions:
                    if tp.offset >= ends[(tp.topic, tp.partition)][1]:
                        del ends[(tp.topic, tp.partition)]
        except KafkaException as err:
            log.warning("%s: judging records read before a watch: %s", self.flow_id, err)
        finally:
            reader.close()
        if ends:
            log.warning(
                "%s: records of %d partition(s) read before their watch was known were not all "
                "judged within %.0f s (%s)",
                self.flow_id,
                len(ends),
                JUDGE_BUDGET_S,
                ", ".join(f"{t}-{p}" for t, p in sorted(ends)),
            )

    def _consumer_went_back(self) -> None:
        """Records older than their lane's progress were read and left uncopied. A recreated
        source topic (new topic id) restarts its lanes from the new topic's start once
        discovery sees it, so discovery runs now (at most once a second); for the same topic
        they were copied already, and copying goes on where the lane was."""
        self._went_back = False
        now = self.clock.monotonic()
        if now - self._went_back_checked_at < WENT_BACK_DISCOVERY_INTERVAL_S:
            return
        self._went_back_checked_at = now
        log.warning(
            "%s: the source consumer returned records older than the progress of their "
            "partition; discovering topics now (a recreated source topic?)",
            self.flow_id,
        )
        self._discover_now()

    def _discover_now(self) -> None:
        """Discover on the loop and tell the delivery mode what changed, if discovery worked."""
        if self.topics.refresh_now():
            self.delivery.topics_changed(self.mirrored)
            self._drain()

    def _take_discovered(self) -> None:
        """Use what a discovery started earlier found, if it has finished."""
        if self.topics.take_finished():
            self.delivery.topics_changed(self.mirrored)
            self._drain()

    # ------------------------------------------------------------------ metrics

    def _remember_end_offsets(self) -> None:
        """Keep each partition's log end as the consumer knows it from fetch responses (no
        request is sent), so that metric scrapes on another thread never call the consumer."""
        consumer = self.consumer
        for lane in list(self.lanes.values()):
            try:
                marks = consumer.get_watermark_offsets(lane.source, cached=True)
            except KafkaException:
                continue
            if marks is not None and marks[1] >= 0:
                lane.counters.source_end_offset = marks[1]

    def partition_reports(self) -> list[PartitionReport]:
        """One report per partition copied now. Runs on a metrics scrape's thread: it reads
        plain values the worker's thread keeps and never calls a Kafka client."""
        now = self.clock.monotonic()
        now_ms = self.clock.time() * 1000
        replicated_offset = self.delivery.replicated_offset
        reports = []
        # list() copies the lanes in one step under the GIL while the worker may change them.
        for lane in list(self.lanes.values()):
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
                    replicated_offset=replicated_offset(lane),
                    source_end_offset=counters.source_end_offset,
                    latency_ms=counters.latency.value(now),
                    record_age_ms=None if last is None else max(0.0, now_ms - last),
                )
            )
        return reports


def _watch(lane: Lane, watch: EpochWatch | None) -> bool:
    """Judge ``lane``'s records by their epoch from where ``watch`` says (None: not at all);
    True when the lane got a watch it did not have."""
    boundary = None if watch is None else watch.boundary(lane.source.partition)
    before = (lane.watch_from, lane.watch_epoch, lane.watch_app)
    if watch is None or boundary is None:
        lane.watch_from, lane.watch_epoch, lane.watch_app = NOT_WATCHED, 0, ""
        return False
    lane.watch_from, lane.watch_epoch, lane.watch_app = boundary, watch.epoch, watch.app
    return before != (boundary, watch.epoch, watch.app)


def _position(lane: Lane) -> int:
    """Where the lane goes on copying: the next offset while reading, the resume point while
    held (a backoff, an operator pause), the restart offset once a restart waits."""
    state = lane.state
    if state.restart is not None:
        return state.restart.at
    if isinstance(state.hold, Reading):
        return lane.progress.next_offset
    return state.resume_from
