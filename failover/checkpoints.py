"""Checkpoints: a consumer group's committed position, translated for another cluster.

A checkpoint stream follows the consumer groups on a flow's source, translates each committed
offset through the offset syncs and writes one *checkpoint* per (group, topic, partition) to
``<source>.checkpoints.internal`` on the flow's target, a compacted topic: the newest checkpoint of
a key is where the group would continue on the target right now.

This module holds what the stream decides, with no I/O:

* the versioned record format (:func:`encode_key`, :func:`encode_value` and their decoders), drawn
  byte by byte in ``docs/checkpoints.md``; values are written in version 2 (which carries the
  topic ids of both sides) and versions 1 and 2 are read; a reader refuses a version it does not
  know with a :class:`CheckpointFormatError` naming it, and never guesses;
* the monotonicity rule (:func:`decide`): a checkpoint replaces the previous one of its key only
  when the translated target offset moves forward, when the source group itself went back
  (rewound), or when the topic on either side was recreated (another topic id: offsets of the
  old incarnation say nothing about the new one); a translation that became unknown never hides a
  known position, and nothing moves backwards because an index is behind;
* what a failover right now would cost each partition (:func:`exposure`): the records it would lose
  and the records it would read twice.

Offsets, not records, are counted: transaction markers and records removed by compaction take
offsets too, so both numbers are upper bounds on records (exact for plain topics).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Literal, NamedTuple

from failover.errors import CheckpointFormatError
from failover.translation import Reason

__all__ = [
    "DOWNSTREAM",
    "KEY_MAGIC",
    "KEY_VERSION",
    "TOPIC_ID_BYTES",
    "UPSTREAM",
    "VALUE_MAGIC",
    "VALUE_VERSION",
    "VALUE_VERSIONS_READ",
    "Checkpoint",
    "CheckpointFormatError",
    "CheckpointKey",
    "Direction",
    "Exposure",
    "Verdict",
    "decide",
    "decode_key",
    "decode_value",
    "encode_key",
    "encode_value",
    "exposure",
]

Direction = Literal["downstream", "upstream"]
DOWNSTREAM: Direction = "downstream"
"""Failover: the group read a topic on the flow's source, its copy on the target continues it."""
UPSTREAM: Direction = "upstream"
"""Failback: the group read a copy on the flow's source, the original on the target continues it."""

KEY_MAGIC = 0xDA
KEY_VERSION = 1
VALUE_MAGIC = 0xDB
VALUE_VERSION = 2
"""The version :func:`encode_value` writes."""
VALUE_VERSIONS_READ = (1, 2)
"""The versions :func:`decode_value` reads."""
TOPIC_ID_BYTES = 16
_UNKNOWN_ID = bytes(TOPIC_ID_BYTES)  # Kafka never assigns the all-zero topic id

_KEY_HEAD = struct.Struct(">BB")  # magic, version
_LENGTH16 = struct.Struct(">H")
_PARTITION = struct.Struct(">i")
_VALUE_HEAD = struct.Struct(">BBBqqqq")  # magic, version, flags, offsets, pending, time
_VALUE_FIXED = struct.Struct(">Bqqqq")  # the same after magic and version
_TOPIC_IDS = struct.Struct(">16s16s")  # version 2: source topic id, target topic id
_LENGTH8 = struct.Struct(">B")
_LENGTH32 = struct.Struct(">I")

_TARGET_KNOWN = 0x01
_EXACT = 0x02
_UPSTREAM = 0x04
_KNOWN_FLAGS = _TARGET_KNOWN | _EXACT | _UPSTREAM

_MAX_NAME_BYTES = 0xFFFF
_MAX_REASON_BYTES = 0xFF
_MAX_METADATA_BYTES = 1 << 20  # far above Kafka's offset.metadata.max.bytes (4096 by default)
_MAX_OFFSET = (1 << 63) - 1


