"""Group offset sync: keep a passive application's groups on a flow's target at the translated
positions, so that a failover finds fresh committed offsets there.

The checkpoint agent of a flow translates each group's committed offsets on the source through the
offset syncs and hands them to :meth:`GroupOffsetSyncer.sync`, keyed by the topic and partition on
the *target*. The syncer commits them to the group on the target when, and only when:

* the group belongs to an application that opted in (``sync_group_offsets: true``) and the flow's
  groups filter includes it;
* the application is not active on the flow's target. Its active cluster is the Consul key
  ``drsvc/<namespace>/apps/<app>/active`` (an alias, plain or as JSON ``"west"`` or
  ``{"cluster": "west", ...}``); without the key it is the application's preferred cluster. A
  value of ``null``, ``none`` or an empty string means a switch is under way: nothing is synced.
  A value that names no cluster of the topology is not guessed at: nothing is synced either;
* a partition never moves backwards (below the group's committed offset on the target), unless
  the source group itself went back since that offset was committed, or a topic was recreated.
  Every commit of the syncer carries, as its metadata, the source position it was translated from
  (:mod:`~drsvc.runtime.checkpoints.sync_origin`), and every call says, per partition, which
  source position the wanted offset was translated from (``origins``). A target offset written by
  the syncer from a source position ahead of the wanted one's, or from another incarnation of
  the source or target topic, may be moved back: the source group went back since (or the topic
  changed). This does not depend on one call: a rewind whose sync failed (Consul unreachable, a
  switch under way, members on the target, a refusal) is still recognised by every later call,
  also after a restart of the checkpoint agent. A commit the syncer did not write (a consumer's,
  or one without origin) is moved back only when the caller names the partition in ``rewound``
  (the source group went back in this very round);
* the group has no members on the target. This is not checked beforehand: the offsets are simply
  committed without a member id, and the broker refuses such a commit while the group has members
  (``UNKNOWN_MEMBER_ID`` on Kafka 4.1, for classic and for consumer-protocol groups). A check
  followed by a commit would leave a window in which a consumer joins and then has its position
  moved under it; the broker's refusal leaves none.

Partitions whose translation is unknown follow the application's ``on_unknown_translation``
policy (:mod:`failover.unknown_translation`): ``earliest`` commits the earliest offset retained on
the target, ``refuse`` leaves the whole group as it is and says why.

Each call returns a :class:`GroupSyncResult` with what was done per partition. Changes of a
group's state (syncing, active on the target, refused ...) are logged once, when they happen.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple, Protocol

from drsvc.errors import ConfigError
from drsvc.kafka.admin import (
    GroupOffset,
    PartitionError,
    alter_group_offsets,
    group_offsets,
    group_offsets_settings,
    list_offsets,
)
from drsvc.kafka.clients import KafkaClients
from drsvc.kafka.types import AdminClient
from drsvc.runtime.checkpoints.sync_origin import SyncOrigin, decode_origin, encode_origin
from drsvc.topology.models import Application, Flow, Topology
from failover import naming
from failover.active import decode_active
from failover.errors import ActiveFormatError
from failover.unknown_translation import (
    UnknownTranslation,
    describe_reason,
    resolve_group,
)

__all__ = [
    "ActiveCluster",
    "GroupOffsetSyncer",
    "GroupStatus",
    "GroupSyncResult",
    "KafkaTargetGroups",
    "KeyValueReader",
    "PartitionAction",
    "PartitionDecision",
    "PartitionSync",
    "TargetGroups",
    "decide_partition",
    "parse_active_value",
]

log = logging.getLogger(__name__)

Partition = tuple[str, int]

PartitionAction = Literal[
    "synced", "unchanged", "skipped-backwards", "refused-active", "refused-unknown", "failed"
]
"""What happened to one partition::

    synced              committed on the target
    unchanged           the group is already there
    skipped-backwards   the target group is further on, and the source group did not go back
                        since the target's offset was committed
    refused-active      the broker refused the commit: the group has members on the target
    refused-unknown     not moved: the application's policy refuses unknown translations
    failed              the broker refused the commit for another reason (named in detail)
