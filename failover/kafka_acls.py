"""The Kafka ACLs each role of drsvc needs on a cluster, least privilege, without I/O.

:func:`role_grants` answers "which bindings does role R need on cluster C of this topology": one
:class:`Grant` per (resource, pattern, operation, principal, permission). ``drsvc acls plan``
prints them in ``kafka-acls.sh`` form; an adapter may create them with the Admin API.

The roles and who runs as them:

- ``replicator``: every replication worker (both delivery modes) and its heartbeat copier. The
  heartbeat emitters and observers (``drsvc heartbeats``) run as the same principal by default,
  and then the replicator's grants include theirs (``heartbeats`` alone gives only theirs).
- ``checkpoints``: the checkpoint stream and the group offset sync.
- ``executor``: the failover executor, which the controller and the API also run (``drsvc
  failover|failback|recover|translate``, ``drsvc controller``, ``drsvc api``, ``drsvc status``).
- ``verifier``: ``drsvc verify`` (Spark's Kafka source), read only.
- ``application``: each application (``drsvc.client``) under its own principal.
- ``acl-sync``: ``drsvc acls sync``, which mirrors the source's topic READ and DESCRIBE ACLs
  onto the copies of the flows that set ``sync_acls`` (:mod:`failover.acl_sync`).
- ``migrator``: every ``drsvc migrate`` command of the topology's migrations. A migration runs
  its own one-way identity flow, copies as a replicator, reports and cuts its applications over
  as the executor, compares as the verifier and may take over from MirrorMaker 2 (reading its
  offsets and offset-syncs topics): the migrator gets those grants for the migration's flow
  and applications only, under one principal, on the migration's two clusters.

Names come from :mod:`failover.naming`, the topology's
:class:`~failover.topic_rules.InternalTopicNames` and each flow's replication policy, so a grant
names exactly what the role touches. Topic and group filters are regular expressions, which ACLs
cannot express: :func:`pattern_resources` turns a pattern into LITERAL or PREFIXED resources that
cover every name it matches, and into the wildcard ``*`` only when no such resource exists (an
include pattern ``.*`` copies every topic, so the replicator may read every topic of its source).

Kafka's implications keep the list short: READ, WRITE, ALTER and DELETE imply DESCRIBE, and
ALTER_CONFIGS implies DESCRIBE_CONFIGS. Since Kafka 3.0 an idempotent producer needs WRITE on
the topics it writes, not IDEMPOTENT_WRITE on the cluster. Only ACL management needs the cluster
resource: ``acl-sync`` (DESCRIBE at a flow's source to list its ACLs, ALTER at its target to
create them) and the executor when an application fences writes (ALTER, to add and remove its
DENY WRITE bindings).

The core cannot import the service's topology models, so it reads them through the small
protocols below (a loaded :class:`drsvc.topology.models.Topology` satisfies them as it is).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Literal, Protocol, get_args

from failover import migration_mm2, naming
from failover.errors import PolicyError
from failover.replication_policy import IdentityPolicy, PrefixPolicy, ReplicationPolicy
from failover.topic_rules import InternalTopicNames, NameFilter, topic_verdict

__all__ = [
    "CLUSTER_NAME",
    "ROLES",
    "WILDCARD",
    "Grant",
    "Operation",
    "PatternType",
    "Permission",
    "Principals",
    "Resource",
    "ResourceType",
    "Role",
    "application_clusters",
    "application_principal",
    "copy_name",
    "flow_source_resources",
    "heartbeats_topics",
    "pattern_resources",
    "role_grants",
]

Role = Literal[
    "replicator",
    "heartbeats",
    "checkpoints",
    "executor",
    "verifier",
    "application",
    "acl-sync",
    "migrator",
]
ROLES: tuple[Role, ...] = get_args(Role)


class ResourceType(StrEnum):
    TOPIC = "TOPIC"
    GROUP = "GROUP"
    TRANSACTIONAL_ID = "TRANSACTIONAL_ID"
    CLUSTER = "CLUSTER"


class PatternType(StrEnum):
    LITERAL = "LITERAL"
    PREFIXED = "PREFIXED"


class Operation(StrEnum):
    """Kafka's ACL operations (bindings listed from a cluster may name any of them)."""

    ALL = "ALL"
    READ = "READ"
    WRITE = "WRITE"
    CREATE = "CREATE"
    DELETE = "DELETE"
    DESCRIBE = "DESCRIBE"
    ALTER = "ALTER"
    ALTER_CONFIGS = "ALTER_CONFIGS"
    DESCRIBE_CONFIGS = "DESCRIBE_CONFIGS"
    CLUSTER_ACTION = "CLUSTER_ACTION"
    IDEMPOTENT_WRITE = "IDEMPOTENT_WRITE"


class Permission(StrEnum):
    ALLOW = "ALLOW"
    DENY = "DENY"


#: the LITERAL name Kafka reads as "every resource of the type"
WILDCARD = "*"
#: the one name of the cluster resource
CLUSTER_NAME = "kafka-cluster"


