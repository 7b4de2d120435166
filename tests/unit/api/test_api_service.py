"""The API's service between the routes and the failover executor: what it passes on, what it
answers, which executor it asks (a fake executor: the real one's rules have their own tests)."""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import pytest
from failover_topologies import east_west, orders_and_payments
from fastapi.testclient import TestClient
from memory_coordination import FakeClock, MemoryCoordinator

from drsvc.adapters.consul_client import ConsulClient
from drsvc.api.app import create_app
from drsvc.api.auth import ApiAuth
from drsvc.api.service import ApiService
from drsvc.topology.models import Application
from failover.active import ActiveDocument
from failover.failover_plan import (
    FailoverKind,
    FailoverPlan,
    FailoverRecord,
    FailoverRequest,
    GroupTarget,
)
from failover.requester import RequestedBy, RequesterKind

TOKEN = "s3cret-token-0123456789"
AUTH = {"Authorization": f"Bearer {TOKEN}"}

TOPOLOGY = east_west("shop", *orders_and_payments())


def _plan(request: FailoverRequest, failover_id: str) -> FailoverPlan:
    kind = FailoverKind.UNPLANNED if request.force else FailoverKind.PLANNED
    return FailoverPlan(failover_id, request.app, "east", request.to, kind, steps=())


@dataclass
class FakeExecutor:
    """Answers as a failover executor would, and keeps what it was asked."""

    epoch: int = 4
    #: a switch that lands while the plan is made (the epoch moves on during ``preview``)
    switch_during_preview: bool = False
    #: what this executor answers any request id with: an earlier failover's record
    earlier: FailoverRecord | None = None
    started: list[FailoverRequest] = field(default_factory=list)
    carried_on: list[str] = field(default_factory=list)

    def application(self, name: str) -> Application:
        return TOPOLOGY.application(name)

    def application_names(self) -> list[str]:
        return [a.name for a in TOPOLOGY.applications]

    def active(self, app: Application) -> ActiveDocument:
        return ActiveDocument("east", self.epoch, f"f-{self.epoch}", 0)

    def running(self, app: Application, me: str | None = None) -> str | None:
        return None

    def preview(self, request: FailoverRequest) -> tuple[FailoverPlan, list[GroupTarget], str]:
        if self.switch_during_preview:
            self.epoch += 1
        return _plan(request, "dry-run"), [], ""

    def start(self, request: FailoverRequest, on_created: Any = None) -> FailoverRecord:
        self.started.append(request)
        record = self.earlier or FailoverRecord(_plan(request, f"f-{len(self.started)}"))
        on_created(record)
        self.carried_on.append(record.plan.failover_id)
        return record


def _client(service: ApiService) -> TestClient:
    return TestClient(
        create_app(service, ApiAuth.of(TOKEN)), raise_server_exceptions=False, headers=AUTH
    )


def _service(**factories: Any) -> ApiService:
    return ApiService(
        TOPOLOGY,
        {"east": "e:9092", "west": "w:9092"},
        coordinator=MemoryCoordinator(FakeClock()),  # never asked: the executor answers for it
        consul=ConsulClient("127.0.0.1:1"),  # never asked: no readiness or migration here
        **factories,
    )


@pytest.fixture
def executor() -> FakeExecutor:
    return FakeExecutor()


@pytest.fixture
def api(executor: FakeExecutor) -> TestClient:
    return _client(_service(executor_factory=lambda: executor))


def test_a_dry_run_answers_the_plans_kind_and_the_epoch_to_send_back(
    api: TestClient, executor: FakeExecutor
) -> None:
    answer = api.post(
        "/v1/apps/orders/failover", json={"to": "west", "dry_run": True}, headers=AUTH
    )
    assert answer.status_code == 200, answer.text
    plan = answer.json()
    assert (plan["kind"], plan["epoch"]) == ("planned", 4)
    forced = api.post(
        "/v1/apps/orders/failover",
        json={"to": "west", "dry_run": True, "force": True},
        headers=AUTH,
    )
    assert forced.json()["kind"] == "unplanned"
    assert executor.started == []  # a dry run starts nothing


def test_the_epoch_of_a_dry_run_is_read_before_its_plan(
    api: TestClient, executor: FakeExecutor
) -> None:
    # A switch lands while the plan is made: the epoch answered is the older one, so a caller
    # that sends it back is refused rather than running a plan made after the switch.
    executor.switch_during_preview = True
    plan = api.post("/v1/apps/orders/failover", json={"to": "west", "dry_run": True}, headers=AUTH)
    assert plan.json()["epoch"] == 4
    assert executor.epoch == 5


