"""The one mapping of Kafka errors: each code and flag to its drsvc error class, messages that
name the operation and the cluster, and the named code sets.

(Named ``test_kafka_errors`` because test modules share one namespace and
``tests/unit/failover/test_errors.py`` exists.)
"""

from __future__ import annotations

import concurrent.futures

import pytest
from confluent_kafka import KafkaError, KafkaException

from drsvc.errors import (
    ConfigError,
    DrsvcError,
    FatalClientError,
    KafkaUnavailableError,
    TemporaryError,
)
from drsvc.kafka import admin as kafka_admin
from drsvc.kafka import errors
from drsvc.kafka.errors import describe, kafka_error, retriable, to_drsvc, translated

E = KafkaError


def _raised(code: int, *, fatal: bool = False, retry: bool = False) -> KafkaException:
    return KafkaException(KafkaError(code, "what the client said", fatal=fatal, retriable=retry))


# (what librdkafka raised, the drsvc class it maps to)
TABLE: list[tuple[str, BaseException, type[DrsvcError]]] = [
    # fatal first, whatever else the error says
    ("fatal", _raised(E._FENCED, fatal=True), FatalClientError),
    ("fatal and retriable", _raised(E._TIMED_OUT, fatal=True, retry=True), FatalClientError),
    ("fatal auth", _raised(E.SASL_AUTHENTICATION_FAILED, fatal=True), FatalClientError),
    # flagged retriable by librdkafka
    ("retriable", _raised(E.NOT_ENOUGH_REPLICAS, retry=True), KafkaUnavailableError),
    ("retriable gone", _raised(E.UNKNOWN_TOPIC_OR_PART, retry=True), KafkaUnavailableError),
    # unavailable, flagged or not
    ("timed out", _raised(E._TIMED_OUT), KafkaUnavailableError),
    ("transport", _raised(E._TRANSPORT), KafkaUnavailableError),
    ("all brokers down", _raised(E._ALL_BROKERS_DOWN), KafkaUnavailableError),
    ("request timed out", _raised(E.REQUEST_TIMED_OUT), KafkaUnavailableError),
    ("not coordinator", _raised(E.NOT_COORDINATOR), KafkaUnavailableError),
    ("coordinator loading", _raised(E.COORDINATOR_LOAD_IN_PROGRESS), KafkaUnavailableError),
    ("no coordinator", _raised(E.COORDINATOR_NOT_AVAILABLE), KafkaUnavailableError),
    ("a bare code", KafkaException(E._TRANSPORT), KafkaUnavailableError),
    ("builtin timeout", TimeoutError(), KafkaUnavailableError),
    ("future timeout", concurrent.futures.TimeoutError(), KafkaUnavailableError),
    # someone must change a setting, a secret or an ACL
    ("local auth", _raised(E._AUTHENTICATION), ConfigError),
    ("sasl auth", _raised(E.SASL_AUTHENTICATION_FAILED), ConfigError),
    ("sasl mechanism", _raised(E.UNSUPPORTED_SASL_MECHANISM), ConfigError),
    ("topic acl", _raised(E.TOPIC_AUTHORIZATION_FAILED), ConfigError),
    ("group acl", _raised(E.GROUP_AUTHORIZATION_FAILED), ConfigError),
    ("cluster acl", _raised(E.CLUSTER_AUTHORIZATION_FAILED), ConfigError),
    ("txn id acl", _raised(E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED), ConfigError),
    ("token acl", _raised(E.DELEGATION_TOKEN_AUTHORIZATION_FAILED), ConfigError),
    ("invalid config", _raised(E.INVALID_CONFIG), ConfigError),
    ("invalid argument", _raised(E._INVALID_ARG), ConfigError),
    # anything else: temporary
    ("gone, not flagged", _raised(E.UNKNOWN_TOPIC_OR_PART), KafkaUnavailableError),
    ("leaderless", _raised(E._NO_OFFSET), KafkaUnavailableError),
    ("replication factor", _raised(E.INVALID_REPLICATION_FACTOR), KafkaUnavailableError),
    ("name lookup", _raised(E._RESOLVE), KafkaUnavailableError),
    ("ssl", _raised(E._SSL), KafkaUnavailableError),
    ("generic failure", _raised(E._FAIL), KafkaUnavailableError),
    ("a text only", KafkaException("something odd"), KafkaUnavailableError),
    ("not a kafka error", RuntimeError("odd"), KafkaUnavailableError),
]