class CheckpointKey(NamedTuple):
    """What a checkpoint is about: a group and a partition of the topic it continues on.

    ``topic`` is the name on the flow's *target*, where the group would continue: the remote topic
    (``east.orders``) for a downstream checkpoint, the original (``orders``) for an upstream one.
    """

    group: str
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """Where a group would continue one partition on the flow's target.

    ``source_*`` describe the group's committed position on the flow's source (``source_topic`` is
    the topic the group reads there), ``target_offset`` the translated position on the target,
    ``None`` when it cannot be known, with ``reason`` saying why (a :class:`Reason` value, or one
    of the service's own reasons such as ``topic-missing``). ``pending`` counts the offsets the
    translation could not cover (see :class:`failover.translation.Translation`). ``metadata`` is
    the metadata string the consumer committed with its offset. ``time_ms`` is when the committed
    offset was read (epoch milliseconds).

    ``source_topic_id`` is the id of ``source_topic`` on the flow's source and
    ``target_topic_id`` the id of the key's topic on the target, when known (16 bytes; None when
    unknown, and always None in a version 1 record). They tell a recreated topic from the old one:
    offsets of different incarnations cannot be compared (:func:`decide`).
    """

    source_topic: str
    source_offset: int
    target_offset: int | None
    reason: str
    direction: Direction = DOWNSTREAM
    pending: int = 0
    metadata: str = ""
    time_ms: int = 0
    source_topic_id: bytes | None = None
    target_topic_id: bytes | None = None

    @property
    def exact(self) -> bool:
        """A consumer starting at ``target_offset`` neither skips nor re-reads a record."""
        return self.reason == Reason.EXACT

    @property
    def known(self) -> bool:
        """A target offset was determined (exact or not)."""
        return self.target_offset is not None


def _problem(checkpoint: Checkpoint) -> str | None:
    """Why ``checkpoint`` cannot be encoded, or None."""
    if not checkpoint.source_topic:
        return "source topic is empty"
    if not 0 <= checkpoint.source_offset <= _MAX_OFFSET:
        return f"source offset {checkpoint.source_offset} is out of range"
    if checkpoint.target_offset is not None and not 0 <= checkpoint.target_offset <= _MAX_OFFSET:
        return f"target offset {checkpoint.target_offset} is out of range"
    if checkpoint.exact and checkpoint.target_offset is None:
        return "an exact checkpoint needs a target offset"
    if not 0 <= checkpoint.pending <= _MAX_OFFSET:
        return f"pending {checkpoint.pending} is out of range"
    if not 0 <= checkpoint.time_ms <= _MAX_OFFSET:
        return f"time {checkpoint.time_ms} is out of range"
    if checkpoint.direction not in (DOWNSTREAM, UPSTREAM):
        return f"direction {checkpoint.direction!r} is neither downstream nor upstream"
    if not checkpoint.reason or not checkpoint.reason.isascii():
        return f"reason {checkpoint.reason!r} must be non-empty ASCII"
    if len(checkpoint.reason) > _MAX_REASON_BYTES:
        return f"reason of {len(checkpoint.reason)} characters is too long"
    for side, topic_id in (
        ("source", checkpoint.source_topic_id),
        ("target", checkpoint.target_topic_id),
    ):
        if topic_id is not None and (len(topic_id) != TOPIC_ID_BYTES or topic_id == _UNKNOWN_ID):
            return f"{side} topic id must be {TOPIC_ID_BYTES} bytes, not all zero, or None"
    return None


# -- the record key -----------------------------------------------------------------------------


def encode_key(key: CheckpointKey) -> bytes:
    """The Kafka message key of ``key`` in format version :data:`KEY_VERSION`.

    One key per (group, topic, partition): compaction keeps the newest checkpoint of each.
    """
    group = key.group.encode("utf-8")
    topic = key.topic.encode("utf-8")
    if not group or len(group) > _MAX_NAME_BYTES:
        raise CheckpointFormatError(f"group name of {len(group)} bytes cannot be encoded")
    if not topic or len(topic) > _MAX_NAME_BYTES:
        raise CheckpointFormatError(f"topic name of {len(topic)} bytes cannot be encoded")
    if not 0 <= key.partition <= 0x7FFF_FFFF:
        raise CheckpointFormatError(f"partition {key.partition} cannot be encoded")
    return b"".join(
        (
            _KEY_HEAD.pack(KEY_MAGIC, KEY_VERSION),
            _LENGTH16.pack(len(group)),
            group,
            _LENGTH16.pack(len(topic)),
            topic,
            _PARTITION.pack(key.partition),
        )
    )