@dataclass(frozen=True, order=True)
class Resource:
    """A resource pattern: ``name`` LITERAL (``*`` is every resource) or PREFIXED."""

    type: ResourceType
    pattern: PatternType
    name: str

    def covers(self, name: str) -> bool:
        """Whether a resource called ``name`` (of this type) matches this pattern."""
        if self.pattern is PatternType.PREFIXED:
            return name.startswith(self.name)
        return self.name in {WILDCARD, name}

    def covers_resource(self, other: Resource) -> bool:
        """Whether every name ``other`` matches, this pattern matches too."""
        if self.type is not other.type:
            return False
        if self.pattern is PatternType.LITERAL and self.name == WILDCARD:
            return True
        if other.pattern is PatternType.LITERAL:
            return other.name != WILDCARD and self.covers(other.name)
        return self.pattern is PatternType.PREFIXED and other.name.startswith(self.name)


@dataclass(frozen=True, order=True)
class Grant:
    """One ACL binding. ``why`` says what needs it; it is not part of the binding (two grants
    that differ only there are the same grant)."""

    resource_type: ResourceType
    pattern_type: PatternType
    resource_name: str
    operation: Operation
    principal: str
    permission: Permission = Permission.ALLOW
    host: str = "*"
    why: str = field(default="", compare=False)

    @property
    def resource(self) -> Resource:
        return Resource(self.resource_type, self.pattern_type, self.resource_name)

    def allows(self, operation: Operation, resource_type: ResourceType, name: str) -> bool:
        """Whether this grant is an ALLOW of ``operation`` on the resource ``name``, counting
        Kafka's implications (READ/WRITE/ALTER imply DESCRIBE, ALTER_CONFIGS implies
        DESCRIBE_CONFIGS)."""
        return (
            self.permission is Permission.ALLOW
            and self.resource_type is resource_type
            and operation in _IMPLIED.get(self.operation, {self.operation})
            and self.resource.covers(name)
        )


_IMPLIED: Mapping[Operation, frozenset[Operation]] = {
    Operation.ALL: frozenset(Operation),
    Operation.READ: frozenset({Operation.READ, Operation.DESCRIBE}),
    Operation.WRITE: frozenset({Operation.WRITE, Operation.DESCRIBE}),
    Operation.DELETE: frozenset({Operation.DELETE, Operation.DESCRIBE}),
    Operation.ALTER: frozenset({Operation.ALTER, Operation.DESCRIBE}),
    Operation.ALTER_CONFIGS: frozenset({Operation.ALTER_CONFIGS, Operation.DESCRIBE_CONFIGS}),
}


#: the fields of :class:`Principals` that name one of drsvc's own roles
_SERVICE_ROLES = (
    "replicator",
    "heartbeats",
    "checkpoints",
    "executor",
    "verifier",
    "acl_sync",
    "migrator",
)


@dataclass(frozen=True)
class Principals:
    """Who each role is to the brokers. The defaults are one principal per role; applications
    are ``User:app-<name>`` (a topology does not name them)."""

    replicator: str = "User:drsvc-replicator"
    #: the heartbeat emitters and observers: the replicator's principal unless set apart
    heartbeats: str = "User:drsvc-replicator"
    checkpoints: str = "User:drsvc-checkpoints"
    executor: str = "User:drsvc-executor"
    verifier: str = "User:drsvc-verifier"
    acl_sync: str = "User:drsvc-acl-sync"
    migrator: str = "User:drsvc-migrator"
    application_prefix: str = "User:app-"

    def __post_init__(self) -> None:
        for role in _SERVICE_ROLES:
            _check_principal(getattr(self, role), role)
        _check_principal(self.application_prefix + "x", "application_prefix")

    def of(self, role: Role, application: str | None = None) -> str:
        """The principal of ``role`` (of ``application`` for the application role, by the
        default convention: :func:`application_principal` honours one the topology names)."""
        if role == "application":
            if application is None:
                raise PolicyError("the application role needs an application name")
            return self.application_prefix + application
        principal: str = getattr(self, role.replace("-", "_"))
        return principal

    def services(self) -> frozenset[str]:
        """The principals of drsvc's own roles (not the applications')."""
        return frozenset(getattr(self, role) for role in _SERVICE_ROLES)


def application_principal(app: ApplicationShape, principals: Principals | None = None) -> str:
    """The principal of ``app``: the one its topology entry names, else the convention's."""
    if app.principal is not None:
        return app.principal
    return (principals if principals is not None else Principals()).of("application", app.name)


def _check_principal(principal: str, what: str) -> None:
    kind, sep, name = principal.partition(":")
    if not sep or not kind or not name or any(c.isspace() for c in principal):
        raise PolicyError(f"{what}: principal {principal!r} is not of the form Type:name")


# -- what the core reads of a topology ------------------------------------------------------------


class NameFilterShape(Protocol):
    """A flow's topic or group filter: regular expressions matched against whole names."""

    @property
    def include(self) -> Sequence[str]: ...

    @property
    def exclude(self) -> Sequence[str]: ...


class FlowShape(Protocol):
    """A flow as the grants need it."""

    @property
    def source(self) -> str: ...

    @property
    def target(self) -> str: ...

    @property
    def policy(self) -> str: ...

    @property
    def separator(self) -> str: ...

    @property
    def delivery(self) -> str: ...

    @property
    def standby(self) -> bool: ...

    @property
    def multi_hop(self) -> bool: ...

    @property
    def topics(self) -> NameFilterShape: ...

    @property
    def groups(self) -> NameFilterShape: ...

    @property
    def sync_acls(self) -> bool: ...


