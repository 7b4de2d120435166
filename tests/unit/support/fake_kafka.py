"""An in-memory Kafka for unit tests of the replication engine and the Kafka port, without
brokers.

The engine reaches Kafka only through :class:`drsvc.runtime.replication.boundary.KafkaBoundary`
and reads time only from a :class:`~drsvc.kafka.clock.Clock`. This module fakes both, so the
whole loop of both delivery modes (discovery, rebalances, the hot path, delivery reports, offset
syncs, commits, transactions, fencing) runs in a unit test in milliseconds, and always the same
way:

* Nothing sleeps and nothing runs on a thread. Where a real client would wait (``consume``,
  ``poll``, ``flush`` with nothing to do, a call to a cluster that is down) the fake advances the
  shared :class:`FakeClock` by the timeout instead, so loops that wait for time progress.
* Every callback runs inside the client call that serves it in confluent-kafka: delivery reports
  and ``error_cb`` in the producer's ``poll``/``flush``, rebalance callbacks in the consumer's
  ``consume``/``poll`` (and ``close``/``unsubscribe``).
* Records, errors and offsets use confluent-kafka's own plain data classes (``KafkaError``,
  ``KafkaException``, ``TopicPartition``), so the engine's error handling is exercised as is.

Building a flow on two fake clusters (the settings' bootstrap servers pick the cluster)::

    clock = FakeClock()
    east, west = FakeCluster("east", clock), FakeCluster("west", clock)
    topology = load_topology_text(PAIR)  # clusters east and west, a flow east->west
    settings = worker_settings(
        topology, topology.flow("east", "west"), bootstrap_servers(east, west)
    )
    kafka = FakeKafka(east, west, settings)
    engine = ReplicationEngine(settings, kafka=kafka, clock=clock, control=lambda: None)

``bootstrap_servers(east, west)`` is ``{"east": "fake-east:9092", "west": "fake-west:9092"}``:
the bootstrap servers given to ``worker_settings`` win over the topology file's, and
:class:`FakeKafka` checks that the settings name its clusters. It hands out clients by cluster
alias through a :class:`FakeKafkaClients` built from those settings, as the real boundary does.

Code written against the port (:mod:`drsvc.kafka`) gets its clients by cluster alias from
:class:`FakeKafkaClients`, the real factory with fake clients, so a role's topic reads run the
port's own :class:`~drsvc.kafka.reader.TopicReader`::

    clients = FakeKafkaClients(east, west)
    with clients.reader("west", "t", what="test topic", group="g", committed=True) as reader:
        for batch in reader.to_end(): ...

A read of a long history takes time on the fake clock when its consumers are given a cost per
log entry (:attr:`FakeKafkaClients.record_cost_s`, :attr:`FakeConsumer.record_cost_s`).

What is modelled, and the choices made where Kafka leaves room:

* Partition logs with a log start (``delete_records`` is retention), gaps (``compact``), leader
  epochs, topic ids (deterministic, new on ``recreate_topic``), and transactions: records of an
  open transaction hold ``read_committed`` readers at the last stable offset, aborted ones are
  skipped by them, and every commit or abort writes a control marker that takes an offset in each
  partition the transaction wrote to (as on a broker), never delivered to any reader.
* A consumer's ``position`` is unknown (-1001) from ``assign`` until its first fetch (or a
  ``seek``); from then on it is the next offset to fetch, and moves past markers, aborted records
  (``read_committed``) and compacted gaps up to the readable end.
* ``get_watermark_offsets(cached=False)`` answers like ListOffsets: ``(log start, last stable
  offset)`` for a ``read_committed`` consumer, ``(log start, high watermark)`` otherwise.
  ``cached=True`` answers what the partition's last fetch saw, ``(log start, high watermark)``
  as in a fetch response, or ``(-1001, -1001)`` before any fetch.
* Consumer groups: members of one cluster and ``group.id`` share their subscribed topics'
  partitions, eager strategies by a round robin over the sorted member ids, ``cooperative-sticky``
  by a sticky balance that moves as few partitions as it can. A partition is never handed to a
  member while another still holds it: it waits until the holder revokes it at its next
  ``consume``/``poll``, or is kicked out of the group (:meth:`FakeCluster.kick`, a session timeout:
  the kicked member hears ``on_lost`` at its next ``consume``/``poll`` and rejoins).
* Producer transactions with a coordinator per cluster: ``init_transactions`` fences the previous
  producer of the same ``transactional.id`` (its open transaction is aborted), and a transaction
  older than ``transaction.timeout.ms`` is aborted by the coordinator, which fences its producer
  just the same. Offsets sent to a transaction become committed with it.
* A cluster that is down (:attr:`FakeCluster.down`): produced records stay queued until
  ``message.timeout.ms`` fails them, fetches return nothing, and requests (watermarks, commits,
  committed offsets, transactions, metadata, discovery) fail after their timeout.
* Metadata (``list_topics``): one broker, the topics with their partitions, an unknown topic
  named with ``UNKNOWN_TOPIC_OR_PART``. A partition can lose its leader for a while
  (:meth:`FakeCluster.lose_leader`): nothing is fetched from it and watermark queries fail.

Faults a test injects, each explicit and one-shot unless it says a count:
:meth:`FakeCluster.fail_next_deliveries`, :meth:`FakeCluster.refuse_next_produce`,
:meth:`FakeCluster.fail_next_commit_transaction`, :meth:`FakeCluster.kick`,
:attr:`FakeCluster.down`, :meth:`FakeCluster.lose_leader`, :meth:`FakeProducer.raise_fatal`,
:meth:`FakeConsumer.refuse_next_seek`, :meth:`FakeConsumer.fail_next_commit`,
:attr:`FakeTopicCatalog.unreachable`, and the cluster's own history:
:meth:`FakeCluster.delete_records` (retention), :meth:`FakeCluster.compact`,
:meth:`FakeCluster.recreate_topic`, :meth:`FakeCluster.add_partitions`, open source transactions
(:meth:`FakeCluster.append` with ``transaction=``).

What is not modelled: threads (the fake is not thread-safe; clients of several engines can only
take turns), replication between brokers and unclean leader elections (no log truncation, no
KIP-320 check of the committed leader epoch), record batches, sizes and compression (no
``MSG_SIZE_TOO_LARGE`` unless injected), quotas, ACLs, topic configs, regex subscriptions,
rebalance timeouts (an eager member waits for a partition until its holder polls or is kicked),
the pending transactional offsets that make a real ``committed()`` wait (KIP-447), idempotence
sequence numbers, consumer prefetch queues and ``fetch.wait.max.ms``, ``store_offsets`` and
auto-commit, and admin clients (the catalog changes the fake clusters directly). Fetching
costs no time unless a test gives it a cost per log entry.
"""

from __future__ import annotations

import bisect
import hashlib
import zlib
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, NamedTuple, cast

from confluent_kafka import (
    OFFSET_BEGINNING,
    OFFSET_END,
    OFFSET_INVALID,
    OFFSET_STORED,
    TIMESTAMP_CREATE_TIME,
    TIMESTAMP_NOT_AVAILABLE,
    KafkaError,
    KafkaException,
    TopicPartition,
)

# the admin package imports these from its private modules without marking them re-exported
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    BrokerMetadata,
    ClusterMetadata,
    PartitionMetadata,
    TopicMetadata,
)

from drsvc.errors import KafkaUnavailableError
from drsvc.kafka.admin import TopicInfo
from drsvc.kafka.clients import KafkaClients
from drsvc.kafka.types import AdminClient, Consumer, Producer
from drsvc.runtime.replication import repair
from drsvc.runtime.replication.settings import WorkerSettings
from drsvc.runtime.replication.topics import MirroredTopic
from drsvc.topology import Topology, load_topology_text
from failover import offset_syncs, provenance
from failover.keepalive import LastCopy, last_copy_of
from failover.topic_rules import is_heartbeats_topic, topic_verdict

__all__ = [
    "CommittedOffset",
    "DeliveryCallback",
    "FakeClock",
    "FakeCluster",
    "FakeConsumer",
    "FakeGroupMetadata",
    "FakeHeartbeatCopier",
    "FakeKafka",
    "FakeKafkaClients",
    "FakeMessage",
    "FakeProducer",
    "FakeSyncLog",
    "FakeTopic",
    "FakeTopicCatalog",
    "PartitionLog",
    "StoredRecord",
    "Transaction",
    "bootstrap_servers",
]

#: a partition by name: (topic, partition)
TP = tuple[str, int]
#: record headers as stored and handed out (values are bytes or None, as confluent-kafka returns)
Headers = list[tuple[str, bytes | None]]
TxnState = Literal["open", "committed", "aborted"]
DeliveryCallback = Callable[[KafkaError | None, "FakeMessage"], None]
RebalanceCallback = Callable[[Any, list[TopicPartition]], None]

#: what a wait without a bound (a timeout of None or -1) costs on the fake clock
UNBOUNDED_WAIT_S = 1.0
#: librdkafka's defaults for the producer settings the fake follows
DEFAULT_QUEUE_MESSAGES = 100_000
DEFAULT_MESSAGE_TIMEOUT_MS = 300_000
DEFAULT_TRANSACTION_TIMEOUT_MS = 60_000

_FENCED_CODES = frozenset(
    {KafkaError._FENCED, KafkaError.PRODUCER_FENCED, KafkaError.INVALID_PRODUCER_EPOCH}
)


def bootstrap_servers(*clusters: FakeCluster) -> dict[str, str]:
    """``{cluster name: its fake bootstrap string}``: what ``worker_settings`` takes as its
    ``bootstrap`` argument, so that the settings' clients name the fake clusters."""
    return {cluster.name: cluster.bootstrap for cluster in clusters}


def _wait_s(timeout: float | None) -> float:
    """Seconds a call with ``timeout`` waits when there is nothing to do (None and negative
    values mean "forever" in confluent-kafka: a bounded wait keeps test loops moving)."""
    if timeout is None or timeout < 0:
        return UNBOUNDED_WAIT_S
    return float(timeout)


def _as_bytes(data: str | bytes | None) -> bytes | None:
    if data is None or isinstance(data, bytes):
        return data
    return data.encode()


def _headers(headers: Iterable[tuple[str, Any]] | Mapping[str, Any] | None) -> Headers | None:
    """Headers as confluent-kafka hands them back: a list of (str, bytes or None), None for none."""
    if headers is None:
        return None
    pairs = headers.items() if isinstance(headers, Mapping) else headers
    result: Headers = [(str(key), _as_bytes(value)) for key, value in pairs]
    return result or None


def _error(code: int, reason: str | None = None, **flags: bool) -> KafkaError:
    return KafkaError(code, reason, **flags)


def _raise(code: int, reason: str | None = None, **flags: bool) -> KafkaException:
    return KafkaException(_error(code, reason, **flags))


