"""Taking a migration's copy over from a running (then stopped) MirrorMaker 2 (pure).

MirrorMaker 2 (dedicated mode, or a Connect cluster running ``MirrorSourceConnector``) keeps two
records of how far its copy of a source partition got:

* **Committed progress**, in Connect's offset storage topic on the target
  (``mm2-offsets.<source>.internal`` in dedicated mode): key the JSON
  ``["MirrorSourceConnector", {"cluster": "east", "partition": 0, "topic": "orders"}]``, value
  ``{"offset": 41}``: the source offset of the last record it copied and committed (it resumes
  at 42). Committed every ``offset.flush.interval.ms``, and when it stops cleanly.
* **Offset syncs**, in ``mm2-offset-syncs.<target>.internal`` on the source: sparse pairs
  (upstream offset, downstream offset) of a copied record and its copy. Key: the topic (int16
  length, UTF-8) and the partition (int32); value: upstream and downstream offsets (int64 each).

:func:`takeover_start` decides where drsvc's flow starts each partition so that nothing is lost
and nothing copied twice: the record after the last one whose copy ends the target partition.
It checks a candidate by comparing the target's last record with the source record it would be
the copy of (``matches``, supplied by the caller, which reads both clusters). The committed
offset is the first candidate; if MirrorMaker copied past its last commit (killed rather than
stopped), the newest offset sync counted forward to the target's end is the second. A partition
whose copy cannot be placed either way is refused, with the reason.

Only copies under the same names are supported (``IdentityReplicationPolicy``): a migration keeps
topic names, and MirrorMaker 2's default policy copies ``orders`` as ``east.orders``.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass

from failover.errors import FormatError

MM2_CONNECTOR = "MirrorSourceConnector"

_SYNC_VALUE = struct.Struct(">qq")
_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")


def mm2_offsets_topic(source: str) -> str:
    """Connect's offset storage topic of MirrorMaker 2's flow from ``source`` (on the target)."""
    return f"mm2-offsets.{source}.internal"


def mm2_offset_syncs_topic(target: str) -> str:
    """MirrorMaker 2's offset syncs of its flow to ``target`` (on the source, by default)."""
    return f"mm2-offset-syncs.{target}.internal"


def mm2_worker_group(source: str) -> str:
    """The Connect group of MirrorMaker 2's workers for the flow from ``source`` (on the target,
    dedicated mode): members there mean it still runs."""
    return f"{source}-mm2"


@dataclass(frozen=True, order=True)
class Mm2Progress:
    """A committed offset of MirrorMaker 2: ``offset`` is the last source offset it copied."""

    connector: str
    cluster: str
    topic: str
    partition: int


def decode_progress(
    key: bytes | None, value: bytes | None
) -> tuple[Mm2Progress, int | None] | None:
    """One record of the offset storage topic: whose progress and the offset (None: a
    tombstone, the progress was reset); None for records of other shapes (other connectors'
    keys that are not a source partition of MirrorMaker)."""
    if key is None:
        return None
    try:
        raw = json.loads(key)
    except ValueError as err:
        raise FormatError(f"offset storage key is not JSON: {key[:80]!r}") from err
    if not (isinstance(raw, list) and len(raw) == 2 and isinstance(raw[1], dict)):
        return None
    partition = raw[1]
    if not {"cluster", "topic", "partition"} <= set(partition):
        return None
    found = Mm2Progress(
        str(raw[0]), str(partition["cluster"]), str(partition["topic"]), int(partition["partition"])
    )
    if value is None:
        return found, None
    try:
        offset = json.loads(value)["offset"]
    except (ValueError, KeyError, TypeError) as err:
        raise FormatError(f"offset storage value of {found} is not {{'offset': n}}") from err
    return found, int(offset)


@dataclass(frozen=True)
class Mm2Sync:
    topic: str
    partition: int
    upstream: int
    downstream: int


