"""Heartbeat records and the freshness of a heartbeat stream.

Every cluster gets a heartbeat record every second or so in its ``heartbeats`` topic; flows copy
them like a topic of their own (``east.heartbeats`` on west). How long ago the observed heartbeat
offset last advanced says whether a source is alive and reaching the observer.

Wire format of the record value (big-endian), version 1::

    u8  version (=1)
    u8  length of the source alias (1-255), then the alias (UTF-8)
    i64 emit time, milliseconds since the epoch, on the emitter's wall clock
    u64 emitter id: random, drawn once when an emitter starts
    u64 sequence: per emitter, counting from 0

The record key is the source alias (UTF-8), so every heartbeat of one source lands in the same
partition whatever the topic's partition count. A reader never compares the emit time with its own
clock: clocks of different machines disagree, and freshness is measured on the observer's
monotonic clock alone (:class:`FreshnessTracker`). Emitter id and sequence let a reader tell a
restarted emitter from lost heartbeats.

A decoder refuses versions it does not know with :class:`HeartbeatFormatError` instead of guessing;
the observer still counts such a record as a heartbeat of the topic it arrived on.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from enum import StrEnum

from failover.errors import HeartbeatFormatError

HEARTBEAT_VERSION = 1

_MAX_ALIAS_BYTES = 0xFF
_TAIL = struct.Struct(">qQQ")
_MAX_U64 = (1 << 64) - 1
_MIN_I64 = -(1 << 63)
_MAX_I64 = (1 << 63) - 1


@dataclass(frozen=True, slots=True)
class Heartbeat:
    """One heartbeat: ``source`` was alive at ``emitted_at_ms`` (its own clock)."""

    source: str
    emitted_at_ms: int
    emitter_id: int
    sequence: int


def encode_key(source: str) -> bytes:
    """The record key of every heartbeat of ``source``."""
    return _alias_bytes(source)


def encode(heartbeat: Heartbeat) -> bytes:
    """The record value of ``heartbeat`` in the current version."""
    alias = _alias_bytes(heartbeat.source)
    if not _MIN_I64 <= heartbeat.emitted_at_ms <= _MAX_I64:
        raise HeartbeatFormatError(f"emit time {heartbeat.emitted_at_ms} does not fit in 64 bits")
    for label, value in (("emitter id", heartbeat.emitter_id), ("sequence", heartbeat.sequence)):
        if not 0 <= value <= _MAX_U64:
            raise HeartbeatFormatError(f"{label} {value} must be between 0 and 2^64-1")
    return (
        bytes((HEARTBEAT_VERSION, len(alias)))
        + alias
        + _TAIL.pack(heartbeat.emitted_at_ms, heartbeat.emitter_id, heartbeat.sequence)
    )


def decode(value: bytes | None) -> Heartbeat:
    """Parse a record value; raise :class:`HeartbeatFormatError` naming what is wrong."""
    if not value:
        raise HeartbeatFormatError("heartbeat record is empty")
    if value[0] != HEARTBEAT_VERSION:
        raise HeartbeatFormatError(
            f"heartbeat record version {value[0]} is not supported (this drsvc reads "
            f"version {HEARTBEAT_VERSION}); upgrade the observer"
        )
    if len(value) < 2:
        raise HeartbeatFormatError("heartbeat record is truncated before the source alias")
    alias_end = 2 + value[1]
    if value[1] == 0:
        raise HeartbeatFormatError("heartbeat record has an empty source alias")
    if len(value) != alias_end + _TAIL.size:
        raise HeartbeatFormatError(
            f"heartbeat record has {len(value)} bytes; version {HEARTBEAT_VERSION} with a"
            f" {value[1]}-byte alias has {alias_end + _TAIL.size}"
        )
    try:
        source = value[2:alias_end].decode()
    except UnicodeDecodeError as err:
        raise HeartbeatFormatError(f"heartbeat source alias is not UTF-8: {err}") from err
    emitted_at_ms, emitter_id, sequence = _TAIL.unpack_from(value, alias_end)
    return Heartbeat(source, emitted_at_ms, emitter_id, sequence)


def _alias_bytes(source: str) -> bytes:
    alias = source.encode()
    if not alias or len(alias) > _MAX_ALIAS_BYTES:
        raise HeartbeatFormatError(f"source alias {source!r} must be 1-255 bytes of UTF-8")
    return alias


# -- freshness ------------------------------------------------------------------------------------


class FreshnessState(StrEnum):
    """What an observer can say about a source."""

    #: the heartbeat offset advanced within the threshold
    FRESH = "fresh"
    #: it has not advanced for longer than the threshold (or never, while watched that long)
    STALE = "stale"
    #: watched for less than the threshold and not seen advancing yet
    UNKNOWN = "unknown"


@dataclass(frozen=True, slots=True)
class Freshness:
    """Freshness of one heartbeat stream at one moment.

    ``seconds`` is the time since the observed offset last advanced; before the first advance it
    is the time since watching began, a lower bound of the true age.
    """

    seconds: float
    state: FreshnessState
    last_offset: int | None
    advances: int

    @property
    def seen(self) -> bool:
        """Whether the offset was ever seen advancing."""
        return self.advances > 0


class FreshnessTracker:
    """Freshness of one heartbeat stream from observations ``(offset, monotonic time)``.

    Invariants:

    - only the observer's monotonic clock is used: ``now`` values come from one clock and do not
      go backwards (a smaller ``now`` is treated as no time passing);
    - the offset *advances* when an observation differs from the last one. A smaller offset counts
      too: the topic was deleted and recreated, and a new record still arrived. The same offset
      observed again is no news, however often it is observed;
    - :meth:`baseline` records an offset known when watching begins without calling it an
      advance: nobody knows when that record was written.
    """

    def __init__(self, stale_after_s: float, started_at: float) -> None:
        if stale_after_s <= 0:
            raise ValueError(f"stale_after_s must be positive (got {stale_after_s})")
        self.stale_after_s = stale_after_s
        self._started_at = started_at
        self._last_offset: int | None = None
        self._advanced_at: float | None = None
        self._advances = 0
        self._latest_now = started_at

    def baseline(self, offset: int) -> None:
        """Note ``offset`` as already there when watching began (no advance)."""
        if self._last_offset is None:
            self._last_offset = offset

    def observe(self, offset: int, now: float) -> bool:
        """Note that ``offset`` was observed at ``now``; return whether it advanced."""
        now = max(now, self._latest_now)
        self._latest_now = now
        if offset == self._last_offset:
            return False
        self._last_offset = offset
        self._advanced_at = now
        self._advances += 1
        return True

    def freshness(self, now: float) -> Freshness:
        """Freshness at ``now``."""
        now = max(now, self._latest_now)
        since = self._advanced_at if self._advanced_at is not None else self._started_at
        seconds = max(0.0, now - since)
        if seconds > self.stale_after_s:
            state = FreshnessState.STALE
        elif self._advanced_at is None:
            state = FreshnessState.UNKNOWN
        else:
            state = FreshnessState.FRESH
        return Freshness(seconds, state, self._last_offset, self._advances)
