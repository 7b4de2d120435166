"""A topology file as frozen, typed models: clusters, flows, applications, migrations.

A topology names the clusters (by alias), the flows between them and the applications that can fail
over. The models reject unknown keys (``extra="forbid"``), check each field on its own, and then run
the cross-field rules of :mod:`drsvc.topology.rules` (known aliases, no duplicate flows, identity
only for one-way flows). Cross-field problems are raised together as one :class:`TopologyProblems`
whose lines already carry their field path, so the loader can report them all at once.

Client security lives in :mod:`drsvc.topology.security`, how to reach Consul in
:mod:`drsvc.topology.consul`. Use :func:`drsvc.topology.loader.load_topology` to read a file.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from datetime import UTC, date, datetime
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    Field,
    ValidationError,
    ValidationInfo,
    ValidatorFunctionWrapHandler,
    field_validator,
    model_validator,
)

from drsvc.errors import ConfigError
from drsvc.topology.base import NAME_PATTERN, FrozenModel, Name
from drsvc.topology.consul import ConsulConfig
from drsvc.topology.migration_rules import migration_problems
from drsvc.topology.rules import cross_field_problems
from drsvc.topology.security import SecurityConfig
from failover import naming
from failover.dr_decision import ControllerSettings
from failover.kafka_acls import Principals
from failover.replication_policy import (
    DEFAULT_SEPARATOR,
    IdentityPolicy,
    PrefixPolicy,
    ReplicationPolicy,
    check_separator,
    check_topic_name,
)
from failover.topic_rules import (
    InternalTopicNames,
    NameFilter,
    TopicVerdict,
    compile_pattern,
    topic_verdict,
)
from failover.unknown_translation import UnknownTranslationPolicy

PolicyName = Literal["prefix", "identity"]
DeliveryMode = Literal["at-least-once", "exactly-once"]
StartKind = Literal["earliest", "latest", "timestamp"]


class TopologyProblems(ValueError):
    """Several cross-field problems found at once; each line starts with its field path."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = list(problems)
        super().__init__("; ".join(self.problems))


def _check_regex(value: str) -> str:
    compile_pattern(value)
    return value


def _check_non_empty(value: str) -> str:
    if not value.strip():
        raise ValueError("must not be empty")
    return value


Regex = Annotated[str, AfterValidator(_check_regex)]
TopicName = Annotated[str, AfterValidator(check_topic_name)]
GroupName = Annotated[str, AfterValidator(_check_non_empty)]

#: longest transactional id accepted (Kafka has no limit of its own below the key size of its
#: transaction log; a longer one is a mistake, not a name)
MAX_TRANSACTIONAL_ID = 249


_RESERVED_TRANSACTIONAL_PREFIXES = ("drsvc.", naming.OWN_GROUP_PREFIX)


def _check_transactional_id(value: str) -> str:
    if not value or len(value) > MAX_TRANSACTIONAL_ID:
        raise ValueError(f"must be 1 to {MAX_TRANSACTIONAL_ID} characters (got {value!r})")
    if not value.isprintable() or any(c.isspace() for c in value):
        raise ValueError(f"must be printable, without spaces (got {value!r})")
    # drsvc's own names (its exactly-once slots are drsvc.<flow>.<slot>): fencing one of those
    # would stop a replication flow, not an application's producer
    for reserved in _RESERVED_TRANSACTIONAL_PREFIXES:
        if value.startswith(reserved):
            raise ValueError(f"{value!r} starts with {reserved!r}, which drsvc keeps for itself")
    return value


TransactionalId = Annotated[str, AfterValidator(_check_transactional_id)]


def _check_bootstrap(value: str | None) -> str | None:
    if value is None:
        return None
    entries = [entry.strip() for entry in value.split(",")]
    for entry in entries:
        hostport = entry.split("://", 1)[-1]
        host, sep, port = hostport.rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError(
                f"expected host:port[,host:port...] (got {value!r}; bad entry {entry!r})"
            )
    return ",".join(entries)


