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

import json
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


PROGRESS_FORMAT_VERSION = 1


@dataclass(frozen=True)
class SlotProgress:
    """What a slot's transaction commits per source partition, beside the copies and their syncs:
    the next source offset to copy and the source topic's id (a recreated topic starts over).

    It is stored as the metadata of the progress group's offset commit on the target, keyed by the
    remote topic and partition; the committed offset itself is the next target offset, so Kafka's
    consumer-group tools show a meaningful position on the remote topic.
    """

    next_source_offset: int
    source_topic_id: bytes

    def encode(self) -> str:
        return json.dumps(
            {
                "v": PROGRESS_FORMAT_VERSION,
                "next": self.next_source_offset,
                "source_topic_id": self.source_topic_id.hex(),
            },
            separators=(",", ":"),
        )

    @staticmethod
    def decode(metadata: str) -> SlotProgress:
        """Read commit metadata; raise :class:`PolicyError` naming what is wrong with it."""
        try:
            document = json.loads(metadata)
        except ValueError as err:
            raise PolicyError(f"slot progress is not JSON: {metadata[:80]!r}") from err
        if not isinstance(document, dict):
            raise PolicyError(f"slot progress is not a JSON object: {metadata[:80]!r}")
        version = document.get("v")
        if version != PROGRESS_FORMAT_VERSION:
            raise PolicyError(
                f"slot progress has format version {version!r}; this drsvc reads version "
                f"{PROGRESS_FORMAT_VERSION} (upgrade drsvc to resume this flow)"
            )
        next_offset = document.get("next")
        topic_id = document.get("source_topic_id")
        if not isinstance(next_offset, int) or next_offset < 0 or not isinstance(topic_id, str):
            raise PolicyError(f"slot progress is incomplete: {metadata[:120]!r}")
        try:
            return SlotProgress(next_offset, bytes.fromhex(topic_id))
        except ValueError as err:
            raise PolicyError(f"slot progress has a malformed topic id: {topic_id!r}") from err
