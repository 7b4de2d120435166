"""Every name drsvc gives to what it keeps in Kafka and Consul, each built in exactly one place.

A name here is state: a consumer group holds committed progress, a transactional id fences a
previous writer, a Consul key holds a decision. Renaming one silently orphans that state, so
nothing else in drsvc spells these names out; it calls the functions below. Each says what the
name is and on which cluster it lives. ``<flow-key>`` is ``<source>-<target>`` (a flow's id,
``<source>-><target>``, is not a legal Kafka name).

Names that a topology may change are not here but in
:class:`failover.topic_rules.InternalTopicNames` (``heartbeats``, ``drsvc.offset-syncs.<source>``,
``<source>.checkpoints.internal``; their defaults are below), and remote topic names
(``east.orders`` on west) come from the flow's
:class:`failover.replication_policy.ReplicationPolicy`.

Every consumer group drsvc uses starts with :data:`OWN_GROUP_PREFIX`: the checkpoint stream and
the group offset sync recognise drsvc's own groups by it and never translate or move them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from failover.errors import PolicyError

__all__ = [
    "CHECKPOINTS_READER_GROUP",
    "DEFAULT_CHECKPOINTS_TOPIC",
    "DEFAULT_HEARTBEATS_TOPIC",
    "DEFAULT_OFFSET_SYNCS_TOPIC",
    "DEMO_READER_GROUP",
    "MM2_TAKEOVER_READER_GROUP",
    "OWN_GROUP_PREFIX",
    "REPLAY_READER_GROUP",
    "REQUEST_ID_PATTERN",
    "SMOKE_KEY",
    "SMOKE_TOPIC",
    "SYNC_REPAIR_GROUP",
    "TRANSLATE_READER_GROUP",
    "VERIFY_GROUP_PREFIX",
    "FailoverKey",
    "app_active_key",
    "check_key_segment",
    "check_request_id",
    "checkpoints_app_id",
    "checkpoints_app_suffix",
    "consul_prefix",
    "failover_chunk_key",
    "failover_chunks_prefix",
    "flow_client_id",
    "flow_control_key",
    "flow_key",
    "heartbeat_copier_group",
    "heartbeat_observer_client_id",
    "heartbeat_observer_group",
    "heartbeats_client_id",
    "judge_reader_group",
    "kafka_service",
    "parse_failover_key",
    "progress_reader_group",
    "replicator_group",
    "slot_membership_group",
    "slots_topic",
    "smoke_group",
    "transactional_id",
    "transactional_id_prefix",
]

OWN_GROUP_PREFIX = "drsvc-"
"""Prefix of every consumer group (and faust app id) of drsvc; groups with it are never
checkpointed nor synced."""

# -- topics (defaults of the configurable names; ``{source}`` is a flow's source alias) ----------

DEFAULT_HEARTBEATS_TOPIC = "heartbeats"
"""On every cluster: one record a second from its emitter. Replicated like a user topic
(``east.heartbeats`` on west), so its freshness there says east is alive and reaching west."""

DEFAULT_OFFSET_SYNCS_TOPIC = "drsvc.offset-syncs.{source}"
"""On each flow's target: where every copied run's source offsets map to target offsets."""

DEFAULT_CHECKPOINTS_TOPIC = "{source}.checkpoints.internal"
"""On each flow's target (compacted): the source groups' positions translated to the target."""


def flow_key(source: str, target: str) -> str:
    """The flow's part of the names below: ``<source>-<target>``."""
    return f"{source}-{target}"


def slots_topic(source: str, target: str) -> str:
    """On the target of an exactly-once flow: one partition per slot, so that a consumer group's
    assignment of it says who owns which slot. The ``.internal`` suffix keeps every flow from
    copying it."""
    return f"drsvc.slots.{flow_key(source, target)}.internal"


# -- consumer groups and transactional ids --------------------------------------------------------


def replicator_group(source: str, target: str) -> str:
    """A flow's progress group, ``drsvc-replicator.<flow-key>``.

    At least once: the group on the **source** whose members share the flow's partitions and
    commit the next source offset to copy. Exactly once: the group on the **target** whose offsets
    are committed inside each slot's transaction (:class:`failover.slots.SlotProgress`)."""
    return f"{OWN_GROUP_PREFIX}replicator.{flow_key(source, target)}"


def progress_reader_group(source: str, target: str) -> str:
    """On the source of an exactly-once flow: the id its consumer must carry; partitions are
    assigned by slot, so the group is never joined and never commits."""
    return f"{replicator_group(source, target)}.reader"


def slot_membership_group(source: str, target: str) -> str:
    """On the target of an exactly-once flow: the group over :func:`slots_topic` whose
    assignment decides which worker owns which slot."""
    return f"{OWN_GROUP_PREFIX}slots.{flow_key(source, target)}"


def transactional_id_prefix(source: str, target: str) -> str:
    """On the target of an exactly-once flow: what every slot's :func:`transactional_id`
    starts with, ``drsvc.<flow-key>.`` (the slot count is not known before the flow runs, so
    an ACL names the ids by this prefix)."""
    return f"drsvc.{flow_key(source, target)}."