def _copies(partitions: Sequence[TopicPartition]) -> list[TopicPartition]:
    """What a commit's answer names: each partition and the offset it committed."""
    return [TopicPartition(tp.topic, tp.partition, tp.offset) for tp in partitions]


# ---------------------------------------------------------------------------------------- time


class FakeClock:
    """The port's :class:`~drsvc.kafka.clock.Clock` (the replication engine's too), moved only
    by :meth:`advance` (by tests, or by a fake client that would otherwise wait) and :meth:`sleep`.

    Wall time starts at a realistic epoch so that record timestamps, latencies and ages look like
    production ones; monotonic time starts well above zero so that "0.0 = never" is never now.
    """

    def __init__(self, monotonic: float = 10_000.0, wall: float = 1_800_000_000.0) -> None:
        self._monotonic = monotonic
        self._wall = wall

    def monotonic(self) -> float:
        return self._monotonic

    def time(self) -> float:
        return self._wall

    def now_ms(self) -> int:
        """Wall time in milliseconds, as record timestamps carry it."""
        return round(self._wall * 1000)

    def time_ms(self) -> int:
        """The port's name for :meth:`now_ms`."""
        return self.now_ms()

    def advance(self, seconds: float) -> None:
        """Let ``seconds`` pass on both clocks."""
        if seconds < 0:
            raise ValueError(f"time cannot go backwards ({seconds}s)")
        self._monotonic += seconds
        self._wall += seconds

    def sleep(self, seconds: float) -> None:
        """A wait: the time passes at once. A negative wait raises ``ValueError``, as
        ``time.sleep`` does, so that a caller's miscounted deadline shows in its tests."""
        self.advance(seconds)


# ------------------------------------------------------------------------------------ the logs


class CommittedOffset(NamedTuple):
    """A group's committed offset of one partition."""

    offset: int
    metadata: str = ""
    leader_epoch: int = -1


@dataclass(eq=False)
class Transaction:
    """One producer transaction as its cluster's coordinator sees it.

    Its records are appended while it is open and become visible to ``read_committed`` readers
    (or are skipped by them) all at once when it ends; the offsets sent to it are committed only
    when it commits. Its timeout runs from the moment the coordinator first hears of it (the
    first record delivered or the first offsets sent), as on a broker.
    """

    transactional_id: str
    timeout_s: float
    producer: FakeProducer | None = None
    state: TxnState = "open"
    #: monotonic time the coordinator first heard of it; None while only the client knows it
    started_at: float | None = None
    #: the first offset it wrote in each partition (what holds the last stable offset back)
    first_offsets: dict[TP, int] = field(default_factory=dict)
    #: offsets sent to it, per group, committed when it commits
    staged_offsets: dict[str, dict[TP, CommittedOffset]] = field(default_factory=dict)
    #: why it cannot commit any more (a failed delivery, a purge); it must be aborted
    failure: KafkaError | None = None


@dataclass(eq=False)
class StoredRecord:
    """One entry of a partition log: a record, or a transaction's control marker."""

    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...] | None
    timestamp: int
    leader_epoch: int
    transaction: Transaction | None = None
    #: a transaction's commit or abort marker: takes an offset, never delivered
    control: bool = False

    @property
    def state(self) -> TxnState:
        """committed (outside a transaction, or its transaction committed), open or aborted."""
        return "committed" if self.transaction is None else self.transaction.state

    def header_list(self) -> Headers | None:
        return None if self.headers is None else list(self.headers)

    def provenance(self) -> provenance.Provenance | None:
        """The last hop of the record's provenance headers: where a copy was copied from."""
        hops = provenance.chain(self.headers)
        return hops[-1] if hops else None


class PartitionLog:
    """One partition: its records in offset order, its log start, end and leader epoch."""

    def __init__(self) -> None:
        self.records: list[StoredRecord] = []
        self._offsets: list[int] = []
        self.log_start = 0
        #: the high watermark: the offset the next record gets
        self.end = 0
        self.leader_epoch = 0
        #: open transactions that wrote here, with their first offset here
        self.open_transactions: dict[Transaction, int] = {}

    @property
    def last_stable(self) -> int:
        """Where ``read_committed`` readers stop: the first record of an open transaction."""
        return min(self.open_transactions.values(), default=self.end)

    def index_of(self, offset: int) -> int:
        """Index of the first stored entry at or after ``offset``."""
        return bisect.bisect_left(self._offsets, offset)

    def append(self, record: StoredRecord) -> None:
        self.records.append(record)
        self._offsets.append(record.offset)
        self.end = record.offset + 1

    def delete_before(self, offset: int) -> None:
        offset = min(max(offset, self.log_start), self.end)
        cut = self.index_of(offset)
        del self.records[:cut]
        del self._offsets[:cut]
        self.log_start = offset

    def remove(self, offsets: Iterable[int]) -> None:
        gone = set(offsets)
        self.records = [r for r in self.records if r.offset not in gone]
        self._offsets = [r.offset for r in self.records]


@dataclass(eq=False)
class FakeTopic:
    name: str
    topic_id: bytes
    partitions: list[PartitionLog]

    def info(self) -> TopicInfo:
        return TopicInfo(name=self.name, topic_id=self.topic_id, partitions=len(self.partitions))


# ------------------------------------------------------------------------------------ messages


class FakeMessage:
    """What confluent-kafka's ``Message`` offers: a consumed record, a delivery report, or an
    event (``error()`` set: end of partition, offset reset, unknown partition)."""

    __slots__ = (
        "_error",
        "_headers",
        "_key",
        "_leader_epoch",
        "_offset",
        "_partition",
        "_timestamp",
        "_topic",
        "_value",
    )

    def __init__(
        self,
        topic: str | None,
        partition: int | None,
        offset: int | None,
        *,
        key: bytes | None = None,
        value: bytes | None = None,
        headers: Headers | None = None,
        timestamp: int | None = None,
        leader_epoch: int | None = None,
        error: KafkaError | None = None,
    ) -> None:
        self._topic = topic
        self._partition = partition
        self._offset = offset
        self._key = key
        self._value = value
        self._headers = headers
        self._timestamp = timestamp
        self._leader_epoch = leader_epoch
        self._error = error

    @staticmethod
    def of(topic: str, partition: int, record: StoredRecord) -> FakeMessage:
        return FakeMessage(
            topic,
            partition,
            record.offset,
            key=record.key,
            value=record.value,
            headers=record.header_list(),
            timestamp=record.timestamp,
            leader_epoch=record.leader_epoch,
        )

    @staticmethod
    def event(topic: str, partition: int, offset: int, error: KafkaError) -> FakeMessage:
        return FakeMessage(topic, partition, offset, error=error)

    def topic(self) -> str | None:
        return self._topic

    def partition(self) -> int | None:
        return self._partition

    def offset(self) -> int | None:
        """The record's offset; None where confluent-kafka has none (a failed delivery)."""
        return self._offset if self._offset is not None and self._offset >= 0 else None

    def key(self) -> bytes | None:
        return self._key

    def value(self) -> bytes | None:
        return self._value

    def headers(self) -> Headers | None:
        """A new list on every call, as confluent-kafka returns (callers append to it)."""
        return None if self._headers is None else list(self._headers)

    def timestamp(self) -> tuple[int, int]:
        if self._timestamp is None:
            return TIMESTAMP_NOT_AVAILABLE, -1
        return TIMESTAMP_CREATE_TIME, self._timestamp

    def error(self) -> KafkaError | None:
        return self._error

    def leader_epoch(self) -> int | None:
        epoch = self._leader_epoch
        return epoch if epoch is not None and epoch >= 0 else None

    def latency(self) -> float | None:
        return None

    def set_headers(self, headers: Headers) -> None:
        self._headers = list(headers)

    def set_key(self, key: bytes | None) -> None:
        self._key = key

    def set_value(self, value: bytes | None) -> None:
        self._value = value

    def __len__(self) -> int:
        return len(self._value or b"")

    def __repr__(self) -> str:
        where = f"{self._topic}-{self._partition}@{self._offset}"
        return (
            f"FakeMessage({where}, error={self._error})" if self._error else f"FakeMessage({where})"
        )


# ------------------------------------------------------------------------------------- groups


@dataclass(eq=False)
class _Member:
    member_id: str
    consumer: FakeConsumer
    topics: tuple[str, ...]
    #: partitions the member was given and has not given back
    held: set[TP] = field(default_factory=set)
    #: the group generation the member last synced to (-1: never)
    generation: int = -1


class _Group:
    """A consumer group's coordinator: members, their subscriptions, who holds what."""

    def __init__(self, name: str, cluster: FakeCluster) -> None:
        self.name = name
        self.cluster = cluster
        self.members: dict[str, _Member] = {}
        self.generation = 0

    def join(self, consumer: FakeConsumer, topics: tuple[str, ...]) -> _Member:
        member = _Member(self.cluster._new_member_id(consumer.client_id), consumer, topics)
        self.members[member.member_id] = member
        self.generation += 1
        return member

    def leave(self, member: _Member) -> None:
        if self.members.pop(member.member_id, None) is not None:
            self.generation += 1

    def holder(self, tp: TP, besides: _Member) -> _Member | None:
        for member in self.members.values():
            if member is not besides and tp in member.held:
                return member
        return None

    def _partitions(self) -> list[TP]:
        topics = self.cluster.topics
        wanted = {topic for member in self.members.values() for topic in member.topics}
        return sorted(
            (name, p)
            for name in wanted
            if name in topics
            for p in range(len(topics[name].partitions))
        )

    def target(self) -> dict[str, set[TP]]:
        """What each member should hold now."""
        members = sorted(self.members.values(), key=lambda m: m.member_id)
        if not members:
            return {}
        partitions = self._partitions()
        if any(m.consumer.cooperative for m in members):
            return self._sticky(members, partitions)
        return self._round_robin(members, partitions)

    @staticmethod
    def _round_robin(members: list[_Member], partitions: list[TP]) -> dict[str, set[TP]]:
        """Kafka's round robin: partitions in order, members in a circle, each partition to the
        next member subscribed to its topic."""
        result: dict[str, set[TP]] = {m.member_id: set() for m in members}
        turn = 0
        for tp in partitions:
            for step in range(len(members)):
                member = members[(turn + step) % len(members)]
                if tp[0] in member.topics:
                    result[member.member_id].add(tp)
                    turn = turn + step + 1
                    break
        return result

    @staticmethod
    def _sticky(members: list[_Member], partitions: list[TP]) -> dict[str, set[TP]]:
        """Every member keeps what it holds up to its fair share; the rest goes to the members
        with the fewest. Stable: once everyone holds its share, nothing moves."""
        valid = set(partitions)
        base, extra = divmod(len(partitions), len(members))
        result: dict[str, set[TP]] = {}
        taken: set[TP] = set()
        for member in sorted(members, key=lambda m: (-len(m.held & valid), m.member_id)):
            keep = sorted(tp for tp in member.held & valid if tp[0] in member.topics)
            keep = [tp for tp in keep if tp not in taken]
            share = base
            if extra and len(keep) > base:
                share, extra = base + 1, extra - 1
            result[member.member_id] = set(keep[:share])
            taken.update(keep[:share])
        for tp in partitions:
            if tp in taken:
                continue
            candidates = [m for m in members if tp[0] in m.topics]
            if candidates:
                chosen = min(candidates, key=lambda m: (len(result[m.member_id]), m.member_id))
                result[chosen.member_id].add(tp)
        return result

    def stable(self) -> bool:
        """Every member holds its target and has synced to the current generation."""
        target = self.target()
        return all(
            m.generation == self.generation and m.held == target[m.member_id]
            for m in self.members.values()
        )


