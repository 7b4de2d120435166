"""Reading a flow's offset-sync topic from its target cluster into an offset index.

The replicator writes every run it copies as an offset sync to ``drsvc.offset-syncs.<source>`` on
the flow's target (format: ``docs/offset-syncs.md``). :func:`read_sync_topic` reads that topic from
its first retained record up to the end offsets it finds when it starts, in order, and applies each
sync to an :class:`~failover.offset_index.OffsetIndex` together with its position in the sync topic.

What the result can be trusted for:

* Syncs are read ``read_committed``: a sync written in a transaction counts once it is committed.
  A partition is done at the end offset taken at the start, or earlier at its last stable offset
  when an open transaction holds readers back (its syncs are not visible yet, so neither are, in
  exactly-once mode, the copies they describe).
* Syncs produced after the start are not read. Callers that compare the index with end offsets
  read the end offsets afterwards, so what they count as not yet replicated is never too small.
* A sync that contradicts what its partition already holds (two writers, out of order) is not
  applied; the partition is listed in :attr:`SyncTopicRead.conflicts` and its translations must
  not be trusted. A record that is not a sync at all stops the read with a
  :class:`~drsvc.errors.PermanentError`: skipping it could make translations wrong silently.
* The topic is read by the port's :class:`~drsvc.kafka.reader.TopicReader`, which gives up
  only when the read makes no progress for ``timeout_s`` (its stall period): brokers that do not
  answer in time raise :class:`~drsvc.errors.KafkaUnavailableError` naming the topic, the
  cluster and where each partition stopped. A read that keeps moving is not cut short, however
  long the topic: a flow writes a sync per busy partition about five times a second and keeps
  them for ``sync_retention_ms`` (7 days), millions of syncs that take minutes to read (about
  110,000 a second), and a fixed deadline would fail every failover after a day or two of
  steady traffic. A long read logs how far it is (every ``ReadLimits.progress_log_s``).
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field

from drsvc.errors import PermanentError
from drsvc.kafka.clients import KafkaClients
from drsvc.kafka.read_progress import ReadLimits
from failover import naming
from failover.offset_index import OffsetIndex, SyncConflictError, SyncPosition
from failover.offset_syncs import SyncFormatError, TopicPartition, decode_key, decode_value

log = logging.getLogger(__name__)


@dataclass
class SyncTopicRead:
    """The index built from one sync topic, and what the read saw on the way."""

    cluster: str
    topic: str
    index: OffsetIndex = field(default_factory=OffsetIndex)
    exists: bool = True
    #: per partition of the sync topic: the offset the read stopped at (its end when it started)
    ends: dict[int, int] = field(default_factory=dict)
    #: sync records read (including those of topics the caller did not ask for)
    records: int = 0
    #: syncs that changed the index (the others repeated copies it already held)
    applied: int = 0
    #: source partitions whose syncs contradicted each other: the first contradiction seen
    conflicts: dict[TopicPartition, str] = field(default_factory=dict)
    #: the read began at the topic's log start (False: it extended a kept index, and
    #: ``records`` and ``applied`` count only what it read now)
    full: bool = True

    def add_record(
        self,
        partition: int,
        offset: int,
        key: bytes | None,
        value: bytes | None,
        wanted: Collection[str] | None = None,
    ) -> None:
        """Apply the sync record at ``offset`` of sync-topic ``partition`` (records in order).

        Syncs of source topics not in ``wanted`` are skipped. A partition whose syncs contradict
        each other goes to :attr:`conflicts` and is not applied further. A record that is not an
        offset sync raises :class:`~drsvc.errors.PermanentError`.
        """
        position = SyncPosition(partition, offset)
        where = f"record {offset} of {self.topic}-{partition} on {self.cluster}"
        self.records += 1
        try:
            if key is None or value is None:
                raise SyncFormatError("key or value is missing")
            tp = decode_key(key)
            if (wanted is not None and tp.topic not in wanted) or tp in self.conflicts:
                self.index.note_position(position)
                return
            sync = decode_value(tp.topic, tp.partition, value)
        except SyncFormatError as err:
            raise PermanentError(
                f"{where} is not an offset sync this build can read ({err}); translations that "
                "skipped it could be wrong, so none are made"
            ) from err
        try:
            changed = self.index.apply(sync, position)
        except SyncConflictError as err:
            self.conflicts[tp] = f"{where}: {err}"
            self.index.note_position(position)
            log.warning("%s contradicts earlier syncs: %s", where, err)
            return
        self.applied += changed


def read_sync_topic(
    client_config: Mapping[str, str],
    sync_topic: str,
    *,
    cluster: str,
    topics: Collection[str] | None = None,
    timeout_s: float = 60.0,
    clients: KafkaClients | None = None,
) -> SyncTopicRead:
    """Read ``sync_topic`` on ``cluster`` to its current end into a fresh index.

    ``client_config`` holds the librdkafka settings of the cluster (``bootstrap.servers`` and
    security); ``clients``, when given, is the factory the reader comes from instead (its
    cluster ``cluster``). Only syncs of source topics in ``topics`` are applied (all when None);
    the others are still read, since one partition of the sync topic holds every topic's syncs.
    A sync topic that does not exist yields an empty index with ``exists`` False: the flow never
    wrote a sync. ``timeout_s`` is the read's stall period: it gives up after that long without
    progress, never because the topic is long.
    """
    result = SyncTopicRead(cluster=cluster, topic=sync_topic)
    wanted = None if topics is None else frozenset(topics)
    if clients is None:
        clients = KafkaClients.for_configs({cluster: client_config})
    with clients.reader(
        cluster,
        sync_topic,
        what="offset-sync topic",
        # Named so operators see who reads; never joined nor committed to.
        group=naming.TRANSLATE_READER_GROUP,
        committed=True,
        limits=ReadLimits(stall_s=timeout_s),
    ) as reader:

        def add(partition: int, offset: int, key: bytes | None, value: bytes | None) -> None:
            result.add_record(partition, offset, key, value, wanted)

        ends = reader.each_record_to_end(add)
    if ends is None:
        result.exists = False
        return result
    result.ends = ends
    log.debug(
        "read %d offset syncs from %s on %s (%d applied, %d conflicting partitions)",
        result.records,
        sync_topic,
        cluster,
        result.applied,
        len(result.conflicts),
    )
    return result