def decode_sync(key: bytes, value: bytes) -> Mm2Sync:
    """One MirrorMaker 2 offset sync (see the module docstring for the format)."""
    try:
        (length,) = _INT16.unpack_from(key, 0)
        topic = key[2 : 2 + length].decode()
        (partition,) = _INT32.unpack_from(key, 2 + length)
        upstream, downstream = _SYNC_VALUE.unpack_from(value, 0)
    except (struct.error, UnicodeDecodeError) as err:
        raise FormatError(f"not a MirrorMaker 2 offset sync: {key[:40]!r}") from err
    return Mm2Sync(topic, partition, upstream, downstream)


@dataclass(frozen=True)
class PartitionCopy:
    """What is known of MirrorMaker 2's copy of one source partition."""

    topic: str
    partition: int
    #: last source offset MirrorMaker committed as copied (None: none)
    committed: int | None
    #: its newest offset sync (None: none)
    last_sync: tuple[int, int] | None
    #: the target partition's start and end offsets
    target_start: int
    target_end: int


@dataclass(frozen=True)
class TakeoverDecision:
    topic: str
    partition: int
    #: the source offset drsvc copies next (None: refused, or nothing to take over)
    start: int | None
    reason: str
    refused: bool = False


def takeover_start(copy: PartitionCopy, matches: Callable[[int], bool]) -> TakeoverDecision:
    """Where drsvc continues ``copy``; ``matches(offset)`` says whether the target's last record
    is the copy of the source record at ``offset`` (same key, value, headers and timestamp)."""

    def decided(start: int | None, reason: str, refused: bool = False) -> TakeoverDecision:
        return TakeoverDecision(copy.topic, copy.partition, start, reason, refused)

    where = f"{copy.topic}-{copy.partition}"
    empty = copy.target_end <= copy.target_start
    if copy.committed is None:
        if empty:
            return decided(None, f"{where}: MirrorMaker copied nothing; drsvc copies it all")
        return decided(
            None,
            f"{where}: the target holds {copy.target_end - copy.target_start} record(s) but"
            " MirrorMaker committed no progress for it: cannot tell what they are copies of",
            refused=True,
        )
    if empty:
        return decided(
            None,
            f"{where}: MirrorMaker committed offset {copy.committed} but the target partition is"
            " empty (deleted or truncated?)",
            refused=True,
        )
    candidates = [copy.committed]
    if copy.last_sync is not None:
        upstream, downstream = copy.last_sync
        counted = upstream + (copy.target_end - 1 - downstream)
        if counted != copy.committed:
            candidates.append(counted)
    for last in candidates:
        if last >= 0 and matches(last):
            how = (
                "MirrorMaker's committed progress"
                if last == copy.committed
                else f"its last offset sync counted to the target's end (it copied past its"
                f" last commit, {copy.committed})"
            )
            return decided(last + 1, f"{where}: continues at {last + 1} ({how})")
    tried = " or ".join(str(c) for c in candidates)
    return decided(
        None,
        f"{where}: the target's last record (offset {copy.target_end - 1}) is not the copy of"
        f" source offset {tried}: MirrorMaker's progress does not say where its copy ends"
        " (another writer, or a copy under another policy)",
        refused=True,
    )


def naming_refusals(
    topics: Collection[str], target_topics: Collection[str], source: str, separator: str = "."
) -> list[str]:
    """Topics MirrorMaker 2 copied under source-prefixed names (its default policy): drsvc's
    migration keeps names and takes over only copies under the same name."""
    present = set(target_topics)
    return [
        f"{topic}: MirrorMaker 2 copied it as {source}{separator}{topic} (its default,"
        " source-prefixed names); a migration keeps names, so drsvc takes over only a copy made"
        " with replication.policy.class=org.apache.kafka.connect.mirror.IdentityReplicationPolicy"
        f" (copy {source}{separator}{topic} into {topic} yourself, or let drsvc copy {topic}"
        " from the start)"
        for topic in sorted(topics)
        if f"{source}{separator}{topic}" in present
    ]


def latest_progress(
    records: Mapping[Mm2Progress, int | None], source: str, connector: str = MM2_CONNECTOR
) -> dict[tuple[str, int], int]:
    """The committed offset per source partition of ``source`` (tombstones removed)."""
    return {
        (p.topic, p.partition): offset
        for p, offset in records.items()
        if p.cluster == source and p.connector == connector and offset is not None
    }
