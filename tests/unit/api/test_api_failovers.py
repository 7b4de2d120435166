"""Failovers through the API with the real failover executor, on an in-memory coordinator, fake
clusters and a fake clock: request ids of one application, stale plans, and planned failovers
whose active cluster does not answer."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest
from failover_topologies import Clock, caught_up, east_west, executor_on, orders_and_payments
from fastapi.testclient import TestClient
from memory_coordination import MemoryCoordinator

from drsvc.adapters.consul_client import ConsulClient
from drsvc.api.app import create_app
from drsvc.api.auth import ApiAuth
from drsvc.api.service import ApiService
from drsvc.runtime.failover.executor import FailoverExecutor
from failover.active import decode_active
from failover.failover_record import encode_record
from failover.naming import app_active_key, failover_record_key, failovers_prefix
from failover.recovery_point import UnreplicatedRange
from failover.site_recovery import DivergentRange, RecoveryPolicy, SiteRecovery

TOKEN = "s3cret-token-0123456789"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
NS = "shop"

TOPOLOGY = east_west(NS, *orders_and_payments(lease_s=2))


class World:
    def __init__(self) -> None:
        self.clock = Clock()
        self.store = MemoryCoordinator(self.clock)
        self.clusters = caught_up({"g1": "orders", "g2": "pay"})
        self.service = ApiService(
            TOPOLOGY,
            {"east": "e:9092", "west": "w:9092"},
            self.executor,
            self.store,
            ConsulClient("127.0.0.1:1"),  # never asked: no readiness or migration here
        )
        self.api = TestClient(create_app(self.service, ApiAuth.of(TOKEN)), headers=AUTH)

    def executor(self) -> FailoverExecutor:
        return executor_on(TOPOLOGY, self.store, self.clusters, self.clock)

    def post(self, path: str, body: dict[str, Any]) -> Any:
        answer = self.api.post(path, json=body, headers=AUTH)
        self.settle()
        return answer

    def settle(self) -> None:
        """Wait for the failovers the API started on its threads (fake time: they are quick)."""
        deadline = time.monotonic() + 30
        while self.service.running_threads():
            assert time.monotonic() < deadline, "a failover thread did not end"
            time.sleep(0.01)

    def active(self, app: str) -> str | None:
        entry = self.store.get(app_active_key(NS, app))
        return decode_active(None if entry is None else entry.value, "east").cluster

    def records(self) -> int:
        return len(self.store.list(failovers_prefix(NS)))


@pytest.fixture
def world() -> Iterator[World]:
    yield World()


def test_a_request_id_of_one_application_never_answers_for_another(world: World) -> None:
    orders = world.post("/v1/apps/orders/failover", {"to": "west", "request_id": "r-42"})
    assert orders.status_code == 202, orders.text
    assert orders.json()["app"] == "orders"
    payments = world.post(
        "/v1/apps/payments/failover", {"to": "west", "force": True, "request_id": "r-42"}
    )
    assert payments.status_code == 202, payments.text
    assert payments.json()["app"] == "payments"
    assert payments.json()["id"] != orders.json()["id"]
    assert payments.headers["Location"] == f"/v1/failovers/{payments.json()['id']}"
    assert (world.active("orders"), world.active("payments")) == ("west", "west")


def test_a_request_id_with_another_request_of_the_application_is_409(world: World) -> None:
    first = world.post("/v1/apps/orders/failover", {"to": "west", "request_id": "r-7"})
    assert first.status_code == 202, first.text
    same = world.post("/v1/apps/orders/failover", {"to": "west", "request_id": "r-7"})
    assert (same.status_code, same.json()["id"]) == (202, first.json()["id"])
    other = world.post("/v1/apps/orders/failover", {"to": "east", "request_id": "r-7"})
    assert other.status_code == 409, other.text
    assert other.json()["error"]["code"] == "request_mismatch"
    assert world.active("orders") == "west"
    assert world.records() == 1


def test_a_plan_that_no_longer_holds_is_412_and_changes_nothing(world: World) -> None:
    shown = world.post("/v1/apps/orders/failover", {"to": "west", "dry_run": True})
    assert shown.status_code == 200, shown.text
    plan = shown.json()
    assert plan["kind"] == "planned"
    # someone else moves payments meanwhile: orders' plan still holds
    assert world.post("/v1/apps/payments/failover", {"to": "west"}).status_code == 202
    for stale in (
        {"expect_kind": "planned", "expect_epoch": plan["epoch"] + 1},
        {"expect_kind": "unplanned", "expect_epoch": plan["epoch"]},
    ):
        answer = world.post("/v1/apps/orders/failover", {"to": "west", **stale})
        assert answer.status_code == 412, answer.text
        assert answer.json()["error"]["code"] == "precondition_failed"
    assert (world.active("orders"), world.records()) == ("east", 1)
    bound = {"expect_kind": plan["kind"], "expect_epoch": plan["epoch"]}
    ran = world.post("/v1/apps/orders/failover", {"to": "west", **bound})
    assert ran.status_code == 202, ran.text
    assert world.active("orders") == "west"


def test_a_planned_failover_whose_cluster_does_not_answer_is_refused_not_downgraded(
    world: World,
) -> None:
    world.clusters.down.add("east")
    plan = world.post("/v1/apps/orders/failover", {"to": "west", "dry_run": True})
    refused = world.post("/v1/apps/orders/failover", {"to": "west"})
    assert refused.status_code == 409, refused.text
    error = refused.json()["error"]
    assert error["code"] == "refused" and "does not answer" in error["message"]
    assert (world.active("orders"), world.records()) == ("east", 0)
    assert plan.status_code == 409, plan.text  # the dry run says the same
    forced = world.post("/v1/apps/orders/failover", {"to": "west", "force": True})
    assert forced.status_code == 202, forced.text
    assert forced.json()["kind"] == "unplanned"


def test_every_failover_answer_says_which_token_asked_never_the_secret(world: World) -> None:
    started = world.post("/v1/apps/orders/failover", {"to": "west", "request_id": "r-9"})
    assert started.status_code == 202, started.text
    by = {"kind": "api", "name": "default", "role": "operator"}
    assert started.json()["requested_by"] == by
    shown = world.api.get(f"/v1/failovers/{started.json()['id']}")
    assert shown.json()["requested_by"] == by
    assert [f["requested_by"] for f in world.api.get("/v1/failovers").json()] == [by]
    assert TOKEN not in shown.text and TOKEN not in started.text


def test_the_lost_count_is_the_recovery_s_once_the_returned_site_was_recovered(
    world: World,
) -> None:
    """An unplanned failover away from a dead cluster first knows only that some records may
    not have crossed (a lower bound, not exact); the recovery of the returned site counts
    them, and from then on the answer is that exact number."""
    world.clusters.down.add("east")
    started = world.post("/v1/apps/orders/failover", {"to": "west", "force": True})
    assert started.status_code == 202, started.text
    failover_id = started.json()["id"]
    key = failover_record_key(NS, failover_id)
    # the switch saw what crossed, never the dead cluster's end: an open range
    record = replace(
        world.executor().record(failover_id),
        unreplicated=(UnreplicatedRange("orders", 0, 40, None),),
    )
    world.store.put(key, encode_record(record))
    before = world.api.get(f"/v1/failovers/{failover_id}").json()
    assert (before["kind"], before["rpo_exact"], before["rpo_measured_by"]) == (
        "unplanned",
        False,
        "switch",
    )
    recovery = SiteRecovery(
        RecoveryPolicy.QUARANTINE, "east", 5_000, (DivergentRange("orders", 0, 40, 41),)
    )
    world.store.put(key, encode_record(replace(record, recovery=recovery)))
    after = world.api.get(f"/v1/failovers/{failover_id}").json()
    assert (after["rpo_records"], after["rpo_exact"], after["rpo_measured_by"]) == (
        1,
        True,
        "recovery",
    )
