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
from enum import Enum

from failover import naming
from failover.errors import PolicyError
from failover.keepalive import LastCopy

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
    """Names of the Kafka objects that carry one flow's slots, all on the flow's target (built by
    :mod:`failover.naming`)."""

    source_alias: str
    target_alias: str

    @property
    def flow_key(self) -> str:
        return naming.flow_key(self.source_alias, self.target_alias)

    @property
    def slots_topic(self) -> str:
        """One partition per slot; the ``.internal`` suffix keeps every flow from copying it."""
        return naming.slots_topic(self.source_alias, self.target_alias)

    @property
    def membership_group(self) -> str:
        """The consumer group whose assignment of :attr:`slots_topic` says who owns which slot."""
        return naming.slot_membership_group(self.source_alias, self.target_alias)

    @property
    def progress_group(self) -> str:
        """The group on the target whose offsets are committed in each slot's transactions:
        the next source offset to copy, per source partition, atomically with the copies and
        their offset syncs."""
        return naming.replicator_group(self.source_alias, self.target_alias)

    def transactional_id(self, slot: int) -> str:
        return naming.transactional_id(self.source_alias, self.target_alias, slot)


PROGRESS_FORMAT_VERSION = 1


@dataclass(frozen=True)
class SlotProgress:
    """What a slot's transaction commits per source partition, beside the copies and their syncs:
    the next source offset to copy and the source topic's id (a recreated topic starts over), and
    the partition's last copy (so a restarted worker can keep the partition's syncs alive, see
    :mod:`failover.keepalive`).

    It is stored as the metadata of the progress group's offset commit on the target, keyed by the
    remote topic and partition; the committed offset itself is the next target offset, so Kafka's
    consumer-group tools show a meaningful position on the remote topic. ``last`` is optional
    (readers of version 1 that predate it ignore it; progress without it has no known last copy).
    """

    next_source_offset: int
    source_topic_id: bytes
    last_copy: LastCopy | None = None

    def encode(self) -> str:
        document: dict[str, object] = {
            "v": PROGRESS_FORMAT_VERSION,
            "next": self.next_source_offset,
            "source_topic_id": self.source_topic_id.hex(),
        }
        copy = self.last_copy
        if copy is not None:
            document["last"] = [copy.source_offset, copy.target_offset, copy.leader_epoch]
        return json.dumps(document, separators=(",", ":"))

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
            source_topic_id = bytes.fromhex(topic_id)
        except ValueError as err:
            raise PolicyError(f"slot progress has a malformed topic id: {topic_id!r}") from err
        return SlotProgress(next_offset, source_topic_id, _last_copy(document.get("last")))


def _last_copy(value: object) -> LastCopy | None:
    if value is None:
        return None
    if (
        not isinstance(value, list)
        or len(value) != 3
        or not all(isinstance(x, int) and not isinstance(x, bool) for x in value)
        or value[0] < 0
        or value[1] < 0
        or value[2] < -1
    ):
        raise PolicyError(f"slot progress has a malformed last copy: {value!r}")
    return LastCopy(value[0], value[1], value[2])


class SlotFailure(Enum):
    """Why a slot's transaction failed, as far as it decides when to take the slot again."""

    #: another worker owns the slot now (it fenced us by initialising the transactional id)
    TAKEN_OVER = "taken over by another worker"
    #: the coordinator aborted our transaction for exceeding transaction.timeout.ms (and fenced
    #: our producer epoch doing so); the slot is still ours
    TRANSACTION_TIMED_OUT = "transaction timed out on the coordinator"
    #: anything else (a delivery failed, a broker was unreachable, a flush took too long)
    FAILED = "failed"


def classify_failure(
    *,
    fenced: bool,
    transaction_age_s: float | None,
    transaction_timeout_s: float,
    still_assigned: bool | None,
) -> SlotFailure:
    """Tell a takeover from a coordinator-side timeout. Both reach the old producer as the same
    errors (INVALID_PRODUCER_EPOCH on produce, then librdkafka's fatal _FENCED; PRODUCER_FENCED on
    the coordinator's requests): a timed-out transaction is aborted by bumping the epoch, exactly
    as a new owner's initialisation does. So the evidence is elsewhere:

    * the coordinator only times out a transaction open at least ``transaction_timeout_s`` (it
      starts counting after we opened it, so our ``transaction_age_s`` is never shorter);
    * a new owner only initialises the slot after the membership group assigned it the slot, so
      a group that still assigns the slot to us (``still_assigned``, asked of the group
      coordinator, not our possibly stale view) rules a takeover out.

    Unknown evidence (None) counts as a takeover: retaking too soon would fence the real owner.
    """
    if not fenced:
        return SlotFailure.FAILED
    if (
        still_assigned is True
        and transaction_age_s is not None
        and transaction_age_s >= transaction_timeout_s
    ):
        return SlotFailure.TRANSACTION_TIMED_OUT
    return SlotFailure.TAKEN_OVER


@dataclass(frozen=True)
class RetakeDelays:
    """How long a failed slot waits before it is taken again, by failure kind and by the number of
    failures in a row (:mod:`failover.slot_state` keeps the count in each slot's state; a
    committed transaction resets it).

    A takeover waits ``taken_over_s`` (a worker that was paused learns meanwhile that it lost the
    slot, instead of fencing the new owner). A coordinator timeout retakes promptly: the slot is
    ours and waiting only lets the backlog grow; the delay starts at ``timeout_first_s`` and
    doubles with every failure in a row up to ``timeout_max_s``. Other failures back off from
    ``failed_first_s`` up to ``failed_max_s``."""

    taken_over_s: float = 15.0
    timeout_first_s: float = 0.1
    timeout_max_s: float = 5.0
    failed_first_s: float = 0.5
    failed_max_s: float = 30.0

    def delay_s(self, kind: SlotFailure, failures_in_a_row: int) -> float:
        """The wait after the ``failures_in_a_row``-th failure in a row (this one included)."""
        # The doubling stops at 2 ** 16, far past the maxima in use (a float would overflow at
        # 2 ** 1024).
        growth = 2.0 ** min(failures_in_a_row - 1, 16)
        if kind is SlotFailure.TAKEN_OVER:
            return self.taken_over_s
        if kind is SlotFailure.TRANSACTION_TIMED_OUT:
            return min(self.timeout_max_s, self.timeout_first_s * growth)
        return min(self.failed_max_s, self.failed_first_s * growth)