@pytest.mark.parametrize(
    ("raised", "expected"), [(r, e) for _, r, e in TABLE], ids=[i for i, _, _ in TABLE]
)
def test_each_error_maps_to_its_drsvc_class(
    raised: BaseException, expected: type[DrsvcError]
) -> None:
    mapped = to_drsvc(raised, "listing topics", "east")
    assert type(mapped) is expected


def test_a_bare_kafka_error_maps_like_the_exception_that_carries_it() -> None:
    # what a message or a delivery report carries
    assert type(to_drsvc(KafkaError(E._TRANSPORT), "reading", "east")) is KafkaUnavailableError
    assert type(to_drsvc(KafkaError(E.TOPIC_AUTHORIZATION_FAILED), "reading")) is ConfigError
    assert type(to_drsvc(KafkaError(E._FENCED, fatal=True), "reading")) is FatalClientError


def test_what_a_caller_may_retry_follows_the_class() -> None:
    assert to_drsvc(_raised(E._TIMED_OUT), "x").retryable
    assert to_drsvc(_raised(E._FENCED, fatal=True), "x").retryable
    assert isinstance(to_drsvc(_raised(E._FENCED, fatal=True), "x"), TemporaryError)
    assert not to_drsvc(_raised(E.TOPIC_AUTHORIZATION_FAILED), "x").retryable


def test_the_message_names_the_operation_the_cluster_and_the_error() -> None:
    mapped = to_drsvc(_raised(E._TIMED_OUT), "listing offsets of orders", "east")
    assert str(mapped) == (
        "cluster 'east': listing offsets of orders: _TIMED_OUT: what the client said"
    )


def test_without_a_cluster_the_message_starts_with_the_operation() -> None:
    mapped = to_drsvc(TimeoutError(), "creating topic orders")
    assert str(mapped) == "creating topic orders: TimeoutError: no answer in time"


def test_config_problems_say_what_to_check() -> None:
    refused = to_drsvc(_raised(E.SASL_AUTHENTICATION_FAILED), "listing topics", "west")
    assert str(refused).startswith("cluster 'west': listing topics: SASL_AUTHENTICATION_FAILED")
    assert "security settings" in str(refused)
    denied = to_drsvc(_raised(E.TOPIC_AUTHORIZATION_FAILED), "reading orders", "west")
    assert "ACL" in str(denied)


def test_a_fatal_error_says_the_client_is_done() -> None:
    mapped = to_drsvc(_raised(E._FENCED, fatal=True), "committing a transaction", "west")
    assert str(mapped).startswith("cluster 'west': committing a transaction: _FENCED:")
    assert "cannot be used again" in str(mapped)


# -- translated ---------------------------------------------------------------------------------


def test_translated_raises_the_mapped_error_from_the_original() -> None:
    original = _raised(E._TRANSPORT)
    with (
        pytest.raises(KafkaUnavailableError, match=r"^cluster 'east': describing orders: ") as e,
        translated("describing orders", "east"),
    ):
        raise original
    assert e.value.__cause__ is original


def test_translated_maps_timeouts_of_futures() -> None:
    with (
        pytest.raises(KafkaUnavailableError, match="waiting for the answer"),
        translated("waiting for the answer", "east"),
    ):
        raise concurrent.futures.TimeoutError()