class ApplicationShape(Protocol):
    """An application as the grants need it."""

    @property
    def name(self) -> str: ...

    @property
    def groups(self) -> Sequence[str]: ...

    @property
    def topics(self) -> Sequence[str]: ...

    @property
    def preferred(self) -> str: ...

    @property
    def transactional_ids(self) -> Sequence[str]: ...

    @property
    def sync_group_offsets(self) -> bool: ...

    @property
    def on_recovery(self) -> str: ...

    @property
    def principal(self) -> str | None: ...

    @property
    def fence_writes(self) -> bool: ...


class MigrationShape(Protocol):
    """A migration as the grants need it."""

    @property
    def name(self) -> str: ...

    @property
    def source(self) -> str: ...

    @property
    def target(self) -> str: ...

    @property
    def topics(self) -> NameFilterShape: ...

    @property
    def applications(self) -> Sequence[str]: ...


class TopologyShape(Protocol):
    """A topology as the grants need it (:class:`drsvc.topology.models.Topology` is one)."""

    @property
    def clusters(self) -> Mapping[str, object]: ...

    @property
    def flows(self) -> Sequence[FlowShape]: ...

    @property
    def applications(self) -> Sequence[ApplicationShape]: ...

    @property
    def migrations(self) -> Sequence[MigrationShape]: ...

    def internal_names(self) -> InternalTopicNames: ...


# -- regular expressions as ACL resources -------------------------------------------------------

#: characters that mean something in a Python regular expression outside a class
_META = frozenset(".^$*+?{}[]()|\\")
#: quantifiers that may repeat the atom before them zero times
_OPTIONAL = frozenset("*?{")


def pattern_resources(pattern: str, resource_type: ResourceType) -> tuple[Resource, ...]:
    """Resources that together cover every name ``pattern`` matches in full (as the filters
    match, :func:`re.fullmatch`): LITERAL when the pattern is a plain name (``orders``,
    ``^orders$``, ``orders\\.v2``), PREFIXED on the literal start of a pattern that goes on
    (``orders\\..*`` gives ``orders.``), and one per alternative of a top-level ``a|b``. The
    LITERAL wildcard ``*`` when the pattern has no literal start (``.*``, ``[a-z]+``) or uses
    what a scan of its text cannot follow (groups, inline flags): a covering superset, never
    less than the pattern matches."""
    if "(" in pattern or "[" in pattern:
        # Alternatives inside groups or classes, and inline flags such as (?i), change what a
        # literal start means; a wildcard is the only resource sure to cover them.
        return (Resource(resource_type, PatternType.LITERAL, WILDCARD),)
    alternatives = _split_alternatives(pattern)
    found: list[Resource] = []
    for alternative in alternatives:
        resource = _alternative_resource(alternative, resource_type)
        if resource.name == WILDCARD and resource.pattern is PatternType.LITERAL:
            return (resource,)
        found.append(resource)
    return tuple(sorted(set(found)))


def _split_alternatives(pattern: str) -> list[str]:
    """``pattern`` cut at each unescaped ``|`` (the caller made sure there are no groups)."""
    parts: list[str] = []
    current: list[str] = []
    escaped = False
    for char in pattern:
        if escaped:
            current.append(char)
            escaped = False
        elif char == "\\":
            current.append(char)
            escaped = True
        elif char == "|":
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
    parts.append("".join(current))
    return parts


def _alternative_resource(pattern: str, resource_type: ResourceType) -> Resource:
    literal: list[str] = []
    i = 1 if pattern.startswith("^") else 0
    complete = False
    while True:
        if i == len(pattern) or pattern[i:] == "$":
            complete = True
            break
        char = pattern[i]
        if char == "\\":
            following = pattern[i + 1 : i + 2]
            if not following or following.isalnum() or following == "_":
                break  # a class such as \d or \w, or an anchor such as \Z: not one character
            atom, width = following, 2
        elif char in _META:
            break
        else:
            atom, width = char, 1
        after = pattern[i + width : i + width + 1]
        if after in _OPTIONAL:
            break  # the atom may be absent: the literal start ends before it
        literal.append(atom)
        i += width
        if after == "+":
            break  # the atom at least once: counted once, what follows is unknown
    name = "".join(literal)
    if complete and name:
        return Resource(resource_type, PatternType.LITERAL, name)
    if name:
        return Resource(resource_type, PatternType.PREFIXED, name)
    return Resource(resource_type, PatternType.LITERAL, WILDCARD)


def _filter_resources(patterns: Iterable[str], resource_type: ResourceType) -> list[Resource]:
    resources: set[Resource] = set()
    for pattern in patterns:
        resources.update(pattern_resources(pattern, resource_type))
    return _minimal(resources)


def _minimal(resources: Iterable[Resource]) -> list[Resource]:
    """``resources`` without those another of them covers."""
    unique = sorted(set(resources))
    return [r for r in unique if not any(o != r and o.covers_resource(r) for o in unique)]


# -- the topology, read for grants -------------------------------------------------------------


def _policy(topology: TopologyShape, flow: FlowShape) -> ReplicationPolicy:
    if flow.policy == "identity":
        return IdentityPolicy()
    return PrefixPolicy(aliases=frozenset(topology.clusters), separator=flow.separator)