def decode_key(data: bytes) -> CheckpointKey:
    """Read a key written by :func:`encode_key` (any version this build knows)."""
    reader = _Reader(data, "checkpoint key")
    reader.header(KEY_MAGIC, (KEY_VERSION,))
    group = reader.text(_LENGTH16)
    topic = reader.text(_LENGTH16)
    (partition,) = reader.unpack(_PARTITION)
    reader.finish()
    if not group or not topic or partition < 0:
        raise CheckpointFormatError(
            f"checkpoint key names an invalid partition: group {group!r}, {topic!r}-{partition}"
        )
    return CheckpointKey(group, topic, partition)


# -- the record value ---------------------------------------------------------------------------


def encode_value(checkpoint: Checkpoint) -> bytes:
    """The Kafka message value of ``checkpoint`` in format version :data:`VALUE_VERSION`."""
    problem = _problem(checkpoint)
    if problem is not None:
        raise CheckpointFormatError(f"checkpoint cannot be encoded: {problem}")
    flags = (
        (_TARGET_KNOWN if checkpoint.target_offset is not None else 0)
        | (_EXACT if checkpoint.exact else 0)
        | (_UPSTREAM if checkpoint.direction == UPSTREAM else 0)
    )
    reason = checkpoint.reason.encode("ascii")
    source_topic = checkpoint.source_topic.encode("utf-8")
    metadata = checkpoint.metadata.encode("utf-8")
    if len(source_topic) > _MAX_NAME_BYTES:
        raise CheckpointFormatError(f"source topic of {len(source_topic)} bytes is too long")
    if len(metadata) > _MAX_METADATA_BYTES:
        raise CheckpointFormatError(f"commit metadata of {len(metadata)} bytes is too long")
    target = -1 if checkpoint.target_offset is None else checkpoint.target_offset
    return b"".join(
        (
            _VALUE_HEAD.pack(
                VALUE_MAGIC,
                VALUE_VERSION,
                flags,
                checkpoint.source_offset,
                target,
                checkpoint.pending,
                checkpoint.time_ms,
            ),
            _TOPIC_IDS.pack(
                checkpoint.source_topic_id or _UNKNOWN_ID, checkpoint.target_topic_id or _UNKNOWN_ID
            ),
            _LENGTH8.pack(len(reason)),
            reason,
            _LENGTH16.pack(len(source_topic)),
            source_topic,
            _LENGTH32.pack(len(metadata)),
            metadata,
        )
    )


def decode_value(data: bytes) -> Checkpoint:
    """Read a value written by :func:`encode_value` (any version this build knows)."""
    reader = _Reader(data, "checkpoint value")
    version = reader.header(VALUE_MAGIC, VALUE_VERSIONS_READ)
    flags, source_offset, target, pending, time_ms = reader.unpack(_VALUE_FIXED)
    source_id, target_id = _UNKNOWN_ID, _UNKNOWN_ID
    if version >= 2:
        source_id, target_id = reader.unpack_bytes(_TOPIC_IDS)
    reason = reader.text(_LENGTH8, encoding="ascii")
    source_topic = reader.text(_LENGTH16)
    metadata = reader.text(_LENGTH32)
    reader.finish()
    if flags & ~_KNOWN_FLAGS:
        raise CheckpointFormatError(f"checkpoint value has unknown flags 0x{flags:02x}")
    known = bool(flags & _TARGET_KNOWN)
    if known != (target >= 0):
        raise CheckpointFormatError(
            f"checkpoint value says the target offset is {'known' if known else 'unknown'} "
            f"but holds {target}"
        )
    checkpoint = Checkpoint(
        source_topic=source_topic,
        source_offset=source_offset,
        target_offset=target if known else None,
        reason=reason,
        direction=UPSTREAM if flags & _UPSTREAM else DOWNSTREAM,
        pending=pending,
        metadata=metadata,
        time_ms=time_ms,
        source_topic_id=None if source_id == _UNKNOWN_ID else source_id,
        target_topic_id=None if target_id == _UNKNOWN_ID else target_id,
    )
    if bool(flags & _EXACT) != checkpoint.exact:
        raise CheckpointFormatError(
            f"checkpoint value's exact flag contradicts its reason {reason!r}"
        )
    problem = _problem(checkpoint)
    if problem is not None:
        raise CheckpointFormatError(f"invalid checkpoint value: {problem}")
    return checkpoint


