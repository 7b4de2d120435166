"""How the port's admin operations answer: the answers each expects (a topic that exists, one
that is gone, a coordinator moving) handled first, an invalid topic request a ConfigError, and
every other failure mapped by :mod:`drsvc.kafka.errors`. Run against admin clients whose
futures answer what a test says, on a fake clock."""

from __future__ import annotations

from concurrent.futures import Future
from types import SimpleNamespace
from typing import Any, cast

import pytest
from confluent_kafka import KafkaError, KafkaException
from fake_kafka import FakeClock

from drsvc.errors import ConfigError, FatalClientError, KafkaUnavailableError
from drsvc.kafka.admin import (
    GROUP_HAS_MEMBERS_ERRORS,
    alter_group_offsets,
    create_topic,
    describe_topics,
)
from drsvc.kafka.types import AdminClient

E = KafkaError


def answer(result: Any = None, error: KafkaError | BaseException | None = None) -> Future[Any]:
    future: Future[Any] = Future()
    if isinstance(error, KafkaError):
        future.set_exception(KafkaException(error))
    elif error is not None:
        future.set_exception(error)
    else:
        future.set_result(result)
    return future


class ScriptedAdmin:
    """Answers each request with the next of ``answers`` (an error code, an exception or a
    result)."""

    def __init__(self, *answers: Any) -> None:
        self.answers = list(answers)
        self.requests = 0

    def _next(self) -> Future[Any]:
        self.requests += 1
        found = self.answers.pop(0)
        if isinstance(found, int):
            return answer(error=KafkaError(found))
        if isinstance(found, (KafkaError, BaseException)):
            return answer(error=found)
        return answer(found)

    def create_topics(self, topics: list[Any], operation_timeout: float) -> dict[str, Any]:
        return {topics[0].topic: self._next()}

    def describe_topics(self, names: Any, request_timeout: float) -> dict[str, Any]:
        return {name: self._next() for name in names.topic_names}

    def alter_consumer_group_offsets(self, requests: list[Any], request_timeout: float) -> Any:
        return {requests[0].group_id: self._next()}


def admin(*answers: Any) -> tuple[ScriptedAdmin, AdminClient]:
    scripted = ScriptedAdmin(*answers)
    return scripted, cast(AdminClient, scripted)


def test_creating_a_topic_that_exists_is_no_error_and_an_invalid_request_is_a_config_error() -> (
    None
):
    _, client = admin(None, E.TOPIC_ALREADY_EXISTS, E.INVALID_REPLICATION_FACTOR)
    assert create_topic(client, "t", 1) is True
    assert create_topic(client, "t", 1) is False
    with pytest.raises(ConfigError, match=r"^cluster 'west': cannot create topic t: INVALID_REP"):
        create_topic(client, "t", 1, replication_factor=5, cluster="west")


@pytest.mark.parametrize(
    ("failure", "raised", "text"),
    [
        (E._TRANSPORT, KafkaUnavailableError, "_TRANSPORT"),
        (TimeoutError(), KafkaUnavailableError, "no answer in time"),
        (E.TOPIC_AUTHORIZATION_FAILED, ConfigError, "needs an ACL"),
        (KafkaError(E._FATAL, fatal=True), FatalClientError, "cannot be used again"),
        (E.UNKNOWN, KafkaUnavailableError, "UNKNOWN"),
    ],
    ids=["transport", "timeout", "acl", "fatal", "unknown"],
)
def test_other_topic_creation_failures_are_mapped_naming_the_cluster(
    failure: Any, raised: type[Exception], text: str
) -> None:
    _, client = admin(failure)
    with pytest.raises(raised, match=r"^cluster 'west': creating topic t: ") as caught:
        create_topic(client, "t", 1, cluster="west")
    assert text in str(caught.value)


def test_a_topic_gone_since_it_was_listed_is_left_out_of_a_description() -> None:
    uuid = SimpleNamespace(
        get_most_significant_bits=lambda: 1, get_least_significant_bits=lambda: 2
    )
    described = SimpleNamespace(topic_id=uuid, partitions=[SimpleNamespace(id=0, leader=1)])
    _, client = admin(described, E.UNKNOWN_TOPIC_OR_PART, E._UNKNOWN_TOPIC)
    found = describe_topics(client, ["a", "b", "c"])
    assert list(found) == ["a"] and found["a"].partitions == 1

    _, client = admin(E.TOPIC_AUTHORIZATION_FAILED)
    with pytest.raises(ConfigError, match=r"^cluster 'east': describing topic a: "):
        describe_topics(client, ["a"], cluster="east")


def committed(*errors: int | None) -> SimpleNamespace:
    return SimpleNamespace(
        topic_partitions=[
            SimpleNamespace(topic="t", partition=p, error=None if e is None else KafkaError(e))
            for p, e in enumerate(errors)
        ]
    )


def test_a_moving_coordinator_is_asked_again_on_the_clock_then_given_up() -> None:
    clock = FakeClock()
    scripted, client = admin(
        E.NOT_COORDINATOR, committed(None, E.UNKNOWN_MEMBER_ID), E.COORDINATOR_LOAD_IN_PROGRESS
    )
    offsets = {("t", 0): 5, ("t", 1): 6}
    answers = alter_group_offsets(client, "g", offsets, timeout_s=10.0, clock=clock)
    assert answers[("t", 0)] is None
    refused = answers[("t", 1)]
    assert refused is not None and refused.group_has_members
    assert scripted.requests == 2

    scripted.answers = [E.NOT_COORDINATOR] * 100
    started = clock.monotonic()
    with pytest.raises(KafkaUnavailableError, match="committing offsets of group 'g'"):
        alter_group_offsets(client, "g", offsets, timeout_s=10.0, clock=clock)
    assert 10.0 <= clock.monotonic() - started <= 10.5


def test_the_names_of_a_refusal_by_live_members_are_the_port_s() -> None:
    assert "UNKNOWN_MEMBER_ID" in GROUP_HAS_MEMBERS_ERRORS
    assert "NON_EMPTY_GROUP" in GROUP_HAS_MEMBERS_ERRORS