def _copies(topology: TopologyShape, flow: FlowShape, topic: str) -> str | None:
    """The name ``flow`` gives its copy of ``topic`` (a name on its source), or None when it
    does not copy it."""
    verdict = topic_verdict(
        topic,
        flow.source,
        flow.target,
        _policy(topology, flow),
        topics=NameFilter(tuple(flow.topics.include), tuple(flow.topics.exclude)),
        names=topology.internal_names(),
        allow_multi_hop=flow.multi_hop,
    )
    return verdict.target_topic if verdict.replicate else None


def heartbeats_topics(topology: TopologyShape, cluster: str) -> tuple[str, ...]:
    """Every heartbeats topic that can exist on ``cluster``: its own and the copies that flows
    bring there, multi-hop included (``east.heartbeats``, ``west.east.heartbeats``), sorted."""
    own = topology.internal_names().heartbeats
    found: dict[str, set[str]] = {alias: {own} for alias in topology.clusters}
    changed = True
    while changed:  # ends: the loop rule refuses any name that would pass a cluster twice
        changed = False
        for flow in topology.flows:
            for topic in sorted(found.get(flow.source, set())):
                remote = _copies(topology, flow, topic)
                if remote is not None and remote not in found.setdefault(flow.target, set()):
                    found[flow.target].add(remote)
                    changed = True
    return tuple(sorted(found.get(cluster, {own})))


def application_clusters(topology: TopologyShape, app: ApplicationShape) -> tuple[str, ...]:
    """The clusters ``app`` may be active on: its preferred one and every cluster a chain of
    flows leads to from there (a failover needs a flow to its target), or a migration that
    cuts it over (it ends up on the migration's target), sorted."""
    reached = {app.preferred}
    frontier = [app.preferred]
    while frontier:
        current = frontier.pop()
        routes = [(f.source, f.target) for f in topology.flows] + [
            (m.source, m.target) for m in topology.migrations if app.name in m.applications
        ]
        for source, target in routes:
            if source == current and target not in reached:
                reached.add(target)
                frontier.append(target)
    return tuple(sorted(reached))


def _flow_source_topics(topology: TopologyShape, flow: FlowShape) -> list[Resource]:
    """What ``flow`` may copy from its source, as topic resources: the standby way back of an
    identity pair copies only applications' topics, any other flow what its include patterns
    match (heartbeats apart: see :func:`_flow_heartbeats`)."""
    if flow.standby:
        names = {
            topic
            for app in topology.applications
            for topic in app.topics
            if _copies(topology, flow, topic) is not None
        }
        return [Resource(ResourceType.TOPIC, PatternType.LITERAL, n) for n in sorted(names)]
    return _filter_resources(flow.topics.include, ResourceType.TOPIC)


def _flow_remote_topics(topology: TopologyShape, flow: FlowShape) -> list[Resource]:
    """What ``flow`` may write on its target, as topic resources: under the prefix policy the
    source's resources behind ``<source><separator>`` (a wildcard becomes that prefix), under
    identity the source's own."""
    sources = _flow_source_topics(topology, flow)
    if flow.policy == "identity":
        return sources
    prefix = f"{flow.source}{flow.separator}"
    remote: list[Resource] = []
    for resource in sources:
        if resource.pattern is PatternType.LITERAL and resource.name == WILDCARD:
            remote.append(Resource(ResourceType.TOPIC, PatternType.PREFIXED, prefix))
        else:
            remote.append(Resource(ResourceType.TOPIC, resource.pattern, prefix + resource.name))
    return _minimal(remote)


def _flow_heartbeats(topology: TopologyShape, flow: FlowShape) -> list[tuple[str, str]]:
    """The heartbeats topics ``flow`` copies: (name on the source, name on the target)."""
    routes: list[tuple[str, str]] = []
    for topic in heartbeats_topics(topology, flow.source):
        remote = _copies(topology, flow, topic)
        if remote is not None:
            routes.append((topic, remote))
    return routes


def copy_name(topology: TopologyShape, flow: FlowShape, topic: str) -> str | None:
    """The name ``flow`` gives its copy of ``topic`` (a name on its source), or None when it
    does not copy it (filtered out, internal, a loop, multi-hop off)."""
    return _copies(topology, flow, topic)


def flow_source_resources(topology: TopologyShape, flow: FlowShape) -> tuple[Resource, ...]:
    """What ``flow`` may copy from its source, as topic resources (see the replicator's
    grants): LITERAL or PREFIXED names, or the wildcard."""
    return tuple(_flow_source_topics(topology, flow))


def _remote_names(topology: TopologyShape, cluster: str, topic: str) -> list[str]:
    """The one-hop copies of ``topic`` on ``cluster`` (what a following consumer drains), from
    every flow into it; under identity the copy is ``topic`` itself."""
    names: set[str] = set()
    for flow in topology.flows:
        if flow.target != cluster:
            continue
        remote = _copies(topology, flow, topic)
        if remote is not None:
            names.add(remote)
    return sorted(names)


def _remote_prefixes(topology: TopologyShape, cluster: str) -> list[str]:
    """The prefixes under which prefix-policy flows write their copies on ``cluster``."""
    return sorted(
        {
            f"{flow.source}{flow.separator}"
            for flow in topology.flows
            if flow.target == cluster and flow.policy != "identity"
        }
    )