def transactional_id(source: str, target: str, slot: int) -> str:
    """On the target of an exactly-once flow: the transactional id of one slot; whoever
    initialises it fences the slot's previous owner."""
    return f"{transactional_id_prefix(source, target)}{slot}"


def judge_reader_group(source: str, target: str) -> str:
    """On the source: the id of the consumer a worker reads records again with to judge them by
    their epoch (assigned only, never joined, never commits)."""
    return f"{replicator_group(source, target)}.judge"


def heartbeat_copier_group(source: str, target: str) -> str:
    """On the source: the id of the flow's heartbeat lane consumer (assigned only, never joined,
    never commits); distinct from :func:`replicator_group`, whose partitions it must not share."""
    return f"{OWN_GROUP_PREFIX}heartbeats.{flow_key(source, target)}"


def heartbeat_observer_group(observer: str) -> str:
    """On cluster ``observer``: the id of the consumer reading the heartbeats replicated to it
    (assigned only, never joined, never commits)."""
    return f"{OWN_GROUP_PREFIX}heartbeat-observer.{observer}"


def checkpoints_app_id(cluster: str, suffix: str = "") -> str:
    """On ``cluster`` (a flow target, or a cluster holding a reverse flow's syncs): the faust app
    id of the checkpoint stream, which is also its consumer group over the sync topics there.
    ``suffix`` keeps processes that run different flows out of each other's group."""
    return f"{OWN_GROUP_PREFIX}checkpoints.{cluster}{suffix}"


def checkpoints_app_suffix(flow_id: str) -> str:
    """The :func:`checkpoints_app_id` suffix of a process that runs one flow's stream only:
    ``.<flow-key>`` for flow ``<source>-><target>``."""
    source, _, target = flow_id.partition("->")
    return "." + flow_key(source, target)


CHECKPOINTS_READER_GROUP = f"{OWN_GROUP_PREFIX}checkpoints-reader"
"""On a flow's target: the id of consumers that read sync and checkpoint topics by assignment
(never joined, never committed)."""

TRANSLATE_READER_GROUP = f"{OWN_GROUP_PREFIX}translate"
"""On a flow's target: the id of the consumer that reads a sync topic for a translation
(assigned only, never commits)."""

REPLAY_READER_GROUP = f"{OWN_GROUP_PREFIX}replay-reader"
"""On both clusters of a recovery: the id of the consumer that reads the records a recovery
replays and what an earlier replay copied (assigned only, never commits)."""

SYNC_REPAIR_GROUP = f"{OWN_GROUP_PREFIX}sync-repair"
"""On a flow's target: the id of the consumer that scans remote topics for copies without offset
syncs after a crash (assigned only, never commits)."""

MM2_TAKEOVER_READER_GROUP = f"{OWN_GROUP_PREFIX}mm2-takeover"
"""On both clusters of a migration: the id of the consumers that read MirrorMaker 2's progress
and offset syncs, and the records its copy ends with, to take over from it (assigned only, never
commits)."""

DEMO_READER_GROUP = f"{OWN_GROUP_PREFIX}demo-reader"
"""On the local clusters: the id of the consumer ``drsvc demo`` reads topic metadata with."""


VERIFY_GROUP_PREFIX = f"{OWN_GROUP_PREFIX}verify"
"""On every cluster ``drsvc verify`` reads: the ``groupIdPrefix`` of Spark's Kafka source, which
names its consumers ``<prefix>-<uuid>-...`` (never committed)."""


def smoke_group(token: str) -> str:
    """On each local cluster: a one-off group that reads back one smoke record."""
    return f"{OWN_GROUP_PREFIX}smoke-{token}"


# -- client ids (what brokers and ``drsvc status`` show as a member's owner) -------------------


def flow_client_id(flow_id: str, role: str = "") -> str:
    """The client id of a replication worker's client of flow ``flow_id`` (``east->west``);
    ``role`` tells the clients of one worker apart (``progress``, ``slot-3`` ...)."""
    return f"drsvc-{flow_id}" + (f"-{role}" if role else "")


def heartbeats_client_id(name: str) -> str:
    """The client id of a heartbeat emitter (``name`` is its cluster) or lane (its flow id)."""
    return f"drsvc-heartbeats-{name}"


def heartbeat_observer_client_id(observer: str) -> str:
    """The client id of the heartbeat observer on cluster ``observer``."""
    return f"drsvc-heartbeat-observer-{observer}"


# -- Consul KV ------------------------------------------------------------------------------------

#: A caller's request id (API body, CLI ``--request-id``): it becomes one segment of a Consul key,
#: so it starts with a letter or digit (never ``.`` or ``..``) and has no ``/``.
REQUEST_ID_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,127}")


def check_request_id(request_id: str) -> str:
    """``request_id`` if it may name a request; :class:`PolicyError` naming the rule if not."""
    if not REQUEST_ID_PATTERN.fullmatch(request_id):
        raise PolicyError(
            f"request id {request_id!r}: 1 to 128 letters, digits, '.', '_', ':' or '-', "
            "starting with a letter or digit"
        )
    return request_id


