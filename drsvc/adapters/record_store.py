"""Failover records in the coordination store: whole, or a head and its chunks.

The layout is the core's (:mod:`failover.record_chunks`); this module reads and writes it over a
:class:`~drsvc.adapters.coordination.Coordinator`, so that every reader (the executor, the API,
``drsvc status``, the controller, the client library, the chaos suite) reads a record the same
way, chunked or not.

Writing (:func:`write_record`), under the failover's lock:

1. the chunks the record needs and the store lacks, one transaction each (each checks the lock);
   they sit under the record's key at ``failovers/<id>/<tag>/<n>``, a tag from the digest of
   their body, so they never overwrite the chunks the current head names;
2. the head at ``failovers/<id>``, in one transaction with the caller's other writes (a step's
   change of the active key): this is the write that matters, and until it commits every
   reader reads the record as it was;
3. the chunks no head names any more are deleted (best effort: a failure leaves them for the
   next write of the record to delete, and no reader ever reads them).

Reading: a listing of ``failovers/`` is one consistent read, heads and chunks together, so it
never sees a head without its chunks. :func:`read_record` reads the head, then its chunks; when a
rewrite came in between (the chunks it names were deleted), it reads again.

A write too large for Consul (its 413) and a record over the core's ceiling are
:class:`~drsvc.errors.TooLargeError`, a refusal; an unreadable record is the core's
:class:`~failover.errors.RecordFormatError`, as from :func:`failover.failover_record.decode_record`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from drsvc.adapters.coordination import Coordinator, Delete, Lock, Put, WriteOp
from drsvc.errors import DrsvcError, TooLargeError
from failover import naming
from failover.errors import FormatError, RecordFormatError, RecordTooLarge
from failover.failover_plan import FailoverRecord
from failover.record_chunks import StoredRecord, chunk_set, join_record, split_record

__all__ = ["read_record", "read_records", "stored_form", "write_record"]

log = logging.getLogger(__name__)

#: how many times a read starts again when the record was rewritten while it read
_READS = 3
#: deletes per transaction (Consul takes 128 operations, one is the lock's check)
_DELETES_PER_WRITE = 64


def stored_form(record: FailoverRecord) -> StoredRecord:
    """How ``record`` would be stored; :class:`TooLargeError` when it is over the ceiling."""
    try:
        return split_record(record)
    except RecordTooLarge as err:
        raise TooLargeError(str(err)) from err


def write_record(
    store: Coordinator,
    namespace: str,
    record: FailoverRecord,
    *,
    lock: Lock | None,
    ops: Sequence[WriteOp] = (),
    create: bool = False,
) -> None:
    """Store ``record`` (see the module's docs) with ``ops`` in the head's transaction;
    ``create``: only if the record does not exist yet (else :class:`ConflictError`)."""
    failover_id = record.plan.failover_id
    stored = stored_form(record)
    key = naming.failover_record_key(namespace, failover_id)
    chunks_prefix = naming.failover_chunks_prefix(namespace, failover_id)
    present = {e.key: e.value for e in store.list(chunks_prefix)}
    wanted: dict[str, str] = {}
    if stored.chunk_set is not None:
        tag = stored.chunk_set.tag
        wanted = {
            naming.failover_chunk_key(namespace, failover_id, tag, n): chunk
            for n, chunk in enumerate(stored.chunks)
        }
    for chunk_key, chunk in wanted.items():
        if present.get(chunk_key) != chunk:
            store.write([Put(chunk_key, chunk)], lock=lock)
    store.write([*ops, Put(key, stored.head, 0 if create else None)], lock=lock)
    stale = sorted(k for k in present if k not in wanted)
    for start in range(0, len(stale), _DELETES_PER_WRITE):
        batch = stale[start : start + _DELETES_PER_WRITE]
        try:
            store.write([Delete(k) for k in batch], lock=lock)
        except DrsvcError as err:
            log.warning(
                "failover %s: %d chunk(s) no head names are left for its next write to delete: %s",
                failover_id,
                len(stale) - start,
                err,
            )
            return


def read_record(store: Coordinator, namespace: str, failover_id: str) -> FailoverRecord | None:
    """The record of ``failover_id`` (None: there is none); :class:`RecordFormatError` when it
    cannot be read."""
    key = naming.failover_record_key(namespace, failover_id)
    for _ in range(_READS):
        head = store.get(key)
        if head is None:
            return None
        named = chunk_set(head.value)
        if named is None:
            return join_record(head.value, {})
        prefix = f"{naming.failover_chunks_prefix(namespace, failover_id)}{named.tag}/"
        chunks = {}
        for entry in store.list(prefix):
            parsed = naming.parse_failover_key(namespace, entry.key)
            if parsed is not None and parsed.number is not None:
                chunks[parsed.number] = entry.value
        try:
            return join_record(head.value, chunks)
        except RecordFormatError:
            again = store.get(key)
            if again is not None and again.index == head.index:
                raise
    raise RecordFormatError(f"it was rewritten {_READS} times while it was read")


def read_records(
    store: Coordinator,
    namespace: str,
    unreadable: Callable[[str, FormatError], None] | None = None,
) -> list[FailoverRecord]:
    """Every record of the namespace, in key order, from one listing; a record that cannot be
    read is left out and given to ``unreadable`` (its key and why) when one is given."""
    heads: dict[str, str] = {}
    chunks: dict[tuple[str, str], dict[int, str]] = {}
    for entry in store.list(naming.failovers_prefix(namespace)):
        parsed = naming.parse_failover_key(namespace, entry.key)
        if parsed is None:
            continue
        if parsed.tag is None or parsed.number is None:
            heads[entry.key] = entry.value
        else:
            chunks.setdefault((parsed.failover_id, parsed.tag), {})[parsed.number] = entry.value
    found = []
    for key, head in heads.items():
        failover_id = key.rsplit("/", 1)[-1]
        try:
            named = chunk_set(head)
            mine = {} if named is None else chunks.get((failover_id, named.tag), {})
            found.append(join_record(head, mine))
        except FormatError as err:
            if unreadable is not None:
                unreadable(key, err)
    return found