#: the single token of ApiAuth.of: the operator "default"
BY_DEFAULT = RequestedBy(RequesterKind.API, "default", "operator")


def test_the_preconditions_reach_the_executor(api: TestClient, executor: FakeExecutor) -> None:
    body = {"to": "west", "expect_kind": "planned", "expect_epoch": 4, "request_id": "r-1"}
    answer = api.post("/v1/apps/orders/failover", json=body, headers=AUTH)
    assert answer.status_code == 202, answer.text
    back = api.post(
        "/v1/apps/orders/failback",
        json={"expect_kind": "unplanned", "expect_epoch": 0},
        headers=AUTH,
    )
    assert back.status_code == 202, back.text
    assert executor.started == [
        FailoverRequest("orders", "west", False, "r-1", FailoverKind.PLANNED, 4, BY_DEFAULT),
        FailoverRequest("orders", "east", False, None, FailoverKind.UNPLANNED, 0, BY_DEFAULT),
    ]


def test_a_request_id_never_answers_with_another_applications_failover(
    api: TestClient, executor: FakeExecutor
) -> None:
    # An executor that keeps request ids for the whole namespace answers r-42 of payments with
    # the failover r-42 started for orders: the API must neither return it nor carry it on.
    earlier = FailoverRecord(_plan(FailoverRequest("orders", "west"), "f-orders-1"))
    executor.earlier = earlier
    answer = api.post(
        "/v1/apps/payments/failover",
        json={"to": "west", "force": True, "request_id": "r-42"},
        headers=AUTH,
    )
    assert answer.status_code == 409, answer.text
    error = answer.json()["error"]
    assert error["code"] == "request_mismatch"
    assert "f-orders-1" in error["message"] and "payments" in error["message"]
    assert "Location" not in answer.headers
    assert executor.carried_on == []


def test_the_same_request_of_the_same_application_is_its_failover(
    api: TestClient, executor: FakeExecutor
) -> None:
    executor.earlier = FailoverRecord(_plan(FailoverRequest("orders", "west"), "f-7"))
    answer = api.post(
        "/v1/apps/orders/failover", json={"to": "west", "request_id": "r-7"}, headers=AUTH
    )
    assert answer.status_code == 202, answer.text
    assert (answer.json()["id"], answer.headers["Location"]) == ("f-7", "/v1/failovers/f-7")


def test_dry_runs_and_failovers_probe_as_failovers_and_reads_as_reads() -> None:
    built: list[str] = []

    def factory(role: str) -> Any:
        def build() -> FakeExecutor:
            built.append(role)
            return FakeExecutor()

        return build

    api = _client(_service(executor_factory=factory("reads"), mover_factory=factory("moves")))
    assert api.get("/v1/apps/orders", params={"exposure": False}).status_code == 200
    assert built == ["reads"]
    api.post("/v1/apps/orders/failover", json={"to": "west", "dry_run": True}, headers=AUTH)
    api.post("/v1/apps/orders/failover", json={"to": "west"}, headers=AUTH)
    assert built == ["reads", "moves", "moves"]


@dataclass
class BlockingExecutor(FakeExecutor):
    """A failover that runs on until it is let go."""

    release: threading.Event = field(default_factory=threading.Event)

    def start(self, request: FailoverRequest, on_created: Any = None) -> FailoverRecord:
        record = FailoverRecord(_plan(request, "f-slow"))
        on_created(record)
        self.release.wait(30)
        return record


def test_failover_threads_are_not_daemons_and_are_joined_up_to_a_bound() -> None:
    executor = BlockingExecutor()
    service = _service(executor_factory=lambda: executor)
    api = _client(service)
    assert api.post("/v1/apps/orders/failover", json={"to": "west"}).status_code == 202
    threads = [t for t in threading.enumerate() if t.name == "failover-orders"]
    assert threads and not any(t.daemon for t in threads)  # waited for, never cut off
    started = time.monotonic()
    assert service.join_failovers(0.3) == ["failover-orders"]
    assert 0.25 <= time.monotonic() - started < 5
    executor.release.set()
    assert service.join_failovers(10) == []
    assert service.running_threads() == 0


def test_the_caller_of_a_failover_is_logged_by_name_and_role_never_by_secret(
    api: TestClient, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="drsvc.api.service")
    assert api.post("/v1/apps/orders/failover", json={"to": "west"}).status_code == 202
    assert "failover of orders to west asked by default (operator)" in caplog.text
    assert TOKEN not in caplog.text
