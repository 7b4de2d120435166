"""The faust apps of the checkpoint stream: one per cluster, with its agents and timers.

faust talks to one Kafka cluster per app, so a process runs one app per cluster it needs (every
flow target, and every cluster holding a reverse flow's syncs), all in one faust worker and one
event loop. The app of cluster ``X``

* runs one **agent per offset-sync topic on X**, handing every sync record to its
  :class:`~.sync_follower.SyncFollower`, which keeps that flow's offset index current;
* runs one **timer per stream into X** (every ``interval_s``), which drives a cycle of
  :class:`~.stream.CheckpointStream` and writes the checkpoints through the app's producer to the
  stream's checkpoints topic on X.

Source clusters are read through confluent-kafka (:class:`~.group_reader.KafkaGroupReader`), in a
worker thread so the event loop never blocks. The apps keep no tables (the faust recovery race of
``docs/faust-on-kafka4.md`` never applies); their consumer groups ``drsvc-checkpoints.<X>`` only
spread sync-topic partitions. The apps come from the Kafka port (:mod:`drsvc.kafka.faust_app`),
which gives them the cluster's brokers and TLS and SASL settings from the topology, and a consumer
that reads committed records only (the syncs of exactly-once flows are written in transactions).
They use no static member id (why: :mod:`drsvc.kafka.faust_app`). The agents never rely on where
faust starts reading (see the follower).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from drsvc.errors import DrsvcError
from drsvc.kafka.clients import KafkaClients
from drsvc.kafka.faust_app import new_app
from drsvc.runtime.checkpoints.group_sync_hook import GroupSyncHook
from drsvc.runtime.checkpoints.metrics import CheckpointMetrics
from drsvc.runtime.checkpoints.settings import CheckpointSettings
from drsvc.runtime.checkpoints.stream import CheckpointStream, ClusterReader, Emission
from drsvc.runtime.checkpoints.sync_follower import SyncFollower
from drsvc.runtime.liveness import loop_liveness
from failover import naming
from failover.checkpoints import encode_key, encode_value

__all__ = ["StreamRunner", "add_stream_timer", "add_sync_agent", "build_app"]

log = logging.getLogger(__name__)

SETTLED_SYNC_STATUSES = frozenset({"synced", "unchanged", "not-opted-in"})
"""Group sync outcomes that need no retry: anything else (failed, refused, active on the target,
a switch under way ...) is offered again after ``resync_s``."""


def build_app(alias: str, clients: KafkaClients, settings: CheckpointSettings) -> Any:
    """A faust app for cluster ``alias`` of ``clients`` (a ``faust.App``; typed Any because faust
    is untyped)."""
    name = naming.checkpoints_app_id(alias, settings.app_id_suffix)
    data_dir: Path = settings.data_dir / name
    return new_app(
        clients,
        alias,
        name,
        store="memory://",
        datadir=str(data_dir),
        web_enabled=False,
        autodiscover=False,
        # No tables and no leader-only timers: neither the leader topic nor standbys are needed.
        topic_disable_leader=True,
        table_standby_replicas=0,
        consumer_auto_offset_reset="earliest",
        consumer_metadata_max_age_ms=int(settings.metadata_max_age_s * 1000),
        broker_session_timeout=settings.session_timeout_s,
        broker_heartbeat_interval=min(2.0, settings.session_timeout_s / 4),
        broker_rebalance_timeout=max(10.0, settings.session_timeout_s),
        producer_acks=-1,
    )


def add_sync_agent(app: Any, follower: SyncFollower) -> None:
    """An agent over ``follower``'s sync topic that keeps its index current."""
    topic = app.topic(
        follower.source.topic,
        key_type=bytes,
        value_type=bytes,
        key_serializer="raw",
        value_serializer="raw",
    )

    async def follow_syncs(stream: AsyncIterator[Any]) -> None:
        loop = asyncio.get_running_loop()
        async for event in stream.events():  # type: ignore[attr-defined]
            message = event.message
            while True:
                gap = follower.accept(message.partition, message.offset, message.key, message.value)
                if gap is None:
                    break
                try:
                    records = await loop.run_in_executor(None, follower.read_range, gap)
                except DrsvcError as err:
                    log.warning("%s: %s; retrying", follower.source.topic, err)
                    await asyncio.sleep(1.0)
                    continue
                follower.fill(gap, records)

    app.agent(topic, name=f"follow-{follower.source.topic}")(follow_syncs)


def add_stream_timer(app: Any, runner: StreamRunner, interval_s: float) -> None:
    """A timer running ``runner``'s cycle every ``interval_s``."""
    runner.topic = app.topic(
        runner.stream.plan.checkpoints_topic,
        key_type=bytes,
        value_type=bytes,
        key_serializer="raw",
        value_serializer="raw",
    )

    async def checkpoint_cycle() -> None:
        await runner.cycle()

    app.timer(interval_s, name=f"checkpoints {runner.stream.flow_id}")(checkpoint_cycle)


