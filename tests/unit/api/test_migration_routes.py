"""The API's migration routes over a fake service: shapes, authentication, refusals (no I/O)."""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient

from drsvc.api.app import create_app
from drsvc.api.auth import ApiAuth
from drsvc.api.events import EventLog
from drsvc.api.problems import ApiProblem
from drsvc.errors import RefusedError
from failover.requester import RequestedBy, RequesterKind

TOKEN = "s3cret-token-0123456789"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


class FakeMigrations:
    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []
        self.requesters: list[RequestedBy] = []

    def _known(self, name: str) -> None:
        if name != "to-west":
            raise ApiProblem(404, "not_found", f"no migration {name!r} (migrations: to-west)")

    def list(self) -> list[dict[str, Any]]:
        return [{"migration": "to-west", "state": "copying"}]

    def status(self, name: str) -> dict[str, Any]:
        self._known(name)
        return {"migration": name, "lag": 0}

    def plan(self, name: str) -> dict[str, Any]:
        self._known(name)
        return {"migration": name, "conflicts": 0}

    def start(self, name: str, take_over_mm2: bool, copy: bool) -> dict[str, Any]:
        self._known(name)
        self.calls.append(("start", take_over_mm2, copy))
        return {"migration": name, "created": ["t"]}

    def cutover(
        self, name: str, app: str, dry_run: bool, wait_s: float, requested_by: RequestedBy
    ) -> tuple[int, dict[str, Any]]:
        self._known(name)
        self.calls.append(("cutover", app, dry_run, wait_s))
        self.requesters.append(requested_by)
        if app == "lagging":
            raise RefusedError("cutover of lagging to west refused: the copy lags: 3 record(s)")
        return (200, {"dry_run": True}) if dry_run else (202, {"id": "f-9", "state": "running"})

    def finish(self, name: str, dry_run: bool) -> dict[str, Any]:
        self._known(name)
        self.calls.append(("finish", dry_run))
        return {"migration": name, "state": "finished"}

    def verify(self, name: str) -> dict[str, Any]:
        self._known(name)
        return {"migration": name, "passed": True}


class FakeService:
    def __init__(self) -> None:
        self.migrations = FakeMigrations()
        self.events = EventLog()

    def refresh_events(self) -> None:
        pass


def _client(service: FakeService, signed_in: bool = True) -> TestClient:
    """A client that sends the token on every request (reads need it), or none."""
    app = create_app(service, ApiAuth.of(TOKEN))  # type: ignore[arg-type]
    return TestClient(app, raise_server_exceptions=False, headers=AUTH if signed_in else None)


def test_reads_and_unknown_migrations() -> None:
    web = _client(FakeService())
    assert web.get("/v1/migrations").json() == [{"migration": "to-west", "state": "copying"}]
    assert web.get("/v1/migrations/to-west").json()["lag"] == 0
    assert web.get("/v1/migrations/to-west/plan").json()["conflicts"] == 0
    missing = web.get("/v1/migrations/north")
    assert missing.status_code == 404
    assert missing.json()["error"]["code"] == "not_found"
    assert "to-west" in missing.json()["error"]["message"]
    assert web.get("/v1/migrations/bad name").status_code in (404, 422)


def test_changes_need_the_token() -> None:
    service = FakeService()
    web = _client(service, signed_in=False)
    for path in ("start", "finish", "verify"):
        assert web.post(f"/v1/migrations/to-west/{path}").status_code == 401
    assert web.post("/v1/migrations/to-west/start", headers={"Authorization": "Bearer x" * 4}
                    ).status_code == 403  # fmt: skip
    assert service.migrations.calls == []


def test_start_cutover_finish_verify() -> None:
    service = FakeService()
    web = _client(service)
    started = web.post("/v1/migrations/to-west/start", json={"take_over_mm2": True}, headers=AUTH)
    assert started.status_code == 202 and started.json()["created"] == ["t"]
    dry = web.post("/v1/migrations/to-west/cutover", json={"app": "orders", "dry_run": True},
                   headers=AUTH)  # fmt: skip
    assert dry.status_code == 200 and dry.json() == {"dry_run": True}
    moved = web.post("/v1/migrations/to-west/cutover", json={"app": "orders"}, headers=AUTH)
    assert moved.status_code == 202 and moved.headers["Location"] == "/v1/failovers/f-9"
    refused = web.post("/v1/migrations/to-west/cutover", json={"app": "lagging"}, headers=AUTH)
    assert refused.status_code == 409
    assert refused.json()["error"]["code"] == "refused"
    assert "the copy lags" in refused.json()["error"]["message"]
    invalid = web.post("/v1/migrations/to-west/cutover", json={"app": "orders", "wait_s": -1},
                       headers=AUTH)  # fmt: skip
    assert invalid.status_code == 422
    unknown_field = web.post("/v1/migrations/to-west/finish", json={"force": True}, headers=AUTH)
    assert unknown_field.status_code == 422
    assert web.post("/v1/migrations/to-west/finish", headers=AUTH).json()["state"] == "finished"
    assert web.post("/v1/migrations/to-west/verify", headers=AUTH).json()["passed"] is True
    assert service.migrations.calls == [
        ("start", True, True),
        ("cutover", "orders", True, 10.0),
        ("cutover", "orders", False, 10.0),
        ("cutover", "lagging", False, 10.0),
        ("finish", False),
    ]
    # the cut-over's failover record says which token asked for it
    assert set(service.migrations.requesters) == {
        RequestedBy(RequesterKind.API, "default", "operator")
    }
