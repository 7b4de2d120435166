"""The unknown-translation policy: earliest retained offset, or a refusal naming the partition."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from failover.translation import (
    BEFORE_SYNCS,
    LOG_TRUNCATED,
    TOPIC_MISMATCH,
    UNKNOWN_PARTITION,
    Reason,
    Translation,
)
from failover.unknown_translation import (
    UNKNOWN_TRANSLATION_POLICIES,
    Refusal,
    StartAtEarliest,
    UnknownTranslation,
    describe_reason,
    resolve_group,
    resolve_unknown,
)

ORDERS_3 = UnknownTranslation("east.orders", 3, Reason.BEFORE_SYNCS.value)


def test_the_policies_are_earliest_and_refuse() -> None:
    assert UNKNOWN_TRANSLATION_POLICIES == ("earliest", "refuse")


def test_earliest_starts_at_the_earliest_retained_offset() -> None:
    assert resolve_unknown("earliest", "billing", ORDERS_3, 120) == StartAtEarliest(
        "east.orders", 3, 120, "before-syncs"
    )


def test_refuse_names_group_topic_partition_and_why() -> None:
    refusal = resolve_unknown("refuse", "billing", ORDERS_3, 120)
    assert refusal == Refusal("billing", "east.orders", 3, "before-syncs", "refuse")
    assert isinstance(refusal, Refusal)
    assert refusal.message == (
        "group 'billing': east.orders-3 has no known translation (before-syncs: the position is"
        " older than the oldest retained offset sync); on_unknown_translation is 'refuse'"
    )


def test_earliest_refuses_a_partition_the_target_does_not_have() -> None:
    missing = UnknownTranslation("east.orders", 7, "topic-missing")
    refusal = resolve_unknown("earliest", "billing", missing, None)
    assert isinstance(refusal, Refusal)
    assert refusal.message == (
        "group 'billing': east.orders-7 has no known translation (topic-missing: the topic does"
        " not exist on the target), and the partition does not exist on the target, so there is"
        " no earliest retained offset to start at"
    )


@pytest.mark.parametrize(
    ("policy", "earliest", "error"),
    [
        ("latest", 5, "must be one of earliest, refuse (got 'latest')"),
        ("earliest", -1, "must not be negative (got -1)"),
    ],
)
def test_bad_input_is_refused(policy: str, earliest: int, error: str) -> None:
    with pytest.raises(ValueError, match=re.escape(error)):
        resolve_unknown(policy, "g", ORDERS_3, earliest)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("reason", "text"),
    [
        ("unknown-partition", "unknown-partition: no offset sync has been seen for the partition"),
        ("log-truncated", "log-truncated: the source log was truncated past the committed offset"),
        ("sync-conflict", "sync-conflict: the partition's offset syncs contradict each other"),
        ("something-new", "something-new"),
    ],
)
def test_reasons_are_explained(reason: str, text: str) -> None:
    assert describe_reason(reason) == text


@pytest.mark.parametrize(
    "translation", [UNKNOWN_PARTITION, TOPIC_MISMATCH, BEFORE_SYNCS, LOG_TRUNCATED]
)
def test_every_unknown_translation_of_the_core_is_explained(translation: Translation) -> None:
    assert not translation.known
    assert describe_reason(translation.reason.value).startswith(f"{translation.reason.value}: ")


def test_a_group_is_refused_when_any_partition_is() -> None:
    unknown = [
        UnknownTranslation("east.orders", 1, "before-syncs"),
        UnknownTranslation("east.orders", 0, "unknown-partition"),
    ]
    resolution = resolve_group("earliest", "g", unknown, {("east.orders", 1): 40})
    assert resolution.refused
    assert resolution.start_at == (StartAtEarliest("east.orders", 1, 40, "before-syncs"),)
    assert [(r.topic, r.partition) for r in resolution.refusals] == [("east.orders", 0)]


partitions = st.lists(
    st.tuples(st.sampled_from(["a", "b"]), st.integers(0, 5)), unique=True, max_size=8
)


@given(
    partitions,
    st.dictionaries(
        st.tuples(st.sampled_from(["a", "b"]), st.integers(0, 5)), st.integers(0, 10**6)
    ),
    st.sampled_from(UNKNOWN_TRANSLATION_POLICIES),
)
def test_every_partition_is_resolved_exactly_once(
    keys: list[tuple[str, int]], earliest: dict[tuple[str, int], int], policy: str
) -> None:
    unknown = [UnknownTranslation(topic, p, "before-syncs") for topic, p in keys]
    resolution = resolve_group(policy, "g", unknown, earliest)  # type: ignore[arg-type]
    started = [(s.topic, s.partition) for s in resolution.start_at]
    refused = [(r.topic, r.partition) for r in resolution.refusals]
    assert sorted(started + refused) == sorted(keys)
    if policy == "refuse":
        assert started == []
        assert resolution.refused == bool(keys)
    else:
        assert refused == sorted(k for k in keys if k not in earliest)
        assert all(s.offset == earliest[(s.topic, s.partition)] for s in resolution.start_at)