class Cluster(FrozenModel):
    """One Kafka cluster, known by its alias (the key under ``clusters``)."""

    alias: Name = Field(description="Alias of the cluster; prefixes its topics on other clusters.")
    bootstrap_servers: Annotated[str | None, AfterValidator(_check_bootstrap)] = Field(
        default=None,
        description="host:port list; omitted means: taken by alias from the running drsvc dev"
        " environment.",
    )
    security: SecurityConfig = Field(
        default_factory=SecurityConfig, description="Client security settings."
    )

    def client_config(
        self, bootstrap_servers: str | None = None, *, env: Mapping[str, str] | None = None
    ) -> dict[str, str]:
        """librdkafka settings for a client of this cluster, secrets included.

        ``bootstrap_servers`` (for example resolved from the dev environment) wins over the file's.
        Secrets are read now, from the environment (``env``, default the process environment)
        and files, so a rotated password is picked up by the next client.

        Raises :class:`ConfigError` naming the cluster and the missing variable or file.
        """
        servers = bootstrap_servers or self.bootstrap_servers
        if not servers:
            raise ConfigError(
                f"cluster '{self.alias}': no bootstrap_servers in the topology and none given;"
                f" set clusters.{self.alias}.bootstrap_servers or run it under 'drsvc dev'"
            )
        environ: Mapping[str, str] = os.environ if env is None else env
        return {"bootstrap.servers": servers, **self.security.client_settings(self.alias, environ)}