def _is_copy_name(topology: TopologyShape, cluster: str, topic: str) -> bool:
    """Whether ``topic`` on ``cluster`` is named like a copy a prefix-policy flow writes."""
    return any(topic.startswith(prefix) for prefix in _remote_prefixes(topology, cluster))


# -- the grants ------------------------------------------------------------------------------


class _Grants:
    """Collects one principal's grants on one cluster."""

    def __init__(self, principal: str) -> None:
        self.principal = principal
        self.items: list[Grant] = []

    def add(
        self,
        resource: Resource,
        operations: Iterable[Operation],
        why: str,
        permission: Permission = Permission.ALLOW,
    ) -> None:
        for operation in operations:
            self.items.append(
                Grant(
                    resource.type,
                    resource.pattern,
                    resource.name,
                    operation,
                    self.principal,
                    permission,
                    why=why,
                )
            )

    def literal(
        self, resource_type: ResourceType, name: str, operations: Iterable[Operation], why: str
    ) -> None:
        self.add(Resource(resource_type, PatternType.LITERAL, name), operations, why)


_R = Operation.READ
_W = Operation.WRITE
_TOPIC = ResourceType.TOPIC
_GROUP = ResourceType.GROUP
_TXN = ResourceType.TRANSACTIONAL_ID
_CLUSTER = Resource(ResourceType.CLUSTER, PatternType.LITERAL, CLUSTER_NAME)


def _replicator(topology: TopologyShape, cluster: str, grants: _Grants) -> None:
    names = topology.internal_names()
    for flow in topology.flows:
        s, t = flow.source, flow.target
        exactly_once = flow.delivery == "exactly-once"
        if cluster == s:
            for resource in _flow_source_topics(topology, flow):
                # DESCRIBE_CONFIGS: a remote topic is created with the source's configs
                grants.add(
                    resource,
                    (_R, Operation.DESCRIBE_CONFIGS),
                    f"flow {s}->{t}: read the topics it copies"
                    + (
                        " (its include patterns are regular expressions that no literal or"
                        " prefixed name covers)"
                        if resource.name == WILDCARD
                        else ""
                    ),
                )
            for topic, _remote in _flow_heartbeats(topology, flow):
                grants.literal(_TOPIC, topic, (_R,), f"flow {s}->{t}: heartbeat copier reads")
            groups = [
                (naming.judge_reader_group(s, t), "records read again to judge their epoch"),
                (naming.heartbeat_copier_group(s, t), "heartbeat copier's consumer"),
            ]
            if exactly_once:
                groups.append((naming.progress_reader_group(s, t), "slots' source consumer"))
            else:
                groups.append((naming.replicator_group(s, t), "workers share and commit"))
            for group, why in groups:
                grants.literal(_GROUP, group, (_R,), f"flow {s}->{t}: {why}")
        if cluster == t:
            for resource in _flow_remote_topics(topology, flow):
                grants.add(
                    resource,
                    (Operation.CREATE, _W, Operation.ALTER, Operation.ALTER_CONFIGS, _R),
                    f"flow {s}->{t}: create, grow, configure and write its copies; the repair"
                    " scan reads them",
                )
            for _topic, remote in _flow_heartbeats(topology, flow):
                grants.literal(
                    _TOPIC,
                    remote,
                    (Operation.CREATE, _W, Operation.ALTER),
                    f"flow {s}->{t}: heartbeat copier creates, grows and writes",
                )
            grants.literal(
                _TOPIC,
                names.offset_syncs_topic(s),
                (Operation.CREATE, _W, _R),
                f"flow {s}->{t}: offset syncs",
            )
            grants.literal(
                _GROUP, naming.SYNC_REPAIR_GROUP, (_R,), f"flow {s}->{t}: sync repair reads"
            )
            if exactly_once:
                grants.literal(
                    _TOPIC,
                    naming.slots_topic(s, t),
                    (Operation.CREATE, _R),
                    f"flow {s}->{t}: the slots topic, whose assignment gives out the slots",
                )
                grants.literal(
                    _GROUP,
                    naming.replicator_group(s, t),
                    (_R,),
                    f"flow {s}->{t}: progress committed in each slot's transaction",
                )
                grants.literal(
                    _GROUP,
                    naming.slot_membership_group(s, t),
                    (_R,),
                    f"flow {s}->{t}: slot membership",
                )
                grants.add(
                    Resource(_TXN, PatternType.PREFIXED, naming.transactional_id_prefix(s, t)),
                    (_W,),
                    f"flow {s}->{t}: one transactional id per slot (the slot count is known"
                    " only at run time)",
                )


def _replicator_denials(
    topology: TopologyShape, cluster: str, grants: _Grants, principals: Principals
) -> None:
    """A prefixed grant on ``<source>.`` also reaches the flow's checkpoints topic under its
    default name (``<source>.checkpoints.internal``): a DENY keeps the replicator from writing
    the checkpoint stream's topic, unless both roles share one principal."""
    if principals.checkpoints == grants.principal:
        return
    names = topology.internal_names()
    for flow in topology.flows:
        if flow.target != cluster:
            continue
        checkpoints = names.checkpoints_topic(flow.source)
        if any(g.allows(_W, _TOPIC, checkpoints) for g in grants.items):
            grants.add(
                Resource(_TOPIC, PatternType.LITERAL, checkpoints),
                (_W,),
                f"flow {flow.source}->{flow.target}: the checkpoint stream's topic lies under"
                " the copies' prefix; only the checkpoint stream writes it",
                Permission.DENY,
            )