@dataclass(frozen=True)
class FakeGroupMetadata:
    """What ``consumer_group_metadata()`` returns: the group, member and generation."""

    group_id: str
    member_id: str
    generation: int


# ------------------------------------------------------------------------------------ cluster


class FakeCluster:
    """One Kafka cluster: topics, partition logs, committed group offsets, groups, transaction
    coordinators, and the faults a test injects."""

    def __init__(self, name: str, clock: FakeClock | None = None) -> None:
        self.name = name
        self.clock = clock if clock is not None else FakeClock()
        #: what a client config's ``bootstrap.servers`` says to reach this cluster
        self.bootstrap = f"fake-{name}:9092"
        self.topics: dict[str, FakeTopic] = {}
        #: committed offsets: {group: {(topic, partition): (offset, metadata, leader epoch)}}
        self.group_offsets: dict[str, dict[TP, CommittedOffset]] = {}
        #: every client created on this cluster, in order
        self.consumers: list[FakeConsumer] = []
        self.producers: list[FakeProducer] = []
        #: a cluster that is down keeps produced records queued and fails requests
        self.down = False
        self._groups: dict[str, _Group] = {}
        self._transactional: dict[str, FakeProducer] = {}
        self._open_transactions: list[Transaction] = []
        self._test_transactions: dict[str, Transaction] = {}
        self._topics_created = 0
        self._members_created = 0
        self._delivery_faults: dict[str, list[tuple[int, int]]] = {}
        self._produce_refusals: dict[str, list[int]] = {}
        self._commit_transaction_failures: list[KafkaError] = []
        #: partitions without a leader: until which monotonic time (None: until elected)
        self._leaderless: dict[TP, float | None] = {}

    def __repr__(self) -> str:
        return f"FakeCluster({self.name!r})"

    # ---- topics

    def create_topic(self, name: str, partitions: int = 1) -> FakeTopic:
        if name in self.topics:
            raise ValueError(f"topic {name} already exists on {self.name}")
        if partitions < 1:
            raise ValueError(f"a topic needs at least one partition (got {partitions})")
        self._topics_created += 1
        seed = f"{self.name}/{name}/{self._topics_created}".encode()
        topic = FakeTopic(
            name,
            hashlib.blake2b(seed, digest_size=offset_syncs.TOPIC_ID_SIZE).digest(),
            [PartitionLog() for _ in range(partitions)],
        )
        self.topics[name] = topic
        return topic

    def delete_topic(self, name: str) -> None:
        """Delete a topic, and the groups' committed offsets of it (as the broker does)."""
        topic = self._topic(name)
        for log in topic.partitions:
            for txn in list(log.open_transactions):
                txn.first_offsets = {tp: o for tp, o in txn.first_offsets.items() if tp[0] != name}
        del self.topics[name]
        for offsets in self.group_offsets.values():
            for tp in [tp for tp in offsets if tp[0] == name]:
                del offsets[tp]

    def recreate_topic(self, name: str, partitions: int | None = None) -> FakeTopic:
        """Delete and create a topic again: a new topic id and empty logs."""
        count = partitions if partitions is not None else len(self._topic(name).partitions)
        self.delete_topic(name)
        return self.create_topic(name, count)

    def add_partitions(self, name: str, total: int) -> None:
        topic = self._topic(name)
        if total < len(topic.partitions):
            raise ValueError(f"{name} has {len(topic.partitions)} partitions; cannot shrink")
        topic.partitions.extend(PartitionLog() for _ in range(total - len(topic.partitions)))

    def topic_id(self, name: str) -> bytes:
        return self._topic(name).topic_id

    def partition_count(self, name: str) -> int:
        return len(self._topic(name).partitions)

    def info(self, name: str) -> TopicInfo:
        return self._topic(name).info()

    def metadata(self, topic: str | None = None) -> ClusterMetadata:
        """What a client's ``list_topics`` answers: one broker (id 1), and every topic, or
        only ``topic`` (with ``UNKNOWN_TOPIC_OR_PART`` as its error when it does not exist, as
        a broker that does not create topics on request answers). A partition without a
        leader names none (-1) and carries ``LEADER_NOT_AVAILABLE``."""
        # The metadata classes declare their fields by assigning None, hence the ignores.
        answer = ClusterMetadata()
        answer.cluster_id = f"fake-{self.name}"  # type: ignore[assignment]
        answer.controller_id = 1
        broker = BrokerMetadata()
        broker.id, broker.host, broker.port = 1, f"fake-{self.name}", 9092  # type: ignore[assignment]
        answer.brokers = {1: broker}
        names = sorted(self.topics) if topic is None else [topic]
        for name in names:
            described = TopicMetadata()
            described.topic = name
            found = self.topics.get(name)
            if found is None:
                described.error = _error(KafkaError.UNKNOWN_TOPIC_OR_PART)
            else:
                for index in range(len(found.partitions)):
                    partition = PartitionMetadata()
                    partition.id, partition.replicas, partition.isrs = index, [1], [1]
                    if self.has_leader(name, index):
                        partition.leader = 1
                    else:
                        partition.error = _error(KafkaError.LEADER_NOT_AVAILABLE, retriable=True)
                    described.partitions[index] = partition
            answer.topics[name] = described
        return answer

    # ---- partition leaders

    def lose_leader(self, topic: str, partition: int, until: float | None = None) -> None:
        """The partition has no leader (a topic created a moment ago, its broker gone) until
        the clock's monotonic time reaches ``until``, or until :meth:`elect_leader` when None.
        Meanwhile fetches from it return nothing (not even the end of the partition), watermark
        queries answer ``_NO_OFFSET`` (what librdkafka answers then, not flagged retriable),
        and its metadata names no leader. Producing to it is not affected."""
        self._log(topic, partition)
        self._leaderless[(topic, partition)] = until

    def elect_leader(self, topic: str, partition: int) -> None:
        self._leaderless.pop((topic, partition), None)

    def has_leader(self, topic: str, partition: int) -> bool:
        key = (topic, partition)
        if key not in self._leaderless:
            return True
        until = self._leaderless[key]
        if until is not None and self.clock.monotonic() >= until:
            del self._leaderless[key]
            return True
        return False

    # ---- records

    def append(
        self,
        topic: str,
        partition: int,
        value: bytes | str | None,
        key: bytes | str | None = None,
        headers: Iterable[tuple[str, Any]] | Mapping[str, Any] | None = None,
        timestamp: int | None = None,
        *,
        transaction: str | None = None,
    ) -> int:
        """Write a record as a producer outside the engine would; its offset.

        ``timestamp`` defaults to now (ms). With ``transaction`` (a transactional id of the
        test's choosing) the record joins that open transaction, which :meth:`end_transaction`
        commits or aborts.
        """
        txn = None
        if transaction is not None:
            txn = self._test_transactions.get(transaction)
            if txn is None:
                txn = Transaction(transaction, timeout_s=float("inf"))
                self._test_transactions[transaction] = txn
        return self._append(
            topic,
            partition,
            key=_as_bytes(key),
            value=_as_bytes(value),
            headers=_headers(headers),
            timestamp=self.clock.now_ms() if timestamp is None else timestamp,
            transaction=txn,
        )

    def end_transaction(self, transaction: str, commit: bool = True) -> None:
        """Commit or abort a test transaction opened by :meth:`append`."""
        txn = self._test_transactions.pop(transaction)
        self._end_transaction(txn, commit)

    def records(
        self, topic: str, partition: int, committed_only: bool = True
    ) -> list[StoredRecord]:
        """The records of a partition from its log start (never markers): the committed ones,
        or with ``committed_only=False`` the open and aborted ones as well."""
        log = self._log(topic, partition)
        return [
            r
            for r in log.records
            if not r.control and (not committed_only or r.state == "committed")
        ]

    def values(self, topic: str, partition: int, committed_only: bool = True) -> list[bytes | None]:
        return [r.value for r in self.records(topic, partition, committed_only)]

    def end_offset(self, topic: str, partition: int) -> int:
        """The high watermark: the offset the next record gets."""
        return self._log(topic, partition).end

    def log_start_offset(self, topic: str, partition: int) -> int:
        return self._log(topic, partition).log_start

    def last_stable_offset(self, topic: str, partition: int) -> int:
        return self._log(topic, partition).last_stable

    def delete_records(self, topic: str, partition: int, before: int) -> None:
        """Retention: every record before ``before`` is gone, the log starts there."""
        self._log(topic, partition).delete_before(before)

    def compact(self, topic: str, partition: int, offsets: Iterable[int]) -> None:
        """Compaction: the records at ``offsets`` are gone, leaving gaps."""
        self._log(topic, partition).remove(offsets)

    def bump_leader_epoch(self, topic: str, partition: int) -> int:
        """A new partition leader: later records carry the next leader epoch."""
        log = self._log(topic, partition)
        log.leader_epoch += 1
        return log.leader_epoch

    # ---- group offsets

    def committed_offset(self, group: str, topic: str, partition: int) -> int | None:
        found = self.group_offsets.get(group, {}).get((topic, partition))
        return None if found is None else found.offset

    def set_committed(
        self,
        group: str,
        topic: str,
        partition: int,
        offset: int,
        metadata: str = "",
        leader_epoch: int = -1,
    ) -> None:
        """Commit an offset as another client would (progress left by an earlier worker)."""
        self.group_offsets.setdefault(group, {})[(topic, partition)] = CommittedOffset(
            offset, metadata, leader_epoch
        )

    # ---- groups

    def kick(self, consumer: FakeConsumer) -> None:
        """Throw a member out of its group, as a session timeout does: the others may take its
        partitions at once; it hears ``on_lost`` at its next consume/poll and joins again."""
        member = consumer._member
        if member is None:
            raise ValueError(f"{consumer!r} is not a member of a group on {self.name}")
        self._groups[consumer._require_group()].leave(member)
        consumer._member = None
        consumer._lost = set(member.held)

    def group_members(self, group: str) -> list[str]:
        found = self._groups.get(group)
        return sorted(found.members) if found is not None else []

    def group_assignment(self, group: str) -> dict[str, list[TP]]:
        """What each member of ``group`` holds now (given and not yet given back)."""
        found = self._groups.get(group)
        if found is None:
            return {}
        return {m.member_id: sorted(m.held) for m in found.members.values()}

    def group_stable(self, group: str) -> bool:
        found = self._groups.get(group)
        return found is not None and bool(found.members) and found.stable()

    # ---- transactions

    def transactional_owner(self, transactional_id: str) -> FakeProducer | None:
        """The producer that last initialised ``transactional_id`` (the one not fenced)."""
        return self._transactional.get(transactional_id)

    def open_transactions(self) -> list[Transaction]:
        return list(self._open_transactions)

    # ---- faults

    def fail_next_deliveries(self, topic: str, count: int, error_code: int) -> None:
        """The next ``count`` records produced to ``topic`` are not written; their delivery
        reports carry ``error_code``."""
        self._delivery_faults.setdefault(topic, []).append((count, error_code))

    def refuse_next_produce(self, topic: str, error_code: int) -> None:
        """The next ``produce()`` to ``topic`` raises ``KafkaException(error_code)``."""
        self._produce_refusals.setdefault(topic, []).append(error_code)

    def fail_next_commit_transaction(
        self, error_code: int, *, retriable: bool = False, fatal: bool = False
    ) -> None:
        """The next ``commit_transaction()`` on this cluster raises ``error_code``: abortable
        (the transaction must be aborted) unless ``retriable`` (commit again) or ``fatal`` (the
        producer is done). A fencing code fences the producer."""
        fatal = fatal or error_code in _FENCED_CODES
        self._commit_transaction_failures.append(
            _error(
                error_code,
                "injected commit failure",
                fatal=fatal,
                retriable=retriable,
                txn_requires_abort=not (fatal or retriable),
            )
        )

    # ---- internals shared by the clients

    def _topic(self, name: str) -> FakeTopic:
        try:
            return self.topics[name]
        except KeyError:
            raise KeyError(f"no topic {name} on {self.name}") from None

    def _log(self, topic: str, partition: int) -> PartitionLog:
        log = self._partition(topic, partition)
        if log is None:
            raise KeyError(f"no partition {topic}-{partition} on {self.name}")
        return log

    def _partition(self, topic: str, partition: int) -> PartitionLog | None:
        found = self.topics.get(topic)
        if found is None or not 0 <= partition < len(found.partitions):
            return None
        return found.partitions[partition]

    def _append(
        self,
        topic: str,
        partition: int,
        *,
        key: bytes | None,
        value: bytes | None,
        headers: Headers | None,
        timestamp: int,
        transaction: Transaction | None,
    ) -> int:
        log = self._log(topic, partition)
        offset = log.end
        log.append(
            StoredRecord(
                offset,
                key,
                value,
                None if headers is None else tuple(headers),
                timestamp,
                log.leader_epoch,
                transaction,
            )
        )
        if transaction is not None:
            self._coordinator_learns(transaction)
            if (topic, partition) not in transaction.first_offsets:
                transaction.first_offsets[(topic, partition)] = offset
                log.open_transactions[transaction] = offset
        return offset

    def _coordinator_learns(self, txn: Transaction) -> None:
        if txn.started_at is None:
            txn.started_at = self.clock.monotonic()
            self._open_transactions.append(txn)

    def _end_transaction(self, txn: Transaction, commit: bool) -> None:
        """Commit or abort: a marker in every partition it wrote to, its offsets committed."""
        if txn.state != "open":
            return
        txn.state = "committed" if commit else "aborted"
        if txn in self._open_transactions:
            self._open_transactions.remove(txn)
        now_ms = self.clock.now_ms()
        for topic, partition in txn.first_offsets:
            log = self._partition(topic, partition)
            if log is None:
                continue
            log.open_transactions.pop(txn, None)
            marker = StoredRecord(log.end, None, None, None, now_ms, log.leader_epoch, txn, True)
            log.append(marker)
        if commit:
            for group, offsets in txn.staged_offsets.items():
                self.group_offsets.setdefault(group, {}).update(offsets)
        txn.staged_offsets = {}

    def _expire_transactions(self) -> None:
        """The coordinators abort transactions older than their timeout and fence their
        producers (the epoch bump a producer cannot tell from a takeover)."""
        now = self.clock.monotonic()
        for txn in list(self._open_transactions):
            started = txn.started_at
            if started is None or now - started <= txn.timeout_s:
                continue
            self._end_transaction(txn, commit=False)
            if txn.producer is not None:
                txn.producer._fence(
                    f"transaction of {txn.transactional_id} timed out on the coordinator after "
                    f"{txn.timeout_s:.1f}s and was aborted"
                )

    def _register_transactional(self, producer: FakeProducer, transactional_id: str) -> None:
        previous = self._transactional.get(transactional_id)
        self._transactional[transactional_id] = producer
        if previous is not None and previous is not producer:
            previous._fence(f"producer fenced: {transactional_id} was initialised by another")
        for txn in list(self._open_transactions):
            if txn.transactional_id == transactional_id and txn.producer is not producer:
                self._end_transaction(txn, commit=False)

    def _group(self, name: str) -> _Group:
        group = self._groups.get(name)
        if group is None:
            group = self._groups[name] = _Group(name, self)
        return group

    def _new_member_id(self, client_id: str) -> str:
        self._members_created += 1
        return f"{client_id}-{self._members_created:06d}"

    def _take_delivery_fault(self, topic: str) -> KafkaError | None:
        faults = self._delivery_faults.get(topic)
        if not faults:
            return None
        count, code = faults[0]
        if count <= 1:
            faults.pop(0)
        else:
            faults[0] = (count - 1, code)
        return _error(code)

    def _take_produce_refusal(self, topic: str) -> KafkaError | None:
        refusals = self._produce_refusals.get(topic)
        return _error(refusals.pop(0)) if refusals else None

    def _take_commit_failure(self) -> KafkaError | None:
        failures = self._commit_transaction_failures
        return failures.pop(0) if failures else None


