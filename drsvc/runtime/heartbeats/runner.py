"""The heartbeats role: an emitter for every cluster of a topology plus the freshness observers,
with a log line whenever a source turns stale or recovers."""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field

from drsvc.errors import ConfigError
from drsvc.kafka.clients import KafkaClients
from drsvc.kafka.clock import Clock
from drsvc.runtime.heartbeats.emitter import EmitterSettings, HeartbeatEmitter
from drsvc.runtime.heartbeats.observer import FreshnessKey, HeartbeatObserver, ObserverSettings
from drsvc.runtime.liveness import loop_liveness
from drsvc.topology.models import Topology
from failover.heartbeats import Freshness, FreshnessState

log = logging.getLogger(__name__)


def check_timing(interval_s: float, stale_after_s: float) -> None:
    """Refuse an interval and threshold that would make every source flap between states."""
    if interval_s <= 0:
        raise ConfigError(f"--interval-s must be positive (got {interval_s})")
    if stale_after_s <= interval_s:
        raise ConfigError(
            f"--stale-after-s ({stale_after_s}) must be longer than --interval-s ({interval_s});"
            " three intervals or more keeps one late heartbeat from raising an alarm"
        )


@dataclass
class FreshnessLog:
    """Logs each (observer, source) pair once when it turns stale and once when it recovers."""

    logger: logging.Logger = field(default_factory=lambda: log)
    states: dict[FreshnessKey, FreshnessState] = field(default_factory=dict)
    stale_since: dict[FreshnessKey, float] = field(default_factory=dict)

    def update(self, freshness: Mapping[FreshnessKey, Freshness], now: float) -> None:
        for key, fresh in freshness.items():
            before = self.states.get(key, FreshnessState.UNKNOWN)
            if fresh.state == before:
                continue
            self.states[key] = fresh.state
            observer, source = key
            what = (
                f"{observer}'s own heartbeats"
                if observer == source
                else f"heartbeats of {source} on {observer}"
            )
            if fresh.state == FreshnessState.STALE:
                self.stale_since[key] = now - fresh.seconds
                self.logger.warning(
                    "%s are stale: %s for %.1fs",
                    what,
                    "not advancing" if fresh.seen else "not seen",
                    fresh.seconds,
                )
            elif fresh.state == FreshnessState.FRESH:
                since = self.stale_since.pop(key, None)
                if since is None:
                    self.logger.info("%s are fresh", what)
                else:
                    self.logger.info(
                        "%s are fresh again (had not advanced for %.1fs)", what, now - since
                    )


class HeartbeatRunner:
    """Emitters for every cluster of the topology and observers on them, with their clients
    from one factory (``clients``, default: one over ``topology`` and ``bootstrap``) and their
    time from its clock, or from ``clock``."""

    def __init__(
        self,
        topology: Topology,
        bootstrap: Mapping[str, str],
        *,
        interval_s: float = 1.0,
        stale_after_s: float = 5.0,
        emit: bool = True,
        clients: KafkaClients | None = None,
        clock: Clock | None = None,
    ) -> None:
        check_timing(interval_s, stale_after_s)
        self.interval_s = interval_s
        kafka = clients if clients is not None else KafkaClients(topology, bootstrap, clock=clock)
        timing = clock if clock is not None else kafka.clock
        topic = topology.internal_names().heartbeats
        self.emitters = (
            [
                HeartbeatEmitter(
                    EmitterSettings(
                        cluster=alias,
                        client=cluster.client_config(bootstrap.get(alias)),
                        topic=topic,
                        interval_s=interval_s,
                    ),
                    clients=kafka,
                    clock=timing,
                )
                for alias, cluster in sorted(topology.clusters.items())
            ]
            if emit
            else []
        )
        self.observer = HeartbeatObserver(
            topology,
            bootstrap,
            ObserverSettings(stale_after_s=stale_after_s),
            clients=kafka,
            clock=timing,
        )
        self.transitions = FreshnessLog()
        self._clock = timing

    def start(self) -> None:
        for emitter in self.emitters:
            emitter.start()
        self.observer.start()

    def stop(self) -> None:
        for emitter in self.emitters:
            emitter.request_stop()  # all at once, so the waits below overlap
        for emitter in self.emitters:
            emitter.stop()
        self.observer.stop()

    def run(self, stop: threading.Event) -> None:
        """Run until ``stop`` is set, logging freshness transitions."""
        self.start()
        try:
            while not stop.wait(min(0.5, self.interval_s)):
                loop_liveness().tick("heartbeats")
                self.transitions.update(self.observer.freshness(), self._clock.monotonic())
        finally:
            self.stop()