def _heartbeats(topology: TopologyShape, cluster: str, grants: _Grants) -> None:
    own = topology.internal_names().heartbeats
    grants.literal(_TOPIC, own, (Operation.CREATE, _W), "emitter creates and writes")
    for topic in _observed_heartbeats(topology, cluster):
        grants.literal(_TOPIC, topic, (_R,), "freshness observer reads")
    grants.literal(
        _GROUP, naming.heartbeat_observer_group(cluster), (_R,), "freshness observer's consumer"
    )


def _observed_heartbeats(topology: TopologyShape, cluster: str) -> list[str]:
    """The heartbeats topics an observer on ``cluster`` follows: its own and each flow's copy."""
    names = topology.internal_names()
    followed = {names.heartbeats}
    for flow in topology.flows:
        if flow.target == cluster:
            followed.add(_policy(topology, flow).format_remote_topic(flow.source, names.heartbeats))
    return sorted(followed)


def _checkpoints(topology: TopologyShape, cluster: str, grants: _Grants) -> None:
    names = topology.internal_names()
    for flow in topology.flows:
        s, t = flow.source, flow.target
        if cluster == s:
            for resource in _filter_resources(flow.groups.include, _GROUP):
                grants.add(
                    resource,
                    (Operation.DESCRIBE,),
                    f"flow {s}->{t}: list the groups it checkpoints, read their offsets"
                    + (
                        " (group include patterns are regular expressions that no literal or"
                        " prefixed name covers)"
                        if resource.name == WILDCARD
                        else ""
                    ),
                )
            for resource in _flow_source_topics(topology, flow):
                grants.add(
                    resource,
                    (Operation.DESCRIBE,),
                    f"flow {s}->{t}: committed and end offsets of the topics it copies",
                )
        if cluster == t:
            grants.literal(
                _TOPIC, names.offset_syncs_topic(s), (_R,), f"flow {s}->{t}: follow the syncs"
            )
            grants.literal(
                _TOPIC,
                names.checkpoints_topic(s),
                (Operation.CREATE, _W, _R),
                f"flow {s}->{t}: the checkpoints topic",
            )
            for resource in _flow_remote_topics(topology, flow):
                grants.add(
                    resource, (Operation.DESCRIBE,), f"flow {s}->{t}: end offsets of the copies"
                )
            grants.literal(
                _GROUP,
                naming.checkpoints_app_id(t),
                (_R,),
                f"flow {s}->{t}: the stream's faust app",
            )
            grants.literal(
                _GROUP,
                naming.checkpoints_app_id(t, naming.checkpoints_app_suffix(f"{s}->{t}")),
                (_R,),
                f"flow {s}->{t}: the faust app of a process that runs this flow's stream alone",
            )
            grants.literal(
                _GROUP,
                naming.CHECKPOINTS_READER_GROUP,
                (_R,),
                f"flow {s}->{t}: sync and checkpoint readers",
            )
    for app in topology.applications:
        if not app.sync_group_offsets or cluster not in application_clusters(topology, app):
            continue
        for group in app.groups:
            grants.literal(
                _GROUP, group, (_R,), f"application {app.name}: group offset sync commits"
            )
        for topic in app.topics:
            # Its copies there, and the topic itself: a group synced back (a copy's position
            # translated upstream) commits on the original, and a commit needs READ.
            for name in (topic, *_remote_names(topology, cluster, topic)):
                grants.literal(
                    _TOPIC, name, (_R,), f"application {app.name}: group offset sync commits"
                )