class StreamRunner:
    """Runs the cycles of one stream: reads in a worker thread, decisions on the loop, writes
    through faust (see :mod:`~drsvc.runtime.checkpoints.stream`)."""

    def __init__(
        self,
        stream: CheckpointStream,
        source: ClusterReader,
        target: ClusterReader,
        metrics: CheckpointMetrics,
        hook: GroupSyncHook | None = None,
        resync_s: float = 5.0,
    ) -> None:
        self.stream = stream
        self.source = source
        self.target = target
        self.metrics = metrics
        self.hook = hook
        self.topic: Any = None
        self._previous_poll: float | None = None
        self._failing = False
        self.resync_s = resync_s
        self._retry_at: dict[str, float] = {}  # group -> when to offer it again (monotonic)
        self._offered_all = False
        self._sync_failing: set[str] = set()

    async def cycle(self) -> None:
        """One cycle; failures are logged and counted, and the next cycle tries again."""
        flow = self.stream.flow_id
        # /healthz: the timer still turns (a cycle that never returns stops the ticks)
        loop_liveness().tick(f"checkpoints {flow}")
        try:
            await self._cycle()
        except Exception as err:  # the timer must keep running whatever went wrong
            self.metrics.cycle_errors.labels(flow).inc()
            if not self._failing:
                log.warning("checkpoints of %s: cycle failed: %s", flow, err, exc_info=True)
            self._failing = True
            return
        if self._failing:
            log.info("checkpoints of %s: cycles succeed again", flow)
        self._failing = False

    async def _cycle(self) -> None:
        loop = asyncio.get_running_loop()
        stream = self.stream
        observation = await loop.run_in_executor(None, stream.observe, self.source, self.target)
        for group, problem in observation.failed_groups.items():
            log.warning("checkpoints of %s: group %s skipped: %s", stream.flow_id, group, problem)
        views = stream.translate(observation)
        ends = await loop.run_in_executor(
            None, self.source.end_offsets, stream.end_offsets_needed(views)
        )
        self.metrics.record_numbers(stream.flow_id, stream.numbers(views, ends), time.time())
        emissions = stream.candidates(views, observation.read_at_ms)
        acked: list[Emission] = []
        if emissions:
            acked = await self._write(emissions)
            stream.record_emitted(acked)
            self._note_latency(acked, self._previous_poll or observation.started)
        await self._offer_to_group_sync(acked)
        self._previous_poll = observation.started

    async def _write(self, emissions: list[Emission]) -> list[Emission]:
        pending = [
            await self.topic.send(key=encode_key(e.key), value=encode_value(e.checkpoint))
            for e in emissions
        ]
        results = await asyncio.gather(*pending, return_exceptions=True)
        acked = [
            e for e, r in zip(emissions, results, strict=True) if not isinstance(r, BaseException)
        ]
        failed = [r for r in results if isinstance(r, BaseException)]
        self.metrics.emitted.labels(self.stream.flow_id).inc(len(acked))
        if failed:
            log.warning(
                "checkpoints of %s: %d of %d not acknowledged (%s); written again next cycle",
                self.stream.flow_id,
                len(failed),
                len(emissions),
                failed[0],
            )
        for e in acked:
            log.debug(
                "checkpoint %s %s-%d: %s -> %s (%s; %s)",
                e.key.group,
                e.key.topic,
                e.key.partition,
                e.checkpoint.source_offset,
                e.checkpoint.target_offset,
                e.checkpoint.reason,
                e.verdict.why,
            )
        return acked

    def _note_latency(self, acked: list[Emission], commit_not_seen_at: float) -> None:
        """Upper bound on commit-to-checkpoint latency for checkpoints with a new source offset:
        the commit happened after the previous poll started, the acknowledgement just arrived."""
        moved = [
            e
            for e in acked
            if e.previous is None or e.previous.source_offset != e.checkpoint.source_offset
        ]
        if moved:
            elapsed_ms = (time.monotonic() - commit_not_seen_at) * 1000
            self.metrics.latency_ms.labels(self.stream.flow_id).set(elapsed_ms)

    async def _offer_to_group_sync(self, acked: list[Emission]) -> None:
        """Hand groups' positions to the group offset syncer (if there is one).

        Offered are the groups whose checkpoints changed in this cycle, every group once after
        the start, and, every ``resync_s``, the groups whose last sync did not settle (it failed,
        was refused, or waits for a switch or for the application to leave the target). A rewind
        whose sync did not go through is thus offered again until it does. The retry needs no
        memory of the rewind itself: each commit of the syncer records the source position it
        was translated from, and the syncer compares that with the current one, so a restart of
        this process loses nothing (the first cycle offers every group again)."""
        if self.hook is None:
            return
        loop = asyncio.get_running_loop()
        now = time.monotonic()
        due = {group for group, at in self._retry_at.items() if at <= now}
        if not self._offered_all:
            due.update(self.stream.groups())
            self._offered_all = True
        for group in sorted(due | {e.key.group for e in acked}):
            rewound = {
                (e.key.topic, e.key.partition)
                for e in acked
                if e.key.group == group and e.verdict.rewound
            }
            offsets = self.stream.exact_positions(group)
            unknown = self.stream.unknown_positions(group)
            origins = self.stream.origins(group)
            try:
                result = await loop.run_in_executor(
                    None, self.hook.offer, group, offsets, rewound, unknown, origins
                )
            except Exception as err:  # the syncer's failure must not stop checkpointing
                self._retry_at[group] = now + self.resync_s
                if group not in self._sync_failing:
                    log.warning(
                        "group offset sync of %s on %s failed: %s (retried every %.0fs)",
                        group,
                        self.stream.flow.target,
                        err,
                        self.resync_s,
                    )
                self._sync_failing.add(group)
                continue
            self._sync_failing.discard(group)
            if result is None or result.status in SETTLED_SYNC_STATUSES:
                self._retry_at.pop(group, None)
            else:
                self._retry_at[group] = now + self.resync_s
