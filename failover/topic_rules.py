"""Which topics a flow copies: internal topics, include/exclude filters and the loop rule.

The single entry point for the replicator is :func:`topic_verdict`, which answers "does flow
source->target copy this topic, under which name, and why (not)". The answer carries a reason so
that nothing is skipped silently: the replicator logs it and the CLI shows it.

Rules, checked in this order:

1. **Internal topics are never copied** (:func:`internal_topic_reason`): Kafka's own, drsvc's and
   MirrorMaker 2's bookkeeping, Kafka Connect's and Kafka Streams' internal topics, Schema
   Registry's storage. A copy of an internal topic (``east.__consumer_offsets``) is internal too.
2. **The loop rule**: a flow A->B never copies a topic whose source chain contains B (it came from
   B), and never produces a name that passes through one cluster twice. With the prefix policy this
   is what keeps active/active and aggregation from looping; the identity policy cannot be checked
   by name (see :class:`failover.replication_policy.IdentityPolicy`).
3. **Multi-hop**: a topic that reached A from a third cluster C (``C.orders`` on A) is copied by
   A->B as ``A.C.orders`` by default, as MirrorMaker 2 does, so B sees C's data even without a
   C->B flow. A flow can switch that off with ``allow_multi_hop=False``.
4. **Filters**: the topic name *as it is on the source* (``C.orders``, not ``orders``) must match
   one include pattern and no exclude pattern, with :func:`re.fullmatch`.
5. **Heartbeats are always copied** (subject to rules 1-3 only): their freshness on the far side is
   how drsvc measures that a cluster is alive and reaching its peers, so a filter must not hide
   them. :func:`is_heartbeats_topic` recognises them at any hop.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from failover.errors import PatternError, PolicyError
from failover.naming import (
    DEFAULT_CHECKPOINTS_TOPIC,
    DEFAULT_HEARTBEATS_TOPIC,
    DEFAULT_OFFSET_SYNCS_TOPIC,
)
from failover.replication_policy import ReplicationPolicy, topic_name_problem

SOURCE_PLACEHOLDER = "{source}"

#: Kafka Connect's default names for its distributed-worker storage topics.
CONNECT_TOPICS = frozenset({"connect-offsets", "connect-configs", "connect-status"})

#: Schema Registry's default storage topic. Copying it under a prefix is useless (the registry on
#: the target reads ``_schemas``, not ``east._schemas``) and copying it under its own name would
#: give the target's registry two writers; schemas are replicated by the registry, not by drsvc.
SCHEMA_REGISTRY_TOPIC = "_schemas"

_SAMPLE_ALIAS = "sample"


@dataclass(frozen=True)
class InternalTopicNames:
    """Names of drsvc's own topics; ``{source}`` stands for the alias of a flow's source.

    - ``heartbeats``: written on every cluster, replicated like a user topic (``east.heartbeats``);
    - ``offset_syncs``: on the target of each flow, where source offsets map to target offsets;
    - ``checkpoints``: on the target of each flow (compacted), translated group offsets.
    """

    heartbeats: str = DEFAULT_HEARTBEATS_TOPIC
    offset_syncs: str = DEFAULT_OFFSET_SYNCS_TOPIC
    checkpoints: str = DEFAULT_CHECKPOINTS_TOPIC

    def __post_init__(self) -> None:
        problem = topic_name_problem(self.heartbeats)
        if problem is not None:
            raise PolicyError(f"heartbeats: {problem}")
        if _kafka_or_tool_internal_reason(self.heartbeats) is not None:
            raise PolicyError(
                f"heartbeats: {self.heartbeats!r} looks like an internal topic, but heartbeats"
                " must be replicated; choose another name"
            )
        for label, template in (
            ("offset_syncs", self.offset_syncs),
            ("checkpoints", self.checkpoints),
        ):
            if template.count(SOURCE_PLACEHOLDER) != 1:
                raise PolicyError(
                    f"{label}: {template!r} must contain {SOURCE_PLACEHOLDER} exactly once"
                )
            rendered = template.replace(SOURCE_PLACEHOLDER, _SAMPLE_ALIAS)
            problem = topic_name_problem(rendered)
            if problem is not None:
                raise PolicyError(f"{label}: {template!r} does not give a legal name: {problem}")
        if self._template_regex(self.offset_syncs).fullmatch(self.heartbeats) or (
            self._template_regex(self.checkpoints).fullmatch(self.heartbeats)
        ):
            raise PolicyError(
                f"heartbeats: {self.heartbeats!r} collides with the offset-syncs or checkpoints"
                " topic names"
            )

    def offset_syncs_topic(self, source_alias: str) -> str:
        """The offset-syncs topic, on the target, of the flow from ``source_alias``."""
        return self._render(self.offset_syncs, source_alias, "offset_syncs")

    def checkpoints_topic(self, source_alias: str) -> str:
        """The checkpoints topic, on the target, of the flow from ``source_alias``."""
        return self._render(self.checkpoints, source_alias, "checkpoints")

    def own_topic_reason(self, topic: str) -> str | None:
        """Say which of drsvc's bookkeeping topics ``topic`` is, or None."""
        if self._template_regex(self.offset_syncs).fullmatch(topic):
            return "drsvc offset syncs"
        if self._template_regex(self.checkpoints).fullmatch(topic):
            return "drsvc checkpoints"
        return None

    @staticmethod
    def _render(template: str, source_alias: str, label: str) -> str:
        name = template.replace(SOURCE_PLACEHOLDER, source_alias)
        problem = topic_name_problem(name)
        if problem is not None:
            raise PolicyError(f"{label} topic for {source_alias!r}: {problem}")
        return name

    @staticmethod
    def _template_regex(template: str) -> re.Pattern[str]:
        before, _, after = template.partition(SOURCE_PLACEHOLDER)
        return re.compile(re.escape(before) + "[a-zA-Z0-9._-]+" + re.escape(after))