class _Reader:
    """Reads length-prefixed fields, turning every short read into a CheckpointFormatError."""

    __slots__ = ("data", "pos", "what")

    def __init__(self, data: bytes, what: str) -> None:
        self.data = bytes(data)
        self.pos = 0
        self.what = what

    def header(self, magic: int, versions: tuple[int, ...]) -> int:
        """Check the magic byte and the version (one of ``versions``); return the version."""
        if len(self.data) < 2:
            raise CheckpointFormatError(f"truncated {self.what}: {len(self.data)} bytes")
        if self.data[0] != magic:
            raise CheckpointFormatError(
                f"not a {self.what}: magic byte 0x{self.data[0]:02x}, expected 0x{magic:02x}"
            )
        if self.data[1] not in versions:
            known = " and ".join(str(v) for v in versions)
            plural = "s" if len(versions) > 1 else ""
            raise CheckpointFormatError(
                f"unsupported {self.what} version {self.data[1]} (this build reads version"
                f"{plural} {known}); upgrade drsvc where checkpoints are read before where they "
                "are written"
            )
        self.pos = 2
        return self.data[1]

    def unpack(self, layout: struct.Struct) -> tuple[int, ...]:
        if self.pos + layout.size > len(self.data):
            raise CheckpointFormatError(f"truncated {self.what}")
        values = layout.unpack_from(self.data, self.pos)
        self.pos += layout.size
        return tuple(values)

    def unpack_bytes(self, layout: struct.Struct) -> tuple[bytes, ...]:
        if self.pos + layout.size > len(self.data):
            raise CheckpointFormatError(f"truncated {self.what}")
        values = layout.unpack_from(self.data, self.pos)
        self.pos += layout.size
        return tuple(values)

    def text(self, length_layout: struct.Struct, encoding: str = "utf-8") -> str:
        (length,) = self.unpack(length_layout)
        if self.pos + length > len(self.data):
            raise CheckpointFormatError(f"truncated {self.what}")
        raw = self.data[self.pos : self.pos + length]
        self.pos += length
        try:
            return raw.decode(encoding)
        except UnicodeDecodeError as exc:
            raise CheckpointFormatError(f"{self.what} holds text that is not {encoding}") from exc

    def finish(self) -> None:
        if self.pos != len(self.data):
            raise CheckpointFormatError(
                f"{self.what} has {len(self.data) - self.pos} trailing bytes"
            )


# -- monotonicity -------------------------------------------------------------------------------


class Verdict(NamedTuple):
    """Whether a new checkpoint replaces the previous one of its key, and why."""

    emit: bool
    rewound: bool
    why: str


