"""How a topic is named on the cluster it is copied to, and how to read that name back.

A replication policy is three string functions, and everything else is derived from them:

- :meth:`ReplicationPolicy.format_remote_topic` names the copy of ``topic`` from ``source_alias``;
- :meth:`ReplicationPolicy.topic_source` says which cluster a topic was copied from (one hop);
- :meth:`ReplicationPolicy.upstream_topic` names the topic one hop up.

From those come :meth:`~ReplicationPolicy.original_topic`, :meth:`~ReplicationPolicy.source_chain`
and :meth:`~ReplicationPolicy.is_remote`, which the loop rule in :mod:`failover.topic_rules` relies
on. Two policies exist:

- :class:`PrefixPolicy` (the default): ``east.orders`` on west is the copy of ``orders`` on east.
  The name carries its provenance, so flows in both directions and aggregation never loop, and every
  target partition has exactly one writer, which is what makes exact offset translation possible.
- :class:`IdentityPolicy`: the copy keeps the source name. Consumers need no change, but the name no
  longer says where a record came from; it is only safe for one-way flows.

Everything here is pure: no I/O, no Kafka client.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Iterable
from dataclasses import dataclass

from failover.errors import PolicyError

#: Longest topic name Kafka accepts.
MAX_TOPIC_LENGTH = 249

#: Characters Kafka accepts in a topic name.
TOPIC_CHARSET = "a-zA-Z0-9._-"

DEFAULT_SEPARATOR = "."

_LEGAL_NAME = re.compile(f"[{TOPIC_CHARSET}]+")


def topic_name_problem(name: str) -> str | None:
    """Say why ``name`` is not a legal Kafka topic name, or return None if it is."""
    if not name:
        return "topic name is empty"
    if name in {".", ".."}:
        return f"topic name {name!r} is reserved by Kafka"
    if len(name) > MAX_TOPIC_LENGTH:
        return f"topic name is {len(name)} characters long, Kafka allows at most {MAX_TOPIC_LENGTH}"
    if not _LEGAL_NAME.fullmatch(name):
        bad = sorted({c for c in name if not re.fullmatch(f"[{TOPIC_CHARSET}]", c)})
        shown = ", ".join(repr(c) for c in bad)
        return (
            f"topic name {name!r} has characters Kafka does not allow ({shown}); use [a-zA-Z0-9._-]"
        )
    return None


def check_topic_name(name: str) -> str:
    """Return ``name`` if it is a legal Kafka topic name, else raise :class:`PolicyError`."""
    problem = topic_name_problem(name)
    if problem is not None:
        raise PolicyError(problem)
    return name


def check_separator(separator: str) -> str:
    """Return ``separator`` if it can appear in topic names, else raise :class:`PolicyError`."""
    if not separator:
        raise PolicyError("separator is empty")
    if not _LEGAL_NAME.fullmatch(separator):
        raise PolicyError(
            f"separator {separator!r} has characters Kafka does not allow in topic names;"
            " use [a-zA-Z0-9._-]"
        )
    return separator


def check_alias(alias: str, separator: str = DEFAULT_SEPARATOR) -> str:
    """Return ``alias`` if it can prefix remote topic names, else raise :class:`PolicyError`.

    An alias must be made of topic-name characters, must not contain the separator (or
    ``east.1.orders`` would be ambiguous) and must not end with the start of the separator (with
    separator ``__`` the alias ``a_`` would give ``a___orders``, whose first ``__`` is inside the
    alias).
    """
    if not alias:
        raise PolicyError("cluster alias is empty")
    if not _LEGAL_NAME.fullmatch(alias):
        raise PolicyError(
            f"cluster alias {alias!r} has characters Kafka does not allow in topic names;"
            " use [a-zA-Z0-9._-]"
        )
    if separator in alias:
        raise PolicyError(
            f"cluster alias {alias!r} contains the separator {separator!r}, so remote topic names"
            " would be ambiguous; rename the cluster or choose another separator"
        )
    if (alias + separator).find(separator) != len(alias):
        raise PolicyError(
            f"cluster alias {alias!r} ends with the start of the separator {separator!r}, so"
            " remote topic names would be ambiguous; rename the cluster or choose another separator"
        )
    return alias


class ReplicationPolicy(ABC):
    """Names remote topics and reads provenance back from names.

    Implementations provide the three abstract methods; the derived methods must not be overridden
    in ways that contradict them. Invariants every implementation keeps:

    - ``upstream_topic(t)`` is None exactly when ``topic_source(t)`` is None;
    - ``upstream_topic(t)``, when not None, is strictly shorter than ``t`` (so chains end);
    - for a remote name ``r = format_remote_topic(a, t)`` that the policy can recognise,
      ``topic_source(r) == a`` and ``upstream_topic(r) == t``.
    """

    @abstractmethod
    def format_remote_topic(self, source_alias: str, topic: str) -> str:
        """Name of the copy, on a target cluster, of ``topic`` from cluster ``source_alias``.

        Raises :class:`PolicyError` if the alias is unknown or the result would not be a legal
        Kafka topic name (too long, bad characters).
        """

    @abstractmethod
    def topic_source(self, topic: str) -> str | None:
        """Alias of the cluster ``topic`` was copied from, or None for a local topic."""

    @abstractmethod
    def upstream_topic(self, topic: str) -> str | None:
        """Name of ``topic`` one hop up (on the cluster it came from), or None if local."""

    def is_remote(self, topic: str) -> bool:
        """Whether the name says ``topic`` was copied from another cluster."""
        return self.topic_source(topic) is not None

    def original_topic(self, topic: str) -> str:
        """The name ``topic`` had on the cluster where it was first written (all hops removed)."""
        current = topic
        while (upstream := self._next_hop(current)) is not None:
            current = upstream
        return current

    def source_chain(self, topic: str) -> tuple[str, ...]:
        """Aliases ``topic`` came through, nearest first: ``west.east.orders`` -> (west, east)."""
        chain: list[str] = []
        current = topic
        while (source := self.topic_source(current)) is not None:
            chain.append(source)
            upstream = self._next_hop(current)
            if upstream is None:  # pragma: no cover - guarded by the invariants above
                break
            current = upstream
        return tuple(chain)

    def _next_hop(self, topic: str) -> str | None:
        upstream = self.upstream_topic(topic)
        if upstream is not None and len(upstream) >= len(topic):
            raise PolicyError(
                f"{type(self).__name__}.upstream_topic({topic!r}) returned {upstream!r}, which is"
                " not shorter; a policy must strip something at each hop"
            )
        return upstream


@dataclass(frozen=True)
class PrefixPolicy(ReplicationPolicy):
    """``<alias><separator><topic>``: the copy of ``orders`` from east is ``east.orders``.

    The policy knows the topology's cluster aliases and only reads a prefix as a source when it is
    one of them, so a local topic called ``orders.v2`` is not mistaken for a copy of ``v2`` from a
    cluster named ``orders``. Heartbeats follow the same rule (``east.heartbeats``).
    """

    aliases: frozenset[str]
    separator: str = DEFAULT_SEPARATOR

    def __post_init__(self) -> None:
        check_separator(self.separator)
        if not self.aliases:
            raise PolicyError("a prefix policy needs the topology's cluster aliases (none given)")
        for alias in sorted(self.aliases):
            check_alias(alias, self.separator)

    @classmethod
    def for_aliases(
        cls, aliases: Iterable[str], separator: str = DEFAULT_SEPARATOR
    ) -> PrefixPolicy:
        """Build the policy from any iterable of aliases."""
        return cls(aliases=frozenset(aliases), separator=separator)

    def format_remote_topic(self, source_alias: str, topic: str) -> str:
        if source_alias not in self.aliases:
            known = ", ".join(sorted(self.aliases))
            raise PolicyError(f"unknown cluster alias {source_alias!r} (known: {known})")
        check_topic_name(topic)
        remote = f"{source_alias}{self.separator}{topic}"
        problem = topic_name_problem(remote)
        if problem is not None:
            raise PolicyError(f"cannot copy {topic!r} from {source_alias!r}: remote {problem}")
        return remote

    def topic_source(self, topic: str) -> str | None:
        split = self._split(topic)
        return None if split is None else split[0]

    def upstream_topic(self, topic: str) -> str | None:
        split = self._split(topic)
        return None if split is None else split[1]

    def _split(self, topic: str) -> tuple[str, str] | None:
        head, sep, tail = topic.partition(self.separator)
        if not sep or head not in self.aliases or topic_name_problem(tail) is not None:
            return None
        return head, tail


@dataclass(frozen=True)
class IdentityPolicy(ReplicationPolicy):
    """The copy keeps the source name: ``orders`` on east is copied as ``orders`` on west.

    The name says nothing about where a record came from, so :meth:`topic_source` is always None
    and the name-based loop rule cannot protect an identity flow. Loop safety for identity relies
    on the provenance header that the replicator writes on every copied record and checks before
    copying (a record that already carries the target's alias is never copied back), and on the
    topology rule that identity is only allowed for one-way flows: exactly one writer per target
    partition, no way back to the source.
    """

    def format_remote_topic(self, source_alias: str, topic: str) -> str:
        if not source_alias:
            raise PolicyError("cluster alias is empty")
        return check_topic_name(topic)

    def topic_source(self, topic: str) -> str | None:
        return None

    def upstream_topic(self, topic: str) -> str | None:
        return None
