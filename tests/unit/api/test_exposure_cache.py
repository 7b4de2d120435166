"""Exposure is computed once per application at a time, served again for its time to live
while the application stays where it was, and says how old it is."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from failover_topologies import east_west, orders_and_payments
from fastapi.testclient import TestClient
from memory_coordination import FakeClock, MemoryCoordinator

from drsvc.adapters.consul_client import ConsulClient
from drsvc.api.app import create_app
from drsvc.api.auth import ApiAuth
from drsvc.api.exposure_cache import ExposureCache
from drsvc.api.service import ApiService
from drsvc.topology.models import Application
from failover.active import ActiveDocument

TOKEN = "s3cret-token-0123456789"
TOPOLOGY = east_west("shop", *orders_and_payments())


class Clocks:
    def __init__(self) -> None:
        self.now = 100.0

    def monotonic(self) -> float:
        return self.now

    def wall_ms(self) -> int:
        return int(self.now * 1000)


def test_kept_for_its_time_to_live_and_for_its_key_only() -> None:
    clocks = Clocks()
    cache = ExposureCache(10.0, monotonic=clocks.monotonic, wall_ms=clocks.wall_ms)
    computed: list[int] = []

    def compute(epoch: int) -> Any:
        def run() -> tuple[Any, dict[str, Any]]:
            computed.append(epoch)
            return ("east", epoch), {"groups": [len(computed)]}

        return run

    first = cache.get("orders", ("east", 4), compute(4))
    assert (first.computed_now, first.entry.as_of_ms, first.age_s) == (True, 100_000, 0.0)
    clocks.now += 9.5
    again = cache.get("orders", ("east", 4), compute(4))
    assert (again.computed_now, again.entry.document, again.age_s) == (False, {"groups": [1]}, 9.5)
    moved = cache.get("orders", ("west", 5), compute(5))  # it moved: that exposure is void
    assert moved.computed_now and computed == [4, 5]
    clocks.now += 10.0
    assert cache.get("orders", ("east", 5), compute(5)).computed_now
    assert cache.get("payments", ("east", 5), compute(5)).computed_now  # one per application


def test_one_computation_per_application_at_a_time() -> None:
    cache = ExposureCache(10.0)
    running = 0
    most = 0
    calls = 0
    lock = threading.Lock()

    def compute() -> tuple[Any, dict[str, Any]]:
        nonlocal running, most, calls
        with lock:
            running += 1
            calls += 1
            most = max(most, running)
        time.sleep(0.2)
        with lock:
            running -= 1
        return ("east", 4), {"groups": []}

    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(lambda _: cache.get("orders", ("east", 4), compute), range(8)))
    assert (calls, most) == (1, 1)
    assert sum(a.computed_now for a in answers) == 1


@dataclass
class ExposureExecutor:
    """What the application page asks of an executor, and how often exposure was computed."""

    epoch: int = 4
    computed: list[str] = field(default_factory=list)

    def application(self, name: str) -> Application:
        return TOPOLOGY.application(name)

    def application_names(self) -> list[str]:
        return [a.name for a in TOPOLOGY.applications]

    def active(self, app: Application) -> ActiveDocument:
        return ActiveDocument("east", self.epoch, f"f-{self.epoch}", 0)

    def running(self, app: Application, me: str | None = None) -> str | None:
        return None

    def failover_targets(self, app: Application, active: str) -> list[str]:
        return ["west"]

    def answers(self, cluster: str) -> bool:
        return True

    def exposure(self, group: str, active: str, other: str) -> dict[str, Any]:
        self.computed.append(group)
        return {"group": group, "from": active, "to": other, "would_lose": 0}


def test_the_application_pages_compute_exposure_only_when_asked_and_once_per_ttl() -> None:
    executor = ExposureExecutor()
    service = ApiService(
        TOPOLOGY,
        {"east": "e:9092", "west": "w:9092"},
        lambda: executor,  # type: ignore[arg-type,return-value]
        MemoryCoordinator(FakeClock()),
        ConsulClient("127.0.0.1:1"),  # never asked
        exposure_ttl_s=60.0,
    )
    api = TestClient(
        create_app(service, ApiAuth.of(TOKEN)), headers={"Authorization": f"Bearer {TOKEN}"}
    )
    plain = api.get("/v1/apps/orders").json()
    assert plain["groups"] == [] and "exposure_as_of_ms" not in plain
    assert executor.computed == []
    first = api.get("/v1/apps/orders", params={"exposure": True}).json()
    computed = list(executor.computed)
    assert [g["group"] for g in first["groups"]] == computed != []
    assert first["exposure_age_s"] == 0.0 and first["exposure_as_of_ms"] > 0
    second = api.get("/v1/apps/orders", params={"exposure": True}).json()
    assert executor.computed == computed  # served again, not computed again
    assert second["groups"] == first["groups"]
    assert second["exposure_as_of_ms"] == first["exposure_as_of_ms"]
    assert second["exposure_age_s"] >= 0
    executor.epoch = 5  # a failover moved it: the old exposure is not served
    third = api.get("/v1/apps/orders", params={"exposure": True}).json()
    assert third["epoch"] == 5 and len(executor.computed) == 2 * len(computed)
    listing = api.get("/v1/apps", params={"exposure": True}).json()
    assert {a["app"] for a in listing["apps"]} == {"orders", "payments"}
    assert all("exposure_age_s" in a for a in listing["apps"])
