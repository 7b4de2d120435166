"""A failover record too large for one Consul value: a head and its chunks.

Consul keeps a value to 512 KiB (``kv_max_value_size``) and a transaction's request body to
512 KiB too (``txn_max_req_len``, its values base64-encoded, so about 384 KiB of them), with at
most 128 operations. A record's per-partition fields grow with the application: a planned
failover of a few thousand group partitions no longer fits. So a record is stored in one of two
forms, both under its key ``failovers/<id>`` (:mod:`failover.naming`):

- **whole** (version 1, :mod:`failover.failover_record`), when its document is at most
  :data:`INLINE_LIMIT_BYTES`: as every earlier build wrote and reads it;
- **chunked** (version 2) otherwise: the fields that grow with partitions
  (:data:`CHUNKED_FIELDS`) are one JSON text, the *body*, cut into chunks of at most
  :data:`CHUNK_BYTES`, stored at ``failovers/<id>/<tag>/<n>``; the head at ``failovers/<id>``
  holds every other field and names the body: its SHA-256, its length and its chunk count::

      {"v": 2, "id": "f-...", ..., "events": [...], "epoch": 2,
       "chunks": {"digest": "<sha-256 hex>", "count": 3, "bytes": 700123}}

The tag is the digest's first :data:`TAG_LENGTH` characters, so a body's chunks are never
overwritten by another body's: the store writes the chunks first, then the head in the write
that matters, then removes the chunks no head names. A reader loads the head, then the chunks
of its tag, and :func:`join_record` refuses anything but exactly the chunks the head names, of
exactly the digest it names: a half-written or half-removed record is never read as a record.

Ceiling: a record whose body needs more than :data:`MAX_CHUNKS` chunks (8 MiB), or whose head
alone is over :data:`INLINE_LIMIT_BYTES`, is :class:`RecordTooLarge`, a refusal: the failover
must not go on without its record.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from failover.errors import RecordFormatError, RecordTooLarge
from failover.failover_plan import FailoverRecord
from failover.failover_record import (
    CHUNKED_FORMAT_VERSION,
    RECORD_FORMAT_VERSION,
    decode_record,
    parse_document,
    record_fields,
    record_from_fields,
)

__all__ = [
    "CEILING_BYTES",
    "CHUNKED_FIELDS",
    "CHUNK_BYTES",
    "INLINE_LIMIT_BYTES",
    "MAX_CHUNKS",
    "TAG_LENGTH",
    "ChunkSet",
    "RecordTooLarge",
    "StoredRecord",
    "chunk_set",
    "join_record",
    "split_record",
]

#: the largest record stored whole (version 1), and the largest head of a chunked one: it
#: leaves room in the step's transaction (512 KiB of base64) for the step's other writes
INLINE_LIMIT_BYTES = 128 * 1024
#: the largest chunk: with base64 (4/3) and the transaction's framing, one chunk per
#: transaction stays well under Consul's 512 KiB
CHUNK_BYTES = 256 * 1024
#: the most chunks of one record
MAX_CHUNKS = 32
#: the ceiling of a record's body: about 45,000 group partitions at ~180 bytes each
CEILING_BYTES = MAX_CHUNKS * CHUNK_BYTES
#: the fields that grow with partitions, kept in the chunks of a chunked record
CHUNKED_FIELDS = ("groups", "cutoffs", "unreplicated", "recovery")
#: how much of the body's digest names its chunks in their keys
TAG_LENGTH = 16


@dataclass(frozen=True)
class ChunkSet:
    """The chunks a head names."""

    #: SHA-256 (hex) of the body, the chunks joined in order
    digest: str
    count: int
    #: the body's length (ASCII: bytes and characters are the same)
    size: int

    @property
    def tag(self) -> str:
        """What names this body's chunks in their keys."""
        return self.digest[:TAG_LENGTH]

    def fields(self) -> dict[str, Any]:
        return {"digest": self.digest, "count": self.count, "bytes": self.size}


@dataclass(frozen=True)
class StoredRecord:
    """A record as stored: the document at its key and, when chunked, its chunks in order."""

    head: str
    chunks: tuple[str, ...] = ()
    #: None: stored whole
    chunk_set: ChunkSet | None = None

    @property
    def size(self) -> int:
        return len(self.head) + sum(len(c) for c in self.chunks)