def decide(previous: Checkpoint | None, candidate: Checkpoint) -> Verdict:
    """Whether ``candidate`` replaces ``previous`` (the newest checkpoint of the same key).

    The target offset of a key only moves forward. There are two exceptions, both flagged
    ``rewound`` (the target group may have to go back too):

    * the topic on either side was recreated: both checkpoints know the topic id of the same side
      and the ids differ. Offsets of the old incarnation say nothing about the new one (a
      recreated remote topic is copied again from the start, at lower offsets), so the candidate,
      known or not, replaces the old position whatever its offsets. With an id unknown on either
      side the offsets are compared as below;
    * the source group itself went back (its committed offset is lower than before: reset by an
      operator, or the source topic recreated without the ids known): then the new position,
      known or not, is the truth and replaces the old one.

    Otherwise:

    * a known target offset never gives way to an unknown one (the index may just be behind);
    * a lower target offset never replaces a higher one;
    * at the same target offset, a newer source offset or a change of exactness is written (a
      refresh: the position stays where it was), anything else is not (nothing changed).
    """
    if previous is None:
        return Verdict(True, False, "first checkpoint of the key")
    if _recreated(previous.target_topic_id, candidate.target_topic_id):
        return Verdict(True, True, "the target topic was recreated (new topic id)")
    if _recreated(previous.source_topic_id, candidate.source_topic_id):
        return Verdict(True, True, "the source topic was recreated (new topic id)")
    if candidate.source_offset < previous.source_offset:
        return Verdict(True, True, "the source group went back")
    if candidate.target_offset is None:
        if previous.target_offset is None and candidate.reason != previous.reason:
            return Verdict(True, False, "still unknown, for another reason")
        if previous.target_offset is None:
            return Verdict(False, False, "unchanged")
        return Verdict(False, False, "a known position is kept while the translation is unknown")
    if previous.target_offset is None:
        return Verdict(True, False, "translated for the first time")
    if candidate.target_offset > previous.target_offset:
        return Verdict(True, False, "the target offset moved forward")
    if candidate.target_offset < previous.target_offset:
        return Verdict(False, False, "the target offset would move backwards")
    if candidate.source_offset > previous.source_offset or candidate.exact != previous.exact:
        return Verdict(True, False, "same target offset, newer source position")
    return Verdict(False, False, "unchanged")


def _recreated(before: bytes | None, now: bytes | None) -> bool:
    """Both ids are known and differ: the topic was deleted and created again."""
    return before is not None and now is not None and before != now


# -- what a failover right now would cost -------------------------------------------------------


_REREAD_REASONS = frozenset({Reason.AHEAD_OF_SYNCS.value, Reason.RECOPY_BEHIND.value})
"""Known translations whose ``pending`` offsets a consumer starting there reads again."""


class Exposure(NamedTuple):
    """Per partition: records a failover right now would lose, and records it would re-read.

    ``None`` where the inputs do not allow an answer (no source end offset, or no known
    translation for the re-read count).
    """

    would_lose: int | None
    would_reread: int | None


def exposure(
    direction: Direction,
    *,
    committed: int,
    reason: str,
    known: bool,
    pending: int,
    frontier: int | None,
    source_end: int | None,
) -> Exposure:
    """What failing a group over right now costs one partition.

    Downstream (the group reads a topic of the flow's source; ``frontier`` is the replicated
    position, one past the highest source offset any replication pass has copied
    (:meth:`failover.offset_index.OffsetIndex.replicated_end`): the records before it are on the
    target; ``source_end`` is the source partition's end offset):

    * would lose = ``source_end - max(committed, frontier)``: records the group has not consumed
      and that are not on the target yet. Nothing replicated yet (no frontier) loses everything
      the group has not consumed.
    * would re-read = records between the translated position and the group's true position, the
      translation's ``pending`` for the two reasons that leave some: ``ahead-of-syncs`` (records
      the group consumed on the source that are not replicated yet, ``committed - frontier``: the
      consumer starts after the last copy, and those records come back to it if the source site
      recovers and replication resumes) and ``recopy-behind`` (a re-copy pass after a worker
      restart has not caught up yet: the position is after the newest copy of the pass, so copies
      of records the group consumed are read again). Zero for an exact translation, which drsvc's
      is whenever it is known and no re-copy is behind.

    Upstream (the group reads a copy; the originals are on the target): nothing is lost; copies it
    read past what the syncs cover (``pending`` of an ahead-of-syncs or recopy-behind translation)
    are re-read.
    """
    reread: int | None = None
    if known:
        reread = pending if reason in _REREAD_REASONS else 0
    if direction == UPSTREAM:
        return Exposure(0, reread)
    if source_end is None:
        return Exposure(None, reread)
    consumed_or_copied = committed if frontier is None else max(committed, frontier)
    return Exposure(max(0, source_end - consumed_or_copied), reread)
