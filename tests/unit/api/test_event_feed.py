"""Long-polls of /v1/events: any number of waiters share one reader of the records, they are
bounded, and neither they nor slow reads keep the health probes or a change waiting."""

from __future__ import annotations

import asyncio
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from fastapi.testclient import TestClient

from drsvc.api.app import create_app
from drsvc.api.auth import ApiAuth
from drsvc.api.event_feed import FEED_BUSY_RETRY_AFTER_S, EventFeed
from drsvc.api.events import START, EventLog, event_id
from drsvc.api.limits import ApiLimits, ThreadPools
from drsvc.api.service import MoveRequest
from drsvc.errors import CoordinatorUnavailableError
from failover.failover_plan import Outcome, StepEvent, StepName

TOKEN = "s3cret-token-0123456789"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
NOW_MS = 10_000_000


class Record:
    def __init__(self, failover_id: str, *events: StepEvent) -> None:
        self.plan = type("Plan", (), {"failover_id": failover_id, "app": "orders"})()
        self.events = list(events)


class Records:
    """The failover records in Consul, and how often they were read."""

    def __init__(self) -> None:
        self.log = EventLog(settle_ms=0)
        self.records: list[Any] = []
        self.reads = 0
        self.fail_with: Exception | None = None

    def refresh(self) -> None:
        self.reads += 1
        if self.fail_with is not None:
            raise self.fail_with
        self.log.note(self.records)


def _feed(records: Records, *, max_waiters: int = 32, refresh_s: float = 0.05) -> EventFeed:
    return EventFeed(
        records.log,
        records.refresh,
        ThreadPools(ApiLimits()),
        max_waiters=max_waiters,
        refresh_s=refresh_s,
        now_ms=lambda: NOW_MS,
    )


def test_many_waiters_share_one_reader() -> None:
    records = Records()
    feed = _feed(records, refresh_s=0.05)

    async def scenario() -> list[Any]:
        waiting = [asyncio.create_task(feed.read(START, 5.0)) for _ in range(25)]
        await asyncio.sleep(0.5)
        assert feed.waiters == 25
        records.records = [Record("a", StepEvent(StepName.ACTIVATE, Outcome.OK, 100))]
        return await asyncio.gather(*waiting)

    answers = asyncio.run(scenario())
    assert {tuple(e.id for e in a.events) for a in answers} == {(event_id(100, "a", 0),)}
    # about one read per 0.05 s while they waited (0.5 s): one reader, not one per waiter
    assert 3 <= records.reads <= 20, records.reads
    assert feed.waiters == 0


def test_nobody_waiting_nobody_reads() -> None:
    records = Records()
    feed = _feed(records)

    async def scenario() -> None:
        await feed.read(START, 0.2)
        reads = records.reads
        await asyncio.sleep(0.3)
        assert records.reads == reads

    asyncio.run(scenario())


def test_past_the_bound_a_poll_is_answered_at_once() -> None:
    records = Records()
    records.records = [Record("a", StepEvent(StepName.DEACTIVATE, Outcome.OK, 50))]
    records.log.note(records.records)
    feed = _feed(records, max_waiters=2)
    cursor = event_id(50, "a", 0)

    async def scenario() -> None:
        waiting = [asyncio.create_task(feed.read(cursor, 5.0)) for _ in range(2)]
        await asyncio.sleep(0.1)
        started = time.monotonic()
        over = await feed.read(START, 5.0)
        assert time.monotonic() - started < 0.5
        assert over.retry_after_s == FEED_BUSY_RETRY_AFTER_S
        assert [e.id for e in over.events] == [cursor]  # what the log holds
        for task in waiting:
            task.cancel()
        await asyncio.gather(*waiting, return_exceptions=True)

    asyncio.run(scenario())


def test_a_failed_read_is_answered_as_an_error() -> None:
    records = Records()
    records.fail_with = CoordinatorUnavailableError("Consul at 127.0.0.1:1: refused", delay=2)
    with pytest.raises(CoordinatorUnavailableError):
        asyncio.run(_feed(records).read(START, 2.0))


class SlowService:
    """Reads that take long (a cluster that does not answer), and the events of a quiet
    namespace."""

    def __init__(self) -> None:
        self.events = EventLog()
        self.release = threading.Event()
        self.moves: list[MoveRequest] = []
        self.records_read = 0

    def refresh_events(self) -> None:
        self.records_read += 1

    def readiness(self) -> dict[str, Any]:
        return {"status": "ready"}

    def clusters(self) -> list[dict[str, Any]]:
        self.release.wait(30)
        return []

    def move(self, request: MoveRequest) -> tuple[int, dict[str, Any]]:
        self.moves.append(request)
        return 200, {"dry_run": True}


def test_long_polls_and_slow_reads_keep_nobody_waiting() -> None:
    service = SlowService()
    limits = ApiLimits(max_long_polls=64, read_threads=4, long_poll_refresh_s=0.2)
    app = create_app(service, ApiAuth.of(TOKEN), limits)  # type: ignore[arg-type]
    with TestClient(app, headers=AUTH) as c, ThreadPoolExecutor(60) as pool:
        polls = [pool.submit(c.get, "/v1/events", params={"wait_s": 3}) for _ in range(40)]
        slow = [pool.submit(c.get, "/v1/clusters") for _ in range(4)]  # every read thread
        time.sleep(0.8)  # all of them waiting by now
        latencies = []
        for _ in range(20):
            started = time.monotonic()
            assert c.get("/healthz").status_code == 200
            latencies.append(time.monotonic() - started)
        started = time.monotonic()
        assert c.get("/readyz").status_code == 200
        ready_s = time.monotonic() - started
        started = time.monotonic()
        change = c.post("/v1/apps/orders/failover", json={"to": "west", "dry_run": True})
        change_s = time.monotonic() - started
        service.release.set()
        answers = [p.result(timeout=30) for p in polls]
        assert all(s.result(timeout=30).status_code == 200 for s in slow)
    assert max(latencies) < 1.0, latencies
    assert ready_s < 1.0 and change_s < 1.0, (ready_s, change_s)
    assert change.status_code == 200
    assert all(a.status_code == 200 and a.json()["events"] == [] for a in answers)
    # 40 waiters for about 3 s, one read every 0.2 s: far fewer reads than waiters
    assert service.records_read < 40, service.records_read


def test_events_answer_ids_from_the_records_and_refuse_bad_cursors() -> None:
    service = SlowService()
    service.events = EventLog(settle_ms=0)
    service.events.note([Record("a", StepEvent(StepName.ACTIVATE, Outcome.OK, 100))])
    c = TestClient(create_app(service, ApiAuth.of(TOKEN)), headers=AUTH)  # type: ignore[arg-type]
    doc = c.get("/v1/events", params={"after": 0}).json()
    assert doc["last_id"] == event_id(100, "a", 0)
    assert [e["id"] for e in doc["events"]] == [doc["last_id"]]
    after = c.get("/v1/events", params={"after": doc["last_id"]}).json()
    assert after == {"events": [], "last_id": doc["last_id"]}
    bad = c.get("/v1/events", params={"after": "42"})
    assert bad.status_code == 422
    assert bad.json()["error"]["details"][0]["field"] == "query.after"