"""

GroupStatus = Literal[
    "synced",
    "unchanged",
    "not-opted-in",
    "active-on-target",
    "no-active-cluster",
    "active-unreadable",
    "active-here",
    "refused-unknown",
    "failed",
]
"""The group as a whole: synced (at least one partition moved), unchanged, or why it was left
alone: not opted in, the application is active on the target, a switch is under way, the active
key is unreadable, the broker refused (members on the target), the unknown-translation policy
refused, or commits failed."""

Origin = Literal["translated", "earliest"]


# -- where the application is active (pure) -------------------------------------------------------


@dataclass(frozen=True)
class ActiveCluster:
    """Where an application is active, as far as the group sync is concerned."""

    alias: str | None
    """The active cluster; None while a switch is under way or when the value is unreadable."""
    state: Literal["active", "switching", "unreadable"]
    explanation: str


def parse_active_value(
    raw: str | None, application: Application, aliases: Collection[str], key: str
) -> ActiveCluster:
    """Read the value of the application's active key (``raw`` None when the key is absent),
    in the format of :mod:`failover.active`."""
    try:
        document = decode_active(raw, application.preferred)
    except ActiveFormatError as err:
        return _unreadable(key, raw or "", str(err))
    if raw is None:
        return ActiveCluster(
            application.preferred, "active", f"{key} is not set: its preferred cluster"
        )
    if document.cluster is None:
        return ActiveCluster(None, "switching", f"{key} = {raw!r}: a switch is under way")
    if document.cluster in aliases:
        return ActiveCluster(document.cluster, "active", f"{key} = {document.cluster!r}")
    known = ", ".join(sorted(aliases))
    return _unreadable(key, raw, f"it names no cluster of the topology (known: {known})")


def _unreadable(key: str, raw: str, why: str) -> ActiveCluster:
    return ActiveCluster(None, "unreadable", f"{key} = {raw!r} cannot be used: {why}")


# -- partition decisions (pure) -------------------------------------------------------------------


Decision = Literal["commit", "record-origin", "unchanged", "skipped-backwards"]
"""``commit`` the wanted offset; ``record-origin``: the offset is already there, commit it again
only to record what it was translated from (so that a later rewind is recognised); leave it
``unchanged``; or ``skipped-backwards``."""


class PartitionDecision(NamedTuple):
    """What to do with one partition, and why."""

    action: Decision
    why: str


def decide_partition(
    wanted: int,
    committed: int | None,
    rewound: bool,
    origin: SyncOrigin | None = None,
    committed_origin: SyncOrigin | None = None,
) -> PartitionDecision:
    """Whether to commit ``wanted`` over the target group's ``committed`` offset (None: none).

    ``origin`` is the source position ``wanted`` was translated from, ``committed_origin`` the one
    recorded with the target's commit (None: the commit was not written by the group sync, or
    carries no origin this build reads). ``rewound``: the caller saw the source group go back in
    this round. A move backwards is allowed when the source group went back since the target's
    commit (its recorded source offset is ahead of ``origin``'s), when the source or the target
    topic was recreated since (both ids known and different), or when ``rewound`` says so;
    otherwise the target's offset is kept. A commit not written by the group sync is moved back
    only on ``rewound``: nothing says the source group went back since whoever wrote it.
    """
    if committed is None:
        return PartitionDecision("commit", "")
    if wanted == committed:
        if origin is not None and committed_origin != origin:
            return PartitionDecision("record-origin", "its origin recorded")
        return PartitionDecision("unchanged", "")
    if wanted > committed:
        return PartitionDecision("commit", "")
    if rewound:
        return PartitionDecision("commit", "moved back: the source group rewound")
    back = _went_back_since(origin, committed_origin)
    if back is not None:
        return PartitionDecision("commit", f"moved back: {back}")
    if committed_origin is None:
        why = f"the group is further on the target ({committed}), committed by someone else"
    else:
        why = (
            f"the group is further on the target ({committed}, translated from source offset "
            f"{committed_origin.source_offset}) and the source group did not go back since"
        )
    return PartitionDecision("skipped-backwards", why)


def _went_back_since(origin: SyncOrigin | None, committed: SyncOrigin | None) -> str | None:
    """Why the target's commit (translated from ``committed``) is outdated by ``origin``, or None
    when nothing says it is."""
    if origin is None or committed is None:
        return None
    if (committed.flow, committed.source_topic) != (origin.flow, origin.source_topic):
        return None  # translated from something else: not comparable
    if _differ(committed.target_topic_id, origin.target_topic_id):
        return "the target topic was recreated since the target's commit"
    if _differ(committed.source_topic_id, origin.source_topic_id):
        return "the source topic was recreated since the target's commit"
    if committed.source_offset > origin.source_offset:
        return (
            f"the source group went back (from {committed.source_offset} to "
            f"{origin.source_offset}) since the target's commit"
        )
    return None


def _differ(before: bytes | None, now: bytes | None) -> bool:
    return before is not None and now is not None and before != now


# -- results --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PartitionSync:
    """What the sync did to one partition of the group on the target."""

    topic: str
    partition: int
    action: PartitionAction
    offset: int | None
    """The offset the sync wanted to commit (None when refused before one was known)."""
    committed: int | None
    """The group's committed offset on the target before the sync (None: none, or not read)."""
    origin: Origin | None
    """``translated`` (from the source group) or ``earliest`` (unknown translation, policy)."""
    detail: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {
            "topic": self.topic,
            "partition": self.partition,
            "action": self.action,
            "offset": self.offset,
            "committed": self.committed,
            "origin": self.origin,
            "detail": self.detail,
        }


@dataclass(frozen=True)
class GroupSyncResult:
    """One sync of one group on a flow's target: the outcome and what happened per partition."""

    group: str
    flow: str
    application: str | None
    status: GroupStatus
    reason: str
    partitions: tuple[PartitionSync, ...] = ()

    def actions(self) -> dict[Partition, PartitionAction]:
        """The action of each partition, keyed by (topic, partition) on the target."""
        return {(p.topic, p.partition): p.action for p in self.partitions}

    def count(self, action: PartitionAction) -> int:
        return sum(1 for p in self.partitions if p.action == action)

    def as_dict(self) -> dict[str, Any]:
        return {
            "group": self.group,
            "flow": self.flow,
            "application": self.application,
            "status": self.status,
            "reason": self.reason,
            "partitions": [p.as_dict() for p in self.partitions],
        }


# -- I/O seams ------------------------------------------------------------------------------------


class KeyValueReader(Protocol):
    """Reads one key of the coordination store (:class:`ConsulClient` is one)."""

    def kv_get(self, key: str) -> str | None: ...


class TargetGroups(Protocol):
    """What the sync reads and changes on the flow's target cluster."""

    def committed(
        self, group: str, partitions: Collection[Partition]
    ) -> dict[Partition, GroupOffset]:
        """The group's committed offsets (with their metadata) of those of ``partitions`` that
        have one; read without joining the group."""
        ...

    def earliest(self, partitions: Collection[Partition]) -> dict[Partition, int]:
        """Earliest retained offsets of those of ``partitions`` that exist."""
        ...

    def alter(
        self, group: str, offsets: Mapping[Partition, int], metadata: Mapping[Partition, str]
    ) -> dict[Partition, PartitionError | None]:
        """Commit ``offsets`` as an outsider, each with its ``metadata`` (if any); per partition
        None or the broker's refusal."""
        ...


class KafkaTargetGroups:
    """:class:`TargetGroups` over a real cluster, ``alias``, whose clients come from ``clients``
    (built from ``client_config`` when None: then the config must name the bootstrap
    servers)."""

    def __init__(
        self,
        client_config: Mapping[str, str],
        timeout_s: float = 30.0,
        *,
        alias: str = "target",
        clients: KafkaClients | None = None,
    ) -> None:
        if clients is None:
            if not client_config.get("bootstrap.servers"):
                raise ConfigError(
                    "group offset sync: the target client config has no bootstrap.servers"
                )
            clients = KafkaClients.for_configs({alias: client_config})
        self.alias = alias
        self._clients = clients
        self._timeout_s = timeout_s

    @property
    def admin(self) -> AdminClient:
        """The target's admin client (built on first use, then kept)."""
        return self._clients.admin(self.alias)

    def committed(
        self, group: str, partitions: Collection[Partition]
    ) -> dict[Partition, GroupOffset]:
        if not partitions:
            return {}
        consumer = self._clients.consumer(self.alias, group_offsets_settings(group))
        try:
            return group_offsets(
                consumer,
                group,
                partitions,
                self._timeout_s,
                cluster=self.alias,
                clock=self._clients.clock,
            )
        finally:
            consumer.close()

    def earliest(self, partitions: Collection[Partition]) -> dict[Partition, int]:
        return list_offsets(self.admin, partitions, "earliest", self._timeout_s, cluster=self.alias)

    def alter(
        self, group: str, offsets: Mapping[Partition, int], metadata: Mapping[Partition, str]
    ) -> dict[Partition, PartitionError | None]:
        return alter_group_offsets(
            self.admin,
            group,
            offsets,
            self._timeout_s,
            metadata=metadata,
            clock=self._clients.clock,
        )


# -- the syncer -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Wanted:
    offset: int
    origin: Origin
    note: str
    translated_from: SyncOrigin | None = None


class GroupOffsetSyncer:
    """Syncs groups' offsets onto ``flow``'s target; one per flow, called after each round of
    checkpoints.

    ``target_client`` is the librdkafka config of the target cluster (bootstrap servers and
    security). ``consul`` reads the applications' active clusters; without it every application
    counts as active on its preferred cluster. ``target`` replaces the Kafka access (tests).
    """

    def __init__(
        self,
        topology: Topology,
        flow: Flow,
        target_client: Mapping[str, str],
        consul: KeyValueReader | None,
        *,
        timeout_s: float = 30.0,
        target: TargetGroups | None = None,
    ) -> None:
        topology.policy_for(flow)  # ConfigError when the flow is not the topology's
        self._topology = topology
        self._flow = flow
        self._consul = consul
        self._target: TargetGroups = target or KafkaTargetGroups(
            target_client, timeout_s, alias=flow.target
        )
        self._states: dict[str, tuple[str, str]] = {}

    @property
    def flow(self) -> Flow:
        return self._flow

    def sync(
        self,
        group: str,
        offsets: Mapping[Partition, int],
        rewound: Collection[Partition] = (),
        unknown: Mapping[Partition, str] | None = None,
        origins: Mapping[Partition, SyncOrigin] | None = None,
    ) -> GroupSyncResult:
        """Bring ``group`` on the flow's target to ``offsets`` where the rules allow it.

        ``offsets`` maps (topic, partition) on the target to the translated offset; ``unknown``
        maps the partitions whose translation is unknown to the reason (a
        :class:`failover.translation.Reason` value, ``topic-missing`` ...). ``origins`` says, for
        partitions of either, which source position they were translated from: it is recorded
        with each commit, and a target offset that a commit recorded from a source position
        ahead of it (or from another incarnation of a topic) may be moved back
        (:func:`decide_partition`). ``rewound`` names the partitions whose source group moved
        backwards in this round: those may move backwards whoever committed on the target.

        Raises :class:`ConfigError` for contradictory input (a partition both translated and
        unknown, a negative offset), :class:`CoordinatorUnavailableError` when Consul cannot be
        read, and :class:`KafkaUnavailableError` when the target does not answer.
        """
        unknowns = _check_input(group, offsets, unknown or {})
        origins = origins or {}
        app = self._eligible_application(group)
        if isinstance(app, GroupSyncResult):
            return self._report(app)
        wanted = {
            tp: _Wanted(offset, "translated", "", origins.get(tp)) for tp, offset in offsets.items()
        }
        if unknowns:
            refused = self._resolve_unknown(app, group, unknowns, wanted, origins)
            if refused is not None:
                return self._report(refused)
        if not wanted:
            return self._report(self._result(group, app, "unchanged", "no partitions given"))
        return self._report(self._commit(group, app, wanted, set(rewound)))

    # -- steps ------------------------------------------------------------------------------------

    def _eligible_application(self, group: str) -> Application | GroupSyncResult:
        """The group's application when its offsets may be synced now, else why not."""
        app = next((a for a in self._topology.applications if group in a.groups), None)
        if app is None:
            why = f"group '{group}' belongs to no application of topology '{self._topology.name}'"
            return self._result(group, None, "not-opted-in", why)
        if not app.sync_group_offsets:
            why = f"application '{app.name}' does not set sync_group_offsets"
            return self._result(group, app, "not-opted-in", why)
        if not self._flow.groups.to_filter().matches(group):
            why = f"the groups filter of flow {self._flow.id} excludes '{group}'"
            return self._result(group, app, "not-opted-in", why)
        active = self._active_cluster(app)
        if active.state == "switching":
            return self._result(group, app, "no-active-cluster", active.explanation)
        if active.state == "unreadable":
            return self._result(group, app, "active-unreadable", active.explanation)
        if active.alias == self._flow.target:
            why = f"application '{app.name}' is active on '{active.alias}' ({active.explanation})"
            return self._result(group, app, "active-on-target", why)
        return app

    def _active_cluster(self, app: Application) -> ActiveCluster:
        key = naming.app_active_key(self._topology.namespace, app.name)
        if self._consul is None:
            return ActiveCluster(app.preferred, "active", "no Consul configured: preferred cluster")
        return parse_active_value(self._consul.kv_get(key), app, self._topology.aliases, key)

    def _resolve_unknown(
        self,
        app: Application,
        group: str,
        unknowns: list[UnknownTranslation],
        wanted: dict[Partition, _Wanted],
        origins: Mapping[Partition, SyncOrigin],
    ) -> GroupSyncResult | None:
        """Add the unknown partitions' start positions to ``wanted``, or refuse the group."""
        policy = app.on_unknown_translation
        earliest: dict[Partition, int] = {}
        if policy == "earliest":
            earliest = self._target.earliest([(u.topic, u.partition) for u in unknowns])
        resolution = resolve_group(policy, group, unknowns, earliest)
        if not resolution.refused:
            for start in resolution.start_at:
                note = f"earliest retained offset ({describe_reason(start.reason)})"
                tp = (start.topic, start.partition)
                wanted[tp] = _Wanted(start.offset, "earliest", note, origins.get(tp))
            return None
        refused = {(r.topic, r.partition): r for r in resolution.refusals}
        partitions = []
        for tp in sorted({*wanted, *((u.topic, u.partition) for u in unknowns)}):
            refusal = refused.get(tp)
            detail = (
                refusal.message
                if refusal is not None
                else "not synced: other partitions of the group have no usable translation"
            )
            offset = wanted[tp].offset if tp in wanted else None
            origin: Origin | None = "translated" if tp in wanted else None
            partitions.append(
                PartitionSync(tp[0], tp[1], "refused-unknown", offset, None, origin, detail)
            )
        reason = "; ".join(r.message for r in resolution.refusals)
        return self._result(group, app, "refused-unknown", reason, partitions)

    def _commit(
        self,
        group: str,
        app: Application,
        wanted: Mapping[Partition, _Wanted],
        rewound: set[Partition],
    ) -> GroupSyncResult:
        committed = self._target.committed(group, list(wanted))
        decisions = {tp: _decide(w, committed.get(tp), tp in rewound) for tp, w in wanted.items()}
        writes = {
            tp: wanted[tp] for tp, d in decisions.items() if d.action in ("commit", "record-origin")
        }
        metadata = {
            tp: encode_origin(w.translated_from)
            for tp, w in writes.items()
            if w.translated_from is not None
        }
        offsets = {tp: w.offset for tp, w in writes.items()}
        answers = self._target.alter(group, offsets, metadata) if offsets else {}
        partitions = []
        for tp in sorted(wanted):
            want = wanted[tp]
            before = None if committed.get(tp) is None else committed[tp].offset
            action, detail = _action(decisions[tp], answers.get(tp))
            note = "; ".join(part for part in (want.note, detail) if part)
            partitions.append(
                PartitionSync(tp[0], tp[1], action, want.offset, before, want.origin, note)
            )
        status, reason = _group_status(partitions, self._flow.target)
        return self._result(group, app, status, reason, partitions)

    # -- results and logs -------------------------------------------------------------------------

    def _result(
        self,
        group: str,
        app: Application | None,
        status: GroupStatus,
        reason: str,
        partitions: list[PartitionSync] | tuple[PartitionSync, ...] = (),
    ) -> GroupSyncResult:
        return GroupSyncResult(
            group=group,
            flow=self._flow.id,
            application=None if app is None else app.name,
            status=status,
            reason=reason,
            partitions=tuple(partitions),
        )

    def _report(self, result: GroupSyncResult) -> GroupSyncResult:
        """Log the group's state when it changes (a running sync moving offsets is one state)."""
        syncing = result.status in ("synced", "unchanged")
        state = ("syncing", "") if syncing else (result.status, result.reason)
        previous = self._states.get(result.group)
        self._states[result.group] = state
        extra = {"group": result.group, "flow": result.flow, "status": result.status}
        if state == previous:
            log.debug(
                "group %s on %s: %s", result.group, self._flow.target, result.reason, extra=extra
            )
            return result
        if syncing:
            was = "" if previous is None else f" (was: {previous[0]})"
            log.info(
                "group %s: syncing its offsets onto %s%s",
                result.group,
                self._flow.target,
                was,
                extra=extra,
            )
        else:
            level = _LOG_LEVELS.get(result.status, logging.INFO)
            log.log(
                level,
                "group %s: not syncing its offsets onto %s: %s",
                result.group,
                self._flow.target,
                result.reason,
                extra=extra,
            )
        return result


_LOG_LEVELS: dict[str, int] = {
    "not-opted-in": logging.DEBUG,
    "active-unreadable": logging.WARNING,
    "refused-unknown": logging.WARNING,
    "failed": logging.WARNING,
}


def _check_input(
    group: str, offsets: Mapping[Partition, int], unknown: Mapping[Partition, str]
) -> list[UnknownTranslation]:
    both = sorted(set(offsets) & set(unknown))
    if both:
        topic, partition = both[0]
        raise ConfigError(
            f"group '{group}': {topic}-{partition} is given both a translated offset and an"
            " unknown translation"
        )
    negative = sorted(tp for tp, offset in offsets.items() if offset < 0)
    if negative:
        topic, partition = negative[0]
        raise ConfigError(
            f"group '{group}': translated offset of {topic}-{partition} is negative"
            f" ({offsets[negative[0]]})"
        )
    return [UnknownTranslation(tp[0], tp[1], reason) for tp, reason in sorted(unknown.items())]


def _decide(want: _Wanted, before: GroupOffset | None, rewound: bool) -> PartitionDecision:
    if before is None:
        return decide_partition(want.offset, None, rewound, want.translated_from)
    return decide_partition(
        want.offset, before.offset, rewound, want.translated_from, decode_origin(before.metadata)
    )


def _action(
    decision: PartitionDecision, answer: PartitionError | None
) -> tuple[PartitionAction, str]:
    if decision.action in ("unchanged", "skipped-backwards"):
        return decision.action, decision.why
    if answer is None:
        return ("unchanged" if decision.action == "record-origin" else "synced"), decision.why
    if answer.group_has_members:
        return "refused-active", f"the group has members on the target ({answer.name})"
    return "failed", f"{answer.name}: {answer.description}"


def _group_status(partitions: list[PartitionSync], target: str) -> tuple[GroupStatus, str]:
    actions = [p.action for p in partitions]
    counts = {action: actions.count(action) for action in dict.fromkeys(actions)}
    summary = ", ".join(f"{count} {action}" for action, count in counts.items())
    if "refused-active" in counts:
        refusal = next(p.detail for p in partitions if p.action == "refused-active")
        return "active-here", f"the group is active on '{target}': {refusal}"
    if "failed" in counts:
        return "failed", summary + "; " + next(p.detail for p in partitions if p.action == "failed")
    if "synced" in counts:
        return "synced", summary
    return "unchanged", summary