def _executor(topology: TopologyShape, cluster: str, grants: _Grants) -> None:
    names = topology.internal_names()
    for flow in topology.flows:
        s, t = flow.source, flow.target
        if cluster == s:
            for resource in _flow_source_topics(topology, flow):
                grants.add(
                    resource, (Operation.DESCRIBE,), f"flow {s}->{t}: status, the source's ends"
                )
            if flow.delivery != "exactly-once":
                grants.literal(
                    _GROUP,
                    naming.replicator_group(s, t),
                    (Operation.DESCRIBE,),
                    f"flow {s}->{t}: status, the workers' progress",
                )
        if cluster == t:
            for resource in _flow_remote_topics(topology, flow):
                grants.add(
                    resource, (Operation.DESCRIBE,), f"flow {s}->{t}: status, the copies' ends"
                )
            grants.literal(_TOPIC, names.offset_syncs_topic(s), (_R,), f"flow {s}->{t}: translate")
            grants.literal(
                _TOPIC,
                names.checkpoints_topic(s),
                (_R,),
                f"flow {s}->{t}: unplanned failovers, checkpoints",
            )
            if flow.delivery == "exactly-once":
                grants.literal(
                    _GROUP,
                    naming.replicator_group(s, t),
                    (Operation.DESCRIBE,),
                    f"flow {s}->{t}: status, the slots' progress",
                )
    for topic in _observed_heartbeats(topology, cluster):
        grants.literal(_TOPIC, topic, (_R,), "the controller's and the API's freshness observer")
    for group, why in (
        (naming.TRANSLATE_READER_GROUP, "translation's sync reader"),
        (naming.CHECKPOINTS_READER_GROUP, "checkpoint reader"),
        (naming.REPLAY_READER_GROUP, "recovery's replay reader"),
        (naming.heartbeat_observer_group(cluster), "freshness observer"),
    ):
        grants.literal(_GROUP, group, (_R,), why)
    for app in topology.applications:
        if cluster not in application_clusters(topology, app):
            continue
        who = f"application {app.name}"
        for topic in app.topics:
            replay = app.on_recovery == "replay" and not _is_copy_name(topology, cluster, topic)
            grants.literal(
                _TOPIC,
                topic,
                (_R, _W) if replay else (_R,),
                f"{who}: set offsets, read divergent records"
                + ("; replay writes them back" if replay else ""),
            )
            for remote in _remote_names(topology, cluster, topic):
                grants.literal(_TOPIC, remote, (_R,), f"{who}: set offsets, cut-offs")
        for group in app.groups:
            grants.literal(_GROUP, group, (_R,), f"{who}: set and read the group's offsets")
        for transactional in app.transactional_ids:
            grants.literal(_TXN, transactional, (_W,), f"{who}: fence its transactional producer")
        if app.fence_writes:
            grants.add(
                _CLUSTER,
                (Operation.ALTER,),
                f"{who}: fence its producers' writes (add and remove DENY WRITE bindings)",
            )


def _acl_sync(topology: TopologyShape, cluster: str, grants: _Grants) -> None:
    """Listing ACLs takes DESCRIBE on the cluster, creating them ALTER (which implies DESCRIBE,
    so the target's existing bindings can be compared): only for flows that set ``sync_acls``."""
    for flow in topology.flows:
        if not flow.sync_acls:
            continue
        s, t = flow.source, flow.target
        if cluster == s:
            grants.add(_CLUSTER, (Operation.DESCRIBE,), f"flow {s}->{t}: list the topics' ACLs")
        if cluster == t:
            grants.add(
                _CLUSTER,
                (Operation.ALTER,),
                f"flow {s}->{t}: list the copies' ACLs, create the mirrored ones",
            )


def _verifier(topology: TopologyShape, cluster: str, grants: _Grants) -> None:
    for flow in topology.flows:
        if cluster == flow.source:
            for resource in _flow_source_topics(topology, flow):
                grants.add(resource, (_R,), f"flow {flow.source}->{flow.target}: the originals")
        if cluster == flow.target:
            for resource in _flow_remote_topics(topology, flow):
                grants.add(resource, (_R,), f"flow {flow.source}->{flow.target}: the copies")
    for app in topology.applications:
        if cluster not in application_clusters(topology, app):
            continue
        for topic in app.topics:
            for name in (topic, *_remote_names(topology, cluster, topic)):
                grants.literal(_TOPIC, name, (_R,), f"application {app.name}: its records")
    grants.add(
        Resource(_GROUP, PatternType.PREFIXED, f"{naming.VERIFY_GROUP_PREFIX}-"),
        (_R,),
        "Spark's Kafka source names its consumers by the groupIdPrefix drsvc gives it",
    )


@dataclass(frozen=True)
class _NoNames:
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()


@dataclass(frozen=True)
class _MigrationFlow:
    """The one-way identity flow a migration runs (``drsvc migrate start``): at least once,
    over the migration's topics, syncing no group (its applications move by cutover)."""

    source: str
    target: str
    topics: NameFilterShape
    policy: str = "identity"
    separator: str = "."
    delivery: str = "at-least-once"
    standby: bool = False
    multi_hop: bool = True
    groups: NameFilterShape = field(default_factory=_NoNames)
    sync_acls: bool = False


@dataclass(frozen=True)
class _MigrationTopology:
    """What a migration's commands see of ``base``: the migration's flow as the only flow and
    the applications it cuts over as the only applications."""

    base: TopologyShape
    migration: MigrationShape

    @property
    def clusters(self) -> Mapping[str, object]:
        return self.base.clusters

    @property
    def flows(self) -> Sequence[FlowShape]:
        m = self.migration
        return (_MigrationFlow(m.source, m.target, m.topics),)

    @property
    def applications(self) -> Sequence[ApplicationShape]:
        return tuple(a for a in self.base.applications if a.name in self.migration.applications)

    @property
    def migrations(self) -> Sequence[MigrationShape]:
        return ()

    def internal_names(self) -> InternalTopicNames:
        return self.base.internal_names()


