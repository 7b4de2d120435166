"""Fencing transactional ids on the old cluster: every id is tried with its own producer, under
one deadline; one id's failure is reported with its reason and never stops the others."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import Any, cast

from confluent_kafka import KafkaError, KafkaException
from fake_kafka import FakeClock

from drsvc.kafka.clients import KafkaClients
from drsvc.kafka.types import Producer
from drsvc.runtime.failover.fencing import (
    FENCING_CLIENT_ID,
    FenceFailure,
    FencingReport,
    fence_transactional_ids,
)
from drsvc.topology import load_topology_text

CONFIG = {"bootstrap.servers": "127.0.0.1:1"}
TOPOLOGY = """
name: fencing
clusters:
  east: {bootstrap_servers: "127.0.0.1:1"}
"""


class FakeProducer:
    """Answers ``init_transactions`` with what the test scripted for its transactional id."""

    def __init__(
        self, config: dict[str, Any], script: Callable[[str, float], None], log: list[str]
    ) -> None:
        self.config = config
        self._script = script
        self._log = log
        self.closed = False

    def init_transactions(self, timeout: float) -> None:
        self._log.append(f"init {self.config['transactional.id']} {timeout:g}")
        self._script(self.config["transactional.id"], timeout)

    def close(self) -> bool:
        self.closed = True
        return True


class Fakes(KafkaClients):
    """The client factory of cluster ``east``: its producers are scripted :class:`FakeProducer`
    objects, built with the settings the real factory gives them."""

    def __init__(self, script: Callable[[str, float], None]) -> None:
        self.fake_clock = FakeClock()
        super().__init__(load_topology_text(TOPOLOGY), clock=self.fake_clock)
        self.log: list[str] = []
        self.producers: list[FakeProducer] = []
        self._script = script
        self._lock = threading.Lock()

    def producer(self, alias: str, overlay: Mapping[str, Any] | None = None) -> Producer:
        producer = FakeProducer(self.config(alias, overlay), self._script, self.log)
        with self._lock:
            self.producers.append(producer)
        return cast(Producer, producer)

    def fence(self, ids: list[str], timeout_s: float = 10.0, parallel: int = 8) -> FencingReport:
        return fence_transactional_ids("east", self, ids, timeout_s=timeout_s, parallel=parallel)


def fails_with(code: int, message: str, retriable: bool = False) -> KafkaException:
    return KafkaException(KafkaError(code, message, retriable=retriable))


def test_each_id_gets_its_own_producer_on_the_old_cluster() -> None:
    fakes = Fakes(lambda _id, _timeout: None)
    report = fakes.fence(["tx-a", "tx-b", "tx-a"])
    assert report.fenced == ("tx-a", "tx-b") and report.failed == () and report.complete
    configs = sorted((p.config["transactional.id"], p.config["client.id"]) for p in fakes.producers)
    assert configs == [("tx-a", FENCING_CLIENT_ID), ("tx-b", FENCING_CLIENT_ID)]
    assert all(p.config["bootstrap.servers"] == "127.0.0.1:1" for p in fakes.producers)
    assert all(p.closed for p in fakes.producers)
    assert report.detail() == "fenced 2 of 2 transactional id(s) on east in 0.0s"


def test_one_ids_failure_is_reported_and_the_others_are_fenced() -> None:
    def script(transactional_id: str, _timeout: float) -> None:
        if transactional_id == "tx-denied":
            raise fails_with(KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, "not allowed")

    report = Fakes(script).fence(["tx-a", "tx-denied", "tx-b"])
    assert report.fenced == ("tx-a", "tx-b")
    assert report.failed == (
        FenceFailure("tx-denied", "TRANSACTIONAL_ID_AUTHORIZATION_FAILED: not allowed"),
    )
    assert not report.complete
    assert report.detail().endswith(
        "not fenced: tx-denied (TRANSACTIONAL_ID_AUTHORIZATION_FAILED: not allowed)"
    )


def test_a_retriable_error_is_tried_again_within_the_deadline() -> None:
    answers = [fails_with(KafkaError._TIMED_OUT, "coordinator loading", retriable=True)] * 2

    def script(_id: str, _timeout: float) -> None:
        if answers:
            raise answers.pop()

    fakes = Fakes(script)
    report = fakes.fence(["tx-a"])
    assert report.fenced == ("tx-a",)
    assert len(fakes.producers) == 1 and len(fakes.log) == 3  # one producer, three tries
    assert report.took_s > 0  # the backoff between tries


def test_a_cluster_that_does_not_answer_costs_the_bound_and_no_more() -> None:
    fakes: Fakes

    def script(_id: str, timeout: float) -> None:
        fakes.fake_clock.advance(timeout)  # blocks as long as it may, then times out
        raise fails_with(KafkaError._TIMED_OUT, "Transactional operation timed out", True)

    fakes = Fakes(script)
    report = fakes.fence(["tx-a", "tx-b"], timeout_s=5.0, parallel=1)
    assert report.fenced == ()
    assert [f.transactional_id for f in report.failed] == ["tx-a", "tx-b"]
    assert report.failed[0].reason == "_TIMED_OUT: Transactional operation timed out"
    assert report.failed[1].reason == "not tried: the 5s bound ran out"
    assert fakes.log == ["init tx-a 5"]
    assert report.took_s == 5.0


def test_a_producer_that_cannot_be_built_is_that_ids_failure() -> None:
    # librdkafka refuses the setting when the producer is built, before any connection
    settings = {**CONFIG, "no.such.setting": "1"}
    report = fence_transactional_ids("east", settings, ["tx-a"], timeout_s=5)
    assert report.fenced == ()
    (failure,) = report.failed
    assert failure.transactional_id == "tx-a"
    assert failure.reason.startswith("ConfigError: cluster 'east': creating a producer:")
    assert "no.such.setting" in failure.reason


def test_a_dropped_connection_is_tried_again_though_not_flagged_retriable() -> None:
    answers = [fails_with(KafkaError._TRANSPORT, "Broker: Connection reset")]

    def script(_id: str, _timeout: float) -> None:
        if answers:
            raise answers.pop()

    fakes = Fakes(script)
    assert fakes.fence(["tx-a"]).fenced == ("tx-a",)
    assert len(fakes.log) == 2


def test_nothing_to_fence_is_said_so() -> None:
    report = Fakes(lambda _id, _timeout: None).fence([])
    assert report.complete and report.fenced == ()
    assert report.detail() == "no transactional ids to fence on east"