def check_key_segment(kind: str, name: str) -> str:
    """``name`` if it may be one segment of a Consul key (a namespace, an application, a
    cluster alias); :class:`PolicyError` if not. Consul's reads normalise ``.`` and ``..`` in a
    URL while its transactions store them literally, so such a name would read and write
    different keys."""
    if name in {".", ".."} or not name or "/" in name:
        raise PolicyError(f"{kind} {name!r} cannot be part of a Consul key (not '.', '..' or '/')")
    return name


def consul_prefix(namespace: str) -> str:
    """Every key of a topology's namespace lives under ``drsvc/<namespace>/``."""
    return f"drsvc/{namespace}"


def app_active_key(namespace: str, application: str) -> str:
    """Where ``application`` is active: a cluster alias (or none while a switch is under way).
    Only the failover executor writes it; the group offset sync reads it."""
    return f"{consul_prefix(namespace)}/apps/{application}/active"


def app_lock_key(namespace: str, application: str) -> str:
    """The failover executor's lock of ``application`` (held through a Consul session; its value
    names the failover that holds it). One failover of an application runs at a time."""
    return f"{consul_prefix(namespace)}/apps/{application}/lock"


def app_failover_key(namespace: str, application: str) -> str:
    """The id of ``application``'s latest failover: a new one may start only once that one's
    record has ended."""
    return f"{consul_prefix(namespace)}/apps/{application}/failover"


def failovers_prefix(namespace: str) -> str:
    """Every failover record of the namespace lives under this prefix."""
    return f"{consul_prefix(namespace)}/failovers/"


def failover_record_key(namespace: str, failover_id: str) -> str:
    """The record of one failover (:mod:`failover.failover_record`)."""
    return f"{failovers_prefix(namespace)}{failover_id}"


def failover_chunks_prefix(namespace: str, failover_id: str) -> str:
    """Where the chunks of a record too large for one value live (``failovers/<id>/``), under
    the record's own key so that whoever may read records may read its chunks too."""
    return f"{failover_record_key(namespace, failover_id)}/"


def failover_chunk_key(namespace: str, failover_id: str, tag: str, number: int) -> str:
    """Chunk ``number`` (from 0) of a record's chunk set ``tag`` (from its digest)."""
    return f"{failover_chunks_prefix(namespace, failover_id)}{tag}/{number:04d}"


@dataclass(frozen=True)
class FailoverKey:
    """What a key under :func:`failovers_prefix` holds: a record's head (``tag`` None) or one
    of its chunks."""

    failover_id: str
    tag: str | None = None
    number: int | None = None


def parse_failover_key(namespace: str, key: str) -> FailoverKey | None:
    """The record or chunk ``key`` names; None for a key of another shape."""
    prefix = failovers_prefix(namespace)
    if not key.startswith(prefix):
        return None
    parts = key[len(prefix) :].split("/")
    if len(parts) == 1 and parts[0]:
        return FailoverKey(parts[0])
    if len(parts) == 3 and all(parts) and parts[2].isdigit():
        return FailoverKey(parts[0], parts[1], int(parts[2]))
    return None


def failover_request_key(namespace: str, application: str, request_id: str) -> str:
    """Which failover of ``application`` a caller's request id started, with a digest of the
    request (the same request twice is one failover; the same id with another request is
    refused). Ids are scoped per application: ``r-42`` of one application is not another's.
    Raises :class:`PolicyError` for an application name or request id that cannot be part of a
    key (``..`` would reach another application's keys)."""
    check_key_segment("application", application)
    check_request_id(request_id)
    return f"{consul_prefix(namespace)}/failover-requests/{application}/{request_id}"


def controller_lock_key(namespace: str) -> str:
    """The DR controller's leader lock (held through a Consul session; its value names the
    replica that leads). Only the leader decides and starts automated failovers."""
    return f"{consul_prefix(namespace)}/controller/leader"


def flow_control_key(namespace: str, source: str, target: str) -> str:
    """The flow's control document (pause, resume, throttle), written by ``drsvc flow`` and
    followed by every worker of the flow."""
    return f"{consul_prefix(namespace)}/flows/{source}/{target}/control"


def flow_stale_records_key(namespace: str, source: str, target: str) -> str:
    """Records the flow's workers found written under a stale epoch after a switch away from
    the source (:mod:`failover.stale_epochs`); the failover report lists them."""
    return f"{consul_prefix(namespace)}/flows/{source}/{target}/stale-records"


# -- Consul services -----------------------------------------------------------------------------


def kafka_service(alias: str) -> str:
    """The Consul service whose health checks say whether cluster ``alias``'s brokers answer;
    the controller and the API read its health as one vantage point."""
    return f"kafka-{alias}"


# -- the local environment's smoke test ------------------------------------------------------

SMOKE_TOPIC = "drsvc-smoke"
"""On each local cluster: ``drsvc dev smoke`` writes one record here and reads it back."""

SMOKE_KEY = "drsvc/smoke"
"""In the local Consul agent, outside any namespace: ``drsvc dev smoke`` writes and reads it."""