def split_record(
    record: FailoverRecord,
    *,
    inline_limit: int = INLINE_LIMIT_BYTES,
    chunk_bytes: int = CHUNK_BYTES,
    max_chunks: int = MAX_CHUNKS,
) -> StoredRecord:
    """How ``record`` is stored: whole when it fits ``inline_limit``, else a head and chunks.
    Raises :class:`RecordTooLarge` naming the sizes when it is over the ceiling."""
    fields = record_fields(record)
    whole = _compact(fields)
    if len(whole) <= inline_limit:
        return StoredRecord(whole)
    body = _compact({name: fields[name] for name in CHUNKED_FIELDS})
    count = -(-len(body) // chunk_bytes)
    what = (
        f"the record of failover {record.plan.failover_id} ({len(record.groups)} group "
        f"partition(s), {len(record.cutoffs)} cut-off(s))"
    )
    if count > max_chunks:
        raise RecordTooLarge(
            f"{what} would take {len(body)} bytes, over the ceiling of {max_chunks} chunks of "
            f"{chunk_bytes} bytes ({max_chunks * chunk_bytes} bytes)"
        )
    chunks = ChunkSet(hashlib.sha256(body.encode("ascii")).hexdigest(), count, len(body))
    head_fields = {k: v for k, v in fields.items() if k not in CHUNKED_FIELDS}
    head = _compact({**head_fields, "v": CHUNKED_FORMAT_VERSION, "chunks": chunks.fields()})
    if len(head) > inline_limit:
        raise RecordTooLarge(
            f"{what}: its head alone would take {len(head)} bytes, over {inline_limit}"
        )
    pieces = tuple(body[i : i + chunk_bytes] for i in range(0, len(body), chunk_bytes))
    return StoredRecord(head, pieces, chunks)


def chunk_set(head: str) -> ChunkSet | None:
    """The chunks the stored document ``head`` names (None: a whole record, version 1).
    Raises :class:`RecordFormatError` for a document that is neither."""
    doc = parse_document(head)
    if doc.get("v") != CHUNKED_FORMAT_VERSION:
        return None
    return _chunk_set(doc)


def join_record(head: str, chunks: Mapping[int, str]) -> FailoverRecord:
    """The record stored as ``head`` and, when it names chunks, ``chunks`` (by number, from
    0; extra numbers or chunks of a whole record are refused too). Raises
    :class:`RecordFormatError` naming what is missing or wrong."""
    doc = parse_document(head)
    if doc.get("v") != CHUNKED_FORMAT_VERSION:
        if chunks:
            raise RecordFormatError(f"a whole record has no chunks, found {len(chunks)}")
        return decode_record(head)
    named = _chunk_set(doc)
    if sorted(chunks) != list(range(named.count)):
        missing = sorted(set(range(named.count)) - set(chunks))
        extra = sorted(set(chunks) - set(range(named.count)))
        raise RecordFormatError(
            f"its head names {named.count} chunk(s) of {named.tag}; missing {missing}, "
            f"unexpected {extra}"
        )
    body = "".join(chunks[n] for n in range(named.count))
    if len(body) != named.size:
        raise RecordFormatError(f"its chunks hold {len(body)} bytes, its head names {named.size}")
    try:
        digest = hashlib.sha256(body.encode("ascii")).hexdigest()
    except UnicodeEncodeError as err:
        raise RecordFormatError(f"its chunks are not the ASCII JSON it writes: {err}") from err
    if digest != named.digest:
        raise RecordFormatError(
            f"its chunks' digest {digest[:TAG_LENGTH]}... is not the {named.tag}... its head names"
        )
    bulk = parse_document(body)
    unknown = sorted(set(bulk) - set(CHUNKED_FIELDS))
    if unknown:
        raise RecordFormatError(f"its chunks hold fields a head keeps: {unknown}")
    fields = {k: v for k, v in doc.items() if k != "chunks"}
    return record_from_fields({**fields, **bulk, "v": RECORD_FORMAT_VERSION})


def _chunk_set(doc: Mapping[str, Any]) -> ChunkSet:
    value = doc.get("chunks")
    if not isinstance(value, dict):
        raise RecordFormatError("a chunked record's head must name its chunks ('chunks')")
    digest, count, size = value.get("digest"), value.get("count"), value.get("bytes")
    if (
        not isinstance(digest, str)
        or len(digest) != 64
        or any(c not in "0123456789abcdef" for c in digest)
    ):
        raise RecordFormatError("'chunks.digest' must be a SHA-256 in lower-case hex")
    for name, number in (("count", count), ("bytes", size)):
        if not isinstance(number, int) or isinstance(number, bool) or number < 1:
            raise RecordFormatError(f"'chunks.{name}' must be a positive integer")
    assert isinstance(count, int) and isinstance(size, int)
    return ChunkSet(digest, count, size)


def _compact(fields: Mapping[str, Any]) -> str:
    # ASCII (json's default): a chunk boundary never cuts a character in two
    return json.dumps(fields, separators=(",", ":"), ensure_ascii=True)