# ------------------------------------------------------------------------------------ consumer


@dataclass
class _Fetch:
    """A consumer's state of one assigned partition."""

    #: the next offset to fetch, or a logical offset (OFFSET_*) until the first fetch resolves it
    position: int
    #: position() answers it (after the first fetch or a seek)
    known: bool = False
    paused: bool = False
    #: fetching stopped after an offset reset error, until a seek or a new assignment
    stopped: bool = False
    eof_sent: bool = False
    missing_reported: bool = False
    #: (log start, high watermark) as the last fetch saw them
    marks: tuple[int, int] | None = None


_RESET_EARLIEST = ("smallest", "earliest", "beginning")
_RESET_LATEST = ("largest", "latest", "end")


class FakeConsumer:
    """A confluent-kafka ``Consumer`` on a :class:`FakeCluster` (see the module docstring for
    what it models)."""

    #: records taken from one partition before moving on to the next, so that a batch
    #: interleaves partitions (as fetch responses for several partitions do)
    chunk: int = 5
    #: what fetching one log entry costs on the clock: a record handed out, or a marker or an
    #: aborted record passed over. 0 (the default) makes fetching free. With a cost, a
    #: ``consume`` call lasts at most its timeout, as a real one does, so it stops early with
    #: what it has: a long history then takes time to read while the position keeps moving.
    record_cost_s: float = 0.0

    def __init__(self, cluster: FakeCluster, config: Mapping[str, Any], clock: FakeClock) -> None:
        self.cluster = cluster
        self.config = dict(config)
        self.clock = clock
        self.group_id: str | None = config.get("group.id")
        self.client_id: str = str(config.get("client.id", "rdkafka"))
        self.read_committed = config.get("isolation.level", "read_committed") == "read_committed"
        self.partition_eof = _flag(config.get("enable.partition.eof", False))
        self.offset_reset = str(config.get("auto.offset.reset", "latest"))
        strategy = str(config.get("partition.assignment.strategy", "range,roundrobin"))
        self.cooperative = "cooperative" in strategy
        self.closed = False
        #: errors of asynchronous commits (confluent-kafka hands them to on_commit, if set)
        self.failed_commits: list[KafkaError] = []
        self._fetches: dict[TP, _Fetch] = {}
        #: partitions paused by the application: librdkafka keeps a partition paused across
        #: unassign and a later assign, until it is resumed
        self._paused: set[tuple[str, int]] = set()
        self._subscription: tuple[str, ...] | None = None
        self._on_assign: RebalanceCallback | None = None
        self._on_revoke: RebalanceCallback | None = None
        self._on_lost: RebalanceCallback | None = None
        self._member: _Member | None = None
        #: partitions taken away by a kick, reported at the next consume/poll
        self._lost: set[TP] | None = None
        self._assigned_in_callback = False
        self._turn = 0
        self._seek_refusals: list[int] = []
        self._commit_failures: list[int] = []
        #: answers to asynchronous commits, for ``on_commit`` at the next consume/poll
        self._commit_answers: list[tuple[KafkaError | None, list[TopicPartition]]] = []
        #: log entries the current consume call may still fetch (None: as many as it likes)
        self._budget: int | None = None
        cluster.consumers.append(self)

    def __repr__(self) -> str:
        return f"FakeConsumer({self.cluster.name}, group={self.group_id!r}, {self.client_id!r})"

    # ---- faults

    def refuse_next_seek(self, error_code: int = KafkaError._STATE) -> None:
        """The next ``seek()`` raises ``error_code`` (librdkafka refuses to seek a partition
        whose fetcher stopped in error)."""
        self._seek_refusals.append(error_code)

    def fail_next_commit(self, error_code: int) -> None:
        self._commit_failures.append(error_code)

    # ---- subscription and group membership

    def subscribe(
        self,
        topics: Sequence[str],
        on_assign: RebalanceCallback | None = None,
        on_revoke: RebalanceCallback | None = None,
        on_lost: RebalanceCallback | None = None,
    ) -> None:
        """Join the group (or change the subscription); partitions come at the next
        consume/poll."""
        self._check_open()
        group_id = self._require_group()
        self._subscription = tuple(topics)
        self._on_assign, self._on_revoke, self._on_lost = on_assign, on_revoke, on_lost
        if self._member is not None:
            self._member.topics = self._subscription
            self.cluster._group(group_id).generation += 1
        elif self._lost is None:
            self._member = self.cluster._group(group_id).join(self, self._subscription)

    def unsubscribe(self) -> None:
        """Leave the group; the held partitions are revoked now."""
        self._check_open()
        self._subscription = None
        self._leave_group()

    def memberid(self) -> str | None:
        return None if self._member is None else self._member.member_id

    def consumer_group_metadata(self) -> FakeGroupMetadata:
        member = self._member
        group = self.cluster._groups.get(self.group_id or "")
        return FakeGroupMetadata(
            self.group_id or "",
            "" if member is None else member.member_id,
            -1 if member is None or group is None else group.generation,
        )

    def _leave_group(self) -> None:
        member = self._member
        if member is None:
            return
        held, member.held = member.held, set()
        self.cluster._groups[self.group_id or ""].leave(member)
        self._member = None
        if held:
            self._rebalance("revoke", held)

    def _serve_group(self) -> None:
        """Deliver what changed in the group since the last call: a kick, then revocations
        and assignments (see the module docstring)."""
        if self._lost is not None:
            lost, self._lost = self._lost, None
            self._rebalance("lost", lost)
            if self._subscription is not None and not self.closed:
                group = self.cluster._group(self._require_group())
                self._member = group.join(self, self._subscription)
        member = self._member
        if member is None:
            return
        group = self.cluster._groups[self._require_group()]
        target = group.target().get(member.member_id, set())
        if self.cooperative:
            removed = member.held - target
            if removed:
                member.held -= removed
                self._rebalance("revoke", removed)
            added = {tp for tp in target - member.held if group.holder(tp, member) is None}
            first = member.generation < 0
            member.generation = group.generation
            if added or first:
                member.held |= added
                self._rebalance("assign", added)
            return
        if member.generation == group.generation and member.held == target:
            return
        if member.held:
            held, member.held = member.held, set()
            self._rebalance("revoke", held)
        if all(group.holder(tp, member) is None for tp in target):
            member.held = set(target)
            member.generation = group.generation
            self._rebalance("assign", target)

    def _rebalance(self, kind: Literal["assign", "revoke", "lost"], partitions: set[TP]) -> None:
        """Run the application's callback, then what confluent-kafka does when the callback
        did not (un)assign itself."""
        tps = [TopicPartition(t, p) for t, p in sorted(partitions)]
        callback = {
            "assign": self._on_assign,
            "revoke": self._on_revoke,
            "lost": self._on_lost or self._on_revoke,
        }[kind]
        self._assigned_in_callback = False
        if callback is not None:
            callback(self, tps)
        if self._assigned_in_callback:
            return
        if kind == "assign":
            if self.cooperative:
                self.incremental_assign(tps)
            else:
                self.assign(tps)
        elif self.cooperative:
            self.incremental_unassign(
                [tp for tp in tps if (tp.topic, tp.partition) in self._fetches]
            )
        else:
            self.unassign()

    # ---- assignment

    def assign(self, partitions: Sequence[TopicPartition]) -> None:
        """Replace the assignment. Offsets: absolute, OFFSET_BEGINNING/END, or
        OFFSET_STORED/INVALID (the group's committed offset, else ``auto.offset.reset``)."""
        self._check_open()
        self._check_unique(partitions)
        self._assigned_in_callback = True
        self._fetches = {(tp.topic, tp.partition): self._new_fetch(tp) for tp in partitions}

    def unassign(self) -> None:
        self._check_open()
        self._assigned_in_callback = True
        self._fetches = {}

    def incremental_assign(self, partitions: Sequence[TopicPartition]) -> None:
        self._check_open()
        self._check_unique(partitions)
        for tp in partitions:
            if (tp.topic, tp.partition) in self._fetches:
                raise _raise(
                    KafkaError._CONFLICT,
                    f"{tp.topic} [{tp.partition}] is already part of the current assignment",
                )
        self._assigned_in_callback = True
        for tp in partitions:
            self._fetches[(tp.topic, tp.partition)] = self._new_fetch(tp)

    def incremental_unassign(self, partitions: Sequence[TopicPartition]) -> None:
        self._check_open()
        for tp in partitions:
            if (tp.topic, tp.partition) not in self._fetches:
                raise _raise(
                    KafkaError._INVALID_ARG,
                    f"{tp.topic} [{tp.partition}] can't be unassigned since it is not in the "
                    "current assignment",
                )
        self._assigned_in_callback = True
        for tp in partitions:
            del self._fetches[(tp.topic, tp.partition)]

    def assignment(self) -> list[TopicPartition]:
        self._check_open()
        return [TopicPartition(t, p) for t, p in sorted(self._fetches)]

    @staticmethod
    def _check_unique(partitions: Sequence[TopicPartition]) -> None:
        keys = [(tp.topic, tp.partition) for tp in partitions]
        if len(set(keys)) != len(keys):
            raise _raise(KafkaError._INVALID_ARG, "duplicate partitions in input list")

    # ---- positions

    def seek(self, partition: TopicPartition) -> None:
        """Fetch from ``partition.offset`` next; records handed out after it come again."""
        self._check_open()
        if self._seek_refusals:
            raise _raise(self._seek_refusals.pop(0))
        fetch = self._fetches.get((partition.topic, partition.partition))
        if fetch is None:
            raise _raise(
                KafkaError._STATE, f"{partition.topic} [{partition.partition}] is not assigned"
            )
        fetch.position = partition.offset
        fetch.known = partition.offset >= 0
        fetch.stopped = fetch.eof_sent = fetch.missing_reported = False

    def pause(self, partitions: Sequence[TopicPartition]) -> None:
        self._check_open()
        for tp in partitions:
            fetch = self._fetches.get((tp.topic, tp.partition))
            if fetch is not None:
                fetch.paused = True
                self._paused.add((tp.topic, tp.partition))

    def resume(self, partitions: Sequence[TopicPartition]) -> None:
        self._check_open()
        for tp in partitions:
            fetch = self._fetches.get((tp.topic, tp.partition))
            if fetch is not None:
                fetch.paused = False
            self._paused.discard((tp.topic, tp.partition))

    def _new_fetch(self, tp: TopicPartition) -> _Fetch:
        return _Fetch(tp.offset, paused=(tp.topic, tp.partition) in self._paused)

    def position(self, partitions: Sequence[TopicPartition]) -> list[TopicPartition]:
        """The next offset to fetch per partition; -1001 when not known yet (or unassigned)."""
        self._check_open()
        result = []
        for tp in partitions:
            fetch = self._fetches.get((tp.topic, tp.partition))
            known = fetch is not None and fetch.known and fetch.position >= 0
            offset = fetch.position if fetch is not None and known else OFFSET_INVALID
            result.append(TopicPartition(tp.topic, tp.partition, offset))
        return result

    def get_watermark_offsets(
        self, partition: TopicPartition, timeout: float | None = None, cached: bool = False
    ) -> tuple[int, int]:
        """(low, high): see the module docstring for which high."""
        self._check_open()
        key = (partition.topic, partition.partition)
        if cached:
            fetch = self._fetches.get(key)
            if fetch is None or fetch.marks is None:
                return OFFSET_INVALID, OFFSET_INVALID
            return fetch.marks
        self._request(timeout, "querying watermark offsets")
        log = self.cluster._partition(*key)
        if log is None:
            code = (
                KafkaError._UNKNOWN_PARTITION
                if key[0] in self.cluster.topics
                else KafkaError._UNKNOWN_TOPIC
            )
            raise _raise(code)
        if not self.cluster.has_leader(*key):
            raise _raise(KafkaError._NO_OFFSET, "no leader for the partition")
        return log.log_start, log.last_stable if self.read_committed else log.end

    def offsets_for_times(
        self, partitions: Sequence[TopicPartition], timeout: float | None = None
    ) -> list[TopicPartition]:
        """Per partition, the first offset whose record's timestamp is at or after the given
        one (``offset`` carries the timestamp); -1 when there is none."""
        self._check_open()
        self._request(timeout, "looking up offsets by time")
        result = []
        for tp in partitions:
            log = self.cluster._partition(tp.topic, tp.partition)
            found = OFFSET_END
            if log is not None:
                for record in log.records:
                    if not record.control and record.timestamp >= tp.offset:
                        found = record.offset
                        break
            result.append(TopicPartition(tp.topic, tp.partition, found))
        return result

    # ---- committed offsets

    def committed(
        self, partitions: Sequence[TopicPartition], timeout: float | None = None
    ) -> list[TopicPartition]:
        """The group's committed offsets, with their metadata and leader epoch; -1001 where
        the group has none."""
        self._check_open()
        group = self._require_group()
        self._request(timeout, "fetching committed offsets")
        offsets = self.cluster.group_offsets.get(group, {})
        result = []
        for tp in partitions:
            found = offsets.get((tp.topic, tp.partition))
            if found is None:
                result.append(TopicPartition(tp.topic, tp.partition, OFFSET_INVALID))
                continue
            committed = TopicPartition(
                tp.topic,
                tp.partition,
                found.offset,
                metadata=found.metadata,
                leader_epoch=found.leader_epoch,
            )
            result.append(committed)
        return result

    def commit(
        self,
        message: FakeMessage | None = None,
        offsets: Sequence[TopicPartition] | None = None,
        asynchronous: bool = True,
    ) -> list[TopicPartition] | None:
        """Commit ``offsets`` (or past ``message``, or the current positions). A failed
        asynchronous commit is only recorded in :attr:`failed_commits`."""
        self._check_open()
        group = self._require_group()
        if message is not None:
            topic, partition, offset = message.topic(), message.partition(), message.offset()
            assert topic is not None and partition is not None and offset is not None
            wanted = [TopicPartition(topic, partition, offset + 1)]
        elif offsets is not None:
            wanted = list(offsets)
        else:
            wanted = [tp for tp in self.position(self.assignment()) if tp.offset >= 0]
            if not wanted:
                raise _raise(KafkaError._NO_OFFSET)
        error = None
        if self.cluster.down:
            error = _error(KafkaError._TRANSPORT, f"{self.cluster.name} is down", retriable=True)
        elif self._subscription is not None and self._member is None:
            error = _error(KafkaError.UNKNOWN_MEMBER_ID, "not a member of the group (kicked out)")
        elif self._commit_failures:
            error = _error(self._commit_failures.pop(0))
        if error is not None:
            if asynchronous:
                self.failed_commits.append(error)
                self._commit_answers.append((error, _copies(wanted)))
                return None
            raise KafkaException(error)
        stored = self.cluster.group_offsets.setdefault(group, {})
        for tp in wanted:
            epoch = tp.leader_epoch
            stored[(tp.topic, tp.partition)] = CommittedOffset(
                tp.offset, tp.metadata or "", -1 if epoch is None else epoch
            )
        if asynchronous:
            self._commit_answers.append((None, _copies(wanted)))
        return (
            None
            if asynchronous
            else [TopicPartition(tp.topic, tp.partition, tp.offset) for tp in wanted]
        )

    # ---- reading

    def consume(self, num_messages: int = 1, timeout: float | None = -1) -> list[FakeMessage]:
        """Up to ``num_messages`` records and events from the unpaused assigned partitions,
        in offset order per partition, a few at a time per partition. Serves the group first;
        with nothing to return, the clock advances by ``timeout``. With a
        :attr:`record_cost_s`, the entries fetched cost their time, and no more are fetched
        than fit in ``timeout`` (at least one)."""
        self._check_open()
        self._serve_group()
        self._serve_commit_answers()
        self.cluster._expire_transactions()
        wait_s = _wait_s(timeout)
        cost = self.record_cost_s
        allowed = max(1, int(wait_s / cost)) if cost > 0 else None
        self._budget = allowed
        try:
            messages = self._gather(num_messages)
        finally:
            left, self._budget = self._budget, None
        spent = 0.0 if allowed is None or left is None else (allowed - left) * cost
        # A call that found nothing to hand out waits for its whole timeout, as a real one does.
        self.clock.advance(spent if messages else max(spent, wait_s))
        return messages

    def poll(self, timeout: float | None = None) -> FakeMessage | None:
        """One record or event, or None (after advancing the clock by ``timeout``). Where
        rebalance callbacks run for a consumer that never consumes."""
        messages = self.consume(1, timeout)
        return messages[0] if messages else None

    def _serve_commit_answers(self) -> None:
        """librdkafka answers asynchronous commits through ``on_commit`` from consume/poll."""
        answers, self._commit_answers = self._commit_answers, []
        on_commit = self.config.get("on_commit")
        if on_commit is not None:
            for error, partitions in answers:
                on_commit(error, partitions)

    def close(self) -> None:
        """Leave the group (the held partitions are revoked first, as librdkafka does)."""
        if self.closed:
            return
        self._subscription = None
        self._lost = None
        self._leave_group()
        self._fetches = {}
        self.closed = True

    def list_topics(self, topic: str | None = None, timeout: float | None = None) -> Any:
        """The cluster's metadata (:meth:`FakeCluster.metadata`); fails after ``timeout`` when
        the cluster is down."""
        self._request(timeout, "fetching metadata")
        return self.cluster.metadata(topic)

    def _gather(self, limit: int) -> list[FakeMessage]:
        if self.cluster.down or limit <= 0:
            return []
        keys = sorted(k for k, f in self._fetches.items() if not (f.paused or f.stopped))
        if not keys:
            return []
        start = self._turn % len(keys)
        self._turn += 1
        order = keys[start:] + keys[:start]
        messages: list[FakeMessage] = []
        moved = True
        while moved and len(messages) < limit:
            moved = False
            for key in order:
                room = min(self.chunk, limit - len(messages))
                if room <= 0:
                    break
                got = self._fetch(key, self._fetches[key], room)
                if got:
                    moved = True
                    messages.extend(got)
        return messages

    def _fetch(self, key: TP, fetch: _Fetch, limit: int) -> list[FakeMessage]:
        """Up to ``limit`` records and events of one partition, moving its position."""
        if fetch.paused or fetch.stopped:
            return []
        topic, partition = key
        log = self.cluster._partition(topic, partition)
        if log is None:
            if fetch.missing_reported:
                return []
            fetch.missing_reported = True
            return [
                FakeMessage.event(
                    topic, partition, fetch.position, _error(KafkaError.UNKNOWN_TOPIC_OR_PART)
                )
            ]
        fetch.missing_reported = False
        if not self.cluster.has_leader(topic, partition):
            return []
        out: list[FakeMessage] = []
        if not self._start(key, fetch, log, out):
            return out
        fetch.marks = (log.log_start, log.end)
        fetch.known = True
        end = log.last_stable if self.read_committed else log.end
        records = log.records
        i = log.index_of(fetch.position)
        while len(out) < limit and i < len(records) and records[i].offset < end:
            if self._budget is not None:
                if self._budget <= 0:
                    break
                self._budget -= 1
            record = records[i]
            i += 1
            fetch.position = record.offset + 1
            if record.control or (self.read_committed and record.state == "aborted"):
                continue
            out.append(FakeMessage.of(topic, partition, record))
            fetch.eof_sent = False
        if fetch.position < end and (i >= len(records) or records[i].offset >= end):
            fetch.position = end  # only markers, skipped records or gaps were left
        if self.partition_eof and fetch.position >= end and not fetch.eof_sent and len(out) < limit:
            out.append(
                FakeMessage.event(
                    topic, partition, fetch.position, _error(KafkaError._PARTITION_EOF)
                )
            )
            fetch.eof_sent = True
        return out

    def _start(self, key: TP, fetch: _Fetch, log: PartitionLog, out: list[FakeMessage]) -> bool:
        """Resolve a logical start offset and check the position is in the log; False (and an
        error event in ``out``, once) when ``auto.offset.reset`` is ``error``."""
        readable_end = log.last_stable if self.read_committed else log.end
        wanted = fetch.position
        position: int | None
        problem = ""
        if wanted in (OFFSET_STORED, OFFSET_INVALID):
            found = self.cluster.group_offsets.get(self.group_id or "", {}).get(key)
            position = found.offset if found is not None else self._reset_to(log, readable_end)
            problem = "no committed offset to start from"
        elif wanted == OFFSET_BEGINNING:
            position = log.log_start
        elif wanted < 0:
            position = readable_end
        else:
            position = wanted
        if position is not None and not log.log_start <= position <= log.end:
            problem = f"offset {position} is outside the log [{log.log_start}, {log.end})"
            position = self._reset_to(log, readable_end)
        if position is None:
            fetch.stopped = True
            reason = f"fetch failed due to requested offset not available on the broker: {problem}"
            error = _error(KafkaError._AUTO_OFFSET_RESET, reason)
            out.append(FakeMessage.event(key[0], key[1], wanted, error))
            return False
        fetch.position = position
        return True

    def _reset_to(self, log: PartitionLog, readable_end: int) -> int | None:
        if self.offset_reset in _RESET_EARLIEST:
            return log.log_start
        if self.offset_reset in _RESET_LATEST:
            return readable_end
        return None

    # ---- helpers

    def _check_open(self) -> None:
        if self.closed:
            raise RuntimeError("Consumer closed")

    def _require_group(self) -> str:
        if not self.group_id:
            raise _raise(KafkaError._INVALID_ARG, "group.id is not configured")
        return self.group_id

    def _request(self, timeout: float | None, what: str) -> None:
        """A request to the cluster: when it is down, the timeout passes and it fails."""
        if self.cluster.down:
            self.clock.advance(_wait_s(timeout))
            raise _raise(
                KafkaError._TIMED_OUT, f"{what}: {self.cluster.name} is down", retriable=True
            )