class NameFilterConfig(FrozenModel):
    """Include/exclude regular expressions, each matched against the whole name."""

    include: tuple[Regex, ...] = Field(
        default=(".*",), description="A name must fully match one of these (default: all)."
    )
    exclude: tuple[Regex, ...] = Field(
        default=(), description="A name fully matching any of these is skipped."
    )

    @field_validator("include", "exclude", mode="before")
    @classmethod
    def _one_pattern_is_a_list(cls, value: Any) -> Any:
        return [value] if isinstance(value, str) else value

    @field_validator("include")
    @classmethod
    def _include_something(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if not value:
            raise ValueError("must list at least one pattern (use ['.*'] for everything)")
        return value

    def to_filter(self) -> NameFilter:
        """The pure filter used by the core."""
        return NameFilter(include=self.include, exclude=self.exclude)


class StartPosition(FrozenModel):
    """Where a flow starts reading a source partition it has no progress for.

    Written in a topology as ``earliest``, ``latest`` or ``{timestamp: <ISO-8601 with offset, or
    epoch milliseconds>}``; stored normalised as a kind and, for timestamps, epoch milliseconds.
    """

    kind: StartKind = Field(default="earliest", description="earliest, latest or timestamp.")
    timestamp_ms: int | None = Field(
        default=None, description="Epoch milliseconds, when kind is timestamp."
    )

    @model_validator(mode="before")
    @classmethod
    def _from_file_shape(cls, value: Any) -> Any:
        if isinstance(value, str):
            if value not in {"earliest", "latest"}:
                raise ValueError(
                    "must be earliest, latest or {timestamp: <ISO-8601 or epoch ms>}"
                    f" (got {value!r})"
                )
            return {"kind": value}
        if isinstance(value, Mapping) and "kind" not in value:
            unknown = sorted(str(key) for key in value if key != "timestamp")
            if unknown:
                raise ValueError(f"unknown key {unknown[0]!r} (expected timestamp)")
            if "timestamp" not in value:
                raise ValueError("expected {timestamp: <ISO-8601 or epoch ms>}")
            return {"kind": "timestamp", "timestamp_ms": _epoch_ms(value["timestamp"])}
        return value

    @model_validator(mode="after")
    def _timestamp_iff_kind(self) -> StartPosition:
        if (self.kind == "timestamp") != (self.timestamp_ms is not None):
            raise ValueError("timestamp_ms is set exactly when kind is timestamp")
        return self

    def describe(self) -> str:
        """Short human form: ``earliest``, ``latest`` or ``timestamp 2024-05-01T00:00:00+00:00``."""
        if self.timestamp_ms is None:
            return self.kind
        moment = datetime.fromtimestamp(self.timestamp_ms / 1000, tz=UTC)
        return f"timestamp {moment.isoformat()}"


def _epoch_ms(value: Any) -> int:
    """Epoch milliseconds from an int, a digit string, an ISO-8601 string or a YAML datetime."""
    if isinstance(value, bool):
        raise ValueError(f"timestamp must be ISO-8601 or epoch milliseconds (got {value!r})")
    if isinstance(value, int):
        if value < 0:
            raise ValueError(f"timestamp must not be negative (got {value})")
        return value
    if isinstance(value, str) and value.strip().isdigit():
        return int(value.strip())
    moment: datetime
    if isinstance(value, datetime):
        moment = value
    elif isinstance(value, date):
        raise ValueError(
            f"timestamp {value.isoformat()} has no time; give a time and a UTC offset,"
            f" like {value.isoformat()}T00:00:00Z"
        )
    elif isinstance(value, str):
        try:
            moment = datetime.fromisoformat(value.strip())
        except ValueError as err:
            raise ValueError(
                f"timestamp must be ISO-8601 or epoch milliseconds (got {value!r})"
            ) from err
    else:
        raise ValueError(f"timestamp must be ISO-8601 or epoch milliseconds (got {value!r})")
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise ValueError(
            f"timestamp {moment.isoformat()} has no UTC offset; add one, like 'Z' or '+02:00'"
        )
    millis = round(moment.timestamp() * 1000)
    if millis < 0:
        raise ValueError(f"timestamp must not be before 1970 (got {moment.isoformat()})")
    return millis


class Flow(FrozenModel):
    """Replication from one cluster to another: which topics and groups, named and delivered how."""

    source: str = Field(description="Alias of the cluster records are read from.")
    target: str = Field(description="Alias of the cluster records are written to.")
    topics: NameFilterConfig = Field(
        default_factory=NameFilterConfig,
        description="Topics to copy, matched by their name on the source.",
    )
    groups: NameFilterConfig = Field(
        default_factory=NameFilterConfig,
        description="Consumer groups whose offsets are translated and checkpointed.",
    )
    policy: PolicyName = Field(
        default="prefix",
        description="prefix: east.orders on the target (loop-safe); identity: same name"
        " (one-way flows only).",
    )
    separator: str = Field(
        default=DEFAULT_SEPARATOR,
        description="Between alias and topic in remote names (prefix policy); the same for every"
        " prefix flow of a topology.",
    )
    delivery: DeliveryMode = Field(
        default="at-least-once",
        description="at-least-once, or exactly-once (transactions on the target).",
    )
    start: StartPosition = Field(
        default_factory=lambda: StartPosition(kind="earliest"),
        description="Where to start partitions with no progress: earliest, latest or"
        " {timestamp: ...}.",
    )
    linger_ms: int = Field(
        default=5,
        ge=0,
        le=1000,
        description="How long the target producer waits to fill a batch (librdkafka's"
        " linger.ms). 5 keeps replication latency low; 50-100 copies a backlog (a catch-up, a"
        " migration) with fewer, larger requests, which leaves the target broker more CPU,"
        " at up to that much added latency.",
    )
    multi_hop: bool = Field(
        default=True,
        description="Also copy topics that reached the source from a third cluster"
        " (south.orders on east becomes east.south.orders on west).",
    )
    standby: bool = Field(
        default=False,
        description="The way back of an identity (active/passive) flow: it copies nothing until"
        " a failover moves an application to its source; from then on it copies that"
        " application's topics from the failover point, so the old cluster catches up and the"
        " application can fail back exactly. Only for identity flows whose opposite flow is a"
        " plain identity flow.",
    )
    sync_acls: bool = Field(
        default=False,
        description="Mirror the source's topic ACLs onto the copies, as MirrorMaker 2 does:"
        " ALLOW READ and DESCRIBE (ALL becomes READ) and DENY READ and DESCRIBE, for the same"
        " principal and host, on the remote names. WRITE is never granted on a copy, and"
        " nothing is ever deleted ('drsvc acls sync'; opt-in).",
    )

    @field_validator("separator")
    @classmethod
    def _legal_separator(cls, value: str) -> str:
        return check_separator(value)

    @property
    def id(self) -> str:
        """Stable identifier, ``east->west``; a topology has at most one flow per pair."""
        return f"{self.source}->{self.target}"


class Application(FrozenModel):
    """A set of consumer groups and topics that fails over from cluster to cluster as one."""

    name: Name = Field(description="Application name; keys its state in Consul.")
    groups: tuple[GroupName, ...] = Field(
        min_length=1, description="Consumer groups of the application (at least one)."
    )
    topics: tuple[TopicName, ...] = Field(
        min_length=1,
        description="Topics the application consumes, by their name on the preferred cluster.",
    )
    preferred: str = Field(description="Alias of the cluster the application normally runs on.")
    auto_failover: bool = Field(
        default=False,
        description="Let the DR controller fail the application over when its cluster is gone.",
    )
    sync_group_offsets: bool = Field(
        default=False,
        description="Keep the groups' committed offsets on clusters where the application is"
        " passive at the translated positions, so that a failover starts from fresh offsets"
        " (opt-in; only groups without members there are touched).",
    )
    lease_s: float = Field(
        default=15.0,
        gt=0,
        le=300,
        description="How long the application's clients may keep using its active cluster"
        " without hearing from Consul; a failover waits this long (plus a margin) between"
        " deactivating the old cluster and activating the new one.",
    )
    on_recovery: Literal["quarantine", "replay"] = Field(
        default="quarantine",
        description="What happens to records of a lost cluster that never crossed before an"
        " unplanned failover, once that cluster is back: quarantine (leave them out and list"
        " them as a divergence report) or replay (copy them across, marked by a header).",
    )
    on_unknown_translation: UnknownTranslationPolicy = Field(
        default="refuse",
        description="What a partition whose offset cannot be translated gets: earliest (the"
        " earliest offset retained on the target) or refuse (leave the group alone, refuse the"
        " failover). The consumers' auto.offset.reset is never used.",
    )

    transactional_ids: tuple[TransactionalId, ...] = Field(
        default=(),
        description="The transactional.id of every transactional producer of the application."
        " A failover fences each on the old cluster (it initialises a producer with the id,"
        " which aborts an open transaction and makes a paused or partitioned producer's next"
        " send or commit fail) while the old cluster answers, and records what it fenced."
        " Plain (idempotent) producers cannot be fenced: they rely on their lease alone.",
    )
    principal: str | None = Field(
        default=None,
        description="The Kafka principal the application's clients authenticate as"
        " ('User:orders-service'); default User:app-<name>. Its role grants name it.",
    )
    fence_writes: bool = Field(
        default=False,
        description="Write fencing for producers that are not transactional: a failover, once"
        " the lease is waited out, removes a DENY WRITE of the application's principal on its"
        " topics on the new cluster and, when planned, adds one on the old cluster, and records"
        " it as its fence-writes step; a rollback removes it again. The executor then needs"
        " ALTER on the cluster resource (opt-in; needs principal).",
    )

    @field_validator("principal")
    @classmethod
    def _principal_form(cls, value: str | None) -> str | None:
        if value is None:
            return value
        kind, sep, name = value.partition(":")
        if not sep or not kind or not name or name == "*" or any(c.isspace() for c in value):
            raise ValueError(
                f"principal must be of the form Type:name, one principal, like"
                f" 'User:orders-service' (got {value!r})"
            )
        return value

    @model_validator(mode="after")
    def _fencing_names_its_principal(self) -> Application:
        if self.fence_writes and self.principal is None:
            raise ValueError(
                f"application {self.name!r}: fence_writes needs principal (the principal whose"
                " WRITE a failover denies on the old cluster), e.g. principal: User:app-"
                f"{self.name}"
            )
        if self.principal is not None and self.principal in Principals().services():
            raise ValueError(
                f"application {self.name!r}: principal {self.principal} is one of drsvc's own;"
                " an application needs a principal of its own"
            )
        return self

    @field_validator("sync_group_offsets", "on_unknown_translation", mode="wrap")
    @classmethod
    def _name_the_application(
        cls, value: Any, handler: ValidatorFunctionWrapHandler, info: ValidationInfo
    ) -> Any:
        # The loader reports these under applications[<index>]; naming the application as well
        # saves counting entries in a long file.
        try:
            return handler(value)
        except ValidationError as err:
            name = info.data.get("name")
            owner = f"application {name!r}: " if isinstance(name, str) else ""
            if info.field_name == "on_unknown_translation":
                raise ValueError(
                    f"{owner}must be earliest (start at the earliest offset retained on the"
                    " target) or refuse (leave the group alone, refuse the failover); the"
                    f" consumers' auto.offset.reset is never used (got {value!r})"
                ) from err
            raise ValueError(f"{owner}must be true or false (got {value!r})") from err

    @field_validator("groups", "topics", "transactional_ids")
    @classmethod
    def _no_duplicates(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        seen: set[str] = set()
        for item in value:
            if item in seen:
                raise ValueError(f"{item!r} is listed twice")
            seen.add(item)
        return value


class MigrationOverrides(FrozenModel):
    """Settings of a migration's topics on the target that differ from the source's."""

    replication_factor: int | None = Field(
        default=None,
        ge=1,
        description="Replication factor of the topics created on the target (default: the"
        " source topic's), never more than the target's broker count.",
    )


class Migration(FrozenModel):
    """Moving topics (and optionally applications) from one cluster to another for good."""

    name: Name = Field(description="Migration name (drsvc migrate ... --migration NAME).")
    source: str = Field(description="Alias of the cluster the topics move from.")
    target: str = Field(description="Alias of the cluster the topics move to.")
    topics: NameFilterConfig = Field(
        default_factory=NameFilterConfig,
        description="Topics to migrate, matched by their name on the source (internal topics"
        " never are).",
    )
    applications: tuple[Name, ...] = Field(
        default=(),
        description="Applications to cut over from source to target, one by one (optional).",
    )
    overrides: MigrationOverrides = Field(
        default_factory=MigrationOverrides,
        description="Settings of the created topics that differ from the source's.",
    )
    linger_ms: int = Field(
        default=100,
        ge=0,
        le=1000,
        description="How long the migration's target producer waits to fill a batch (a flow's"
        " linger_ms). A migration first copies the whole backlog, which fewer, larger requests"
        " copy faster; after that, copies reach the target up to this much later.",
    )


class InternalTopicsConfig(FrozenModel):
    """Names of drsvc's own topics; ``{source}`` is replaced by a flow's source alias."""

    heartbeats: str = Field(
        default=naming.DEFAULT_HEARTBEATS_TOPIC, description="Heartbeats topic on every cluster."
    )
    offset_syncs: str = Field(
        default=naming.DEFAULT_OFFSET_SYNCS_TOPIC,
        description="Offset-syncs topic on each flow's target.",
    )
    checkpoints: str = Field(
        default=naming.DEFAULT_CHECKPOINTS_TOPIC,
        description="Checkpoints topic (compacted) on each flow's target.",
    )

    @model_validator(mode="after")
    def _names_are_usable(self) -> InternalTopicsConfig:
        self.to_names()
        return self

    def to_names(self) -> InternalTopicNames:
        """The pure naming rules used by the core."""
        return InternalTopicNames(
            heartbeats=self.heartbeats,
            offset_syncs=self.offset_syncs,
            checkpoints=self.checkpoints,
        )


class ControllerConfig(FrozenModel):
    """The automated DR trigger (``drsvc controller``): when it fails an application over."""

    unreachable_after_s: float = Field(
        default=60.0,
        gt=0,
        description="How long an application's active cluster must be unreachable from every"
        " vantage point before the controller fails it over (conservative by default).",
    )
    healthy_after_s: float = Field(
        default=10.0,
        ge=0,
        description="How long a cluster must have been reachable from every vantage point to be"
        " a failover target.",
    )
    cooldown_s: float = Field(
        default=600.0,
        ge=0,
        description="No second automated failover of one application within this long.",
    )
    min_vantages: int = Field(
        default=2,
        ge=1,
        description="Fresh vantage points that must agree before a cluster counts as down.",
    )
    interval_s: float = Field(
        default=2.0, gt=0, le=60, description="How often the controller observes and decides."
    )

    def to_settings(self) -> ControllerSettings:
        return ControllerSettings(
            unreachable_after_s=self.unreachable_after_s,
            healthy_after_s=self.healthy_after_s,
            cooldown_s=self.cooldown_s,
            # A vantage that did not report for several cycles (or 10 s) is not fresh.
            max_observation_age_s=max(10.0, 5 * self.interval_s),
            min_vantages=self.min_vantages,
        )


class Topology(FrozenModel):
    """Clusters, the flows between them and the applications that can fail over."""

    name: Name = Field(description="Topology name.")
    namespace: Name = Field(
        default="default",
        description="Consul KV namespace (keys under drsvc/<namespace>/); defaults to name.",
    )
    clusters: dict[str, Cluster] = Field(
        min_length=1, description="Clusters by alias; the alias is the key."
    )
    flows: tuple[Flow, ...] = Field(default=(), description="Replication flows.")
    applications: tuple[Application, ...] = Field(
        default=(), description="Applications that fail over between clusters."
    )
    migrations: tuple[Migration, ...] = Field(
        default=(), description="Cluster migrations (drsvc migrate)."
    )
    internal_topics: InternalTopicsConfig = Field(
        default_factory=InternalTopicsConfig, description="Names of drsvc's own topics."
    )
    controller: ControllerConfig = Field(
        default_factory=ControllerConfig, description="The automated DR trigger's thresholds."
    )
    consul: ConsulConfig | None = Field(
        default=None,
        description="How drsvc reaches Consul (address, TLS, ACL tokens): defaults under the"
        " CONSUL_* environment variables and DRSVC_CONSUL_HTTP_ADDR.",
    )

    @model_validator(mode="before")
    @classmethod
    def _namespace_defaults_to_name(cls, data: Any) -> Any:
        if (
            isinstance(data, Mapping)
            and "namespace" not in data
            and isinstance(data.get("name"), str)
            and NAME_PATTERN.fullmatch(data["name"])
        ):
            return {**data, "namespace": data["name"]}
        return data

    @field_validator("clusters", mode="before")
    @classmethod
    def _alias_is_the_key(cls, value: Any) -> Any:
        if not isinstance(value, Mapping):
            return value
        clusters: dict[Any, Any] = {}
        for alias, raw in value.items():
            clusters[alias] = cls._with_alias(alias, {} if raw is None else raw)
        return clusters

    @staticmethod
    def _with_alias(alias: Any, body: Any) -> Any:
        if isinstance(body, Cluster):
            if body.alias != alias:
                raise ValueError(
                    f"cluster under key {alias!r} has alias {body.alias!r}; they must be equal"
                )
            return body
        if isinstance(body, Mapping):
            if "alias" in body:
                raise ValueError(
                    f"unknown key 'alias' in cluster {alias!r}; the key under clusters is the alias"
                )
            return {"alias": alias, **body}
        return body

    @model_validator(mode="after")
    def _cross_field_rules(self) -> Topology:
        problems = [*cross_field_problems(self), *migration_problems(self)]
        if problems:
            raise TopologyProblems(problems)
        return self

    # -- lookups -----------------------------------------------------------------------------

    @property
    def aliases(self) -> frozenset[str]:
        """Aliases of all clusters."""
        return frozenset(self.clusters)

    def cluster(self, alias: str) -> Cluster:
        """The cluster called ``alias``; :class:`ConfigError` if there is none."""
        try:
            return self.clusters[alias]
        except KeyError:
            known = ", ".join(sorted(self.clusters))
            raise ConfigError(
                f"topology '{self.name}' has no cluster '{alias}' (known: {known})"
            ) from None

    def flow(self, source: str, target: str) -> Flow:
        """The flow ``source->target``; :class:`ConfigError` if there is none."""
        for flow in self.flows:
            if flow.source == source and flow.target == target:
                return flow
        known = ", ".join(f.id for f in self.flows) or "none"
        raise ConfigError(f"topology '{self.name}' has no flow {source}->{target} (flows: {known})")

    def flows_into(self, alias: str) -> tuple[Flow, ...]:
        """Flows whose target is ``alias``, in file order."""
        return tuple(flow for flow in self.flows if flow.target == alias)

    def flows_from(self, alias: str) -> tuple[Flow, ...]:
        """Flows whose source is ``alias``, in file order."""
        return tuple(flow for flow in self.flows if flow.source == alias)

    def application(self, name: str) -> Application:
        """The application called ``name``; :class:`ConfigError` if there is none."""
        for app in self.applications:
            if app.name == name:
                return app
        known = ", ".join(app.name for app in self.applications) or "none"
        raise ConfigError(f"topology '{self.name}' has no application '{name}' (known: {known})")

    def migration(self, name: str | None = None) -> Migration:
        """The migration called ``name``, or the only one when ``name`` is None;
        :class:`ConfigError` naming the known ones otherwise."""
        known = ", ".join(m.name for m in self.migrations) or "none"
        if name is None:
            if len(self.migrations) == 1:
                return self.migrations[0]
            raise ConfigError(
                f"topology '{self.name}' has {len(self.migrations)} migrations; name one with"
                f" --migration (known: {known})"
            )
        for migration in self.migrations:
            if migration.name == name:
                return migration
        raise ConfigError(f"topology '{self.name}' has no migration '{name}' (known: {known})")

    def internal_names(self) -> InternalTopicNames:
        """Naming rules for drsvc's own topics."""
        return self.internal_topics.to_names()

    def policy_for(self, flow: Flow) -> ReplicationPolicy:
        """The replication policy of ``flow``, aware of every alias of this topology."""
        if flow not in self.flows:
            raise ConfigError(f"flow {flow.id} is not part of topology '{self.name}'")
        if flow.policy == "identity":
            return IdentityPolicy()
        return PrefixPolicy(aliases=self.aliases, separator=flow.separator)

    def topic_verdict(self, flow: Flow, topic: str) -> TopicVerdict:
        """Whether ``flow`` copies ``topic`` (a name on its source), under which name, and why."""
        return topic_verdict(
            topic,
            flow.source,
            flow.target,
            self.policy_for(flow),
            topics=flow.topics.to_filter(),
            names=self.internal_names(),
            allow_multi_hop=flow.multi_hop,
        )
