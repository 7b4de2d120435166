"""Rebuilding the offset syncs a crashed worker never wrote, from the target's own log.

A worker writes a run's syncs after the run's copies are delivered, and commits source progress
only after the syncs are delivered. A worker killed in between leaves copies on the target that no
sync maps; they all copy source offsets at or after the committed position. Before copying a
partition again, the next worker reads the tail of the remote partition, finds those copies by
their provenance header, and writes syncs for them, so every copy on the target stays mapped.

The tail is bounded by what can be in flight (the producer queue), so the scan reads backwards
from the end in growing windows until it reaches a copy of an offset before the committed one.
:func:`written_sync_end` reads the sync topic's tail the same way, so that only copies past the
last written sync are rebuilt: syncs are appended in target order, never slotted in between.

Both scans read ``read_uncommitted``: the copies a crashed exactly-once worker left in an open or
aborted transaction are on the target's log too, and the scan must see every copy there is. They
read through the port's :class:`~drsvc.kafka.reader.TopicReader`, which gives up only when the
read stops moving: a sync topic keeps days of syncs, and a scan far back into it takes as long as
it takes.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import closing
from typing import Any

from drsvc.errors import ConfigError
from drsvc.kafka.clients import KafkaClients
from drsvc.kafka.read_progress import ReadLimits
from drsvc.kafka.reader import TopicReader
from drsvc.kafka.types import Message
from failover import naming, offset_syncs, provenance
from failover.keepalive import LastCopy, last_copy_of

__all__ = ["FIRST_WINDOW", "GROWTH", "MAX_SYNC_SCAN", "unsynced_copies", "written_last_copy"]

#: the newest offsets a backward scan reads first
FIRST_WINDOW = 10_000
#: each window of a backward scan is this many times longer than the one after it
GROWTH = 4
#: the sync topic is read backwards at most this far looking for a partition's last sync
MAX_SYNC_SCAN = 5_000_000


def unsynced_copies(
    target_client: Mapping[str, Any],
    remote_topic: str,
    partition: int,
    source_alias: str,
    source_topic: str,
    committed: int,
    timeout_s: float = 60.0,
    after: int | None = None,
    *,
    clients: KafkaClients | None = None,
    target: str | None = None,
) -> list[tuple[int, int]]:
    """``(source offset, target offset)`` of every copy in the remote partition's tail that was
    made from ``source_topic``/``partition`` at or after source offset ``committed``, in target
    order.

    ``after``: every copy below that target offset is known to be mapped (the previous owner
    handed the partition over cleanly, :mod:`failover.handover`): only what lies past it is read.

    ``timeout_s`` is how long the read may stand still before it gives up
    (:attr:`~drsvc.kafka.read_progress.ReadLimits.stall_s`), not a bound on the whole scan.
    ``target`` is the target cluster's alias, for messages (its bootstrap servers when not
    given); ``clients`` the factory to read with (one built from ``target_client`` when not
    given, which then needs no ``target``). Raises
    :class:`~drsvc.errors.KafkaUnavailableError` naming the topic and cluster when the read
    stops moving, and the port's mapped error of any other failure.
    """
    copies: list[tuple[int, int]] = []
    reader = _tail_reader(target_client, remote_topic, "remote topic", timeout_s, clients, target)
    with reader:
        windows = reader.backwards(partition, first_window=FIRST_WINDOW, growth=GROWTH, floor=after)
        with closing(windows):
            for window in windows:
                found, reached_committed = _copies_in(
                    window, partition, source_alias, source_topic, committed
                )
                copies[:0] = found  # windows come newest first
                # With ``after``, the whole stretch past it is read: it is all unmapped.
                if reached_committed and after is None:
                    break
    return copies


def written_sync_end(
    target_client: Mapping[str, Any],
    sync_topic: str,
    tp: offset_syncs.TopicPartition,
    topic_ids: tuple[bytes, bytes],
    timeout_s: float = 60.0,
    *,
    clients: KafkaClients | None = None,
    target: str | None = None,
) -> int:
    """One past the highest target offset a written sync of ``tp`` maps (under ``topic_ids``,
    the source and remote topic ids); 0 when none is found.

    Syncs of a partition are written in target order, so that is one past its newest mapped copy
    (:func:`written_last_copy`, read at most :data:`MAX_SYNC_SCAN` records back; ``timeout_s``,
    ``clients`` and ``target`` as there).
    """
    last = written_last_copy(
        target_client,
        sync_topic,
        tp,
        topic_ids,
        MAX_SYNC_SCAN,
        timeout_s,
        clients=clients,
        target=target,
    )
    return 0 if last is None else last.target_offset + 1


def written_last_copy(
    target_client: Mapping[str, Any],
    sync_topic: str,
    tp: offset_syncs.TopicPartition,
    topic_ids: tuple[bytes, bytes],
    max_scan: int,
    timeout_s: float = 60.0,
    *,
    clients: KafkaClients | None = None,
    target: str | None = None,
) -> LastCopy | None:
    """The newest copy a written sync of ``tp`` maps (under ``topic_ids``), read backwards from
    the sync topic's end in growing windows, at most ``max_scan`` records back; None when none is
    found there.

    A worker restarted at its committed progress learns an idle partition's last copy this way,
    so that its keepalive syncs go on (:mod:`failover.keepalive`). ``timeout_s`` is how long the
    read may stand still (see :func:`unsynced_copies`, also for ``clients`` and ``target``).
    """
    if max_scan < 1:
        return None
    key = offset_syncs.encode_key(tp.topic, tp.partition)
    reader = _tail_reader(
        target_client, sync_topic, "offset-sync topic", timeout_s, clients, target
    )
    with reader:
        windows = reader.backwards(
            0, first_window=min(FIRST_WINDOW, max_scan), growth=GROWTH, max_scan=max_scan
        )
        with closing(windows):
            for window in windows:
                found = _last_copy_in(window, key, topic_ids)
                if found is not None:
                    return found
    return None


def _tail_reader(
    target_client: Mapping[str, Any],
    topic: str,
    what: str,
    timeout_s: float,
    clients: KafkaClients | None,
    target: str | None,
) -> TopicReader:
    """A ``read_uncommitted`` reader of ``topic`` on the target that gives up after ``timeout_s``
    without movement."""
    if clients is None:
        alias = target or str(target_client.get("bootstrap.servers", "the target"))
        clients = KafkaClients.for_configs({alias: target_client})
    elif target is None:
        raise ConfigError(
            f"reading {what} {topic}: a client factory was given without the alias of the target"
            " cluster to read"
        )
    else:
        alias = target
    return clients.reader(
        alias,
        topic,
        what=what,
        group=naming.SYNC_REPAIR_GROUP,
        committed=False,
        limits=ReadLimits(stall_s=timeout_s),
    )


def _last_copy_in(
    records: list[Message], key: bytes, topic_ids: tuple[bytes, bytes]
) -> LastCopy | None:
    """The last copy of the last sync keyed ``key`` among ``records``."""
    syncs = []
    for msg in records:
        if msg.key() != key:
            continue
        try:
            sync = offset_syncs.decode_value("x", 0, msg.value() or b"")
        except offset_syncs.SyncFormatError:
            continue  # not a sync this build reads: the index refuses it anyway
        if (sync.source_topic_id, sync.target_topic_id) == topic_ids:
            syncs.append(sync)
    # Syncs of a partition are written in target order: the last one with copies holds it.
    return last_copy_of(syncs, None)


def _copies_in(
    records: list[Message], partition: int, source_alias: str, source_topic: str, committed: int
) -> tuple[list[tuple[int, int]], bool]:
    """The copies of ``source_topic``/``partition`` at or after ``committed`` among ``records``,
    and whether a copy of an earlier offset is among them (the scan went back far enough)."""
    copies: list[tuple[int, int]] = []
    reached = False
    for msg in records:
        hops = provenance.chain(msg.headers())  # type: ignore[arg-type]
        if not hops:
            continue
        hop = hops[-1]
        if hop.cluster != source_alias or hop.topic != source_topic:
            continue
        if hop.partition != partition:
            continue
        if hop.offset < committed:
            reached = True
            continue
        offset = msg.offset()
        assert offset is not None
        copies.append((hop.offset, offset))
    return copies, reached
