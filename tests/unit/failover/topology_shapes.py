"""Small topologies for the pure grant and ACL sync rules: plain values with the fields of
``failover.kafka_acls.TopologyShape``, no pydantic model and no file."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from failover.topic_rules import InternalTopicNames


@dataclass(frozen=True)
class Filter:
    include: tuple[str, ...] = (".*",)
    exclude: tuple[str, ...] = ()


@dataclass(frozen=True)
class Flow:
    source: str
    target: str
    policy: str = "prefix"
    separator: str = "."
    delivery: str = "at-least-once"
    standby: bool = False
    multi_hop: bool = True
    topics: Filter = field(default_factory=Filter)
    groups: Filter = field(default_factory=Filter)
    sync_acls: bool = False


@dataclass(frozen=True)
class App:
    name: str
    groups: tuple[str, ...]
    topics: tuple[str, ...]
    preferred: str
    transactional_ids: tuple[str, ...] = ()
    sync_group_offsets: bool = False
    on_recovery: str = "quarantine"
    principal: str | None = None
    fence_writes: bool = False


@dataclass(frozen=True)
class Migration:
    name: str
    source: str
    target: str
    topics: Filter = field(default_factory=Filter)
    applications: tuple[str, ...] = ()


@dataclass(frozen=True)
class Topo:
    clusters: Mapping[str, object]
    flows: tuple[Flow, ...] = ()
    applications: tuple[App, ...] = ()
    migrations: tuple[Migration, ...] = ()
    namespace: str = "shop"

    def internal_names(self) -> InternalTopicNames:
        return InternalTopicNames()