def _migrator(
    topology: TopologyShape, cluster: str, grants: _Grants, principals: Principals
) -> None:
    """The copier (a replicator), status and cutover (the executor), ``migrate verify`` (the
    verifier) and the takeover from MirrorMaker 2, each for the migration's own flow and
    applications only."""
    for migration in topology.migrations:
        s, t = migration.source, migration.target
        if cluster not in (s, t):
            continue
        view = _MigrationTopology(topology, migration)
        collected = _Grants(grants.principal)
        _replicator(view, cluster, collected)
        _replicator_denials(view, cluster, collected, principals)
        _executor(view, cluster, collected)
        _verifier(view, cluster, collected)
        if cluster == s:
            collected.literal(
                _TOPIC,
                migration_mm2.mm2_offset_syncs_topic(t),
                (_R,),
                "takeover from MirrorMaker 2: its offset syncs",
            )
        else:
            collected.literal(
                _TOPIC,
                migration_mm2.mm2_offsets_topic(s),
                (_R,),
                "takeover from MirrorMaker 2: its committed progress",
            )
            collected.literal(
                _GROUP,
                migration_mm2.mm2_worker_group(s),
                (Operation.DESCRIBE,),
                "takeover from MirrorMaker 2: refused while its workers run",
            )
        collected.literal(
            _GROUP,
            naming.MM2_TAKEOVER_READER_GROUP,
            (_R,),
            "takeover from MirrorMaker 2: its reader",
        )
        for item in collected.items:
            grants.items.append(replace(item, why=f"migration {migration.name}: {item.why}"))


def _application(
    topology: TopologyShape,
    cluster: str,
    app: ApplicationShape,
    grants: _Grants,
    principals: Principals,
) -> None:
    who = f"application {app.name}"
    for topic in app.topics:
        if _is_copy_name(topology, cluster, topic):
            # A name some flow writes here as a copy: the application may read it, never write.
            grants.literal(_TOPIC, topic, (_R,), f"{who}: reads (a copy's name here)")
        else:
            grants.literal(_TOPIC, topic, (_R, _W), f"{who}: its topic")
        for remote in _remote_names(topology, cluster, topic):
            if remote != topic:
                grants.literal(_TOPIC, remote, (_R,), f"{who}: drains the copy to the cut-off")
    for group in app.groups:
        grants.literal(_GROUP, group, (_R,), f"{who}: its consumer group")
    for transactional in app.transactional_ids:
        grants.literal(_TXN, transactional, (_W,), f"{who}: its transactional producer")
    if grants.principal in principals.services():
        return  # a DENY would stop drsvc's own role that shares the principal
    for prefix in _remote_prefixes(topology, cluster):
        # One writer per copy: whatever else allows the application (a broad grant, ACLs
        # mirrored from the source), it never writes where a flow writes.
        grants.add(
            Resource(_TOPIC, PatternType.PREFIXED, prefix),
            (_W,),
            f"{who}: copies under {prefix!r} have one writer, their flow",
            Permission.DENY,
        )


def role_grants(
    topology: TopologyShape,
    role: Role,
    cluster: str,
    *,
    application: str | None = None,
    principals: Principals | None = None,
) -> tuple[Grant, ...]:
    """The grants ``role`` needs on ``cluster`` of ``topology``, sorted, without duplicates or
    grants another of them covers.

    For the application role, ``application`` picks one application; None gives every
    application of the topology that may be active on ``cluster``, each under its own
    principal. Raises :class:`PolicyError` for an unknown role, cluster or application.
    """
    if role not in ROLES:
        raise PolicyError(f"unknown role {role!r} (roles: {', '.join(ROLES)})")
    if cluster not in topology.clusters:
        known = ", ".join(sorted(topology.clusters))
        raise PolicyError(f"unknown cluster {cluster!r} (known: {known})")
    who = principals if principals is not None else Principals()
    collected: list[Grant] = []
    if role == "application":
        apps = list(topology.applications)
        if application is not None:
            apps = [a for a in apps if a.name == application]
            if not apps:
                known = ", ".join(a.name for a in topology.applications) or "none"
                raise PolicyError(f"unknown application {application!r} (known: {known})")
        for app in apps:
            if cluster in application_clusters(topology, app):
                grants = _Grants(application_principal(app, who))
                _application(topology, cluster, app, grants, who)
                collected.extend(grants.items)
    else:
        grants = _Grants(who.of(role))
        if role == "replicator":
            _replicator(topology, cluster, grants)
            if who.heartbeats == who.replicator:
                _heartbeats(topology, cluster, grants)
            _replicator_denials(topology, cluster, grants, who)
        elif role == "heartbeats":
            _heartbeats(topology, cluster, grants)
        elif role == "checkpoints":
            _checkpoints(topology, cluster, grants)
        elif role == "executor":
            _executor(topology, cluster, grants)
        elif role == "acl-sync":
            _acl_sync(topology, cluster, grants)
        elif role == "migrator":
            _migrator(topology, cluster, grants, who)
        else:
            _verifier(topology, cluster, grants)
        collected.extend(grants.items)
    return tuple(_reduced(collected))


def _reduced(grants: Iterable[Grant]) -> Iterator[Grant]:
    """Sorted, one of each, without an ALLOW another ALLOW of the same principal covers
    (same operation, a resource pattern that matches at least as much)."""
    unique: dict[Grant, Grant] = {}
    for grant in grants:
        unique.setdefault(grant, grant)
    ordered = sorted(unique)
    for grant in ordered:
        if grant.permission is Permission.ALLOW and any(
            other is not grant
            and other.permission is Permission.ALLOW
            and other.principal == grant.principal
            and other.operation is grant.operation
            and other.resource != grant.resource
            and other.resource.covers_resource(grant.resource)
            for other in ordered
        ):
            continue
        yield grant