def _kafka_or_tool_internal_reason(topic: str) -> str | None:
    """Internal topics recognisable by name alone, whatever drsvc's own names are."""
    if topic.startswith("__"):
        return "Kafka internal (leading '__')"
    if topic.startswith("."):
        return "hidden (leading '.')"
    if topic == SCHEMA_REGISTRY_TOPIC or topic.startswith("_confluent"):
        return "Schema Registry or Confluent Platform internal"
    if topic in CONNECT_TOPICS:
        return "Kafka Connect storage"
    if topic.startswith("mm2-"):
        return "MirrorMaker 2 internal ('mm2-' prefix)"
    if topic.endswith((".internal", "-internal")):
        return "Connect or MirrorMaker 2 internal ('.internal' suffix)"
    if topic.endswith(("-changelog", "-repartition")):
        return "Kafka Streams changelog or repartition"
    return None


def internal_topic_reason(
    topic: str, names: InternalTopicNames | None = None, policy: ReplicationPolicy | None = None
) -> str | None:
    """Say why ``topic`` is internal and must never be copied, or return None.

    With a ``policy``, the original name is checked too, so the copy of an internal topic
    (``east.__consumer_offsets``) is internal as well. Heartbeats are deliberately not internal.
    """
    own = names if names is not None else InternalTopicNames()
    candidates = [topic]
    if policy is not None:
        original = policy.original_topic(topic)
        if original != topic:
            candidates.append(original)
    for name in candidates:
        reason = own.own_topic_reason(name) or _kafka_or_tool_internal_reason(name)
        if reason is not None:
            return reason if name == topic else f"copy of {name!r}: {reason}"
    return None


def is_internal_topic(
    topic: str, names: InternalTopicNames | None = None, policy: ReplicationPolicy | None = None
) -> bool:
    """Whether ``topic`` is internal (see :func:`internal_topic_reason`)."""
    return internal_topic_reason(topic, names, policy) is not None


def is_heartbeats_topic(
    topic: str, policy: ReplicationPolicy, names: InternalTopicNames | None = None
) -> bool:
    """Whether ``topic`` is a heartbeats topic, local (``heartbeats``) or copied
    (``east.heartbeats``, ``west.east.heartbeats``)."""
    own = names if names is not None else InternalTopicNames()
    return policy.original_topic(topic) == own.heartbeats


