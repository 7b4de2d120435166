"""Offset syncs: what a replicator worker records about where each copied record landed.

For every delivered batch of source partition ``P`` of topic ``T`` the worker emits one *offset
sync* to ``drsvc.offset-syncs.<source>`` on the target. A sync describes one *run*: the worker's
consumer read source positions ``[source_begin, source_end)`` and copied every record it read there
to the target. The copies are listed as gap-aware *segments* ``(source_offset, target_offset,
count)``: inside a segment both logs advance by one together, and a new segment starts whenever
either side jumps (compacted or aborted source records, transaction markers on either side).

Invariants of an :class:`OffsetSync` (checked on construction, so a decoded sync always holds them):

* ``0 <= source_begin <= source_end``; the segments' source offsets lie in that range;
* segments have ``count >= 1`` and are strictly increasing and non-overlapping on *both* sides;
* the source positions of ``[source_begin, source_end)`` that no segment covers held nothing a
  ``read_committed`` consumer returns (compacted, control or aborted records) when the run was read;
* all records of a run were read under one source leader epoch (``-1`` when unknown); the worker
  starts a new sync when the epoch changes.

The wire format (record key and value) is versioned; ``docs/offset-syncs.md`` draws the byte
layout. :class:`SyncBuilder` turns delivery reports into syncs that always fit the format.

Nothing here performs I/O.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import NamedTuple

from failover.errors import SyncFormatError

__all__ = [
    "KEY_MAGIC",
    "KEY_VERSION",
    "MAX_GAP",
    "MAX_SEGMENTS_PER_SYNC",
    "TOPIC_ID_SIZE",
    "VALUE_MAGIC",
    "VALUE_VERSION",
    "ZERO_TOPIC_ID",
    "OffsetSync",
    "Segment",
    "SyncBuilder",
    "SyncFormatError",
    "TopicPartition",
    "decode_key",
    "decode_sync",
    "decode_value",
    "encode_key",
    "encode_sync",
    "encode_value",
]

TOPIC_ID_SIZE = 16
"""Kafka topic ids are 16-byte UUIDs."""

ZERO_TOPIC_ID = bytes(TOPIC_ID_SIZE)
"""Kafka's "no id" value, used by brokers that do not assign topic ids."""

KEY_MAGIC = 0xD6
KEY_VERSION = 1
VALUE_MAGIC = 0xD5
VALUE_VERSION = 1

MAX_GAP = 0xFFFF_FFFF
"""Largest jump between two segments of one sync, on either side (the format stores 32 bits)."""

MAX_COUNT = 0xFFFF_FFFF
"""Largest number of records in one segment of one sync."""

MAX_SEGMENTS_PER_SYNC = 50_000
"""Upper bound on segments in one sync; keeps a value (12 bytes a segment) far below 1 MiB."""

_MAX_OFFSET = (1 << 63) - 1
_MAX_TOPIC_BYTES = 249 * 4  # Kafka topic names are at most 249 characters.

_KEY_HEAD = struct.Struct(">BBH")  # magic, version, topic length
_KEY_TAIL = struct.Struct(">i")  # partition
_VALUE_HEAD = struct.Struct(">BBi16s16sqqqI")
_SEGMENT = struct.Struct(">III")  # source gap, target gap, count


class TopicPartition(NamedTuple):
    """A source topic partition, by name."""

    topic: str
    partition: int


class Segment(NamedTuple):
    """``length`` copies: source ``source_offset + i`` is at target ``target_offset + i``."""

    source_offset: int
    target_offset: int
    length: int

    @property
    def source_end(self) -> int:
        """First source offset after the segment."""
        return self.source_offset + self.length

    @property
    def target_end(self) -> int:
        """First target offset after the segment."""
        return self.target_offset + self.length