def _flag(value: Any) -> bool:
    return value if isinstance(value, bool) else str(value).lower() in ("true", "1", "yes")


# ------------------------------------------------------------------------------------ producer


@dataclass(eq=False)
class _Queued:
    topic: str
    partition: int
    key: bytes | None
    value: bytes | None
    headers: Headers | None
    timestamp: int
    on_delivery: DeliveryCallback | None
    transaction: Transaction | None
    enqueued_at: float

    def report(self, offset: int | None = None) -> FakeMessage:
        return FakeMessage(
            self.topic,
            self.partition,
            OFFSET_INVALID if offset is None else offset,
            key=self.key,
            value=self.value,
            headers=self.headers,
            timestamp=self.timestamp,
        )


class FakeProducer:
    """A confluent-kafka ``Producer`` on a :class:`FakeCluster`: records queue at
    ``produce()`` and are written, in order, by the next ``poll()``/``flush()``, which also
    calls their delivery callbacks. Transactions when ``transactional.id`` is set."""

    def __init__(self, cluster: FakeCluster, config: Mapping[str, Any], clock: FakeClock) -> None:
        self.cluster = cluster
        self.config = dict(config)
        self.clock = clock
        self.transactional_id: str | None = config.get("transactional.id")
        self.max_queued = int(config.get("queue.buffering.max.messages", DEFAULT_QUEUE_MESSAGES))
        self.message_timeout_s = (
            int(config.get("message.timeout.ms", DEFAULT_MESSAGE_TIMEOUT_MS)) / 1000
        )
        self.transaction_timeout_s = (
            int(config.get("transaction.timeout.ms", DEFAULT_TRANSACTION_TIMEOUT_MS)) / 1000
        )
        self._error_cb: Callable[[KafkaError], None] | None = config.get("error_cb")
        self._default_on_delivery: DeliveryCallback | None = config.get("on_delivery")
        self._queue: deque[_Queued] = deque()
        self._purged: list[_Queued] = []
        self._errors: list[KafkaError] = []
        #: the error that made the producer unusable (fenced, or raised by a test)
        self.fatal_error: KafkaError | None = None
        self.initialized = False
        self.transaction: Transaction | None = None
        #: counters for assertions
        self.delivered = 0
        self.failed = 0
        self.transactions_committed = 0
        self.transactions_aborted = 0
        self.closed = False
        cluster.producers.append(self)

    def __repr__(self) -> str:
        tid = f", transactional.id={self.transactional_id!r}" if self.transactional_id else ""
        return f"FakeProducer({self.cluster.name}{tid})"

    def __len__(self) -> int:
        return len(self._queue) + len(self._purged)

    @property
    def fenced(self) -> bool:
        return self.fatal_error is not None and self.fatal_error.code() == KafkaError._FENCED

    # ---- test helpers

    def raise_fatal(self, error_code: int = KafkaError._FATAL, reason: str = "injected") -> None:
        """A fatal error, as librdkafka raises it: ``error_cb`` hears it at the next
        poll/flush, queued records fail with it, and every later call raises it."""
        self._make_fatal(_error(error_code, reason, fatal=True))

    # ---- producing

    def produce(
        self,
        topic: str,
        value: bytes | str | None = None,
        key: bytes | str | None = None,
        partition: int = -1,
        callback: DeliveryCallback | None = None,
        on_delivery: DeliveryCallback | None = None,
        timestamp: int = 0,
        headers: Iterable[tuple[str, Any]] | Mapping[str, Any] | None = None,
    ) -> None:
        """Queue a record; ``BufferError`` when the queue is full, ``KafkaException`` for a
        partition the topic does not have (or an injected refusal)."""
        self._check_usable()
        txn = self.transaction
        if self.transactional_id is not None:
            if txn is None:
                raise _raise(KafkaError._STATE, "no transaction in progress")
            if txn.failure is not None:
                raise _raise(KafkaError._STATE, "the transaction failed and must be aborted")
        refusal = self.cluster._take_produce_refusal(topic)
        if refusal is not None:
            raise KafkaException(refusal)
        found = self.cluster.topics.get(topic)
        if partition < 0:
            count = len(found.partitions) if found is not None else 1
            partition = zlib.crc32(_as_bytes(key) or b"") % count if key is not None else 0
        elif found is not None and partition >= len(found.partitions):
            raise _raise(KafkaError._UNKNOWN_PARTITION)
        if len(self._queue) >= self.max_queued:
            raise BufferError("Local: Queue full")
        self._queue.append(
            _Queued(
                topic,
                partition,
                _as_bytes(key),
                _as_bytes(value),
                _headers(headers),
                timestamp or self.clock.now_ms(),
                on_delivery or callback or self._default_on_delivery,
                txn,
                self.clock.monotonic(),
            )
        )

    def poll(self, timeout: float | None = None) -> int:
        """Serve errors and delivery reports; the clock advances by ``timeout`` when there
        were none to serve (or until the next queued record times out, if sooner)."""
        served = self._serve()
        if served == 0:
            wait = _wait_s(timeout)
            if self._queue:  # the cluster is down: the first record times out first
                wait = min(
                    wait,
                    self._queue[0].enqueued_at + self.message_timeout_s - self.clock.monotonic(),
                )
            if wait > 0:
                self.clock.advance(wait)
                served = self._serve()
        return served

    def flush(self, timeout: float | None = None) -> int:
        """Deliver everything queued; the number of records still queued (only while the
        cluster is down, after the timeout passed)."""
        self._serve()
        if self._queue:
            last_expiry = self._queue[-1].enqueued_at + self.message_timeout_s
            wait = last_expiry - self.clock.monotonic()
            if timeout is not None and timeout >= 0:
                wait = min(wait, float(timeout))
            if wait > 0:
                self.clock.advance(wait)
            self._serve()
        return len(self._queue)

    def purge(self, in_queue: bool = True, in_flight: bool = True, blocking: bool = True) -> None:
        """Drop queued records: their reports carry ``_PURGE_QUEUE`` at the next poll. (Every
        record of the fake is queued until a poll writes it: none is ever in flight.)"""
        if not in_queue:
            return
        for queued in self._queue:
            txn = queued.transaction
            if txn is not None and txn.failure is None:
                txn.failure = _error(KafkaError._PURGE_QUEUE, txn_requires_abort=True)
        self._purged.extend(self._queue)
        self._queue.clear()

    def close(self, timeout: float | None = None) -> int:
        remaining = self.flush(timeout)
        self.closed = True
        return remaining

    def list_topics(self, topic: str | None = None, timeout: float | None = None) -> Any:
        """The cluster's metadata (:meth:`FakeCluster.metadata`); fails after ``timeout`` when
        the cluster is down."""
        self._request(timeout, "fetching metadata")
        return self.cluster.metadata(topic)

    def _serve(self) -> int:
        self.cluster._expire_transactions()
        served = 0
        for err in self._errors:
            if self._error_cb is not None:
                self._error_cb(err)
            served += 1
        self._errors = []
        purged, self._purged = self._purged, []
        for queued in purged:
            self._report(queued, _error(KafkaError._PURGE_QUEUE))
            served += 1
        while self._queue:
            if self.fatal_error is None and self.cluster.down:
                served += self._time_out_queued()
                break
            queued = self._queue.popleft()
            self._deliver(queued)
            served += 1
        return served

    def _time_out_queued(self) -> int:
        now = self.clock.monotonic()
        expired = 0
        while self._queue and now - self._queue[0].enqueued_at >= self.message_timeout_s:
            queued = self._queue.popleft()
            err = _error(KafkaError._MSG_TIMED_OUT, "Local: Message timed out")
            if queued.transaction is not None and queued.transaction.failure is None:
                queued.transaction.failure = err
            self._report(queued, err)
            expired += 1
        return expired

    def _deliver(self, queued: _Queued) -> None:
        txn = queued.transaction
        if self.fatal_error is not None:
            self._report(queued, self.fatal_error)
            return
        if txn is not None and txn.state != "open":
            self._report(
                queued, _error(KafkaError._FENCED, "the transaction was aborted", fatal=True)
            )
            return
        cluster = self.cluster
        err = cluster._take_delivery_fault(queued.topic)
        if err is None and queued.topic not in cluster.topics:
            err = _error(KafkaError._UNKNOWN_TOPIC)
        elif err is None and cluster._partition(queued.topic, queued.partition) is None:
            err = _error(KafkaError._UNKNOWN_PARTITION)
        if err is not None:
            if txn is not None and txn.failure is None:
                txn.failure = err
            self._report(queued, err)
            return
        offset = cluster._append(
            queued.topic,
            queued.partition,
            key=queued.key,
            value=queued.value,
            headers=queued.headers,
            timestamp=queued.timestamp,
            transaction=txn,
        )
        self._report(queued, None, offset)

    def _report(self, queued: _Queued, err: KafkaError | None, offset: int | None = None) -> None:
        if err is None:
            self.delivered += 1
        else:
            self.failed += 1
        if queued.on_delivery is not None:
            queued.on_delivery(err, queued.report(offset))

    # ---- transactions

    def init_transactions(self, timeout: float | None = None) -> None:
        """Register with the coordinator: fences the previous producer of the same
        ``transactional.id`` and aborts its open transaction."""
        if self.transactional_id is None:
            raise _raise(KafkaError._NOT_CONFIGURED, "transactional.id is not set")
        self._check_usable()
        self._request(timeout, "initialising transactions")
        if not self.initialized:
            self.cluster._register_transactional(self, self.transactional_id)
            self.initialized = True

    def begin_transaction(self) -> None:
        self._check_transactional()
        if self.transaction is not None:
            raise _raise(KafkaError._STATE, "a transaction is already in progress")
        assert self.transactional_id is not None
        self.transaction = Transaction(self.transactional_id, self.transaction_timeout_s, self)

    def send_offsets_to_transaction(
        self, positions: Sequence[TopicPartition], group_metadata: Any, timeout: float | None = None
    ) -> None:
        """Stage group offsets (with their metadata): committed when the transaction is."""
        txn = self._open_transaction()
        self._request(timeout, "sending offsets to the transaction")
        if txn.failure is not None:
            raise KafkaException(
                _error(txn.failure.code(), txn.failure.str(), txn_requires_abort=True)
            )
        group = str(getattr(group_metadata, "group_id", group_metadata))
        self.cluster._coordinator_learns(txn)
        staged = txn.staged_offsets.setdefault(group, {})
        for tp in positions:
            epoch = tp.leader_epoch
            staged[(tp.topic, tp.partition)] = CommittedOffset(
                tp.offset, tp.metadata or "", -1 if epoch is None else epoch
            )

    def commit_transaction(self, timeout: float | None = None) -> None:
        """Flush, then make the transaction's records and offsets visible together."""
        txn = self._open_transaction()
        remaining = self.flush(timeout)
        self._check_usable()  # the flush may have found the producer fenced
        if remaining:
            raise _raise(
                KafkaError._TIMED_OUT, f"{remaining} record(s) not delivered", retriable=True
            )
        self._request(timeout, "committing the transaction")
        injected = self.cluster._take_commit_failure()
        if injected is not None:
            if injected.code() in _FENCED_CODES:
                self._fence(injected.str())
            elif injected.fatal():
                self._make_fatal(injected)
            elif injected.txn_requires_abort() and txn.failure is None:
                txn.failure = injected
            raise KafkaException(injected)
        if txn.failure is not None:
            raise KafkaException(
                _error(txn.failure.code(), txn.failure.str(), txn_requires_abort=True)
            )
        self.cluster._end_transaction(txn, commit=True)
        self.transaction = None
        self.transactions_committed += 1

    def abort_transaction(self, timeout: float | None = None) -> None:
        """Drop what is queued (reports with ``_PURGE_QUEUE``) and abort."""
        txn = self._open_transaction()
        self.purge()
        self._request(timeout, "aborting the transaction")
        self.cluster._end_transaction(txn, commit=False)
        self.transaction = None
        self.transactions_aborted += 1

    def _open_transaction(self) -> Transaction:
        self._check_transactional()
        if self.transaction is None:
            raise _raise(KafkaError._STATE, "no transaction in progress")
        return self.transaction

    def _check_transactional(self) -> None:
        self._check_usable()
        if self.transactional_id is None or not self.initialized:
            raise _raise(KafkaError._STATE, "transactions are not initialised")
        self.cluster._expire_transactions()
        self._check_usable()

    def _check_usable(self) -> None:
        if self.fatal_error is not None:
            raise KafkaException(self.fatal_error)

    def _fence(self, reason: str) -> None:
        """Another producer took the transactional id (or the coordinator aborted a timed-out
        transaction): the open transaction is aborted and the producer is unusable."""
        if self.fatal_error is not None:
            return
        txn = self.transaction
        if txn is not None:
            self.cluster._end_transaction(txn, commit=False)
        self._make_fatal(_error(KafkaError._FENCED, reason, fatal=True))

    def _make_fatal(self, err: KafkaError) -> None:
        if self.fatal_error is None:
            self.fatal_error = err
            self._errors.append(err)

    def _request(self, timeout: float | None, what: str) -> None:
        if self.cluster.down:
            self.clock.advance(_wait_s(timeout))
            raise _raise(
                KafkaError._TIMED_OUT, f"{what}: {self.cluster.name} is down", retriable=True
            )


