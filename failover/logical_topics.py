"""Logical topics: one name for a topic and every copy of it that replication put on a cluster.

An application that reads ``orders`` on a cluster of a prefix topology wants the local ``orders``
and each remote copy of it there (``east.orders``, ``west.orders``, ...): together they hold every
record of the logical topic, from every origin. Under the identity policy the copy has the
original's name, so the logical topic is the one topic.

This module answers, without I/O:

* which of a cluster's topics belong to a logical topic (:meth:`LogicalTopic.members`) and the
  subscription pattern that also matches copies created later (:meth:`LogicalTopic.pattern`);
* where a record read from one of them was first written (:func:`origin`): the alias of the
  cluster, the original topic, partition and offset, from the provenance header when the record
  is a copy, else from where it was read;
* which local partitions must wait until remote copies are read up to a failover's cut-off
  (:func:`drain_blockers`), so that a key's records written before a switch (now in a remote
  copy) are read before those written after it (in the local topic).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from failover import provenance
from failover.replication_policy import PrefixPolicy, ReplicationPolicy, check_topic_name

__all__ = ["LogicalTopic", "Origin", "drain_blockers", "drained", "origin"]


@dataclass(frozen=True, slots=True)
class Origin:
    """Where a record was first written (``cluster`` None: a record of the cluster it was read
    from, read without saying which)."""

    cluster: str | None
    topic: str
    partition: int
    offset: int


@dataclass(frozen=True)
class LogicalTopic:
    """A topic by its original name, read on a cluster through ``policy`` (the naming of the
    flows into that cluster)."""

    name: str
    policy: ReplicationPolicy

    def __post_init__(self) -> None:
        check_topic_name(self.name)

    def is_member(self, topic: str) -> bool:
        """Whether ``topic`` is the logical topic itself or a copy of it (any number of hops)."""
        return topic == self.name or self.policy.original_topic(topic) == self.name

    def members(self, topics: Iterable[str]) -> list[str]:
        """The topics of ``topics`` that belong to this logical topic, sorted."""
        return sorted(t for t in set(topics) if self.is_member(t))

    def pattern(self) -> str:
        """A librdkafka subscription pattern (POSIX extended regex, anchored) matching the topic
        and its one-hop copies from every alias, including copies created after subscribing."""
        name = _escaped(self.name)
        if not isinstance(self.policy, PrefixPolicy):
            return f"^{name}$"  # identity: the copy has the original's name
        sep = _escaped(self.policy.separator)
        aliases = "|".join(_escaped(a) for a in sorted(self.policy.aliases))
        return f"^({name}|({aliases}){sep}{name})$"


def origin(
    cluster: str | None,
    topic: str,
    partition: int,
    offset: int,
    headers: Iterable[tuple[str, bytes | None]] | None,
) -> Origin:
    """Where the record read at ``cluster``/``topic``/``partition``@``offset`` was first written:
    the first hop of its provenance chain when it is a copy, else where it was read."""
    hops = provenance.chain(headers)
    if hops:
        first = hops[0]
        return Origin(first.cluster, first.topic, first.partition, first.offset)
    return Origin(cluster, topic, partition, offset)


def drain_blockers(
    local: tuple[str, int],
    cutoffs: Mapping[tuple[str, int], int],
    logical: LogicalTopic,
) -> dict[tuple[str, int], int]:
    """The remote-copy partitions that must be read up to their cut-off before the ``local``
    partition (topic, partition) may be read: those of the same logical topic and partition
    number (a key keeps its partition across clusters), other than ``local`` itself (under the
    identity policy the copy and the local topic are one log, already in order)."""
    if local in cutoffs:
        return {}  # a remote copy itself: never held back, or two copies could wait on each other
    topic, partition = local
    return {
        (t, p): offset
        for (t, p), offset in cutoffs.items()
        if p == partition and t != topic and logical.is_member(t)
    }


def drained(
    blockers: Mapping[tuple[str, int], int], positions: Mapping[tuple[str, int], int]
) -> bool:
    """Whether every blocker's position (the next offset its reader will read, or the group's
    committed offset) has reached its cut-off; an unknown position has not."""
    return all(positions.get(tp, -1) >= cutoff for tp, cutoff in blockers.items())


def _escaped(text: str) -> str:
    # Topic names and aliases are [a-zA-Z0-9._-]: only the dot means something in a regex.
    return text.replace(".", "[.]")