@dataclass(frozen=True, slots=True)
class OffsetSync:
    """One run of copied records of one source partition (see the module docstring)."""

    topic: str
    partition: int
    source_topic_id: bytes
    target_topic_id: bytes
    leader_epoch: int
    source_begin: int
    source_end: int
    segments: tuple[Segment, ...] = ()

    def __post_init__(self) -> None:
        problem = _check_sync(self)
        if problem is not None:
            raise SyncFormatError(
                f"invalid offset sync for {self.topic}-{self.partition}: {problem}"
            )

    @property
    def tp(self) -> TopicPartition:
        """The source topic partition the sync is about."""
        return TopicPartition(self.topic, self.partition)

    @property
    def record_count(self) -> int:
        """Number of copied records the sync describes."""
        return sum(segment.length for segment in self.segments)

    def copies(self) -> Iterator[tuple[int, int]]:
        """Every ``(source_offset, target_offset)`` pair, in order (for tests and tools)."""
        for source, target, count in self.segments:
            for i in range(count):
                yield source + i, target + i


def _check_sync(sync: OffsetSync) -> str | None:
    if not sync.topic:
        return "topic is empty"
    if not 0 <= sync.partition <= 0x7FFF_FFFF:
        return f"partition {sync.partition} is out of range"
    for name in ("source_topic_id", "target_topic_id"):
        value = getattr(sync, name)
        if not isinstance(value, bytes) or len(value) != TOPIC_ID_SIZE:
            return f"{name} must be {TOPIC_ID_SIZE} bytes"
    if not -1 <= sync.leader_epoch <= 0x7FFF_FFFF:
        return f"leader epoch {sync.leader_epoch} is out of range"
    if not 0 <= sync.source_begin <= sync.source_end <= _MAX_OFFSET:
        return f"source range [{sync.source_begin}, {sync.source_end}) is not a valid range"
    if len(sync.segments) > MAX_SEGMENTS_PER_SYNC:
        return f"{len(sync.segments)} segments exceed the limit of {MAX_SEGMENTS_PER_SYNC}"
    source_floor = sync.source_begin
    target_floor = 0
    for index, (source, target, count) in enumerate(sync.segments):
        if not 1 <= count <= MAX_COUNT:
            return f"segment {index} has count {count}"
        if source < source_floor or target < target_floor:
            return f"segment {index} overlaps or precedes the previous one (or the run's start)"
        if source - source_floor > MAX_GAP or (index > 0 and target - target_floor > MAX_GAP):
            return f"segment {index} jumps more than {MAX_GAP} offsets; split the run"
        source_floor = source + count
        target_floor = target + count
        if target_floor > _MAX_OFFSET:
            return f"segment {index} ends beyond the largest offset"
    if source_floor > sync.source_end:
        return f"segments reach source offset {source_floor}, past source_end {sync.source_end}"
    return None


# -- the record key -----------------------------------------------------------------------------


def encode_key(topic: str, partition: int) -> bytes:
    """The Kafka message key of every sync of ``topic``-``partition``.

    The key is the same for all syncs of a partition, so the default partitioner sends them all to
    one partition of the sync topic, in order. Use a delete-retention sync topic (see the docs):
    compacting on this key would keep only the latest sync of each partition.
    """
    raw = topic.encode("utf-8")
    if not raw or len(raw) > _MAX_TOPIC_BYTES:
        raise SyncFormatError(f"topic name of {len(raw)} bytes cannot be encoded in a sync key")
    if not 0 <= partition <= 0x7FFF_FFFF:
        raise SyncFormatError(f"partition {partition} cannot be encoded in a sync key")
    return _KEY_HEAD.pack(KEY_MAGIC, KEY_VERSION, len(raw)) + raw + _KEY_TAIL.pack(partition)