# ------------------------------------------------------------------------ the engine's boundary


class FakeTopicCatalog:
    """The flow's topics on the two fake clusters (a :class:`TopicCatalog`).

    Discovery mirrors every source topic the flow's own rules copy
    (:func:`failover.topic_rules.topic_verdict`: internal topics, filters, loops) that is no
    heartbeats topic (those have their copier) and does not start with ``__`` or ``drsvc``, to
    the remote name on the target, created with the source's partition count and grown with it.
    """

    def __init__(self, source: FakeCluster, target: FakeCluster, settings: WorkerSettings) -> None:
        self.source = source
        self.target = target
        self.settings = settings
        #: discovery raises KafkaUnavailableError while set (as while a cluster is down)
        self.unreachable = False
        self.refreshes = 0
        self.mirrored: dict[str, MirroredTopic] = {}

    def _check_reachable(self) -> None:
        down = [c.name for c in (self.source, self.target) if c.down]
        if self.unreachable or down:
            raise KafkaUnavailableError(
                f"cannot reach {', '.join(down) or 'the clusters'}: no answer within 10s"
            )

    def mirrors(self, name: str) -> bool:
        """Does the flow copy source topic ``name``?"""
        s = self.settings
        if name.startswith(("__", "drsvc")) or is_heartbeats_topic(name, s.policy, s.names):
            return False
        verdict = topic_verdict(
            name,
            s.source_alias,
            s.target_alias,
            s.policy,
            topics=s.topics,
            names=s.names,
            allow_multi_hop=s.allow_multi_hop,
        )
        return verdict.replicate and verdict.target_topic is not None

    def refresh(self) -> dict[str, MirroredTopic]:
        self._check_reachable()
        self.refreshes += 1
        s = self.settings
        mirrored: dict[str, MirroredTopic] = {}
        for name in sorted(self.source.topics):
            if not self.mirrors(name):
                continue
            source = self.source.topics[name]
            remote_name = s.policy.format_remote_topic(s.source_alias, name)
            count = len(source.partitions)
            remote = self.target.topics.get(remote_name)
            if remote is None:
                remote = self.target.create_topic(remote_name, count)
            elif len(remote.partitions) < count:
                self.target.add_partitions(remote_name, count)
            mirrored[name] = MirroredTopic(
                source=source.info(), remote_name=remote_name, remote=remote.info(), configs={}
            )
        self.mirrored = mirrored
        return dict(mirrored)

    def ensure_sync_topic(self) -> None:
        self.ensure_topic(self.settings.sync_topic, 1)

    def ensure_topic(self, name: str, partitions: int) -> int:
        self._check_reachable()
        found = self.target.topics.get(name)
        if found is None:
            found = self.target.create_topic(name, partitions)
        return len(found.partitions)

    def slot_assigned(self, group: str, member_id: str, topic: str, slot: int) -> bool | None:
        """The target group coordinator's answer: None unless the group is stable."""
        self._check_reachable()
        found = self.target._groups.get(group)
        if not member_id or found is None or not found.members or not found.stable():
            return None
        if member_id not in found.members:
            return False
        return (topic, slot) in found.target()[member_id]


