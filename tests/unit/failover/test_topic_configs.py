"""Which source topic configs a remote topic gets, which it never gets, and which it always gets."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from failover.topic_configs import (
    ALWAYS_SET,
    DEFAULT_MAX_MESSAGE_BYTES,
    HEADER_ALLOWANCE_BYTES,
    MAX_MESSAGE_BYTES,
    NEVER_COPIED,
    config_drift,
    remote_topic_configs,
    retention_shorter_than,
)

LONG_MAX = 2**63 - 1
INT_MAX = 2**31 - 1  # max.message.bytes is an INT topic config on the broker
CREATE_TIME = {
    "message.timestamp.type": "CreateTime",
    "message.timestamp.before.max.ms": str(LONG_MAX),
    "message.timestamp.after.max.ms": str(LONG_MAX),
}

config_names = st.text("abcdefghijklmnopqrstuvwxyz.", min_size=1, max_size=30)
config_values = st.text(max_size=20)


def test_a_typical_compacted_topic() -> None:
    source = {
        "cleanup.policy": "compact",
        "min.compaction.lag.ms": "60000",
        "segment.bytes": "104857600",
        "min.insync.replicas": "2",
        "compression.type": "zstd",
        "message.timestamp.type": "LogAppendTime",
        "unclean.leader.election.enable": "true",
    }
    assert remote_topic_configs(source) == {
        "cleanup.policy": "compact",
        "min.compaction.lag.ms": "60000",
        "segment.bytes": "104857600",
        **CREATE_TIME,
        MAX_MESSAGE_BYTES: str(DEFAULT_MAX_MESSAGE_BYTES + 64 * 1024),
    }


def test_the_always_set_values() -> None:
    assert dict(ALWAYS_SET) == CREATE_TIME
    assert HEADER_ALLOWANCE_BYTES == 64 * 1024
    assert DEFAULT_MAX_MESSAGE_BYTES == 1_048_588


@pytest.mark.parametrize("key", sorted(NEVER_COPIED - set(ALWAYS_SET)))
def test_never_copied_keys_are_dropped(key: str) -> None:
    configs = remote_topic_configs({key: "1", "retention.ms": "1000"})
    assert key not in configs
    assert configs["retention.ms"] == "1000"


@pytest.mark.parametrize("key", sorted(ALWAYS_SET))
@pytest.mark.parametrize("source_value", ["LogAppendTime", "0", "3600000", "-1"])
def test_always_set_keys_are_forced_whatever_the_source_says(key: str, source_value: str) -> None:
    assert remote_topic_configs({key: source_value})[key] == ALWAYS_SET[key]


def test_the_durability_and_placement_keys_are_never_copied() -> None:
    for key in (
        "min.insync.replicas",
        "unclean.leader.election.enable",
        "leader.replication.throttled.replicas",
        "follower.replication.throttled.replicas",
        "compression.type",
        "remote.storage.enable",
        "local.retention.ms",
        "local.retention.bytes",
        "confluent.placement.constraints",
        "message.downconversion.enable",
    ):
        assert key in NEVER_COPIED


@given(st.dictionaries(config_names | st.sampled_from(sorted(NEVER_COPIED)), config_values))
def test_everything_else_the_source_sets_is_copied_as_it_is(source: dict[str, str]) -> None:
    source.pop(MAX_MESSAGE_BYTES, None)
    configs = remote_topic_configs(source)
    for key, value in source.items():
        if key in ALWAYS_SET:
            assert configs[key] == ALWAYS_SET[key]
        elif key in NEVER_COPIED:
            assert key not in configs
        else:
            assert configs[key] == value
    assert set(configs) == (set(source) - NEVER_COPIED) | set(ALWAYS_SET) | {MAX_MESSAGE_BYTES}


def test_the_source_mapping_is_not_changed() -> None:
    source = {"compression.type": "lz4", "retention.ms": "5"}
    remote_topic_configs(source)
    assert source == {"compression.type": "lz4", "retention.ms": "5"}


@pytest.mark.parametrize(
    ("explicit", "effective", "expected"),
    [
        (None, None, DEFAULT_MAX_MESSAGE_BYTES + 65536),  # Kafka's default
        ("2000000", None, 2_000_000 + 65536),  # the source sets it itself
        (None, 5_000_000, 5_000_000 + 65536),  # a broker default the source inherits
        ("2000000", 2_000_000, 2_000_000 + 65536),
        ("0", None, 65536),
    ],
)
def test_max_message_bytes_gets_room_for_the_provenance_header(
    explicit: str | None, effective: int | None, expected: int
) -> None:
    source = {} if explicit is None else {MAX_MESSAGE_BYTES: explicit}
    configs = remote_topic_configs(source, effective)
    assert configs[MAX_MESSAGE_BYTES] == str(expected)


def test_the_effective_limit_wins_over_a_stale_explicit_one() -> None:
    configs = remote_topic_configs({MAX_MESSAGE_BYTES: "1000"}, 3000)
    assert configs[MAX_MESSAGE_BYTES] == str(3000 + HEADER_ALLOWANCE_BYTES)


def test_a_source_at_the_largest_max_message_bytes_gets_a_remote_topic_the_broker_accepts() -> None:
    # 2147483647 is a legal (and common "unlimited") value on the source; 2147549183 is not.
    configs = remote_topic_configs({MAX_MESSAGE_BYTES: str(INT_MAX)}, INT_MAX)
    assert configs[MAX_MESSAGE_BYTES] == str(INT_MAX)


@given(st.integers(0, INT_MAX))
def test_max_message_bytes_is_a_valid_broker_int_that_is_never_smaller(limit: int) -> None:
    # The broker refuses a max.message.bytes above 2^31 - 1 ("not a number of type INT"), so the
    # remote topic could not be created for a source that sets the largest legal value.
    for configs in (
        remote_topic_configs({}, limit),
        remote_topic_configs({MAX_MESSAGE_BYTES: str(limit)}),
    ):
        value = int(configs[MAX_MESSAGE_BYTES])
        assert value <= INT_MAX
        assert value >= min(limit + HEADER_ALLOWANCE_BYTES, INT_MAX)


# -- drift ----------------------------------------------------------------------------------------


def test_config_drift_lists_the_desired_values_the_target_lacks() -> None:
    desired = {"retention.ms": "1000", "cleanup.policy": "compact", "segment.ms": "60000"}
    actual = {"retention.ms": "1000", "cleanup.policy": "delete", "min.insync.replicas": "2"}
    assert config_drift(desired, actual) == {"cleanup.policy": "compact", "segment.ms": "60000"}


def test_no_drift_when_the_target_matches() -> None:
    desired = {"retention.ms": "1000"}
    assert config_drift(desired, {"retention.ms": "1000", "extra": "x"}) == {}
    assert config_drift({}, {"retention.ms": "1"}) == {}


@given(
    st.dictionaries(config_names, config_values),
    st.dictionaries(config_names, config_values),
)
def test_applying_the_drift_removes_it(desired: dict[str, str], actual: dict[str, str]) -> None:
    drift = config_drift(desired, actual)
    assert drift.items() <= desired.items()
    assert all(actual.get(key) != value for key, value in drift.items())
    resynced = {**actual, **drift}
    assert {key: resynced.get(key) for key in desired} == desired
    assert config_drift(desired, resynced) == {}


# -- retention ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("configs", "age_ms", "expected"),
    [
        ({}, 10**12, False),  # the target's default retention is not known here
        ({"retention.ms": "-1"}, 10**12, False),  # infinite
        ({"retention.ms": "-1"}, 0, False),
        ({"retention.ms": "86400000"}, 86_400_000, False),
        ({"retention.ms": "86400000"}, 86_400_001, True),
        ({"retention.ms": "86400000"}, 1_000, False),
        ({"retention.ms": "0"}, 0, False),
        ({"retention.ms": "0"}, 1, True),
        ({"retention.ms": str(LONG_MAX)}, 10**15, False),
        ({"retention.bytes": "1"}, 10**12, False),
    ],
)
def test_retention_shorter_than(configs: dict[str, str], age_ms: int, expected: bool) -> None:
    assert retention_shorter_than(configs, age_ms) is expected


@given(st.integers(0, 10**13), st.integers(0, 10**13))
def test_retention_shorter_than_compares_age_and_retention(retention: int, age: int) -> None:
    assert retention_shorter_than({"retention.ms": str(retention)}, age) is (age > retention)
    assert retention_shorter_than({"retention.ms": "-1"}, age) is False


def test_retention_of_remote_configs_is_the_source_retention() -> None:
    configs = remote_topic_configs({"retention.ms": "3600000"})
    assert retention_shorter_than(configs, 3_600_001)
    assert not retention_shorter_than(remote_topic_configs({}), 10**12)