def decode_key(data: bytes) -> TopicPartition:
    """Read a key written by :func:`encode_key`; :class:`SyncFormatError` when it is not one."""
    if len(data) < _KEY_HEAD.size:
        raise SyncFormatError(f"truncated offset-sync key: {len(data)} bytes")
    magic, version, length = _KEY_HEAD.unpack_from(data)
    if magic != KEY_MAGIC:
        raise SyncFormatError(
            f"not an offset-sync key: magic byte 0x{magic:02x}, expected 0x{KEY_MAGIC:02x}"
        )
    if version != KEY_VERSION:
        raise SyncFormatError(
            f"unsupported offset-sync key version {version} "
            f"(this build reads version {KEY_VERSION})"
        )
    expected = _KEY_HEAD.size + length + _KEY_TAIL.size
    if len(data) != expected:
        raise SyncFormatError(f"offset-sync key has {len(data)} bytes, expected {expected}")
    try:
        topic = bytes(data[_KEY_HEAD.size : _KEY_HEAD.size + length]).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SyncFormatError(f"offset-sync key topic is not UTF-8: {exc}") from exc
    (partition,) = _KEY_TAIL.unpack_from(data, _KEY_HEAD.size + length)
    if not topic or partition < 0:
        raise SyncFormatError(f"offset-sync key names an invalid partition {topic!r}-{partition}")
    return TopicPartition(topic, partition)


# -- the record value ---------------------------------------------------------------------------


def encode_value(sync: OffsetSync) -> bytes:
    """The Kafka message value of ``sync`` in format version :data:`VALUE_VERSION`."""
    segments = sync.segments
    target_base = segments[0].target_offset if segments else -1
    parts = [
        _VALUE_HEAD.pack(
            VALUE_MAGIC,
            VALUE_VERSION,
            sync.leader_epoch,
            sync.source_topic_id,
            sync.target_topic_id,
            sync.source_begin,
            sync.source_end,
            target_base,
            len(segments),
        )
    ]
    source_end = sync.source_begin
    target_end = target_base
    flat: list[int] = []
    for source, target, count in segments:
        flat += (source - source_end, target - target_end, count)
        source_end = source + count
        target_end = target + count
    parts.append(struct.pack(f">{len(flat)}I", *flat))
    return b"".join(parts)


def decode_value(topic: str, partition: int, data: bytes) -> OffsetSync:
    """Read a value written by :func:`encode_value` for ``topic``-``partition``.

    Raises :class:`SyncFormatError` naming the problem for foreign bytes, a version this build
    does not know, truncated or oversized values, and values that break the sync invariants.
    """
    size = len(data)
    if size < 2:
        raise SyncFormatError(f"truncated offset-sync value: {size} bytes")
    magic, version = data[0], data[1]
    if magic != VALUE_MAGIC:
        raise SyncFormatError(
            f"not an offset-sync value: magic byte 0x{magic:02x}, expected 0x{VALUE_MAGIC:02x}"
        )
    if version != VALUE_VERSION:
        raise SyncFormatError(
            f"unsupported offset-sync value version {version} (this build reads version "
            f"{VALUE_VERSION}); upgrade the readers of the sync topic before its writers"
        )
    if size < _VALUE_HEAD.size:
        raise SyncFormatError(
            f"truncated offset-sync value: {size} bytes, the version {version} header needs "
            f"{_VALUE_HEAD.size}"
        )
    (_, _, epoch, source_id, target_id, begin, end, target_base, count) = _VALUE_HEAD.unpack_from(
        data
    )
    expected = _VALUE_HEAD.size + count * _SEGMENT.size
    if size != expected:
        raise SyncFormatError(
            f"offset-sync value has {size} bytes, expected {expected} for {count} segments"
            + (" (truncated)" if size < expected else " (trailing bytes)")
        )
    if count == 0 and target_base != -1:
        raise SyncFormatError(f"offset-sync value without segments has target base {target_base}")
    flat = struct.unpack_from(f">{3 * count}I", data, _VALUE_HEAD.size)
    segments: list[Segment] = []
    source = begin
    target = target_base
    for i in range(0, 3 * count, 3):
        source += flat[i]
        target += flat[i + 1]
        length = flat[i + 2]
        segments.append(Segment(source, target, length))
        source += length
        target += length
    return OffsetSync(topic, partition, source_id, target_id, epoch, begin, end, tuple(segments))


def encode_sync(sync: OffsetSync) -> tuple[bytes, bytes]:
    """The ``(key, value)`` of the Kafka message that carries ``sync``."""
    return encode_key(sync.topic, sync.partition), encode_value(sync)