class FakeSyncLog:
    """What the target holds of a flow (a :class:`SyncLog`), read straight from the fake
    target's logs with the semantics of :mod:`drsvc.runtime.replication.repair`: the same
    backward windows, a ``read_uncommitted`` view (open and aborted records count, markers do
    not), provenance and syncs decoded with the project's own functions."""

    def __init__(self, target: FakeCluster, settings: WorkerSettings) -> None:
        self.target = target
        self.settings = settings
        #: (remote topic, partition, after) of every tail read, in order
        self.tail_reads: list[tuple[str, int, int | None]] = []

    def _check_reachable(self) -> None:
        if self.target.down:
            raise KafkaUnavailableError(f"reading {self.target.name}: the cluster is down")

    def _range(self, log: PartitionLog, begin: int, end: int) -> list[StoredRecord]:
        records = log.records
        i = log.index_of(begin)
        found = []
        while i < len(records) and records[i].offset < end:
            if not records[i].control:
                found.append(records[i])
            i += 1
        return found

    def unsynced_copies(
        self,
        remote_topic: str,
        partition: int,
        source_topic: str,
        start: int,
        timeout_s: float,
        after: int | None = None,
    ) -> list[tuple[int, int]]:
        self._check_reachable()
        self.tail_reads.append((remote_topic, partition, after))
        log = self.target._partition(remote_topic, partition)
        if log is None:
            return []
        low, high = log.log_start, log.end
        window = repair.FIRST_WINDOW
        while True:
            begin = max(low, high - window) if after is None else max(low, after)
            copies: list[tuple[int, int]] = []
            reached = begin >= high
            for record in self._range(log, begin, high):
                hops = provenance.chain(record.headers)
                if not hops:
                    continue
                hop = hops[-1]
                if hop.cluster != self.settings.source_alias or hop.topic != source_topic:
                    continue
                if hop.partition != partition:
                    continue
                if hop.offset < start:
                    reached = True
                    continue
                copies.append((hop.offset, record.offset))
            if reached or begin == low or after is not None:
                return copies
            window *= 4

    def written_sync_end(
        self, tp: offset_syncs.TopicPartition, topic_ids: tuple[bytes, bytes], timeout_s: float
    ) -> int:
        last = self.written_last_copy(tp, topic_ids, repair.MAX_SYNC_SCAN, timeout_s)
        return 0 if last is None else last.target_offset + 1

    def written_last_copy(
        self,
        tp: offset_syncs.TopicPartition,
        topic_ids: tuple[bytes, bytes],
        max_scan: int,
        timeout_s: float,
    ) -> LastCopy | None:
        self._check_reachable()
        log = self.target._partition(self.settings.sync_topic, 0)
        if log is None:
            return None
        low, high = log.log_start, log.end
        key = offset_syncs.encode_key(tp.topic, tp.partition)
        end, window = high, min(repair.FIRST_WINDOW, max_scan)
        while end > low and high - end < max_scan:
            begin = max(low, end - window, high - max_scan)
            syncs = []
            for record in self._range(log, begin, end):
                if record.key != key:
                    continue
                try:
                    sync = offset_syncs.decode_value("x", 0, record.value or b"")
                except offset_syncs.SyncFormatError:
                    continue
                if (sync.source_topic_id, sync.target_topic_id) == topic_ids:
                    syncs.append(sync)
            found = last_copy_of(syncs, None)
            if found is not None:
                return found
            end, window = begin, window * 4
        return None

    def syncs(self) -> list[offset_syncs.OffsetSync]:
        """Every committed sync on the flow's sync topic, in order (for assertions)."""
        if self.settings.sync_topic not in self.target.topics:
            return []
        return [
            offset_syncs.decode_sync(record.key or b"", record.value or b"")
            for record in self.target.records(self.settings.sync_topic, 0)
        ]


