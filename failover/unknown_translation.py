"""What a partition whose offset cannot be translated gets: an explicit per-application policy.

A translation is *unknown* when the offset syncs cannot say where a group's position lies on the
other cluster (see :mod:`failover.translation`). Leaving such a partition without a committed
offset is not neutral: a consumer that starts there falls back to its own ``auto.offset.reset``,
which is usually ``latest`` and silently skips everything in between. drsvc therefore never lets
that setting decide; each application names its policy::

    policy      unknown partition ...
    earliest    starts at the earliest offset still retained on the target: nothing is skipped,
                everything retained is read again
    refuse      is not moved: the group is left alone (offset sync) or the failover is refused,
                with the group, topic, partition and reason named

The decision is pure: the caller looks up the earliest retained offsets on the target and passes
them in. A partition that does not exist on the target has no earliest offset, so even the
``earliest`` policy refuses it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Literal, get_args

__all__ = [
    "UNKNOWN_TRANSLATION_POLICIES",
    "Refusal",
    "StartAtEarliest",
    "UnknownResolution",
    "UnknownTranslation",
    "UnknownTranslationPolicy",
    "describe_reason",
    "resolve_group",
    "resolve_unknown",
]

UnknownTranslationPolicy = Literal["earliest", "refuse"]
UNKNOWN_TRANSLATION_POLICIES: tuple[UnknownTranslationPolicy, ...] = get_args(
    UnknownTranslationPolicy
)

#: Why a translation can be unknown, for people. Keys are the reasons of
#: :class:`failover.translation.Reason` and the two the service adds (``topic-missing``,
#: ``sync-conflict``); any other reason is shown as it is.
_REASONS = {
    "unknown-partition": "no offset sync has been seen for the partition",
    "topic-mismatch": "the offset syncs are for another incarnation of the topic",
    "before-syncs": "the position is older than the oldest retained offset sync",
    "log-truncated": "the source log was truncated past the committed offset",
    "topic-missing": "the topic does not exist on the target",
    "sync-conflict": "the partition's offset syncs contradict each other",
}


def describe_reason(reason: str) -> str:
    """``before-syncs`` becomes ``before-syncs: the position is older than ...``."""
    text = _REASONS.get(reason)
    return reason if text is None else f"{reason}: {text}"


@dataclass(frozen=True)
class UnknownTranslation:
    """A partition (named as on the target) whose translated offset is unknown, and why."""

    topic: str
    partition: int
    reason: str


@dataclass(frozen=True)
class StartAtEarliest:
    """Policy ``earliest``: start the partition at the earliest offset retained on the target."""

    topic: str
    partition: int
    offset: int
    reason: str
    """Why the translation was unknown."""


@dataclass(frozen=True)
class Refusal:
    """The partition cannot be given a position under the policy; ``message`` says why."""

    group: str
    topic: str
    partition: int
    reason: str
    """Why the translation was unknown."""
    policy: UnknownTranslationPolicy

    @property
    def message(self) -> str:
        what = (
            f"group '{self.group}': {self.topic}-{self.partition} has no known translation"
            f" ({describe_reason(self.reason)})"
        )
        if self.policy == "refuse":
            return f"{what}; on_unknown_translation is 'refuse'"
        return (
            f"{what}, and the partition does not exist on the target, so there is no earliest"
            " retained offset to start at"
        )


Resolved = StartAtEarliest | Refusal


def resolve_unknown(
    policy: UnknownTranslationPolicy,
    group: str,
    unknown: UnknownTranslation,
    earliest_retained: int | None,
) -> Resolved:
    """Where ``group`` starts on the target for one unknown partition, or why it cannot.

    ``earliest_retained`` is the partition's log start offset on the target (None when the
    partition does not exist there).
    """
    if policy not in UNKNOWN_TRANSLATION_POLICIES:
        raise ValueError(
            f"unknown-translation policy must be one of {', '.join(UNKNOWN_TRANSLATION_POLICIES)}"
            f" (got {policy!r})"
        )
    if policy == "earliest" and earliest_retained is not None:
        if earliest_retained < 0:
            raise ValueError(
                f"earliest retained offset of {unknown.topic}-{unknown.partition} must not be"
                f" negative (got {earliest_retained})"
            )
        return StartAtEarliest(unknown.topic, unknown.partition, earliest_retained, unknown.reason)
    return Refusal(group, unknown.topic, unknown.partition, unknown.reason, policy)


@dataclass(frozen=True)
class UnknownResolution:
    """Every unknown partition of one group, resolved: start positions and refusals."""

    start_at: tuple[StartAtEarliest, ...]
    refusals: tuple[Refusal, ...]

    @property
    def refused(self) -> bool:
        """At least one partition could not be given a position: the group as a whole is refused
        (moving only some of a group's partitions would leave it half moved)."""
        return bool(self.refusals)


def resolve_group(
    policy: UnknownTranslationPolicy,
    group: str,
    unknown: Iterable[UnknownTranslation],
    earliest_retained: Mapping[tuple[str, int], int],
) -> UnknownResolution:
    """:func:`resolve_unknown` for each of ``unknown``, in topic and partition order.

    ``earliest_retained`` holds the log start offsets on the target of the partitions that exist
    there, keyed by ``(topic, partition)``.
    """
    start_at: list[StartAtEarliest] = []
    refusals: list[Refusal] = []
    for item in sorted(unknown, key=lambda u: (u.topic, u.partition)):
        resolved = resolve_unknown(
            policy, group, item, earliest_retained.get((item.topic, item.partition))
        )
        if isinstance(resolved, Refusal):
            refusals.append(resolved)
        else:
            start_at.append(resolved)
    return UnknownResolution(tuple(start_at), tuple(refusals))
