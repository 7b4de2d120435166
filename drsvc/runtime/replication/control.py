"""Control of a running flow: pause and resume it or single topics, throttle it; the topics a
standby flow copies and the floors below which nothing is copied (both written by failovers).

The control document lives in Consul KV at ``drsvc/<namespace>/flows/<source>/<target>/control``
(:func:`failover.naming.flow_control_key`) as JSON, so every worker of the flow, on any machine,
follows the same switch; workers read it at every topic refresh (a few seconds). No document
means: running, unthrottled.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from drsvc.adapters.consul_client import ConsulClient
from drsvc.errors import ConfigError, CoordinatorUnavailableError
from failover.stale_epochs import EpochWatch, watches_from_json, watches_to_json

if TYPE_CHECKING:
    from drsvc.runtime.replication.settings import WorkerSettings

log = logging.getLogger(__name__)

#: reads the flow's control document; None when there is no document source at all (no Consul
#: known); raises CoordinatorUnavailableError or ConfigError when it cannot be read
ControlReader = Callable[[], "FlowControl | None"]


@dataclass(frozen=True)
class FlowControl:
    paused: bool = False
    paused_topics: frozenset[str] = frozenset()
    throttle_bytes_per_s: int | None = None
    #: a ``standby`` flow copies only these topics: those of applications a failover moved to
    #: its source (see drsvc/runtime/failover/flow_switch.py); other flows ignore it
    started_topics: frozenset[str] = frozenset()
    #: per source partition, copy nothing below this offset (floors a failover or a recovery
    #: set: records that must never cross, or that the other direction already holds)
    skip_below: Mapping[tuple[str, int], int] = field(default_factory=dict)
    #: per source topic, the epoch its records must carry from an offset on (written by planned
    #: failovers away from the source; see :mod:`failover.stale_epochs`)
    epoch_watch: Mapping[str, EpochWatch] = field(default_factory=dict)

    def topic_paused(self, topic: str, *, standby: bool = False) -> bool:
        if standby and topic not in self.started_topics:
            return True
        return self.paused or topic in self.paused_topics

    def floor(self, topic: str, partition: int) -> int | None:
        return self.skip_below.get((topic, partition))

    def to_json(self) -> str:
        skip: dict[str, dict[str, int]] = {}
        for (topic, partition), offset in sorted(self.skip_below.items()):
            skip.setdefault(topic, {})[str(partition)] = offset
        return json.dumps(
            {
                "paused": self.paused,
                "paused_topics": sorted(self.paused_topics),
                "throttle_bytes_per_s": self.throttle_bytes_per_s,
                "started_topics": sorted(self.started_topics),
                "skip_below": skip,
                "epoch_watch": watches_to_json(self.epoch_watch),
            }
        )

    @classmethod
    def from_json(cls, text: str, key: str) -> FlowControl:
        try:
            raw = json.loads(text)
            throttle = raw.get("throttle_bytes_per_s")
            if throttle is not None and (not isinstance(throttle, int) or throttle <= 0):
                raise ValueError("throttle_bytes_per_s must be a positive integer or null")
            return cls(
                paused=bool(raw.get("paused", False)),
                paused_topics=frozenset(str(t) for t in raw.get("paused_topics", [])),
                throttle_bytes_per_s=throttle,
                started_topics=frozenset(str(t) for t in raw.get("started_topics", [])),
                skip_below=_floors(raw.get("skip_below", {})),
                epoch_watch=watches_from_json(raw.get("epoch_watch", {})),
            )
        except (ValueError, AttributeError, TypeError) as err:
            raise ConfigError(f"flow control document at {key} is invalid: {err}") from err


def _floors(raw: object) -> dict[tuple[str, int], int]:
    """``{"orders": {"0": 120}}`` -> ``{("orders", 0): 120}``; anything else is refused."""
    if not isinstance(raw, dict):
        raise ValueError("skip_below must be an object of topics")
    floors: dict[tuple[str, int], int] = {}
    for topic, partitions in raw.items():
        if not isinstance(partitions, dict):
            raise ValueError(f"skip_below.{topic} must be an object of partitions")
        for partition, offset in partitions.items():
            if not str(partition).isdigit():
                raise ValueError(f"skip_below.{topic}: partition {partition!r} is not a number")
            if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
                raise ValueError(
                    f"skip_below.{topic}.{partition}: {offset!r} is not an offset (an integer >= 0)"
                )
            floors[(str(topic), int(partition))] = offset
    return floors


def read_control(client: ConsulClient, key: str) -> FlowControl:
    text = client.kv_get(key)
    return FlowControl() if text is None else FlowControl.from_json(text, key)


def consul_reader(settings: WorkerSettings) -> ControlReader:
    """Reads ``settings``' control document from Consul (no document source without an agent)."""
    addr, key = settings.consul_http_addr, settings.control_key
    if addr is None or key is None:
        return lambda: None
    client = ConsulClient(addr)
    return lambda: read_control(client, key)