def test_translated_lets_drsvc_errors_and_bugs_through_unchanged() -> None:
    already = ConfigError("cluster 'east': no bootstrap_servers")
    with pytest.raises(ConfigError) as e, translated("building a client", "east"):
        raise already
    assert e.value is already
    with (
        pytest.raises(ValueError, match=r"group\.id must be set"),
        translated("building a client", "east"),
    ):
        raise ValueError("group.id must be set")


def test_translated_does_nothing_when_nothing_fails() -> None:
    with translated("listing topics", "east"):
        done = True
    assert done


# -- the parts --------------------------------------------------------------------------------


def test_kafka_error_finds_the_error_wherever_it_is_carried() -> None:
    error = KafkaError(E._TRANSPORT)
    assert kafka_error(error) is error
    assert kafka_error(KafkaException(error)) is error
    bare = kafka_error(KafkaException(E._TIMED_OUT))
    assert bare is not None
    assert bare.code() == E._TIMED_OUT
    assert kafka_error(KafkaException("text")) is None
    assert kafka_error(KafkaException()) is None
    assert kafka_error(TimeoutError()) is None


def test_describe_names_the_error_or_the_exception() -> None:
    assert describe(_raised(E._TIMED_OUT)) == "_TIMED_OUT: what the client said"
    assert describe(KafkaError(E._TRANSPORT, "broken")) == "_TRANSPORT: broken"
    assert describe(RuntimeError("odd")) == "RuntimeError: odd"
    assert describe(TimeoutError()) == "TimeoutError: no answer in time"
    assert describe(KeyError()) == "KeyError"


@pytest.mark.parametrize(
    ("raised", "expected"),
    [
        (_raised(E.NOT_ENOUGH_REPLICAS, retry=True), True),
        (_raised(E._TRANSPORT), True),
        (_raised(E._TIMED_OUT), True),
        (_raised(E.NOT_COORDINATOR), True),
        (TimeoutError(), True),
        (_raised(E._TIMED_OUT, fatal=True, retry=True), False),
        (_raised(E.TOPIC_AUTHORIZATION_FAILED), False),
        (_raised(E._FAIL), False),
        (RuntimeError("odd"), False),
    ],
    ids=[
        "flagged",
        "transport",
        "timed out",
        "coordinator moving",
        "timeout",
        "fatal",
        "acl",
        "unknown",
        "not kafka",
    ],
)
def test_retriable(raised: BaseException, expected: bool) -> None:
    assert retriable(raised) is expected


def test_the_config_problems_are_authentication_authorization_and_invalid_settings() -> None:
    assert errors.CONFIG_PROBLEMS == (
        errors.AUTHENTICATION | errors.AUTHORIZATION | errors.INVALID_CONFIG
    )
    assert not errors.CONFIG_PROBLEMS & errors.UNAVAILABLE


def test_the_named_sets_agree_with_the_copies_they_replace() -> None:
    # These copies go when their modules move onto the port; so do these lines.
    assert errors.COORDINATOR_MOVING == kafka_admin.COORDINATOR_MOVING
    assert {
        KafkaError(code).name() for code in errors.GROUP_HAS_MEMBERS
    } == kafka_admin.GROUP_HAS_MEMBERS_ERRORS


@pytest.mark.parametrize(
    ("code", "text", "refused"),
    [
        (E._AUTHENTICATION, "SASL authentication error: Authentication failed", True),
        (E.SASL_AUTHENTICATION_FAILED, "bad password", True),
        (E.UNSUPPORTED_SASL_MECHANISM, "no SCRAM-SHA-512 here", True),
        (E._SSL, "SSL handshake failed: certificate verify failed", True),
        # a handshake cut by a dying broker is an outage, not a refusal
        (E._SSL, "SSL handshake failed: Disconnected", False),
        (E._TRANSPORT, "Connection refused", False),
        (E._ALL_BROKERS_DOWN, "0/1 brokers are down", False),
    ],
)
def test_only_refused_credentials_and_untrusted_certificates_count_as_refusals(
    code: int, text: str, refused: bool
) -> None:
    assert errors.refuses_credentials(KafkaError(code, text)) is refused