def decode_sync(key: bytes, value: bytes) -> OffsetSync:
    """Read a message written by :func:`encode_sync`."""
    topic, partition = decode_key(key)
    return decode_value(topic, partition, value)


# -- building syncs from delivery reports -------------------------------------------------------


class SyncBuilder:
    """Collects the copies of one run, in delivery order, and emits the syncs that describe it.

    The worker creates one builder per batch, with the position its consumer read the batch from,
    calls :meth:`add` for every delivered record (source and target offsets must both increase),
    and calls :meth:`build` with the consumer position after the batch. A run that does not fit one
    sync (a jump wider than 32 bits, too many segments) is split into several contiguous syncs.
    """

    __slots__ = (
        "_begin",
        "_epoch",
        "_next_source",
        "_next_target",
        "_segments",
        "_source_id",
        "_target_id",
        "_tp",
    )

    def __init__(
        self,
        tp: TopicPartition,
        *,
        source_topic_id: bytes,
        target_topic_id: bytes,
        source_begin: int,
        leader_epoch: int = -1,
    ) -> None:
        self._tp = tp
        self._source_id = source_topic_id
        self._target_id = target_topic_id
        self._epoch = leader_epoch
        self._begin = source_begin
        self._segments: list[list[int]] = []
        self._next_source = source_begin
        self._next_target = -1

    def add(self, source_offset: int, target_offset: int) -> None:
        """Record that source ``source_offset`` was delivered at target ``target_offset``."""
        if source_offset < self._next_source or target_offset < self._next_target:
            raise ValueError(
                f"copy {source_offset}->{target_offset} of {self._tp.topic}-{self._tp.partition} "
                f"is not after the previous copy (next source {self._next_source}, next target "
                f"{self._next_target}); deliver in order, one builder per run"
            )
        segments = self._segments
        if segments and source_offset == self._next_source and target_offset == self._next_target:
            segments[-1][2] += 1
        else:
            segments.append([source_offset, target_offset, 1])
        self._next_source = source_offset + 1
        self._next_target = target_offset + 1

    def add_all(self, copies: Iterable[tuple[int, int]]) -> None:
        """:meth:`add` every ``(source_offset, target_offset)`` pair of ``copies``."""
        for source, target in copies:
            self.add(source, target)

    @property
    def next_source(self) -> int:
        """One past the last source offset added (the run's begin while empty)."""
        return self._next_source

    @property
    def record_count(self) -> int:
        """Copies added so far."""
        return sum(segment[2] for segment in self._segments)

    def build(self, source_end: int) -> tuple[OffsetSync, ...]:
        """The syncs for the run ``[source_begin, source_end)``: one, or several when split.

        A run without copies still yields one sync: it tells the index that the positions up to
        ``source_end`` hold nothing to copy, which is what makes "caught up past a trailing
        transaction marker" translate exactly.
        """
        if source_end < self._next_source:
            raise ValueError(
                f"source_end {source_end} is before the last copy ({self._next_source})"
            )
        syncs: list[OffsetSync] = []
        begin = self._begin
        current: list[Segment] = []
        previous_end = (begin, -1)
        for first_source, first_target, total in self._segments:
            source, target, count = first_source, first_target, total
            while count > 0:
                part = min(count, MAX_COUNT)
                if current:
                    split = (
                        len(current) == MAX_SEGMENTS_PER_SYNC
                        or source - previous_end[0] > MAX_GAP
                        or target - previous_end[1] > MAX_GAP
                    )
                else:
                    split = source - begin > MAX_GAP
                if split:
                    # The positions up to here go into their own sync; the rest stays contiguous.
                    syncs.append(self._sync(begin, source, current))
                    current = []
                    begin = source
                current.append(Segment(source, target, part))
                previous_end = (source + part, target + part)
                source += part
                target += part
                count -= part
        syncs.append(self._sync(begin, source_end, current))
        return tuple(syncs)

    def _sync(self, begin: int, end: int, segments: list[Segment]) -> OffsetSync:
        return OffsetSync(
            self._tp.topic,
            self._tp.partition,
            self._source_id,
            self._target_id,
            self._epoch,
            begin,
            end,
            tuple(segments),
        )