@dataclass
class Throttle:
    """Keeps a byte rate at or under ``bytes_per_s`` over one-second windows."""

    bytes_per_s: int | None = None
    _window_start: float = field(default_factory=time.monotonic)
    _window_bytes: int = 0

    def wait_s(self, sent_bytes: int, now: float) -> float:
        """Account ``sent_bytes``; return how long to hold back before sending more."""
        if self.bytes_per_s is None:
            return 0.0
        if now - self._window_start >= 1.0:
            self._window_start = now
            self._window_bytes = 0
        self._window_bytes += sent_bytes
        earliest = self._window_start + self._window_bytes / self.bytes_per_s
        return max(0.0, earliest - now)


class ControlFollower:
    """What one worker follows of its flow's control: the last document read, and the throttle.

    Both delivery modes use it the same way: :meth:`refresh` at every topic refresh, then follow
    :attr:`control`'s pauses; :meth:`batch_size` before reading and :meth:`sent` after copying.
    """

    def __init__(
        self,
        flow_id: str,
        read: ControlReader,
        throttle_bytes_per_s: int | None,
        *,
        standby: bool = False,
    ) -> None:
        self.flow_id = flow_id
        #: a standby flow copies only the topics a failover started (none until then)
        self.standby = standby
        self.control = FlowControl()
        self._read = read
        self._default_throttle = throttle_bytes_per_s
        self.throttle = Throttle(throttle_bytes_per_s)
        self._record_bytes = 1024

    def refresh(self) -> bool:
        """Read the control document; False (keeping the last one) when there is none to read."""
        try:
            control = self._read()
        except (CoordinatorUnavailableError, ConfigError) as err:
            log.warning("reading flow control of %s: %s (keeping the last)", self.flow_id, err)
            return False
        if control is None:
            return False
        if control != self.control:
            log.info("flow control of %s: %s", self.flow_id, control.to_json())
        self.control = control
        self.throttle.bytes_per_s = control.throttle_bytes_per_s or self._default_throttle
        return True

    def topic_paused(self, topic: str) -> bool:
        return self.control.topic_paused(topic, standby=self.standby)

    def batch_size(self, most: int) -> int:
        """Records per batch: throttled flows take about a tenth of a second's worth at a time,
        so a whole large batch never goes out in one burst."""
        rate = self.throttle.bytes_per_s
        if rate is None:
            return most
        return max(1, min(most, rate // (10 * self._record_bytes)))

    def sent(self, nbytes: int, records: int, now: float) -> float:
        """Account a batch; return how long to hold back before sending more."""
        if records:
            # Sized as if records had at least 1 KiB, so that a run of tiny records does not
            # let a burst of large ones through before the throttle sees them.
            self._record_bytes = max(1024, nbytes // records)
        return self.throttle.wait_s(nbytes, now)
