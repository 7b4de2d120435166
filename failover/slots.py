"""Exactly-once slots: the fixed units of work that move between the workers of one flow.

In exactly-once mode the source partitions of a flow are mapped to a fixed number of slots.
Each slot has its own transactional producer on the target (``transactional.id`` is
``drsvc.<flow>.<slot>``), so whoever takes a slot fences its previous owner by initialising
that transactional id, whatever cluster the source partitions live on. The mapping must never
change while a flow has progress: a partition that moved to another slot would be written by two
transactional ids at once.

Ownership of slots is decided by a Kafka consumer group on the target over an internal topic with
one partition per slot: the partitions a worker is assigned are the slots it owns.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass

from failover.errors import PolicyError

DEFAULT_SLOTS = 8
MAX_SLOTS = 1024


def slot_of(topic: str, partition: int, slots: int) -> int:
    """The slot of a source partition: stable across processes, machines and Python versions
    (CRC-32, not ``hash()``), and spreading one topic's partitions over consecutive slots."""
    if slots < 1:
        raise PolicyError(f"slots must be at least 1, got {slots}")
    return (zlib.crc32(topic.encode("utf-8")) + partition) % slots


@dataclass(frozen=True)
class SlotNames:
    """Names of the Kafka objects that carry one flow's slots, all on the flow's target."""

    source_alias: str
    target_alias: str

    @property
    def flow_key(self) -> str:
        return f"{self.source_alias}-{self.target_alias}"

    @property
    def slots_topic(self) -> str:
        """One partition per slot; the ``.internal`` suffix keeps every flow from copying it."""
        return f"drsvc.slots.{self.flow_key}.internal"

    @property
    def membership_group(self) -> str:
        """The consumer group whose assignment of :attr:`slots_topic` says who owns which slot."""
        return f"drsvc-slots.{self.flow_key}"

    @property
    def progress_group(self) -> str:
        """The group on the target whose offsets are committed in each slot's transactions:
        the next source offset to copy, per source partition, atomically with the copies and
        their offset syncs."""
        return f"drsvc-replicator.{self.flow_key}"

    def transactional_id(self, slot: int) -> str:
        return f"drsvc.{self.flow_key}.{slot}"