class FakeHeartbeatCopier:
    """The heartbeat copier's place: does nothing, remembers being started and stopped."""

    def __init__(self) -> None:
        self.started = False
        self.stopped = False

    def start(self) -> None:
        self.started = True

    def stop(self, timeout_s: float = 10.0) -> None:
        self.stopped = True


class FakeKafka:
    """The engine's :class:`~drsvc.runtime.replication.boundary.KafkaBoundary` on two fake
    clusters. Its clients come from a :class:`FakeKafkaClients` built, as the real boundary's
    factory is, from the settings' resolved client settings of the source and the target: a
    role's overlay is merged (and refused if it sets a bootstrap or security key) by the port's
    own code, and the client is a fake one on the cluster of that alias."""

    def __init__(
        self,
        source: FakeCluster,
        target: FakeCluster,
        settings: WorkerSettings,
        clock: FakeClock | None = None,
    ) -> None:
        self.clock = clock if clock is not None else source.clock
        if source.clock is not self.clock or target.clock is not self.clock:
            raise ValueError("the clusters and FakeKafka must share one FakeClock")
        for role, cluster, client in (
            ("source", source, settings.source_client),
            ("target", target, settings.target_client),
        ):
            if client.get("bootstrap.servers") != cluster.bootstrap:
                raise ValueError(
                    f"the settings' {role} client names {client.get('bootstrap.servers')!r}, not "
                    f"{cluster.bootstrap!r}: build them with worker_settings(topology, flow, "
                    "bootstrap_servers(source, target))"
                )
        self.source = source
        self.target = target
        self.settings = settings
        #: the port's factory on the two clusters, by the flow's aliases
        self.clients = FakeKafkaClients.for_worker(source, target, settings)
        #: discovery runs in the loop (nothing runs on a thread here); a test of discovery on
        #: its own thread sets True
        self.background_discovery = False
        #: every client handed out, in order
        self.consumers: list[FakeConsumer] = self.clients.consumers
        self.producers: list[FakeProducer] = self.clients.producers
        self.copiers: list[FakeHeartbeatCopier] = []
        #: records a consumer takes from one partition before the next (see FakeConsumer.chunk)
        self.fetch_chunk = FakeConsumer.chunk
        self._catalog = FakeTopicCatalog(source, target, settings)
        self._sync_log = FakeSyncLog(target, settings)

    def consumer(self, alias: str, overlay: Mapping[str, Any]) -> Consumer:
        consumer = self.clients.consumer(alias, overlay)
        cast(FakeConsumer, consumer).chunk = self.fetch_chunk
        return consumer

    def producer(self, alias: str, overlay: Mapping[str, Any]) -> Producer:
        return self.clients.producer(alias, overlay)

    def topics(self) -> FakeTopicCatalog:
        return self._catalog

    def sync_log(self) -> FakeSyncLog:
        return self._sync_log

    def heartbeat_copier(self) -> FakeHeartbeatCopier:
        copier = FakeHeartbeatCopier()
        self.copiers.append(copier)
        return copier


# ------------------------------------------------------------------------------ the Kafka port


class FakeKafkaClients(KafkaClients):
    """The port's client factory (:class:`drsvc.kafka.clients.KafkaClients`) on fake clusters:
    a client of alias ``east`` is a client of the :class:`FakeCluster` named ``east``.

    Only where the clients come from is replaced. Their settings are built by the real
    factory (the topology's bootstrap and security settings merged, an overlay that tries to
    change them refused), and everything built on ``consumer`` and ``producer`` runs as it is:
    a :meth:`reader` is the port's own :class:`~drsvc.kafka.reader.TopicReader` over a
    :class:`FakeConsumer`. Admin clients are not faked.

    ``topology`` defaults to one that names the clusters and nothing else. The clusters must
    share one clock, which becomes the factory's.
    """

    def __init__(self, *clusters: FakeCluster, topology: Topology | None = None) -> None:
        if not clusters:
            raise ValueError("FakeKafkaClients needs at least one FakeCluster")
        if topology is None:
            names = "".join(f"  {cluster.name}: {{}}\n" for cluster in clusters)
            topology = load_topology_text(f"name: fake\nclusters:\n{names}")
        super().__init__(topology, bootstrap_servers(*clusters), clock=clusters[0].clock)
        self._fake(clusters)

    @classmethod
    def for_worker(
        cls, source: FakeCluster, target: FakeCluster, settings: WorkerSettings
    ) -> FakeKafkaClients:
        """The factory a replication worker's boundary builds
        (:meth:`~drsvc.kafka.clients.KafkaClients.for_configs` of the settings' resolved client
        settings), on ``source`` and ``target`` by the flow's aliases."""
        clients = cls.for_configs(
            {
                settings.source_alias: settings.source_client,
                settings.target_alias: settings.target_client,
            },
            clock=source.clock,
        )
        assert isinstance(clients, FakeKafkaClients)
        clients._fake((source, target), aliases=(settings.source_alias, settings.target_alias))
        return clients

    def _fake(self, clusters: Sequence[FakeCluster], aliases: Sequence[str] | None = None) -> None:
        clock = clusters[0].clock
        if any(cluster.clock is not clock for cluster in clusters):
            raise ValueError("the clusters of FakeKafkaClients must share one FakeClock")
        self.fake_clock = clock
        names = aliases if aliases is not None else [cluster.name for cluster in clusters]
        #: the fake cluster of each alias
        self.clusters = dict(zip(names, clusters, strict=True))
        #: every client handed out, in order
        self.consumers: list[FakeConsumer] = []
        self.producers: list[FakeProducer] = []
        #: given to every consumer handed out from now on (see FakeConsumer.record_cost_s)
        self.record_cost_s = 0.0

    def consumer(self, alias: str, overlay: Mapping[str, Any] | None = None) -> Consumer:
        config = self.config(alias, overlay)
        consumer = FakeConsumer(self.clusters[alias], config, self.fake_clock)
        consumer.record_cost_s = self.record_cost_s
        self.consumers.append(consumer)
        return cast(Consumer, consumer)

    def producer(self, alias: str, overlay: Mapping[str, Any] | None = None) -> Producer:
        config = self.config(alias, overlay)
        producer = FakeProducer(self.clusters[alias], config, self.fake_clock)
        self.producers.append(producer)
        return cast(Producer, producer)

    def admin(self, alias: str) -> AdminClient:
        raise NotImplementedError("the fake clusters have no admin client")
