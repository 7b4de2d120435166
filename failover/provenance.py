"""The provenance header every copied record carries.

A replicator appends one header per hop, after the record's original headers (which it keeps in
order, ``None`` values distinct from empty ones). The header says where this copy came from: the
source cluster alias, topic, partition and offset. It serves two purposes:

* **Loop safety under the identity policy**, where topic names cannot tell a copy from an original:
  a flow ``A -> B`` never copies a record whose provenance chain contains ``B``.
* **Rebuilding offset syncs** from the target's log if the sync topic is ever lost: each copy names
  the exact source position it was made from.

Wire format of the header value (big-endian), version 1::

    u8  version (=1)
    u8  length of the alias, then the alias (UTF-8)
    u16 length of the source topic, then the topic (UTF-8)
    i32 source partition
    i64 source offset

The prefix up to the partition is the same for every record of a partition, so the hot path packs
it once (:func:`header_prefix`) and appends only the offset.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from failover.errors import ProvenanceFormatError

PROVENANCE_HEADER = "drsvc.provenance"
PROVENANCE_VERSION = 1

_PARTITION = struct.Struct(">i")
_OFFSET = struct.Struct(">q")
_MAX_ALIAS_BYTES = 0xFF
_MAX_TOPIC_BYTES = 0xFFFF


@dataclass(frozen=True, slots=True)
class Provenance:
    """One hop: the record was copied from ``cluster``/``topic``/``partition`` at ``offset``."""

    cluster: str
    topic: str
    partition: int
    offset: int


def header_prefix(cluster: str, topic: str, partition: int) -> bytes:
    """The constant part of the header value for every record of one source partition."""
    alias = cluster.encode()
    name = topic.encode()
    if not alias or len(alias) > _MAX_ALIAS_BYTES:
        raise ProvenanceFormatError(f"cluster alias {cluster!r} must be 1-255 bytes")
    if len(name) > _MAX_TOPIC_BYTES:
        raise ProvenanceFormatError(f"topic {topic[:40]!r}... is too long for a provenance header")
    return (
        bytes((PROVENANCE_VERSION, len(alias)))
        + alias
        + len(name).to_bytes(2, "big")
        + name
        + _PARTITION.pack(partition)
    )


def encode(prov: Provenance) -> bytes:
    return header_prefix(prov.cluster, prov.topic, prov.partition) + _OFFSET.pack(prov.offset)


def decode(value: bytes) -> Provenance:
    """Parse a header value; raise :class:`ProvenanceFormatError` naming what is wrong."""
    if len(value) < 2:
        raise ProvenanceFormatError("provenance header is truncated")
    if value[0] != PROVENANCE_VERSION:
        raise ProvenanceFormatError(
            f"provenance header version {value[0]} is not supported (this drsvc reads "
            f"{PROVENANCE_VERSION})"
        )
    alias_len = value[1]
    if alias_len == 0:
        raise ProvenanceFormatError("provenance header has an empty cluster alias")
    pos = 2 + alias_len
    if len(value) < pos + 2:
        raise ProvenanceFormatError("provenance header is truncated in the alias")
    topic_len = int.from_bytes(value[pos : pos + 2], "big")
    topic_start = pos + 2
    tail = topic_start + topic_len
    if len(value) != tail + _PARTITION.size + _OFFSET.size:
        raise ProvenanceFormatError("provenance header has the wrong length")
    try:
        cluster = value[2:pos].decode()
        topic = value[topic_start:tail].decode()
    except UnicodeDecodeError as err:
        raise ProvenanceFormatError(f"provenance header is not UTF-8: {err}") from err
    (partition,) = _PARTITION.unpack_from(value, tail)
    (offset,) = _OFFSET.unpack_from(value, tail + _PARTITION.size)
    return Provenance(cluster, topic, partition, offset)


def chain(headers: Iterable[tuple[str, bytes | None]] | None) -> list[Provenance]:
    """Every hop recorded in ``headers``, oldest first."""
    if not headers:
        return []
    return [decode(v) for k, v in headers if k == PROVENANCE_HEADER and v is not None]


def visited(headers: Sequence[tuple[str, bytes | None]] | None, cluster: str) -> bool:
    """True when a record with these headers was already copied *from* ``cluster``.

    This is the loop check for the identity policy: a flow into ``cluster`` skips such records.
    It looks only at header keys first, so records without provenance cost one scan.
    """
    if not headers:
        return False
    for key, value in headers:
        if key != PROVENANCE_HEADER or value is None:
            continue
        try:
            if decode(value).cluster == cluster:
                return True
        except ProvenanceFormatError:
            # Unreadable (say, written by a newer drsvc): copying the record risks a duplicate,
            # skipping it would lose it; the first is the recoverable mistake.
            continue
    return False