@dataclass(frozen=True)
class NameFilter:
    """Include/exclude regular expressions over names (topics or consumer groups).

    A name passes when one include pattern and no exclude pattern matches the *whole* name
    (:func:`re.fullmatch`). Patterns are compiled when the filter is built, so a bad pattern fails
    at load time with :class:`PatternError`, not in the middle of replication.
    """

    include: tuple[str, ...] = (".*",)
    exclude: tuple[str, ...] = ()
    _compiled_include: tuple[re.Pattern[str], ...] = field(init=False, repr=False, compare=False)
    _compiled_exclude: tuple[re.Pattern[str], ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_compiled_include", tuple(map(compile_pattern, self.include)))
        object.__setattr__(self, "_compiled_exclude", tuple(map(compile_pattern, self.exclude)))

    def first_include(self, name: str) -> str | None:
        """The first include pattern matching ``name``, or None."""
        return _first_match(self._compiled_include, name)

    def first_exclude(self, name: str) -> str | None:
        """The first exclude pattern matching ``name``, or None."""
        return _first_match(self._compiled_exclude, name)

    def matches(self, name: str) -> bool:
        """Whether ``name`` passes the filter."""
        return self.first_include(name) is not None and self.first_exclude(name) is None


def compile_pattern(pattern: str) -> re.Pattern[str]:
    """Compile one include/exclude pattern, raising :class:`PatternError` with re's reason."""
    try:
        return re.compile(pattern)
    except re.error as err:
        raise PatternError(pattern, str(err)) from err


def _first_match(patterns: tuple[re.Pattern[str], ...], name: str) -> str | None:
    for pattern in patterns:
        if pattern.fullmatch(name):
            return pattern.pattern
    return None


@dataclass(frozen=True)
class TopicVerdict:
    """Whether a flow copies a topic; ``target_topic`` is its name on the target when it does."""

    replicate: bool
    reason: str
    target_topic: str | None = None


def topic_verdict(
    topic: str,
    source_alias: str,
    target_alias: str,
    policy: ReplicationPolicy,
    *,
    topics: NameFilter | None = None,
    names: InternalTopicNames | None = None,
    allow_multi_hop: bool = True,
) -> TopicVerdict:
    """Decide whether the flow ``source_alias -> target_alias`` copies ``topic`` (a name on the
    source cluster), applying the rules in the module docstring in order."""
    if source_alias == target_alias:
        raise PolicyError(f"a flow needs two different clusters (got {source_alias!r} twice)")
    own = names if names is not None else InternalTopicNames()
    internal = internal_topic_reason(topic, own, policy)
    if internal is not None:
        return TopicVerdict(False, f"internal topic: {internal}")

    chain = policy.source_chain(topic)
    path = " <- ".join((source_alias, *chain))
    if target_alias in chain:
        return TopicVerdict(
            False, f"came from {target_alias} (path {path}); copying it back would loop"
        )
    if source_alias in chain:
        return TopicVerdict(
            False,
            f"name says it came from {source_alias}, the cluster it is on (path {path});"
            " a copy would name that cluster twice",
        )
    if len(set(chain)) != len(chain):
        return TopicVerdict(
            False, f"name passes through a cluster twice (path {path}); it cannot be copied safely"
        )
    if chain and not allow_multi_hop:
        return TopicVerdict(False, f"came from {chain[0]} and multi-hop replication is off")

    heartbeats = is_heartbeats_topic(topic, policy, own)
    if heartbeats:
        reason = "heartbeats are always replicated"
    else:
        rules = topics if topics is not None else NameFilter()
        included = rules.first_include(topic)
        if included is None:
            return TopicVerdict(False, "matches no topics.include pattern")
        excluded = rules.first_exclude(topic)
        if excluded is not None:
            return TopicVerdict(False, f"matches topics.exclude pattern {excluded!r}")
        reason = f"matches topics.include pattern {included!r}"

    try:
        remote = policy.format_remote_topic(source_alias, topic)
    except PolicyError as err:
        return TopicVerdict(False, str(err))
    return TopicVerdict(True, reason, remote)


def should_replicate(
    topic: str, source_alias: str, target_alias: str, policy: ReplicationPolicy
) -> bool:
    """Shorthand for :func:`topic_verdict` with default filters and names."""
    return topic_verdict(topic, source_alias, target_alias, policy).replicate
